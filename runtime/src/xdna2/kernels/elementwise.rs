//! Row-parallel vector-unit kernels: RMSNorm (plain, weighted, per-head for
//! Q/K norm), RoPE (half-split, from a bf16 cos|sin lookup table), SiLU·mul,
//! element-wise add, softmax, and the embedding gather.
//!
//! Numerics follow the bf16 vector unit: reductions accumulate in f32 over
//! eight lanes; each vector multiply that produces a bf16 vector rounds its
//! result (so RMSNorm rounds `x·inv_rms` before applying the weight, SiLU
//! rounds exp, the sigmoid and `g·sigmoid` before the product with `up`).
//! These extra roundings are why the registry gates these kernels at wider
//! atol than GEMM.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{operand, refuse_if_any, Herd, Kernel, KernelError};
use crate::bf16;
use crate::threads;
use crate::xdna2::constraints::{ChannelUse, Checker, Constraint, ConstraintViolation};
use crate::xdna2::device::Device;

/// Elements per tile transfer of a streaming kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RowTile {
    pub tile: usize,
}

/// Element-wise add or SiLU·mul over `n` elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EltwiseSpec {
    pub n: usize,
    pub herd: Herd,
    pub tile: RowTile,
}

/// A row-wise kernel (RMSNorm, Q/K RMSNorm, softmax) over `rows × cols`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NormSpec {
    pub rows: usize,
    pub cols: usize,
    pub herd: Herd,
    /// Multiplies by a weight vector of `cols` elements.
    pub weighted: bool,
    /// RMSNorm over a zero-padded row: the mean square is taken over these
    /// first columns (the real ones; the rest are padding zeros).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real_cols: Option<usize>,
}

impl NormSpec {
    /// Columns the mean square is taken over.
    pub fn mean_cols(&self) -> usize {
        self.real_cols.unwrap_or(self.cols).min(self.cols)
    }
}

/// RoPE over `rows` positions of `heads` heads of `head_dim`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RopeSpec {
    pub rows: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub herd: Herd,
    /// Heads zero-padded past their real dimensions: only the first
    /// `rotary_dim` of each head are rotated (half-split within them) and the
    /// lookup table rows are that wide; the padding passes through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotary_dim: Option<usize>,
}

impl RopeSpec {
    /// Dimensions of each head that rotate (the table's row width).
    pub fn rotated(&self) -> usize {
        self.rotary_dim.unwrap_or(self.head_dim).min(self.head_dim)
    }
}

impl EltwiseSpec {
    /// The largest even tile up to the L1 limit that splits `n` evenly over
    /// the herd.
    pub fn select(device: &Device, n: usize, herd: Herd) -> EltwiseSpec {
        let per_tile = n / herd.tiles().max(1);
        let max = device.limits.eltwise_tile_max;
        let tile = (2..=max.min(per_tile))
            .rev()
            .find(|t| t % 2 == 0 && per_tile % t == 0)
            .unwrap_or(2);
        EltwiseSpec {
            n,
            herd,
            tile: RowTile { tile },
        }
    }

    pub fn check(&self, device: &Device, kernel: Kernel) -> Vec<ConstraintViolation> {
        let mut c = Checker::new(device, kernel);
        let (cols, rows) = (self.herd.cols(), self.herd.rows());
        c.herd_fits(cols, rows);
        let tile = self.tile.tile;
        let max = device.limits.eltwise_tile_max;
        c.require(tile <= max, Constraint::L1Capacity, || {
            format!("tile {tile} exceeds {max} elements")
        });
        c.l1(&[("in 2x2", 2 * 2 * tile * 2), ("out 2x", 2 * tile * 2)]);
        let block = tile * self.herd.tiles();
        c.require(
            block > 0 && self.n % block == 0,
            Constraint::Alignment,
            || {
                format!(
                    "N {} is not a multiple of tile {tile} x {} tiles = {block}",
                    self.n,
                    self.herd.tiles()
                )
            },
        );
        dma_even(&mut c, tile);
        c.channels(cols, streamed(rows, 2, 1));
        c.finish()
    }
}

impl NormSpec {
    pub fn check(&self, device: &Device, kernel: Kernel) -> Vec<ConstraintViolation> {
        let mut c = Checker::new(device, kernel);
        let (cols, rows) = (self.herd.cols(), self.herd.rows());
        c.herd_fits(cols, rows);
        let tiles = self.herd.tiles();
        c.require(self.rows % tiles == 0, Constraint::Alignment, || {
            format!("{} rows do not split over {tiles} tiles", self.rows)
        });
        let weight = if self.weighted { self.cols * 2 } else { 0 };
        c.l1(&[
            ("row in 2x", 2 * self.cols * 2),
            ("row out 2x", 2 * self.cols * 2),
            ("weight", weight),
        ]);
        dma_even(&mut c, self.cols);
        c.channels(cols, streamed(rows, 1 + usize::from(self.weighted), 1));
        c.finish()
    }
}

impl RopeSpec {
    pub fn check(&self, device: &Device) -> Vec<ConstraintViolation> {
        let mut c = Checker::new(device, Kernel::Rope);
        let (cols, rows) = (self.herd.cols(), self.herd.rows());
        c.herd_fits(cols, rows);
        let tiles = self.herd.tiles();
        let vectors = self.rows * self.heads;
        c.require(vectors % tiles == 0, Constraint::Alignment, || {
            format!(
                "{} rows x {} heads do not split over {tiles} tiles",
                self.rows, self.heads
            )
        });
        c.require(
            self.head_dim % 2 == 0 && self.rotated() % 2 == 0,
            Constraint::Alignment,
            || {
                format!(
                    "half-split RoPE needs an even head_dim, got {} (rotating {})",
                    self.head_dim,
                    self.rotated()
                )
            },
        );
        let hd = self.head_dim * 2;
        c.l1(&[("x 2x", 2 * hd), ("lut 2x", 2 * hd), ("out 2x", 2 * hd)]);
        c.channels(cols, streamed(rows, 2, 1));
        c.finish()
    }
}

/// Channels of a kernel whose tiles stream straight from the shim.
fn streamed(rows: usize, inputs: usize, outputs: usize) -> ChannelUse {
    ChannelUse {
        compute_in: inputs,
        compute_out: outputs,
        mem_in: 0,
        mem_out: 0,
        shim_in: rows * inputs,
        shim_out: rows * outputs,
    }
}

fn dma_even(c: &mut Checker<'_>, elements: usize) {
    let multiple = c.device.limits.dma_length_multiple_bytes;
    c.require((elements * 2) % multiple == 0, Constraint::Alignment, || {
        format!("{elements} bf16 elements are {} bytes; DMA lengths must be multiples of {multiple}", elements * 2)
    });
}

/// RMSNorm of every row: `x / sqrt(mean(x²) + eps) · weight`.
pub fn rms_norm(
    device: &Device,
    spec: &NormSpec,
    eps: f32,
    x: &[u16],
    weight: Option<&[u16]>,
) -> Result<Vec<u16>, KernelError> {
    norm_rows(device, spec, Kernel::Rmsnorm, eps, x, weight)
}

/// Per-head RMSNorm (Qwen3 Q/K norm): rows are `positions × heads`, columns
/// are `head_dim`, one weight vector shared by every head.
pub fn qk_rms_norm(
    device: &Device,
    spec: &NormSpec,
    eps: f32,
    x: &[u16],
    weight: &[u16],
) -> Result<Vec<u16>, KernelError> {
    norm_rows(device, spec, Kernel::QkRmsnorm, eps, x, Some(weight))
}

fn norm_rows(
    device: &Device,
    spec: &NormSpec,
    kernel: Kernel,
    eps: f32,
    x: &[u16],
    weight: Option<&[u16]>,
) -> Result<Vec<u16>, KernelError> {
    refuse_if_any(kernel, spec.check(device, kernel))?;
    operand(kernel, "x", x, spec.rows * spec.cols)?;
    if let Some(w) = weight {
        operand(kernel, "weight", w, spec.cols)?;
    }
    let weight = weight.filter(|_| spec.weighted);
    let mean_cols = spec.mean_cols();
    let mut out = vec![0u16; x.len()];
    out.par_chunks_mut(spec.cols.max(1))
        .zip(x.par_chunks(spec.cols.max(1)))
        .with_min_len(threads::min_len(spec.cols))
        .for_each(|(o, row)| rms_norm_row(row, mean_cols, weight, eps, o));
    Ok(out)
}

/// One row of RMSNorm with the vector unit's roundings; the mean square is
/// over the first `mean_cols` elements (all of a row that is not padded).
pub(crate) fn rms_norm_row(
    row: &[u16],
    mean_cols: usize,
    weight: Option<&[u16]>,
    eps: f32,
    out: &mut [u16],
) {
    let real = &row[..mean_cols.min(row.len())];
    let mut lanes = [0.0f32; 8];
    for chunk in real.chunks(8) {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            let f = bf16::to_f32(v);
            *lane += f * f;
        }
    }
    let sum: f32 = lanes.iter().sum();
    let inv = 1.0 / (sum / real.len().max(1) as f32 + eps).sqrt();
    for (i, (o, &v)) in out.iter_mut().zip(row).enumerate() {
        let normed = bf16::round(bf16::to_f32(v) * inv);
        *o = match weight {
            Some(w) => bf16::from_f32(normed * bf16::to_f32(w[i])),
            None => bf16::from_f32(normed),
        };
    }
}

/// LayerNorm of every row: `(x − mean) / sqrt(var + eps) · weight + bias`
/// (StableLM; OLMo's has neither weight nor bias). The mean and the biased
/// variance are over the first `mean_cols` columns (the real ones of a
/// zero-padded row), in f32 lanes as the RMSNorm kernel sums; padded columns
/// are written zero.
pub fn layer_norm(
    device: &Device,
    spec: &NormSpec,
    eps: f32,
    x: &[u16],
    (weight, bias): (Option<&[u16]>, Option<&[u16]>),
) -> Result<Vec<u16>, KernelError> {
    let kernel = Kernel::Layernorm;
    refuse_if_any(kernel, spec.check(device, kernel))?;
    operand(kernel, "x", x, spec.rows * spec.cols)?;
    for (name, v) in [("weight", weight), ("bias", bias)] {
        if let Some(v) = v {
            operand(kernel, name, v, spec.cols)?;
        }
    }
    let weight = weight.filter(|_| spec.weighted);
    let mean_cols = spec.mean_cols();
    let mut out = vec![0u16; x.len()];
    out.par_chunks_mut(spec.cols.max(1))
        .zip(x.par_chunks(spec.cols.max(1)))
        .for_each(|(o, row)| layer_norm_row(row, mean_cols, (weight, bias), eps, o));
    Ok(out)
}

/// One row of LayerNorm with the vector unit's roundings: the normalised
/// value is rounded to bf16 before the weight, as in the RMSNorm kernel.
pub(crate) fn layer_norm_row(
    row: &[u16],
    mean_cols: usize,
    (weight, bias): (Option<&[u16]>, Option<&[u16]>),
    eps: f32,
    out: &mut [u16],
) {
    let real = &row[..mean_cols.min(row.len())];
    let n = real.len().max(1) as f32;
    let lane_sum = |f: &dyn Fn(f32) -> f32| -> f32 {
        let mut lanes = [0.0f32; 8];
        for chunk in real.chunks(8) {
            for (lane, &v) in lanes.iter_mut().zip(chunk) {
                *lane += f(bf16::to_f32(v));
            }
        }
        lanes.iter().sum()
    };
    let mean = lane_sum(&|v| v) / n;
    let var = lane_sum(&|v| (v - mean) * (v - mean)) / n;
    let inv = 1.0 / (var + eps).sqrt();
    for (i, (o, &v)) in out.iter_mut().zip(row).enumerate() {
        if i >= real.len() {
            *o = 0;
            continue;
        }
        let normed = bf16::round((bf16::to_f32(v) - mean) * inv);
        let scaled = weight.map_or(normed, |w| normed * bf16::to_f32(w[i]));
        *o = bf16::from_f32(bias.map_or(scaled, |b| scaled + bf16::to_f32(b[i])));
    }
}

/// The RoPE lookup table `[positions, 2 · inv_freq.len()]`: each row holds
/// `cos(p·f_0..f_{d/2})` then `sin(p·f_0..f_{d/2})` with the angle formed in
/// f32 (as transformers does), rounded to bf16.
pub fn rope_lut(inv_freq: &[f32], positions: usize) -> Vec<u16> {
    let half = inv_freq.len();
    let mut lut = vec![0u16; positions * 2 * half];
    for (p, row) in lut.chunks_mut((2 * half).max(1)).enumerate() {
        for (i, &f) in inv_freq.iter().enumerate() {
            let angle = p as f32 * f;
            row[i] = bf16::from_f32(angle.cos());
            row[half + i] = bf16::from_f32(angle.sin());
        }
    }
    lut
}

/// Half-split RoPE of `x` (`[rows, heads·head_dim]`, seq-first) for
/// positions `first_position..first_position + rows`, reading `lut`.
pub fn rope(
    device: &Device,
    spec: &RopeSpec,
    x: &[u16],
    lut: &[u16],
    first_position: usize,
) -> Result<Vec<u16>, KernelError> {
    refuse_if_any(Kernel::Rope, spec.check(device))?;
    let (hd, width) = (spec.head_dim, spec.heads * spec.head_dim);
    operand(Kernel::Rope, "x", x, spec.rows * width)?;
    let rotated = spec.rotated();
    let needed = (first_position + spec.rows) * rotated;
    if lut.len() < needed {
        return Err(KernelError::Operand {
            kernel: Kernel::Rope,
            operand: "lut",
            expected: needed,
            got: lut.len(),
        });
    }
    let half = rotated / 2;
    let mut out = x.to_vec();
    out.par_chunks_mut(width.max(1))
        .zip(x.par_chunks(width.max(1)))
        .with_min_len(threads::min_len(width))
        .enumerate()
        .for_each(|(r, (o, row))| {
            let table = &lut[(first_position + r) * rotated..][..rotated];
            for (oh, xh) in o.chunks_mut(hd).zip(row.chunks(hd)) {
                for i in 0..half {
                    let (c, s) = (bf16::to_f32(table[i]), bf16::to_f32(table[half + i]));
                    let (a, b) = (bf16::to_f32(xh[i]), bf16::to_f32(xh[half + i]));
                    oh[i] = bf16::from_f32(a * c - b * s);
                    oh[half + i] = bf16::from_f32(b * c + a * s);
                }
            }
        });
    Ok(out)
}

/// `silu(gate) · up`.
pub fn silu_mul(
    device: &Device,
    spec: &EltwiseSpec,
    gate: &[u16],
    up: &[u16],
) -> Result<Vec<u16>, KernelError> {
    gated(Kernel::SiluMul, device, spec, (gate, up), silu_mul_value)
}

/// A gated product of `kernel`: placed and its operands checked, then `value`
/// of each gate and up element.
fn gated(
    kernel: Kernel,
    device: &Device,
    spec: &EltwiseSpec,
    (gate, up): (&[u16], &[u16]),
    value: impl Fn(u16, u16) -> u16 + Sync + Send,
) -> Result<Vec<u16>, KernelError> {
    refuse_if_any(kernel, spec.check(device, kernel))?;
    operand(kernel, "gate", gate, spec.n)?;
    operand(kernel, "up", up, spec.n)?;
    Ok(gate
        .par_iter()
        .zip(up.par_iter())
        .with_min_len(threads::MIN_TASK_WORK)
        .map(|(&g, &u)| value(g, u))
        .collect())
}

/// Gemma-2's soft-cap of one value, `tanh(x / cap) · cap`, in f32 (the host's
/// logit soft-cap and the decode attention's score cap).
pub(crate) fn softcap_value(x: f32, cap: f32) -> f32 {
    (x / cap).tanh() * cap
}

/// One element of SiLU·mul with the vector unit's bf16 roundings.
pub(crate) fn silu_mul_value(g: u16, u: u16) -> u16 {
    let gf = bf16::to_f32(g);
    let e = bf16::round((-gf).exp());
    let sigmoid = bf16::round(1.0 / (1.0 + e));
    let silu = bf16::round(gf * sigmoid);
    bf16::from_f32(silu * bf16::to_f32(u))
}

/// `gelu_tanh(gate) · up`, Gemma's gated MLP.
pub fn gelu_mul(
    device: &Device,
    spec: &EltwiseSpec,
    gate: &[u16],
    up: &[u16],
) -> Result<Vec<u16>, KernelError> {
    gated(Kernel::GeluMul, device, spec, (gate, up), gelu_mul_value)
}

/// One element of GELU(tanh)·mul with the vector unit's bf16 roundings: the
/// array has no GELU, so it is composed from what it has (cube, tanh, fused
/// multiply-adds), each intermediate rounded to bf16 as the vector unit stores
/// it: `0.5 · g · (1 + tanh(√(2/π) · (g + 0.044715 · g³)))`.
pub(crate) fn gelu_mul_value(g: u16, u: u16) -> u16 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let gf = bf16::to_f32(g);
    let cube = bf16::round(gf * gf * gf);
    let inner = bf16::round(SQRT_2_OVER_PI * (gf + 0.044_715 * cube));
    let t = bf16::round(inner.tanh());
    let gelu = bf16::round(0.5 * gf * (1.0 + t));
    bf16::from_f32(gelu * bf16::to_f32(u))
}

/// `a + b`.
pub fn eltwise_add(
    device: &Device,
    spec: &EltwiseSpec,
    a: &[u16],
    b: &[u16],
) -> Result<Vec<u16>, KernelError> {
    refuse_if_any(Kernel::EltwiseAdd, spec.check(device, Kernel::EltwiseAdd))?;
    operand(Kernel::EltwiseAdd, "a", a, spec.n)?;
    operand(Kernel::EltwiseAdd, "b", b, spec.n)?;
    Ok(a.par_iter()
        .zip(b.par_iter())
        .with_min_len(threads::MIN_TASK_WORK)
        .map(|(&x, &y)| bf16::from_f32(bf16::to_f32(x) + bf16::to_f32(y)))
        .collect())
}

/// Row-wise softmax.
pub fn softmax(device: &Device, spec: &NormSpec, x: &[u16]) -> Result<Vec<u16>, KernelError> {
    refuse_if_any(Kernel::Softmax, spec.check(device, Kernel::Softmax))?;
    operand(Kernel::Softmax, "x", x, spec.rows * spec.cols)?;
    let mut out = vec![0u16; x.len()];
    out.par_chunks_mut(spec.cols.max(1))
        .zip(x.par_chunks(spec.cols.max(1)))
        .with_min_len(threads::min_len(spec.cols))
        .for_each(|(o, row)| {
            let max = row
                .iter()
                .fold(f32::NEG_INFINITY, |m, &v| m.max(bf16::to_f32(v)));
            let exps: Vec<f32> = row.iter().map(|&v| (bf16::to_f32(v) - max).exp()).collect();
            let sum: f32 = exps.iter().sum();
            for (slot, e) in o.iter_mut().zip(exps) {
                *slot = bf16::from_f32(e / sum);
            }
        });
    Ok(out)
}

/// Gathers rows of `table` (`[rows, hidden]`) for `ids`.
pub fn embedding(table: &[u16], hidden: usize, ids: &[u32]) -> Result<Vec<u16>, KernelError> {
    let rows = table.len() / hidden.max(1);
    let mut out = Vec::with_capacity(ids.len() * hidden);
    for (position, &id) in ids.iter().enumerate() {
        let id = id as usize;
        if id >= rows {
            return Err(KernelError::Index {
                kernel: Kernel::Embedding,
                position,
                index: id,
                limit: rows,
            });
        }
        out.extend_from_slice(&table[id * hidden..(id + 1) * hidden]);
    }
    Ok(out)
}
