//! The host's share of a plan that needs more than a line: Q/K/V layout
//! transposes, the bias added after RoPE, and decode attention over the host KV
//! cache.

use crate::bf16;
use crate::model::oracle::blocks;
use crate::xdna2::kernels::QkvLayout;

/// `[rows, heads, head_dim]` ↔ `[heads, rows, head_dim]`.
pub fn transpose(x: &[u16], rows: usize, heads: usize, head_dim: usize, to: QkvLayout) -> Vec<u16> {
    let mut out = vec![0u16; x.len()];
    for r in 0..rows {
        for h in 0..heads {
            let (seq, head) = ((r * heads + h) * head_dim, (h * rows + r) * head_dim);
            let (src, dst) = match to {
                QkvLayout::HeadFirst => (seq, head),
                QkvLayout::SeqFirst => (head, seq),
            };
            out[dst..dst + head_dim].copy_from_slice(&x[src..src + head_dim]);
        }
    }
    out
}

/// `x += RoPE(b)` per row (position `base + r`) when a RoPE table is given, else
/// `x += b`; RoPE(q + b) = RoPE(q) + RoPE(b). The rotated bias is rounded to bf16
/// like the RoPE kernel's output, then the sum is. The table rotates the first
/// `rotary` dimensions of each head (all of them unless the heads are padded).
pub fn add_bias(
    x: &mut [u16],
    bias: &[u16],
    (heads, head_dim, rotary): (usize, usize, usize),
    lut: Option<&[u16]>,
    base: usize,
) {
    let width = heads * head_dim;
    let half = rotary.min(head_dim) / 2;
    let b: Vec<f32> = bf16::to_f32_vec(bias);
    for (r, row) in x.chunks_mut(width.max(1)).enumerate() {
        let mut rotated = b.clone();
        if let Some(table) = lut {
            let t = &table[(base + r) * 2 * half..][..2 * half];
            for head in rotated.chunks_mut(head_dim) {
                for i in 0..half {
                    let (c, s) = (bf16::to_f32(t[i]), bf16::to_f32(t[half + i]));
                    let (p, q) = (head[i], head[half + i]);
                    head[i] = bf16::round(p * c - q * s);
                    head[half + i] = bf16::round(q * c + p * s);
                }
            }
        }
        for (v, add) in row.iter_mut().zip(&rotated) {
            *v = bf16::from_f32(bf16::to_f32(*v) + add);
        }
    }
}

/// One query per head over the first `positions` cached keys and values, f32 math
/// on bf16 values (the host's numpy-like attention). Query head `h` reads KV head
/// `h / group` (`shift` moves it to the next group: a planted fault). Scores are
/// scaled by `scale_dim^-1/2` (the real head_dim when the heads are zero-padded).
pub fn decode_attention(
    q: &[u16],
    (keys, values): (&[u16], &[u16]),
    positions: usize,
    (heads, kv_heads, head_dim, scale_dim): (usize, usize, usize, usize),
    (shift, softcap): (usize, Option<f32>),
) -> Vec<u16> {
    let kv_width = kv_heads * head_dim;
    let group = heads / kv_heads.max(1);
    let scale = 1.0 / (scale_dim as f32).sqrt();
    let mut out = vec![0u16; heads * head_dim];
    let mut scores = vec![0.0f32; positions];
    for (h, o) in out.chunks_mut(head_dim).enumerate() {
        let qh = bf16::to_f32_vec(&q[h * head_dim..(h + 1) * head_dim]);
        let offset = ((h / group.max(1) + shift) % kv_heads.max(1)) * head_dim;
        for (p, s) in scores.iter_mut().enumerate() {
            *s = dot_bf16_f32(&keys[p * kv_width + offset..][..head_dim], &qh) * scale;
            if let Some(cap) = softcap {
                *s = blocks::softcap(*s, cap);
            }
        }
        blocks::softmax_in_place(&mut scores);
        let mut acc = vec![0.0f32; head_dim];
        for (p, &w) in scores.iter().enumerate() {
            let v = &values[p * kv_width + offset..][..head_dim];
            for (a, &x) in acc.iter_mut().zip(v) {
                *a += w * bf16::to_f32(x);
            }
        }
        for (slot, a) in o.iter_mut().zip(acc) {
            *slot = bf16::from_f32(a);
        }
    }
    out
}

/// Dot product of a bf16 row with an f32 vector, accumulated in f32 over eight
/// independent lanes (the lane order is this kernel's numerics, and lets the
/// compiler vectorise).
#[inline]
pub fn dot_bf16_f32(row: &[u16], x: &[f32]) -> f32 {
    const LANES: usize = 8;
    let n = row.len().min(x.len());
    let mut acc = [0.0f32; LANES];
    let chunks = n / LANES;
    for c in 0..chunks {
        let base = c * LANES;
        for l in 0..LANES {
            acc[l] += bf16::to_f32(row[base + l]) * x[base + l];
        }
    }
    let mut tail = 0.0f32;
    for i in chunks * LANES..n {
        tail += bf16::to_f32(row[i]) * x[i];
    }
    let pair = |a: f32, b: f32| a + b;
    let s = pair(
        pair(pair(acc[0], acc[1]), pair(acc[2], acc[3])),
        pair(pair(acc[4], acc[5]), pair(acc[6], acc[7])),
    );
    s + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_a_plain_sum() {
        let row: Vec<u16> = (0..37)
            .map(|i| bf16::from_f32(i as f32 * 0.25 - 3.0))
            .collect();
        let x: Vec<f32> = (0..37).map(|i| 1.0 / (1.0 + i as f32)).collect();
        let plain: f64 = row
            .iter()
            .zip(&x)
            .map(|(&r, &v)| bf16::to_f32(r) as f64 * v as f64)
            .sum();
        assert!((dot_bf16_f32(&row, &x) as f64 - plain).abs() < 1e-5);
    }
}
