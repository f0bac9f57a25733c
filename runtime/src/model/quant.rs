//! Weight formats as stored in a GGUF file, and their exact dequantization.
//!
//! A row of a matrix is a run of blocks along the input dimension. The float
//! formats are one-element blocks; the llama.cpp block formats hold 32 weights:
//! - Q8_0 (34 bytes): f16 scale `d`, 32 × i8 `q`; `w = d·q`;
//! - Q4_0 (18 bytes): f16 `d`, 16 bytes of nibbles; `w = d·(q − 8)`;
//! - Q4_1 (20 bytes): f16 `d`, f16 minimum `m`, 16 bytes; `w = d·q + m`.
//!
//! In the 4-bit formats the low nibbles of the 16 bytes are elements 0–15 and
//! the high nibbles 16–31. Dequantization computes the products in f32 exactly
//! as gguf-py does (`d·q`, then `+ m`), so the dequantized weights are the same
//! numbers transformers runs on. [`dot`] is the oracle's decode kernel: it
//! reads the stored bytes and never materializes a dequantized row.

use std::fmt;

/// Weights per block of the llama.cpp block formats.
pub const BLOCK: usize = 32;

/// A weight format the runtime reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WeightFormat {
    F32,
    F16,
    Bf16,
    Q8_0,
    Q4_0,
    Q4_1,
}

impl WeightFormat {
    pub const ALL: [WeightFormat; 6] = [
        WeightFormat::F32,
        WeightFormat::F16,
        WeightFormat::Bf16,
        WeightFormat::Q8_0,
        WeightFormat::Q4_0,
        WeightFormat::Q4_1,
    ];

    /// The name llama.cpp gives the format.
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::F32 => "F32",
            WeightFormat::F16 => "F16",
            WeightFormat::Bf16 => "BF16",
            WeightFormat::Q8_0 => "Q8_0",
            WeightFormat::Q4_0 => "Q4_0",
            WeightFormat::Q4_1 => "Q4_1",
        }
    }

    /// Elements per block (1 for the float formats).
    pub fn block_len(self) -> usize {
        match self {
            WeightFormat::F32 | WeightFormat::F16 | WeightFormat::Bf16 => 1,
            WeightFormat::Q8_0 | WeightFormat::Q4_0 | WeightFormat::Q4_1 => BLOCK,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            WeightFormat::F32 => 4,
            WeightFormat::F16 | WeightFormat::Bf16 => 2,
            WeightFormat::Q8_0 => 2 + BLOCK,
            WeightFormat::Q4_0 => 2 + BLOCK / 2,
            WeightFormat::Q4_1 => 4 + BLOCK / 2,
        }
    }

    /// True for the block formats (a scale per 32 weights).
    pub fn is_quantized(self) -> bool {
        self.block_len() > 1
    }

    /// Bytes of a row of `cols` elements; `None` when `cols` is not a whole
    /// number of blocks or the size overflows.
    pub fn row_bytes(self, cols: usize) -> Option<usize> {
        if cols % self.block_len() != 0 {
            return None;
        }
        (cols / self.block_len()).checked_mul(self.block_bytes())
    }

    /// Stored bits per weight (4.5 for Q4_0, 5 for Q4_1).
    pub fn bits_per_weight(self) -> f64 {
        8.0 * self.block_bytes() as f64 / self.block_len() as f64
    }

    /// Dequantizes whole blocks: `bytes` holds `out.len()` elements.
    pub fn dequantize(self, bytes: &[u8], out: &mut [f32]) {
        debug_assert_eq!(self.row_bytes(out.len()), Some(bytes.len()));
        match self {
            WeightFormat::F32 => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
            WeightFormat::F16 => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                    *o = f16(b[0], b[1]);
                }
            }
            WeightFormat::Bf16 => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                    *o = crate::bf16::to_f32(u16::from_le_bytes([b[0], b[1]]));
                }
            }
            WeightFormat::Q8_0 | WeightFormat::Q4_0 | WeightFormat::Q4_1 => {
                for (o, b) in out
                    .chunks_exact_mut(BLOCK)
                    .zip(bytes.chunks_exact(self.block_bytes()))
                {
                    self.dequantize_block(b, o);
                }
            }
        }
    }

    fn dequantize_block(self, block: &[u8], out: &mut [f32]) {
        let d = f16(block[0], block[1]);
        match self {
            WeightFormat::Q8_0 => {
                for (o, &q) in out.iter_mut().zip(&block[2..]) {
                    *o = d * (q as i8) as f32;
                }
            }
            WeightFormat::Q4_0 => {
                let (lo, hi) = out.split_at_mut(BLOCK / 2);
                for ((l, h), &q) in lo.iter_mut().zip(hi).zip(&block[2..]) {
                    *l = d * ((q & 0x0f) as i32 - 8) as f32;
                    *h = d * ((q >> 4) as i32 - 8) as f32;
                }
            }
            WeightFormat::Q4_1 => {
                let m = f16(block[2], block[3]);
                let (lo, hi) = out.split_at_mut(BLOCK / 2);
                for ((l, h), &q) in lo.iter_mut().zip(hi).zip(&block[4..]) {
                    *l = d * (q & 0x0f) as f32 + m;
                    *h = d * (q >> 4) as f32 + m;
                }
            }
            WeightFormat::F32 | WeightFormat::F16 | WeightFormat::Bf16 => {
                unreachable!("float formats have one-element blocks")
            }
        }
    }

    /// `Σ w[i]·x[i]` over a stored row (`bytes`, `x.len()` elements), in f32.
    /// Block formats factor the affine form per block, `d·Σq·x + m·Σx`
    /// (`block_sums` holds `Σx` per block of `x`, see [`block_sums`]); the
    /// float formats widen and multiply. Lanes and order are fixed, so the
    /// result is the same on every machine.
    #[inline(always)]
    pub fn dot(self, bytes: &[u8], x: &[f32], block_sums: &[f32]) -> f32 {
        match self {
            WeightFormat::Q8_0 | WeightFormat::Q4_0 | WeightFormat::Q4_1 => {
                let mut acc = [0.0f32; 4];
                for (b, ((block, xs), &sx)) in bytes
                    .chunks_exact(self.block_bytes())
                    .zip(x.chunks_exact(BLOCK))
                    .zip(block_sums)
                    .enumerate()
                {
                    acc[b % 4] += self.block_dot(block, xs, sx);
                }
                (acc[0] + acc[2]) + (acc[1] + acc[3])
            }
            WeightFormat::F32 | WeightFormat::F16 | WeightFormat::Bf16 => {
                let mut acc = [0.0f32; 8];
                let mut row = [0.0f32; 8];
                let step = 8 * self.block_bytes();
                let body = x.len() / 8 * 8;
                for (b, xs) in bytes.chunks_exact(step).zip(x[..body].chunks_exact(8)) {
                    self.dequantize(b, &mut row);
                    for l in 0..8 {
                        acc[l] += row[l] * xs[l];
                    }
                }
                let mut tail = [0.0f32; 8];
                let rest = x.len() - body;
                self.dequantize(&bytes[body * self.block_bytes()..], &mut tail[..rest]);
                let tail: f32 = tail[..rest]
                    .iter()
                    .zip(&x[body..])
                    .map(|(w, v)| w * v)
                    .sum();
                ((acc[0] + acc[4]) + (acc[2] + acc[6]))
                    + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
                    + tail
            }
        }
    }

    #[inline(always)]
    fn block_dot(self, block: &[u8], x: &[f32], sx: f32) -> f32 {
        let d = f16(block[0], block[1]);
        match self {
            WeightFormat::Q8_0 => {
                let mut s = [0.0f32; 8];
                for (qs, xs) in block[2..].chunks_exact(8).zip(x.chunks_exact(8)) {
                    for l in 0..8 {
                        s[l] += (qs[l] as i8) as f32 * xs[l];
                    }
                }
                d * lanes8(&s)
            }
            WeightFormat::Q4_0 => d * (nibble_dot(&block[2..], x) - 8.0 * sx),
            WeightFormat::Q4_1 => {
                let m = f16(block[2], block[3]);
                d * nibble_dot(&block[4..], x) + m * sx
            }
            WeightFormat::F32 | WeightFormat::F16 | WeightFormat::Bf16 => {
                unreachable!("float formats have one-element blocks")
            }
        }
    }
}

impl fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `Σx` over each block of 32 elements of `x` (the block formats' dot needs
/// it for the minimum or offset term; computed once per input vector).
pub fn block_sums(x: &[f32]) -> Vec<f32> {
    x.chunks(BLOCK)
        .map(|c| {
            let mut s = [0.0f32; 8];
            for part in c.chunks(8) {
                for (l, v) in part.iter().enumerate() {
                    s[l] += v;
                }
            }
            lanes8(&s)
        })
        .collect()
}

/// `Σ q·x` for 16 bytes of nibbles: low nibbles pair with `x[0..16]`, high
/// with `x[16..32]`.
#[inline(always)]
fn nibble_dot(qs: &[u8], x: &[f32]) -> f32 {
    let (lo, hi) = x.split_at(BLOCK / 2);
    let mut s = [0.0f32; 8];
    for ((q, l), h) in qs
        .chunks_exact(8)
        .zip(lo.chunks_exact(8))
        .zip(hi.chunks_exact(8))
    {
        for i in 0..8 {
            s[i] += (q[i] & 0x0f) as f32 * l[i] + (q[i] >> 4) as f32 * h[i];
        }
    }
    lanes8(&s)
}

#[inline(always)]
fn lanes8(s: &[f32; 8]) -> f32 {
    ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))
}

#[inline(always)]
fn f16(lo: u8, hi: u8) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([lo, hi])).to_f32()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16_bytes(v: f32) -> [u8; 2] {
        half::f16::from_f32(v).to_bits().to_le_bytes()
    }

    #[test]
    fn q4_1_low_nibbles_are_the_first_sixteen() {
        let mut block = Vec::new();
        block.extend(f16_bytes(0.5));
        block.extend(f16_bytes(-1.0));
        block.extend((0..16u8).map(|i| i | ((15 - i) << 4)));
        let mut out = [0.0f32; 32];
        WeightFormat::Q4_1.dequantize(&block, &mut out);
        assert_eq!(out[0], -1.0);
        assert_eq!(out[3], 0.5 * 3.0 - 1.0);
        assert_eq!(out[16], 0.5 * 15.0 - 1.0);
        assert_eq!(out[31], 0.5 * 0.0 - 1.0);
    }

    #[test]
    fn q4_0_is_offset_by_eight_and_q8_0_is_signed() {
        let mut q4 = Vec::from(f16_bytes(2.0));
        q4.extend([0x0f_u8; 16]);
        let mut out = [0.0f32; 32];
        WeightFormat::Q4_0.dequantize(&q4, &mut out);
        assert_eq!((out[0], out[16]), (14.0, -16.0));
        let mut q8 = Vec::from(f16_bytes(0.25));
        q8.extend((0..32).map(|i| (i as i8 - 16) as u8));
        WeightFormat::Q8_0.dequantize(&q8, &mut out);
        assert_eq!((out[0], out[31]), (-4.0, 3.75));
    }

    /// The factored block dot equals the dot of the dequantized row (to f32
    /// rounding), for every format.
    #[test]
    fn dot_matches_the_dequantized_row() {
        let cols = 96;
        let x: Vec<f32> = (0..cols).map(|i| ((i * 7) as f32 * 0.13).sin()).collect();
        let sums = block_sums(&x);
        for format in WeightFormat::ALL {
            let bytes: Vec<u8> = (0..format.row_bytes(cols).unwrap())
                .map(|i| match (format, i % format.block_bytes()) {
                    // Keep scales finite and small: byte pairs of an f16 scale.
                    (f, 1 | 3) if f.is_quantized() => 0x2c,
                    (WeightFormat::F32, 3) => 0x3e,
                    (WeightFormat::F16, 1) => 0x30,
                    (WeightFormat::Bf16, 1) => 0x3e,
                    _ => (i * 37 % 251) as u8,
                })
                .collect();
            let mut row = vec![0.0f32; cols];
            format.dequantize(&bytes, &mut row);
            let want: f64 = row.iter().zip(&x).map(|(&w, &v)| w as f64 * v as f64).sum();
            let got = format.dot(&bytes, &x, &sums) as f64;
            let scale: f64 = row
                .iter()
                .zip(&x)
                .map(|(&w, &v)| (w * v).abs() as f64)
                .sum();
            assert!(
                (got - want).abs() <= 1e-5 * scale.max(1e-30),
                "{format}: {got} vs {want}"
            );
        }
    }
}
