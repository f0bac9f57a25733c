//! Phase 1's harness: one kernel configuration of the plan run on the emulator
//! against the f32 reference, element-wise at the kernel's registry tolerance
//! (`|out − ref| ≤ atol + rtol·|ref|`, never a cosine).
//!
//! Each configuration is first checked against the device at its production shape
//! (a refusal is a failed placement); it then runs at a validation shape that keeps
//! every dimension the configuration's tiling depends on and trims only the
//! independent one: one M block of the herd for a GEMM (rows are independent), a
//! few rows for row kernels, one tile block for element-wise kernels, a 256-long
//! sequence for flash attention. RoPE runs every position of the production table,
//! so a table built from wrong frequencies shows at the long positions where it
//! matters. Projections use the model's layer-0 weights (with the plan's setup
//! transforms); activations are seeded normal draws.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::bf16;
use crate::model::arch::Architecture;
use crate::model::oracle::{blocks, linear};
use crate::model::tensor::BfTensor;
use crate::rng::SplitMix64;
use crate::xdna2::constraints::ConstraintViolation;
use crate::xdna2::device::Device;
use crate::xdna2::interpreter::weights::{resolve, TensorIndex, WeightData};
use crate::xdna2::kernels::{
    self, BOperand, EltwiseSpec, FlashAttentionSpec, GemmSpec, Kernel, NormSpec, Precision,
    QkvLayout, RopeSpec,
};
use crate::xdna2::numerics::{self, Comparison, Tolerance};
use crate::xdna2::plan::{Launch, Plan};

/// What phase 1 needs to run one launch.
pub struct ValidationContext<'a, 'm> {
    pub device: &'a Device,
    pub plan: &'a Plan,
    pub index: &'a TensorIndex<'m>,
    pub arch: &'a Architecture,
    /// The RoPE table the NPU path uses.
    pub lut: &'a [u16],
    pub seed: u64,
}

/// The result of one kernel validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelCheck {
    pub kernel: String,
    /// The production shape (the plan's label).
    pub shape: String,
    /// The shape that ran.
    pub validated_shape: String,
    pub rtol: f64,
    pub atol: f64,
    pub outcome: CheckOutcome,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CheckOutcome {
    Compared {
        elements: usize,
        mismatches: usize,
        mean_rel_l1: f64,
        max_abs: f64,
        non_finite: usize,
    },
    /// The device refused the configuration.
    Refused {
        violations: Vec<String>,
        constraints: Vec<String>,
    },
}

impl KernelCheck {
    pub fn passed(&self) -> bool {
        matches!(self.outcome, CheckOutcome::Compared { mismatches: 0, .. })
    }
}

/// Validates `launch`; `Err` only when the harness itself cannot run it (a weight
/// the plan names is missing).
pub fn validate(ctx: &ValidationContext<'_, '_>, launch: &Launch) -> Result<KernelCheck, String> {
    let kernel = launch.kernel();
    let tol = tolerance_of(launch);
    let shape = launch.shape_label();
    let violations = launch.check(ctx.device);
    if !violations.is_empty() {
        return Ok(refused(kernel, shape, tol, &violations));
    }
    let run = run_reduced(ctx, launch)?;
    let (validated_shape, out, reference) = match run {
        Reduced::Ran {
            shape,
            out,
            reference,
        } => (shape, out, reference),
        Reduced::Refused(v) => return Ok(refused(kernel, shape, tol, &v)),
    };
    let c: Comparison = numerics::compare(&out, &reference, tol);
    Ok(KernelCheck {
        kernel: kernel.name().to_string(),
        shape,
        validated_shape,
        rtol: tol.rtol,
        atol: tol.atol,
        outcome: CheckOutcome::Compared {
            elements: c.elements,
            mismatches: c.mismatches,
            mean_rel_l1: c.mean_rel_l1,
            max_abs: c.max_abs,
            non_finite: c.non_finite,
        },
    })
}

fn refused(
    kernel: Kernel,
    shape: String,
    tol: Tolerance,
    v: &[ConstraintViolation],
) -> KernelCheck {
    KernelCheck {
        kernel: kernel.name().to_string(),
        validated_shape: shape.clone(),
        shape,
        rtol: tol.rtol,
        atol: tol.atol,
        outcome: CheckOutcome::Refused {
            violations: v.iter().map(|v| v.to_string()).collect(),
            constraints: v.iter().map(constraint_key).collect(),
        },
    }
}

/// `L1 capacity` → `l1-capacity`, the form lesson conditions use.
pub fn constraint_key(v: &ConstraintViolation) -> String {
    v.constraint.label().to_lowercase().replace([' ', '/'], "-")
}

/// The registry tolerance of a launch.
pub fn tolerance_of(launch: &Launch) -> Tolerance {
    let precision = match launch {
        Launch::Gemm { spec, .. } => spec.precision,
        _ => Precision::Bf16,
    };
    numerics::tolerance(launch.kernel(), precision)
}

enum Reduced {
    Ran {
        shape: String,
        out: Vec<f32>,
        reference: Vec<f32>,
    },
    Refused(Vec<ConstraintViolation>),
}

fn outcome(
    result: Result<Vec<u16>, kernels::KernelError>,
    shape: String,
    reference: Vec<f32>,
) -> Result<Reduced, String> {
    match result {
        Ok(out) => Ok(Reduced::Ran {
            shape,
            out: bf16::to_f32_vec(&out),
            reference,
        }),
        Err(kernels::KernelError::Refused { violations, .. }) => Ok(Reduced::Refused(violations)),
        Err(other) => Err(other.to_string()),
    }
}

/// Seeded normal draws as bf16.
fn draws(seed: u64, stream: &str, n: usize, scale: f32) -> Vec<u16> {
    let mut rng = SplitMix64::for_stream(seed, stream);
    (0..n)
        .map(|_| bf16::from_f32(scale * rng.next_normal()))
        .collect()
}

fn weight<'m>(ctx: &ValidationContext<'_, 'm>, name: &str) -> Result<WeightData<'m>, String> {
    resolve(ctx.plan, name, 0, ctx.index).map_err(|e| e.to_string())
}

/// A weight with at least `rows` rows: the implicit zero rows of a padded or
/// partitioned tensor (borrowed without them) made explicit for the kernel's slot.
fn with_rows(w: WeightData<'_>, rows: usize) -> WeightData<'_> {
    if w.rows >= rows {
        return w;
    }
    let mut bits = w.bits.into_owned();
    bits.resize(rows * w.cols, 0);
    WeightData {
        bits: std::borrow::Cow::Owned(bits),
        rows,
        cols: w.cols,
    }
}

fn run_reduced(ctx: &ValidationContext<'_, '_>, launch: &Launch) -> Result<Reduced, String> {
    let d = ctx.device;
    let seed = ctx.seed;
    let eps = ctx.arch.rms_norm_eps as f32;
    match launch {
        Launch::Gemm { b, spec, .. } => {
            let w = with_rows(weight(ctx, b)?, spec.n);
            let m = spec.m.min(spec.tile.tile_m * spec.herd.cols());
            let small = GemmSpec { m, ..*spec };
            let a = draws(seed, "gemm-a", m * spec.k, 1.0);
            let reference = reference_matmul(&a, m, &w);
            let out = kernels::gemm(d, &small, &a, BOperand::NxK(&w.bits));
            outcome(out, format!("{m}x{}x{}", spec.k, spec.n), reference)
        }
        Launch::Gemv { w, spec, .. } => {
            let wd = with_rows(weight(ctx, w)?, spec.m);
            let x = draws(seed, "gemv-x", spec.k, 1.0);
            let residual = spec.residual.then(|| draws(seed, "gemv-r", spec.m, 1.0));
            let mut reference = reference_gemv(&wd.bits, spec.k, &bf16::to_f32_vec(&x));
            if let Some(r) = &residual {
                for (y, &b) in reference.iter_mut().zip(r) {
                    *y += bf16::to_f32(b);
                }
            }
            let out = kernels::gemv(d, spec, &wd.bits, &x, residual.as_deref());
            outcome(out, format!("{}x{}", spec.m, spec.k), reference)
        }
        Launch::GemvSwiglu {
            norm,
            gate,
            up,
            spec,
            eps: e,
            ..
        } => {
            let nw = weight(ctx, norm)?;
            let gw = with_rows(weight(ctx, gate)?, spec.m);
            let uw = with_rows(weight(ctx, up)?, spec.m);
            let x = draws(seed, "swiglu-x", spec.k, 1.0);
            let mut normed = vec![0.0f32; spec.k];
            blocks::rms_norm(&bf16::to_f32_vec(&x), &nw.bits, *e as f32, &mut normed);
            let mut g = reference_gemv(&gw.bits, spec.k, &normed);
            let u = reference_gemv(&uw.bits, spec.k, &normed);
            blocks::gated_activation(ctx.arch.activation, &mut g, &u);
            let out = kernels::gemv_swiglu(d, spec, *e as f32, &x, &nw.bits, &gw.bits, &uw.bits);
            outcome(out, format!("{}x{}", spec.m, spec.k), g)
        }
        Launch::Rmsnorm {
            weight: w,
            spec,
            eps: e,
            ..
        } => {
            let wd = match w {
                Some(name) => Some(weight(ctx, name)?),
                None => None,
            };
            norm_check(
                d,
                spec,
                *e as f32,
                wd.as_ref().map(|w| &*w.bits),
                seed,
                Kernel::Rmsnorm,
            )
        }
        Launch::QkRmsnorm {
            weight: w, spec, ..
        } => {
            let wd = weight(ctx, w)?;
            norm_check(d, spec, eps, Some(&wd.bits), seed, Kernel::QkRmsnorm)
        }
        Launch::Rope { spec, .. } => rope_check(ctx, spec),
        Launch::SiluMul { spec, .. } => eltwise_check(d, spec, seed, Kernel::SiluMul, ctx.arch),
        Launch::EltwiseAdd { spec, .. } => {
            eltwise_check(d, spec, seed, Kernel::EltwiseAdd, ctx.arch)
        }
        Launch::Softmax { spec, .. } => {
            let rows = spec.rows.min(spec.herd.tiles() * 4);
            let small = NormSpec { rows, ..*spec };
            let x = draws(seed, "softmax-x", rows * spec.cols, 2.0);
            let mut reference = bf16::to_f32_vec(&x);
            reference
                .chunks_mut(spec.cols.max(1))
                .for_each(blocks::softmax_in_place);
            let out = kernels::softmax(d, &small, &x);
            outcome(out, format!("{rows}x{}", spec.cols), reference)
        }
        Launch::FlashAttention { spec, .. } => attention_check(d, spec, seed),
        Launch::LmHeadGemv { w, spec, part, .. } => {
            let wd = weight(ctx, w)?;
            let k = spec.part.k;
            let rows = spec.rows(*part);
            let x = draws(seed, "lm-head-x", k, 1.0);
            let reference = reference_gemv(&wd.bits[..rows.len() * k], k, &bf16::to_f32_vec(&x));
            let mut logits = vec![0u16; spec.vocab];
            let out = kernels::lm_head_partition(d, spec, *part, &wd.bits, &x, &mut logits)
                .map(|()| logits[rows.clone()].to_vec());
            outcome(
                out,
                format!("{}x{k} (rows {}..{})", spec.part.m, rows.start, rows.end),
                reference,
            )
        }
    }
}

/// `x · Wᵀ` in f32 with the oracle's linear layer.
fn reference_matmul(a: &[u16], m: usize, w: &WeightData<'_>) -> Vec<f32> {
    let tensor = BfTensor::owned("validation", vec![w.rows, w.cols], w.bits.to_vec());
    let mut y = vec![0.0f32; m * w.rows];
    linear::matmul(&bf16::to_f32_vec(a), m, &tensor, &mut y);
    y
}

/// `W · x` in f32, one oracle dot product per row.
fn reference_gemv(w: &[u16], k: usize, x: &[f32]) -> Vec<f32> {
    w.par_chunks(k.max(1))
        .map(|row| linear::dot(row, x))
        .collect()
}

fn norm_check(
    d: &Device,
    spec: &NormSpec,
    eps: f32,
    w: Option<&[u16]>,
    seed: u64,
    kernel: Kernel,
) -> Result<Reduced, String> {
    let tiles = spec.herd.tiles().max(1);
    let rows = spec.rows.min(tiles * (64 / tiles).max(1));
    let small = NormSpec { rows, ..*spec };
    let x = draws(seed, kernel.name(), rows * spec.cols, 2.0);
    let xf = bf16::to_f32_vec(&x);
    let ones;
    let weight_bits = match w.filter(|_| spec.weighted) {
        Some(w) => w,
        None => {
            ones = vec![bf16::from_f32(1.0); spec.cols];
            &ones
        }
    };
    let mut reference = vec![0.0f32; xf.len()];
    for (o, row) in reference
        .chunks_mut(spec.cols.max(1))
        .zip(xf.chunks(spec.cols.max(1)))
    {
        blocks::rms_norm(row, weight_bits, eps, o);
    }
    let out = match kernel {
        Kernel::QkRmsnorm => kernels::qk_rms_norm(d, &small, eps, &x, weight_bits),
        _ => kernels::rms_norm(d, &small, eps, &x, w),
    };
    outcome(out, format!("{rows}x{}", spec.cols), reference)
}

fn rope_check(ctx: &ValidationContext<'_, '_>, spec: &RopeSpec) -> Result<Reduced, String> {
    let (hd, width) = (spec.head_dim, spec.heads * spec.head_dim);
    let x = draws(ctx.seed, "rope-x", spec.rows * width, 1.0);
    let inv_freq = blocks::inv_freq(ctx.arch);
    let mut reference = bf16::to_f32_vec(&x);
    reference
        .par_chunks_mut(width.max(1))
        .enumerate()
        .for_each(|(p, row)| {
            let (cos, sin) = blocks::rope_angles(&inv_freq, p);
            row.chunks_mut(hd.max(1))
                .for_each(|head| blocks::apply_rope(head, &cos, &sin));
        });
    let out = kernels::rope(ctx.device, spec, &x, ctx.lut, 0);
    outcome(
        out,
        format!("{}x{hd} positions 0..{}", spec.rows * spec.heads, spec.rows),
        reference,
    )
}

fn eltwise_check(
    d: &Device,
    spec: &EltwiseSpec,
    seed: u64,
    kernel: Kernel,
    arch: &Architecture,
) -> Result<Reduced, String> {
    let block = (spec.tile.tile * spec.herd.tiles()).max(1);
    let n = spec.n.min(block * (spec.n / block).clamp(1, 4));
    let small = EltwiseSpec { n, ..*spec };
    let a = draws(seed, "eltwise-a", n, 2.0);
    let b = draws(seed, "eltwise-b", n, 2.0);
    let (af, bf) = (bf16::to_f32_vec(&a), bf16::to_f32_vec(&b));
    let (reference, out) = if kernel == Kernel::SiluMul {
        let mut g = af;
        blocks::gated_activation(arch.activation, &mut g, &bf);
        (g, kernels::silu_mul(d, &small, &a, &b))
    } else {
        let sum = af.iter().zip(&bf).map(|(x, y)| x + y).collect();
        (sum, kernels::eltwise_add(d, &small, &a, &b))
    };
    outcome(out, n.to_string(), reference)
}

fn attention_check(d: &Device, spec: &FlashAttentionSpec, seed: u64) -> Result<Reduced, String> {
    let key = d.limits.fa_key_block;
    let block = lcm(spec.tile.lqp.max(1), key * spec.tile.cascade.max(1));
    let len = spec.lq.min(block.max(256));
    let small = FlashAttentionSpec {
        lq: len,
        lk: len,
        ..*spec
    };
    let hd = spec.head_dim;
    let q = draws(seed, "fa-q", len * spec.heads * hd, 1.0);
    let k = draws(seed, "fa-k", len * spec.kv_heads * hd, 1.0);
    let v = draws(seed, "fa-v", len * spec.kv_heads * hd, 1.0);
    let reference = reference_attention(&small, &q, &k, &v);
    let out = kernels::flash_attention(d, &small, &q, &k, &v);
    outcome(
        out,
        format!("{len}x{len} h{}/{} d{hd}", spec.heads, spec.kv_heads),
        reference,
    )
}

fn lcm(a: usize, b: usize) -> usize {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x.max(1) * b
}

/// Causal GQA attention in f32 over bf16 inputs laid out as the spec says.
fn reference_attention(spec: &FlashAttentionSpec, q: &[u16], k: &[u16], v: &[u16]) -> Vec<f32> {
    let hd = spec.head_dim;
    let at = |len: usize, heads: usize, pos: usize, head: usize| match spec.layout {
        QkvLayout::SeqFirst => (pos * heads + head) * hd,
        QkvLayout::HeadFirst => (head * len + pos) * hd,
    };
    let (lq, lk) = (spec.lq, spec.lk);
    let group = spec.heads / spec.kv_heads.max(1);
    let scale = 1.0 / (hd as f32).sqrt();
    let mut out = vec![0.0f32; q.len()];
    let rows: Vec<(usize, Vec<f32>)> = (0..spec.heads * lq)
        .into_par_iter()
        .map(|job| {
            let (head, pos) = (job / lq, job % lq);
            let kv = head / group.max(1);
            let qs = bf16::to_f32_vec(&q[at(lq, spec.heads, pos, head)..][..hd]);
            let visible = if spec.causal { pos + lk - lq + 1 } else { lk };
            let mut scores: Vec<f32> = (0..visible)
                .map(|j| {
                    let ks = &k[at(lk, spec.kv_heads, j, kv)..][..hd];
                    qs.iter()
                        .zip(ks)
                        .map(|(a, &b)| a * bf16::to_f32(b))
                        .sum::<f32>()
                        * scale
                })
                .collect();
            blocks::softmax_in_place(&mut scores);
            let mut o = vec![0.0f32; hd];
            for (j, &p) in scores.iter().enumerate() {
                let vs = &v[at(lk, spec.kv_heads, j, kv)..][..hd];
                for (acc, &x) in o.iter_mut().zip(vs) {
                    *acc += p * bf16::to_f32(x);
                }
            }
            (at(lq, spec.heads, pos, head), o)
        })
        .collect();
    for (start, o) in rows {
        out[start..start + hd].copy_from_slice(&o);
    }
    out
}
