//! Decode attention and its KV append as kernels of the single-dispatch fused
//! decode: one query row per head over the KV cache the device holds, on
//! attention compute units (CUs) that each take a slice of the KV heads, and
//! the write of this token's roped K/V row into that cache before it is read
//! back (mlir-air:programming_examples/fused_decode/fused_decode.py:25-26).
//!
//! Numerics are the host decode attention's, so the fused plan and the plan it
//! replaces are judged by the same decode gates: scores and the weighted sum
//! in f32 over bf16 keys and values, one softmax per head, the output rounded
//! once to bf16. How the published kernel blocks the cache (16 positions per
//! readback round, `RB_ROUNDS = ceil(L/16)`,
//! mlir-air:programming_examples/fused_decode/README.md:92) sizes its L1,
//! not its arithmetic here.

use serde::{Deserialize, Serialize};

use super::Kernel;
use crate::bf16;
use crate::xdna2::constraints::{Checker, Constraint, ConstraintViolation};
use crate::xdna2::device::Device;

/// Cached positions one readback round moves into a CU
/// (mlir-air:programming_examples/fused_decode/README.md:92).
pub const KV_BLOCK_POSITIONS: usize = 16;
/// Query heads per KV group are padded to a multiple of this on each CU
/// (`GQA_SEG=4`, mlir-air:programming_examples/fused_decode/fused_decode.py:201).
pub const GQA_SEGMENT: usize = 4;

/// One decode attention on the NPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecodeAttentionSpec {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Scores scale by `scale_dim^-1/2`: the real head_dim of padded heads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_dim: Option<usize>,
    /// Gemma-2's soft-cap on every score, `tanh(s / cap) · cap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softcap: Option<u32>,
    /// Cached positions the template reads per token (its `ATTN_MAXL`: the
    /// readback streams them whatever the real context,
    /// mlir-air:programming_examples/fused_decode/README.md:91-92).
    pub context: usize,
    /// Attention compute units; each holds `kv_heads / cus` KV heads.
    pub cus: usize,
}

impl DecodeAttentionSpec {
    /// Query heads one CU holds, padded per KV group to the GQA segment.
    pub fn padded_heads_per_cu(&self) -> usize {
        let group = self.heads / self.kv_heads.max(1);
        self.kv_per_cu() * group.div_ceil(GQA_SEGMENT) * GQA_SEGMENT
    }

    pub fn kv_per_cu(&self) -> usize {
        self.kv_heads / self.cus.max(1)
    }

    /// Each CU's L1: the query heads, one K and one V block (single-buffered:
    /// the running max and sum live across blocks, so the block loop is not
    /// ping-ponged, mlir-air:programming_examples/fused_decode/README.md:254-256),
    /// the f32 scores of a block, the f32 accumulators and the running max and
    /// sum of each head.
    pub fn l1_parts(&self) -> [(&'static str, usize); 5] {
        let (qh, hd) = (self.padded_heads_per_cu(), self.head_dim);
        let block = KV_BLOCK_POSITIONS * self.kv_per_cu() * hd * 2;
        [
            ("q", qh * hd * 2),
            ("K and V block", 2 * block),
            ("scores", qh * KV_BLOCK_POSITIONS * 4),
            ("accumulators", qh * hd * 4),
            ("max and sum", qh * 8),
        ]
    }

    pub fn check(&self, device: &Device) -> Vec<ConstraintViolation> {
        let mut c = Checker::new(device, Kernel::DecodeAttention);
        let (kv, cus) = (self.kv_heads, self.cus);
        c.require(
            cus >= 1 && cus <= device.columns && kv % cus.max(1) == 0,
            Constraint::Herd,
            || format!("{cus} attention CUs cannot split {kv} KV heads evenly"),
        );
        c.require(self.heads % kv.max(1) == 0, Constraint::Alignment, || {
            format!(
                "{} query heads are not whole groups of {kv} KV heads",
                self.heads
            )
        });
        c.l1(&self.l1_parts());
        c.finish()
    }
}

/// This token's K/V row written into the device's KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvAppendSpec {
    /// KV heads × head_dim of one row.
    pub kv_width: usize,
    /// Positions one layer's cache region holds (the template's `ATTN_MAXL`).
    pub context: usize,
}

impl KvAppendSpec {
    /// Bytes of one layer's cache region, keys and values: a buffer of its
    /// own per layer, which the plan check holds to one buffer descriptor's
    /// reach.
    pub fn region_bytes(&self) -> usize {
        2 * self.context * self.kv_width * 2
    }

    /// The appended row is one DMA transfer: its length a multiple of 4 bytes
    /// (calibration §1).
    pub fn check(&self, device: &Device) -> Vec<ConstraintViolation> {
        let mut c = Checker::new(device, Kernel::KvAppend);
        let (bytes, multiple) = (self.kv_width * 2, device.limits.dma_length_multiple_bytes);
        c.require(
            bytes > 0 && bytes % multiple == 0,
            Constraint::Alignment,
            || format!("a K/V row of {bytes} B is not a multiple of {multiple} B"),
        );
        c.finish()
    }
}

/// Writes `rows` (whole rows of the cache's width) at element `start` of one
/// layer's keys or values, growing the cache with zeros to reach it: slots
/// skipped over hold zeros. The append of the fused decode and the host's KV
/// store both write through it.
pub fn append_rows(cache: &mut Vec<u16>, start: usize, rows: &[u16]) {
    if cache.len() < start + rows.len() {
        cache.resize(start + rows.len(), 0);
    }
    cache[start..start + rows.len()].copy_from_slice(rows);
}

/// One query per head over the first `positions` cached keys and values: f32
/// scores and sums over bf16 values. Query head `h` reads KV head `h / group`
/// (`shift` moves it to the next group: a planted fault). Scores are scaled by
/// `scale_dim^-1/2`, then soft-capped where the model caps them.
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
                *s = super::elementwise::softcap_value(*s, cap);
            }
        }
        softmax_f32(&mut scores);
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

/// The softmax of one head's scores in place, in f32 as the attention units
/// compute it: the largest score subtracted, the exponentials summed in
/// position order, each divided by the sum.
fn softmax_f32(scores: &mut [f32]) {
    let largest = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
    let mut total = 0.0f32;
    for s in scores.iter_mut() {
        *s = (*s - largest).exp();
        total += *s;
    }
    let inverse = 1.0 / total;
    for s in scores.iter_mut() {
        *s *= inverse;
    }
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

    fn llama_1b(cus: usize) -> DecodeAttentionSpec {
        DecodeAttentionSpec {
            heads: 32,
            kv_heads: 8,
            head_dim: 64,
            scale_dim: None,
            softcap: None,
            context: 2048,
            cus,
        }
    }

    #[test]
    fn the_published_layout_places_and_an_uneven_split_is_refused() {
        let device = Device::npu2();
        assert!(llama_1b(4).check(&device).is_empty());
        let found = llama_1b(3).check(&device);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].constraint, Constraint::Herd);
    }

    #[test]
    fn one_cu_holding_every_wide_head_overflows_l1() {
        let device = Device::npu2();
        let wide = DecodeAttentionSpec {
            head_dim: 256,
            ..llama_1b(1)
        };
        let found = wide.check(&device);
        assert!(
            found.iter().any(|v| v.constraint == Constraint::L1Capacity),
            "{found:?}"
        );
    }

    #[test]
    fn an_odd_kv_row_is_refused() {
        let device = Device::npu2();
        let row = |kv_width| KvAppendSpec {
            kv_width,
            context: 2048,
        };
        assert!(row(512).check(&device).is_empty());
        assert_eq!(row(63).check(&device).len(), 1);
    }

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
