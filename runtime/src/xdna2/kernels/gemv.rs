//! Decode matrix-vector kernels: `y[M] = W[M×K] · x[K]` with W in checkpoint
//! `[out, in]` order, bf16 operands and f32 accumulation over 16 lanes per
//! K segment. Variants: a fused residual add (`matvec_2tile_add`), the decode
//! cascade (herd rows split K and chain f32 partial sums), the fused
//! RMSNorm → gate/up GEMV → SiLU·mul cascade launch, and the LM head run as
//! partitions so each partition's outer loop stays within the DMA repeat count.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::elementwise::{rms_norm_row, silu_mul_value};
use super::gemv_packed::PackedFormat;
use super::{operand, refuse_if_any, Herd, Kernel, KernelError};
use crate::bf16;
use crate::threads;
use crate::xdna2::constraints::{ChannelUse, Checker, Constraint, ConstraintViolation};
use crate::xdna2::device::Device;

/// Per-tile GEMV tiling: `tile_m` rows per tile and iteration, `m_input` rows
/// per input DMA, `k_split` K segments per launch (accumulated in f32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GemvTile {
    pub tile_m: usize,
    pub m_input: usize,
    pub k_split: usize,
}

/// One GEMV launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GemvSpec {
    pub m: usize,
    pub k: usize,
    /// `[columns, rows]`; rows > 1 is the decode cascade.
    pub herd: Herd,
    pub tile: GemvTile,
    /// Single-buffered L1 (module-wide `omit_pingpong`).
    pub omit_pingpong: bool,
    /// Fused residual add.
    pub residual: bool,
    /// Weights kept in their 4-bit blocks (`gemv_packed`); bf16 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packed: Option<PackedFormat>,
}

/// K elements of W staged in L1 per row of one input DMA.
const L1_K_CHUNK: usize = 1024;
/// K alignment of the cascade's matvec_2tile kernels (lesson 18).
const CASCADE_K_MULTIPLE: usize = 512;
const TILE_M_CHOICES: [usize; 4] = [16, 8, 4, 2];

impl GemvSpec {
    /// The registry's configuration for a shape: the largest tile_m that
    /// places (memory-tile panel in L2, double-buffered rows in L1), m_input =
    /// tile_m, and as many K segments as the repeat limit needs.
    pub fn select(device: &Device, m: usize, k: usize, herd: Herd) -> GemvSpec {
        let k_max = device.limits.gemv_k_max() * herd.rows();
        let mut k_split = k.div_ceil(k_max.max(1)).max(1);
        while k_split < k
            && (k % k_split != 0 || (k / k_split) % device.limits.gemv_k_multiple != 0)
        {
            k_split += 1;
        }
        let with_tile = |tile_m: usize, m_input: usize| GemvSpec {
            m,
            k,
            herd,
            tile: GemvTile {
                tile_m,
                m_input,
                k_split,
            },
            omit_pingpong: false,
            residual: false,
            packed: None,
        };
        with_tile(2, 2)
            .retiled(device)
            .unwrap_or_else(|| with_tile(2, 2))
    }

    /// This GEMV with the registry rule's tile sized by its own weight bytes
    /// (bf16 rows, or packed blocks): the largest tile_m that places, then the
    /// largest m_input that fits L1; herd, K split and buffering kept. `None`
    /// when no tile places.
    pub fn retiled(&self, device: &Device) -> Option<GemvSpec> {
        let with_tile = |tile_m: usize, m_input: usize| GemvSpec {
            tile: GemvTile {
                tile_m,
                m_input,
                ..self.tile
            },
            ..*self
        };
        TILE_M_CHOICES
            .into_iter()
            .flat_map(|t| {
                TILE_M_CHOICES
                    .into_iter()
                    .filter(move |i| *i <= t)
                    .map(move |i| with_tile(t, i))
            })
            .find(|spec| spec.check(device).is_empty())
    }

    /// K elements one tile reduces per launch segment.
    pub fn k_segment(&self) -> usize {
        self.k / (self.tile.k_split * self.herd.rows()).max(1)
    }

    /// Bytes of the weight matrix as the launch streams it: bf16, or the
    /// stored 4-bit blocks.
    pub fn weight_bytes(&self) -> f64 {
        (self.m * self.row_bytes(self.k)) as f64
    }

    /// Bytes of `elements` weights of one row in the launch's weight format.
    pub fn row_bytes(&self, elements: usize) -> usize {
        self.packed.map_or(2 * elements, |f| f.bytes(elements))
    }

    pub fn check(&self, device: &Device) -> Vec<ConstraintViolation> {
        let mut c = Checker::new(device, Kernel::Gemv);
        self.check_into(&mut c);
        c.finish()
    }

    fn check_into(&self, c: &mut Checker<'_>) {
        if let Some(format) = self.packed {
            super::gemv_packed::check_blocks(self, format, c);
        }
        let weight_bytes = |n| self.row_bytes(n);
        let device = c.device;
        let t = self.tile;
        let (cols, rows) = (self.herd.cols(), self.herd.rows());
        c.herd_fits(cols, rows);
        let max_rows = device.limits.cascade_rows_max;
        c.require(rows <= max_rows, Constraint::Herd, || {
            format!("cascade of {rows} rows exceeds {max_rows}")
        });
        if rows > 1 {
            c.require(
                self.k % CASCADE_K_MULTIPLE == 0,
                Constraint::Alignment,
                || {
                    format!(
                        "cascade GEMV needs K % {CASCADE_K_MULTIPLE} == 0, K is {}",
                        self.k
                    )
                },
            );
        }
        let multiple = device.limits.gemv_k_multiple;
        let split_ok =
            t.k_split > 0 && self.k % (t.k_split * rows) == 0 && self.k_segment() % multiple == 0;
        c.require(split_ok, Constraint::Alignment, || {
            format!(
                "K {} split into {} x {rows} segments must leave multiples of {multiple}",
                self.k, t.k_split
            )
        });
        let k_seg = self.k_segment();
        let k_max = device.limits.gemv_k_max();
        c.require(k_seg <= k_max, Constraint::GemvKLimit, || {
            format!(
                "K segment {k_seg} (K {} / k_split {} / {rows} rows) exceeds {k_max} = {} repeats x {} elements",
                self.k,
                t.k_split,
                device.limits.dma_repeat_max,
                device.limits.gemv_k_chunk
            )
        });
        let dma_ok = t.tile_m >= 2 && (t.tile_m * 2) % device.limits.dma_length_multiple_bytes == 0;
        c.require(dma_ok, Constraint::Alignment, || {
            format!(
                "tile_m {} gives a {}-byte output DMA; transfers must be multiples of {} bytes",
                t.tile_m,
                t.tile_m * 2,
                device.limits.dma_length_multiple_bytes
            )
        });
        c.require(
            t.m_input > 0 && t.tile_m % t.m_input == 0,
            Constraint::Alignment,
            || format!("m_input {} does not divide tile_m {}", t.m_input, t.tile_m),
        );
        c.whole_row_blocks(self.m, t.tile_m, cols);
        c.l2(&[
            ("A panel", cols * t.tile_m * weight_bytes(k_seg)),
            ("y", cols * t.tile_m * 2),
        ]);
        let buffers = if self.omit_pingpong { 1 } else { 2 };
        c.l1(&[
            (
                "A rows",
                buffers * t.m_input * weight_bytes(k_seg.min(L1_K_CHUNK)),
            ),
            ("x", k_seg * 2),
            ("y f32", t.tile_m * 4),
            ("residual", if self.residual { t.tile_m * 2 } else { 0 }),
        ]);
        c.channels(
            cols,
            ChannelUse {
                compute_in: 2,
                compute_out: 1,
                mem_in: 2 + usize::from(self.residual),
                mem_out: rows + 1,
                shim_in: 2,
                shim_out: 1,
            },
        );
    }
}

/// `y = W·x (+ residual)`, bf16 out.
pub fn gemv(
    device: &Device,
    spec: &GemvSpec,
    w: &[u16],
    x: &[u16],
    residual: Option<&[u16]>,
) -> Result<Vec<u16>, KernelError> {
    refuse_if_any(Kernel::Gemv, spec.check(device))?;
    validate_operands(Kernel::Gemv, spec, w, x)?;
    if let Some(r) = residual {
        operand(Kernel::Gemv, "residual", r, spec.m)?;
    }
    let acc = matvec_f32(spec, w, x);
    Ok(acc
        .iter()
        .enumerate()
        .map(|(i, &y)| bf16::from_f32(y + residual.map_or(0.0, |r| bf16::to_f32(r[i]))))
        .collect())
}

fn validate_operands(
    kernel: Kernel,
    spec: &GemvSpec,
    w: &[u16],
    x: &[u16],
) -> Result<(), KernelError> {
    operand(kernel, "W", w, spec.m * spec.k)?;
    operand(kernel, "x", x, spec.k)
}

/// f32 accumulators: each K segment reduced over `LANES` lanes (pairwise at
/// the end), segments added in order (the cascade chain, or the k_split loop).
fn matvec_f32(spec: &GemvSpec, w: &[u16], x: &[u16]) -> Vec<f32> {
    let x32 = bf16::to_f32_vec(x);
    let k = spec.k;
    let segment = spec.k_segment().max(1);
    let mut y = vec![0.0f32; spec.m];
    y.par_chunks_mut(ROWS_PER_TASK)
        .with_min_len(threads::min_len(ROWS_PER_TASK * k))
        .enumerate()
        .for_each(|(block, out)| {
            let rows = &w[block * ROWS_PER_TASK * k..][..out.len() * k];
            rows_dot(rows, k, segment, &x32, out);
        });
    y
}

/// Output rows per parallel task.
pub(super) const ROWS_PER_TASK: usize = 32;
/// Accumulator lanes: one `accfloat` vector of the AIE2P vector unit.
const LANES: usize = 16;

pub(super) fn rows_dot(rows: &[u16], k: usize, segment: usize, x: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present, checked just above.
            unsafe { rows_dot_avx2(rows, k, segment, x, out) };
            return;
        }
    }
    rows_dot_portable(rows, k, segment, x, out);
}

/// The portable loop compiled with AVX2: wider vectors, the same operations
/// in the same order (Rust never contracts into FMA), so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn rows_dot_avx2(rows: &[u16], k: usize, segment: usize, x: &[f32], out: &mut [f32]) {
    rows_dot_portable(rows, k, segment, x, out);
}

#[inline(always)]
fn rows_dot_portable(rows: &[u16], k: usize, segment: usize, x: &[f32], out: &mut [f32]) {
    for (slot, row) in out.iter_mut().zip(rows.chunks_exact(k)) {
        *slot = row
            .chunks(segment)
            .zip(x.chunks(segment))
            .fold(0.0f32, |acc, (r, xs)| acc + segment_dot(r, xs));
    }
}

#[inline(always)]
fn segment_dot(row: &[u16], x: &[f32]) -> f32 {
    let body = row.len() / LANES * LANES;
    let mut acc = [0.0f32; LANES];
    for (r, v) in row[..body]
        .chunks_exact(LANES)
        .zip(x[..body].chunks_exact(LANES))
    {
        for l in 0..LANES {
            acc[l] += bf16::to_f32(r[l]) * v[l];
        }
    }
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            acc[l] += acc[l + width];
        }
    }
    let tail: f32 = row[body..]
        .iter()
        .zip(&x[body..])
        .map(|(&r, &v)| bf16::to_f32(r) * v)
        .sum();
    acc[0] + tail
}

/// One launch of the decode cascade: `silu(Wg·n) ⊙ (Wu·n)` with
/// `n = rmsnorm(x)·norm_weight`; each stage has its standalone kernel's
/// numerics (bf16 between stages).
#[allow(clippy::too_many_arguments)]
pub fn gemv_swiglu(
    device: &Device,
    spec: &GemvSpec,
    eps: f32,
    x: &[u16],
    norm_weight: &[u16],
    w_gate: &[u16],
    w_up: &[u16],
) -> Result<Vec<u16>, KernelError> {
    refuse_if_any(Kernel::GemvSwiglu, check_swiglu(device, spec))?;
    validate_operands(Kernel::GemvSwiglu, spec, w_gate, x)?;
    operand(Kernel::GemvSwiglu, "W_up", w_up, spec.m * spec.k)?;
    operand(Kernel::GemvSwiglu, "norm_weight", norm_weight, spec.k)?;
    let mut normed = vec![0u16; spec.k];
    rms_norm_row(x, x.len(), Some(norm_weight), eps, &mut normed);
    let gate = matvec_f32(spec, w_gate, &normed);
    let up = matvec_f32(spec, w_up, &normed);
    Ok(gate
        .iter()
        .zip(&up)
        .map(|(&g, &u)| silu_mul_value(bf16::from_f32(g), bf16::from_f32(u)))
        .collect())
}

/// The cascade launch's rules on top of the GEMV ones: its K (the model's
/// hidden size) must stay below the cascade's ceiling.
pub fn check_swiglu(device: &Device, spec: &GemvSpec) -> Vec<ConstraintViolation> {
    let mut c = Checker::new(device, Kernel::GemvSwiglu);
    spec.check_into(&mut c);
    let below = device.limits.cascade_hidden_size_below;
    c.require(spec.k < below, Constraint::Herd, || {
        format!(
            "cascade needs hidden size < {below} to fit {} core rows, K is {}",
            device.limits.cascade_rows_max, spec.k
        )
    });
    c.finish()
}

/// The LM head as `parts` GEMV partitions of `part_rows` rows each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LmHeadSpec {
    pub vocab: usize,
    pub parts: usize,
    /// One partition's GEMV (m = rows per partition, padded to the tile).
    pub part: GemvSpec,
}

impl LmHeadSpec {
    /// At least `parts` partitions, more when a partition's outer loop would
    /// exceed the DMA repeat limit (the reference's rule: each partition fits
    /// L2 and the repeat count).
    pub fn select(device: &Device, vocab: usize, k: usize, parts: usize) -> LmHeadSpec {
        let template = Self::template(device, k);
        let block = template.tile.tile_m * template.herd.cols();
        let max_iterations = device.limits.dma_repeat_max;
        let parts = (parts.max(1)..)
            .find(|p| vocab.div_ceil(*p).div_ceil(block) <= max_iterations)
            .unwrap_or(parts);
        let part = GemvSpec {
            m: vocab.div_ceil(parts).div_ceil(block) * block,
            ..template
        };
        LmHeadSpec { vocab, parts, part }
    }

    /// The most partitions a `vocab` × `k` head has rows for: each holds at least
    /// one row block (`tile_m` rows on every compute column); beyond that a
    /// partition would cover no row of the vocabulary.
    pub fn max_parts(device: &Device, vocab: usize, k: usize) -> usize {
        let template = Self::template(device, k);
        vocab.div_ceil(template.tile.tile_m * template.herd.cols())
    }

    /// One partition's GEMV on a row of the array, before its rows are known.
    fn template(device: &Device, k: usize) -> GemvSpec {
        let herd = Herd([device.columns, 1]);
        GemvSpec::select(device, herd.cols() * TILE_M_CHOICES[0], k, herd)
    }

    pub fn check(&self, device: &Device) -> Vec<ConstraintViolation> {
        let mut c = Checker::new(device, Kernel::LmHeadGemv);
        self.part.check_into(&mut c);
        let block = self.part.tile.tile_m * self.part.herd.cols();
        let iterations = self.part.m / block.max(1);
        let max = device.limits.dma_repeat_max;
        c.require(iterations <= max, Constraint::RepeatCount, || {
            format!(
                "partition of {} rows needs {iterations} outer iterations of {block} rows, repeat limit {max}",
                self.part.m
            )
        });
        let covered = self.parts * self.part.m;
        c.require(covered >= self.vocab, Constraint::Shape, || {
            format!(
                "{} partitions x {} rows cover {covered} < vocab {}",
                self.parts, self.part.m, self.vocab
            )
        });
        c.finish()
    }
}

impl LmHeadSpec {
    /// Rows of the vocabulary partition `part` covers.
    pub fn rows(&self, part: usize) -> std::ops::Range<usize> {
        let start = (part * self.part.m).min(self.vocab);
        start..((part + 1) * self.part.m).min(self.vocab)
    }
}

/// Logits `[vocab]` (bf16) from the output projection `[vocab, K]`, every
/// partition in turn.
pub fn lm_head_gemv(
    device: &Device,
    spec: &LmHeadSpec,
    w: &[u16],
    x: &[u16],
) -> Result<Vec<u16>, KernelError> {
    operand(Kernel::LmHeadGemv, "W", w, spec.vocab * spec.part.k)?;
    let mut logits = vec![0u16; spec.vocab];
    let k = spec.part.k;
    for part in 0..spec.parts {
        let rows = spec.rows(part);
        lm_head_partition(
            device,
            spec,
            part,
            &w[rows.start * k..rows.end * k],
            x,
            &mut logits,
        )?;
    }
    Ok(logits)
}

/// One partition: `w_part` holds its rows of the output projection, either
/// the real rows only or padded with zeros to `spec.part.m` (padding is never
/// read); the partition's logits land in their rows of `logits`.
pub fn lm_head_partition(
    device: &Device,
    spec: &LmHeadSpec,
    part: usize,
    w_part: &[u16],
    x: &[u16],
    logits: &mut [u16],
) -> Result<(), KernelError> {
    refuse_if_any(Kernel::LmHeadGemv, spec.check(device))?;
    let k = spec.part.k;
    let rows = spec.rows(part);
    if w_part.len() != spec.part.m * k {
        operand(Kernel::LmHeadGemv, "W partition", w_part, rows.len() * k)?;
    }
    operand(Kernel::LmHeadGemv, "x", x, k)?;
    operand(Kernel::LmHeadGemv, "logits", logits, spec.vocab)?;
    let real = GemvSpec {
        m: rows.len(),
        ..spec.part
    };
    let y = matvec_f32(&real, &w_part[..rows.len() * k], x);
    for (slot, v) in logits[rows].iter_mut().zip(y) {
        *slot = bf16::from_f32(v);
    }
    Ok(())
}
