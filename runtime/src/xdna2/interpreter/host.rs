//! The host's share of a plan that needs more than a line: Q/K/V layout
//! transposes and the bias added after RoPE. Decode attention over the host KV
//! cache runs the decode-attention kernel's function
//! (`kernels::decode_attention`), the one the fused decode runs on the NPU.

use crate::bf16;
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
