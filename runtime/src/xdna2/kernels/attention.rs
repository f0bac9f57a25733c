//! Flash attention with grouped-query heads on the full array: query tiles of
//! 64 rows, key blocks of 64, `cascade` stages that each take a contiguous
//! slice of the keys and are merged at the end, online softmax per stage.
//!
//! Numerics: Q·Kᵀ scores accumulate in f32 and are written as bf16; the
//! probabilities `exp(s − m)` are rounded to bf16 before P·V, which
//! accumulates in f32; the output is rounded once to bf16. The causal mask is
//! applied to scores; for timing, masked blocks still cost (the kernel masks
//! but does not skip, calibration §3), while this functional path skips them
//! because their contribution is exactly zero.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{operand, refuse_if_any, Herd, Kernel, KernelError};
use crate::bf16;
use crate::threads;
use crate::xdna2::constraints::{ChannelUse, Checker, Constraint, ConstraintViolation};
use crate::xdna2::device::Device;

/// Memory order of Q, K, V and the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QkvLayout {
    /// `[positions, heads, head_dim]`: what the projections produce.
    SeqFirst,
    /// `[heads, positions, head_dim]`.
    HeadFirst,
}

/// Placement of one flash-attention launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FlashTile {
    /// Query rows per launch iteration (`q_tiles` × 64).
    pub lqp: usize,
    pub q_tiles: usize,
    pub heads_per_unroll: usize,
    /// Cascade stages (compute rows) splitting the keys.
    pub cascade: usize,
    pub dk_chunks: usize,
    pub dv_chunks: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FlashAttentionSpec {
    pub lq: usize,
    pub lk: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub causal: bool,
    pub layout: QkvLayout,
    pub tile: FlashTile,
    /// Scores are scaled by `scale_dim^-1/2` instead of `head_dim^-1/2`: the
    /// real head_dim of zero-padded heads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_dim: Option<usize>,
    /// Sliding-window mask: a query at absolute position p sees keys
    /// `p + 1 − window ..= p` (transformers' `kv_idx > q_idx − window`). For
    /// timing the masked blocks cost like the causal ones (the kernel masks,
    /// it does not skip).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<usize>,
    /// Gemma-2's soft-cap on every scaled score, `tanh(s / cap) · cap`,
    /// before the mask and the softmax (a whole number: the published caps
    /// are 50 and 30). Timed as the uncapped kernel (uncalibrated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softcap: Option<u32>,
}

impl FlashAttentionSpec {
    /// The registry's full-chip placement: (lqp 256, 4 q-tiles, 2 heads per
    /// unroll, cascade 4), one head per unroll for odd head counts, fewer
    /// q-tiles when the sequence is short; head_dim above 64 is chunked (into
    /// the fewest equal chunks whose tiles fit L1: 2 at 128, 4 at 256) and
    /// runs head-first (the seq-first variant needs dv_chunks = 1).
    pub fn select(
        lq: usize,
        lk: usize,
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
        causal: bool,
    ) -> Self {
        let key = 64;
        let q_tiles = [4, 2, 1]
            .into_iter()
            .find(|t| lq % (t * key) == 0)
            .unwrap_or(1);
        let heads_per_unroll = if heads % 2 == 0 { 2 } else { 1 };
        let cascade = [4, 2, 1]
            .into_iter()
            .find(|c| lk % (c * key) == 0)
            .unwrap_or(1);
        let chunks = (1..=head_dim.max(1))
            .find(|c| head_dim % c == 0 && fits_l1(head_dim / c))
            .unwrap_or_else(|| head_dim.div_ceil(64).max(1));
        let layout = if chunks > 1 {
            QkvLayout::HeadFirst
        } else {
            QkvLayout::SeqFirst
        };
        FlashAttentionSpec {
            lq,
            lk,
            heads,
            kv_heads,
            head_dim,
            causal,
            layout,
            tile: FlashTile {
                lqp: q_tiles * key,
                q_tiles,
                heads_per_unroll,
                cascade,
                dk_chunks: chunks,
                dv_chunks: chunks,
            },
            scale_dim: None,
            window: None,
            softcap: None,
        }
    }

    /// The factor on the scores: `scale_dim^-1/2`, else `head_dim^-1/2`.
    pub fn score_scale(&self) -> f32 {
        1.0 / (self.scale_dim.unwrap_or(self.head_dim) as f32).sqrt()
    }

    /// Tiles the launch occupies as a herd `[q_tiles · heads_per_unroll, cascade]`.
    pub fn herd(&self) -> Herd {
        Herd([
            self.tile.q_tiles * self.tile.heads_per_unroll,
            self.tile.cascade,
        ])
    }

    /// FLOPs the hardware executes: Q·Kᵀ and P·V over every key block, masked
    /// or not.
    pub fn executed_flops(&self) -> f64 {
        2.0 * self.heads as f64 * self.lq as f64 * self.lk as f64 * (2 * self.head_dim) as f64
    }

    pub fn check(&self, device: &Device) -> Vec<ConstraintViolation> {
        let mut c = Checker::new(device, Kernel::FlashAttention);
        let t = self.tile;
        let herd = self.herd();
        c.herd_fits(herd.cols(), herd.rows());
        let key = device.limits.fa_key_block;
        let hpu_max = device.limits.fa_heads_per_unroll_max;
        c.require(
            t.heads_per_unroll >= 1
                && t.heads_per_unroll <= hpu_max
                && self.heads % t.heads_per_unroll == 0,
            Constraint::Herd,
            || {
                format!(
                    "heads_per_unroll {} must be in 1..={hpu_max} and divide {} heads",
                    t.heads_per_unroll, self.heads
                )
            },
        );
        c.require(
            self.kv_heads > 0 && self.heads % self.kv_heads == 0,
            Constraint::Shape,
            || {
                format!(
                    "{} query heads are not a multiple of {} KV heads",
                    self.heads, self.kv_heads
                )
            },
        );
        c.require(
            t.lqp == t.q_tiles * key && t.lqp > 0 && self.lq % t.lqp == 0,
            Constraint::Alignment,
            || {
                format!(
                    "lq {} must be a multiple of lqp {} = q_tiles {} x {key}",
                    self.lq, t.lqp, t.q_tiles
                )
            },
        );
        let stage = key * t.cascade;
        c.require(
            stage > 0 && self.lk % stage == 0,
            Constraint::Alignment,
            || {
                format!(
                    "lk {} must be a multiple of {key} keys x {} cascade stages",
                    self.lk, t.cascade
                )
            },
        );
        let chunks_ok = t.dk_chunks > 0
            && t.dv_chunks > 0
            && self.head_dim % t.dk_chunks == 0
            && self.head_dim % t.dv_chunks == 0;
        c.require(chunks_ok, Constraint::Alignment, || {
            format!(
                "head_dim {} must split into dk_chunks {} and dv_chunks {}",
                self.head_dim, t.dk_chunks, t.dv_chunks
            )
        });
        c.require(
            self.layout == QkvLayout::HeadFirst || t.dv_chunks == 1,
            Constraint::Layout,
            || {
                format!(
                    "the seq-first variant needs dv_chunks = 1, got {}",
                    t.dv_chunks
                )
            },
        );
        let dk = self.head_dim / t.dk_chunks.max(1);
        let dv = self.head_dim / t.dv_chunks.max(1);
        c.l1(&l1_parts(key, dk, dv));
        c.channels(
            herd.cols(),
            ChannelUse {
                compute_in: 2,
                compute_out: 1,
                mem_in: 4,
                mem_out: 5,
                shim_in: 2,
                shim_out: 1,
            },
        );
        c.finish()
    }

    fn index(&self, layout_len: usize, heads: usize, pos: usize, head: usize) -> usize {
        match self.layout {
            QkvLayout::SeqFirst => (pos * heads + head) * self.head_dim,
            QkvLayout::HeadFirst => (head * layout_len + pos) * self.head_dim,
        }
    }
}

/// One compute tile's L1 buffers for key blocks of `key` at chunk widths `dk`
/// (Q, K) and `dv` (V, O).
fn l1_parts(key: usize, dk: usize, dv: usize) -> [(&'static str, usize); 6] {
    [
        ("Q", key * dk * 2),
        ("K 2x", 2 * key * dk * 2),
        ("V", key * dv * 2),
        ("P bf16", key * key * 2),
        ("O f32", key * dv * 4),
        ("max/sum", key * 4 * 2),
    ]
}

/// Whether chunks of `d` dimensions fit npu2's 64 KiB compute-tile memory
/// with 64-key blocks (the selection's guess; `check` decides on the device).
fn fits_l1(d: usize) -> bool {
    l1_parts(64, d, d).iter().map(|(_, b)| b).sum::<usize>() <= 64 * 1024
}

/// Attention output in the spec's layout.
pub fn flash_attention(
    device: &Device,
    spec: &FlashAttentionSpec,
    q: &[u16],
    k: &[u16],
    v: &[u16],
) -> Result<Vec<u16>, KernelError> {
    refuse_if_any(Kernel::FlashAttention, spec.check(device))?;
    let hd = spec.head_dim;
    operand(Kernel::FlashAttention, "Q", q, spec.lq * spec.heads * hd)?;
    operand(Kernel::FlashAttention, "K", k, spec.lk * spec.kv_heads * hd)?;
    operand(Kernel::FlashAttention, "V", v, spec.lk * spec.kv_heads * hd)?;
    let keys: Vec<Vec<f32>> = (0..spec.kv_heads)
        .map(|h| gather(spec, k, spec.lk, spec.kv_heads, h))
        .collect();
    let values: Vec<Vec<f32>> = (0..spec.kv_heads)
        .map(|h| gather(spec, v, spec.lk, spec.kv_heads, h))
        .collect();
    let group = spec.heads / spec.kv_heads;
    let rows: Vec<(usize, usize, Vec<u16>)> = (0..spec.heads * spec.lq)
        .into_par_iter()
        .with_min_len(threads::min_len(2 * spec.lk * hd))
        .map(|job| {
            let (head, pos) = (job / spec.lq, job % spec.lq);
            let start = spec.index(spec.lq, spec.heads, pos, head);
            let query = bf16::to_f32_vec(&q[start..start + hd]);
            let kv = head / group;
            let out = attend_one(spec, &query, pos, &keys[kv], &values[kv]);
            (head, pos, out)
        })
        .collect();
    let mut out = vec![0u16; q.len()];
    for (head, pos, row) in rows {
        let start = spec.index(spec.lq, spec.heads, pos, head);
        out[start..start + hd].copy_from_slice(&row);
    }
    Ok(out)
}

/// One KV head's rows `[lk, head_dim]` as f32.
fn gather(
    spec: &FlashAttentionSpec,
    data: &[u16],
    len: usize,
    heads: usize,
    head: usize,
) -> Vec<f32> {
    let hd = spec.head_dim;
    let mut rows = Vec::with_capacity(len * hd);
    for pos in 0..len {
        let start = spec.index(len, heads, pos, head);
        rows.extend(data[start..start + hd].iter().map(|&b| bf16::to_f32(b)));
    }
    rows
}

/// Online-softmax state of one cascade stage.
struct Stage {
    max: f32,
    sum: f32,
    acc: Vec<f32>,
}

fn attend_one(
    spec: &FlashAttentionSpec,
    query: &[f32],
    pos: usize,
    keys: &[f32],
    values: &[f32],
) -> Vec<u16> {
    let hd = spec.head_dim;
    let scale = spec.score_scale();
    // Query `pos` sits at absolute position pos + (lk − lq) among the keys.
    let last_visible = if spec.causal {
        pos + spec.lk.saturating_sub(spec.lq)
    } else {
        spec.lk - 1
    };
    let first_visible = spec
        .window
        .map_or(0, |w| (last_visible + 1).saturating_sub(w));
    let stages = spec.tile.cascade.max(1);
    let per_stage = spec.lk / stages;
    let block = 64;
    let mut merged: Vec<Stage> = Vec::with_capacity(stages);
    let mut scores = vec![0.0f32; block];
    for s in 0..stages {
        let mut st = Stage {
            max: f32::NEG_INFINITY,
            sum: 0.0,
            acc: vec![0.0; hd],
        };
        let lo = (s * per_stage).max(first_visible);
        let hi = ((s + 1) * per_stage).min(last_visible + 1);
        let mut start = lo;
        while start < hi {
            let end = (start + block).min(hi);
            let n = end - start;
            for (j, slot) in scores[..n].iter_mut().enumerate() {
                let key = &keys[(start + j) * hd..][..hd];
                let score = dot8(query, key) * scale;
                *slot = bf16::round(match spec.softcap {
                    Some(cap) => (score / cap as f32).tanh() * cap as f32,
                    None => score,
                });
            }
            let block_max = scores[..n].iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let new_max = st.max.max(block_max);
            let correction = (st.max - new_max).exp();
            st.sum *= correction;
            st.acc.iter_mut().for_each(|a| *a *= correction);
            for (j, &sc) in scores[..n].iter().enumerate() {
                let p = bf16::round((sc - new_max).exp());
                st.sum += p;
                let value = &values[(start + j) * hd..][..hd];
                for (a, &v) in st.acc.iter_mut().zip(value) {
                    *a += p * v;
                }
            }
            st.max = new_max;
            start = end;
        }
        merged.push(st);
    }
    let global = merged.iter().fold(f32::NEG_INFINITY, |m, s| m.max(s.max));
    let mut acc = vec![0.0f32; hd];
    let mut sum = 0.0f32;
    for st in merged.iter().filter(|s| s.max.is_finite()) {
        let w = (st.max - global).exp();
        sum += st.sum * w;
        for (a, &x) in acc.iter_mut().zip(&st.acc) {
            *a += x * w;
        }
    }
    acc.iter().map(|&a| bf16::from_f32(a / sum)).collect()
}

fn dot8(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    for (ca, cb) in a.chunks(8).zip(b.chunks(8)) {
        for ((lane, &x), &y) in lanes.iter_mut().zip(ca).zip(cb) {
            *lane += x * y;
        }
    }
    lanes.iter().sum()
}
