//! The packed 4-bit decode GEMV: `y[M] = W[M×K] · x[K]` with W kept in
//! llama.cpp's 32-weight blocks (Q4_1: f16 scale `d`, f16 minimum `m`, 16 bytes
//! of nibbles, `w = d·q + m`; Q4_0: `w = d·(q − 8)`), never as a bf16 copy. The
//! vector unit unpacks one block at a time into a bf16 vector (`d·q + m` formed
//! in f32 and rounded to bf16, as a bf16 vector op stores it), multiplies it with
//! the bf16 activations and accumulates in f32 over the GEMV's 16 lanes and K
//! segments, so on the same weights it computes the bits of the bf16 GEMV on the
//! bf16 rounding of the dequantized weights (the bf16 path's operand).
//!
//! What the packing changes is the footprint: a row of K weights is `K/32`
//! blocks of 20 (Q4_1) or 18 (Q4_0) bytes instead of `2K`, in the memory tile's
//! panel, the compute tile's staged rows and the DMA transfers, and a block must
//! never straddle a K segment or a transfer.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::gemv::{rows_dot, GemvSpec, ROWS_PER_TASK};
use super::{operand, refuse_if_any, Herd, Kernel, KernelError};
use crate::bf16;
use crate::model::quant::{WeightFormat, BLOCK};
use crate::model::tensor::PackedRows;
use crate::threads;
use crate::xdna2::constraints::{Checker, Constraint};
use crate::xdna2::device::Device;

/// A 4-bit block format the packed GEMV reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PackedFormat {
    Q4_0,
    Q4_1,
}

impl PackedFormat {
    /// The packed format of a stored weight format, if it is one.
    pub fn of(format: WeightFormat) -> Option<PackedFormat> {
        match format {
            WeightFormat::Q4_0 => Some(PackedFormat::Q4_0),
            WeightFormat::Q4_1 => Some(PackedFormat::Q4_1),
            _ => None,
        }
    }

    pub fn weight_format(self) -> WeightFormat {
        match self {
            PackedFormat::Q4_0 => WeightFormat::Q4_0,
            PackedFormat::Q4_1 => WeightFormat::Q4_1,
        }
    }

    /// Bytes of `elements` weights of one row (whole blocks; a partial block
    /// counts whole, and the alignment rule refuses it).
    pub fn bytes(self, elements: usize) -> usize {
        elements.div_ceil(BLOCK) * self.weight_format().block_bytes()
    }
}

impl std::fmt::Display for PackedFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PackedFormat::Q4_0 => "q4_0",
            PackedFormat::Q4_1 => "q4_1",
        })
    }
}

/// The block rules a packed GEMV adds to the GEMV's (its footprints are the
/// GEMV's with packed row bytes, `GemvSpec::row_bytes`): whole blocks in K and
/// in every K segment, and packed segment rows the DMA can move.
pub(super) fn check_blocks(spec: &GemvSpec, format: PackedFormat, c: &mut Checker<'_>) {
    let (k, segment) = (spec.k, spec.k_segment());
    c.require(k % BLOCK == 0, Constraint::Alignment, || {
        format!("packed {format} GEMV needs K % {BLOCK} == 0 (whole blocks), K is {k}")
    });
    c.require(segment % BLOCK == 0, Constraint::Alignment, || {
        format!("K segment {segment} splits a {BLOCK}-weight block of {format} across segments")
    });
    let multiple = c.device.limits.dma_length_multiple_bytes;
    let row = format.bytes(segment);
    c.require(row % multiple == 0, Constraint::Alignment, || {
        format!("a packed row segment is {row} bytes; DMA lengths must be multiples of {multiple}")
    });
}

/// The GEMV configuration of [`GemvSpec::select`] with its weights packed.
pub fn select(device: &Device, m: usize, k: usize, herd: Herd, format: PackedFormat) -> GemvSpec {
    GemvSpec {
        packed: Some(format),
        ..GemvSpec::select(device, m, k, herd)
    }
}

/// `576x576 q4_1`: the shape and the weight format.
pub fn label(spec: &GemvSpec) -> String {
    match spec.packed {
        Some(f) => format!("{}x{} {f}", spec.m, spec.k),
        None => format!("{}x{}", spec.m, spec.k),
    }
}

/// The order in which a block's 16 bytes hold its 32 nibbles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NibbleOrder {
    /// llama.cpp's: byte `j` holds weight `j` (low nibble) and `j + 16` (high).
    Gguf,
    /// A planted fault (`packed-nibble-order`): the high nibble read as
    /// weight `j` and the low one as `j + 16`.
    Swapped,
}

impl NibbleOrder {
    /// `Swapped` when the planted fault is on.
    pub fn of(swapped: bool) -> Self {
        if swapped {
            NibbleOrder::Swapped
        } else {
            NibbleOrder::Gguf
        }
    }
}

/// `y = W·x (+ residual)`, bf16 out, with `w` the packed rows (`m × k`).
pub fn gemv_packed(
    device: &Device,
    spec: &GemvSpec,
    w: &PackedRows,
    x: &[u16],
    residual: Option<&[u16]>,
) -> Result<Vec<u16>, KernelError> {
    gemv_packed_ordered(device, spec, w, x, residual, NibbleOrder::Gguf)
}

/// [`gemv_packed`] reading the nibbles in `order`.
pub fn gemv_packed_ordered(
    device: &Device,
    spec: &GemvSpec,
    w: &PackedRows,
    x: &[u16],
    residual: Option<&[u16]>,
    order: NibbleOrder,
) -> Result<Vec<u16>, KernelError> {
    refuse_if_any(Kernel::Gemv, spec.check(device))?;
    let g = spec;
    let format = spec.packed.map(PackedFormat::weight_format);
    if format != Some(w.format()) || w.cols() != g.k || w.rows() != g.m {
        return Err(KernelError::Operand {
            kernel: Kernel::Gemv,
            operand: "W (packed)",
            expected: g.m * g.k,
            got: w.rows() * w.cols(),
        });
    }
    operand(Kernel::Gemv, "x", x, g.k)?;
    if let Some(r) = residual {
        operand(Kernel::Gemv, "residual", r, g.m)?;
    }
    let x32 = bf16::to_f32_vec(x);
    let segment = g.k_segment().max(1);
    let mut y = vec![0.0f32; g.m];
    y.par_chunks_mut(ROWS_PER_TASK)
        .with_min_len(threads::min_len(ROWS_PER_TASK * g.k))
        .enumerate()
        .for_each(|(task, out)| {
            let first = task * ROWS_PER_TASK;
            let rows = unpack_rows(w, first, out.len(), order);
            rows_dot(&rows, g.k, segment, &x32, out);
        });
    Ok(y.iter()
        .enumerate()
        .map(|(i, &v)| bf16::from_f32(v + residual.map_or(0.0, |r| bf16::to_f32(r[i]))))
        .collect())
}

/// Rows `first..first + count` unpacked block by block into bf16 vectors, as
/// the vector unit forms them before the multiply.
fn unpack_rows(w: &PackedRows, first: usize, count: usize, order: NibbleOrder) -> Vec<u16> {
    let k = w.cols();
    let mut values = vec![0.0f32; k];
    let mut bits = Vec::with_capacity(count * k);
    for r in first..first + count {
        w.row_values(r, &mut values);
        if order == NibbleOrder::Swapped {
            for block in values.chunks_exact_mut(BLOCK) {
                let (low, high) = block.split_at_mut(BLOCK / 2);
                low.swap_with_slice(high);
            }
        }
        bits.extend(values.iter().map(|&v| bf16::from_f32(v)));
    }
    bits
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::xdna2::kernels::gemv;

    /// A Q4_1 matrix of seeded blocks (every nibble and both f16 fields used).
    pub(crate) fn q4_1_rows(rows: usize, cols: usize, seed: u64) -> PackedRows {
        let mut rng = crate::rng::SplitMix64::for_stream(seed, "q4_1");
        let mut bytes = Vec::new();
        for _ in 0..rows * cols / BLOCK {
            let d = half::f16::from_f32(0.01 + 0.02 * (rng.next_signed() + 1.0) / 2.0);
            let m = half::f16::from_f32(-8.0 * d.to_f32() * (1.0 + 0.2 * rng.next_signed()));
            bytes.extend(d.to_bits().to_le_bytes());
            bytes.extend(m.to_bits().to_le_bytes());
            for _ in 0..BLOCK / 2 {
                bytes.push((rng.next_u64() & 0xff) as u8);
            }
        }
        PackedRows::owned(WeightFormat::Q4_1, rows, cols, bytes)
    }

    #[test]
    fn the_packed_kernel_computes_the_bf16_gemv_of_the_rounded_weights() {
        let device = Device::npu2();
        let (m, k) = (256, 576);
        let w = q4_1_rows(m, k, 7);
        let spec = select(&device, m, k, Herd::ROW, PackedFormat::Q4_1);
        assert!(spec.check(&device).is_empty(), "{:?}", spec.check(&device));
        let x: Vec<u16> = (0..k)
            .map(|i| bf16::from_f32(((i * 37 % 101) as f32 - 50.0) / 25.0))
            .collect();
        let packed = gemv_packed(&device, &spec, &w, &x, None).unwrap();
        let rounded = unpack_rows(&w, 0, m, NibbleOrder::Gguf);
        let bf16_spec = GemvSpec {
            packed: None,
            ..spec
        };
        let dense = gemv::gemv(&device, &bf16_spec, &rounded, &x, None).unwrap();
        assert_eq!(packed, dense);
        assert_eq!(spec.weight_bytes(), (m * k / 32 * 20) as f64);
        assert_eq!(bf16_spec.weight_bytes(), (m * k * 2) as f64);
        // The bf16 GEMV refuses packed weights' spec mismatch: no silent fallback.
        assert!(gemv_packed(&device, &bf16_spec, &w, &x, None).is_err());
    }

    #[test]
    fn packed_weights_must_come_in_whole_blocks_per_segment() {
        let device = Device::npu2();
        let mut spec = select(&device, 64, 576, Herd::ROW, PackedFormat::Q4_0);
        assert!(spec.check(&device).is_empty(), "{:?}", spec.check(&device));
        spec.k = 560;
        let violations = spec.check(&device);
        assert!(
            violations
                .iter()
                .any(|v| v.to_string().contains("K % 32 == 0")),
            "{violations:?}"
        );
        // 36 segments of 16 weights: half a block each.
        spec.k = 576;
        spec.tile.k_split = 36;
        assert!(spec
            .check(&device)
            .iter()
            .any(|v| v.to_string().contains("splits a 32-weight block")));
    }
}
