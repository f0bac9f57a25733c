//! The kernel harness: one launch run on the emulator against the f32 oracle on the
//! same bf16 inputs, compared element-wise at a tolerance (`|out − ref| ≤ atol +
//! rtol·|ref|`, the cosine beside it, never instead of it). Deploy's phase 1,
//! replay's `validate-kernel`, the calibration points' configurations and the tests
//! all run kernels through it, so a kernel verdict means the same wherever it shows.
//!
//! Activations are seeded normal draws, one named stream per operand, so a result
//! depends only on the seed and the shape. Weight operands come from a
//! [`WeightOperands`]: the model's tensors (deploy) or [`DrawnWeights`] (N(0, 1/K)
//! projections, norm scales near one). RoPE runs against the table the caller's NPU
//! path uses (or the architecture's own), compared with the reference's frequencies
//! at every position, so a table built from wrong frequencies shows.
//!
//! [`Scale::Validation`] runs a launch at a reduced shape that keeps every dimension
//! the configuration's tiling depends on and trims only the independent one: one M
//! block of the herd for a GEMM (rows are independent), a few rows for row kernels,
//! up to four tile blocks for element-wise kernels, a 256-long sequence (or one
//! tiling block) for flash attention; projections, RoPE and the LM head keep theirs.

use std::borrow::Cow;

use rayon::prelude::*;

use super::constraints::ConstraintViolation;
use super::device::Device;
use super::kernels::{
    self, BOperand, DecodeAttentionSpec, EltwiseSpec, Epilogue, FlashAttentionSpec, Kernel,
    KernelError, NormSpec, Precision, QkvLayout, RopeSpec,
};
use super::numerics::{self, cosine, Deviation, Tolerance};
use super::plan::Launch;
use crate::bf16;
use crate::model::arch::{Architecture, NormKind, NormWeight};
use crate::model::oracle::{blocks, linear};
use crate::model::tensor::BfTensor;
use crate::rng::SplitMix64;
use crate::threads;

/// What a weight operand is, for operands that are drawn rather than loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightRole {
    /// A projection `[rows, cols]` (out × in).
    Projection,
    /// A norm's per-channel scale.
    NormScale,
}

/// Where a launch's weight operands come from.
pub trait WeightOperands {
    /// Buffer `buffer` of the launch, row-major; `rows × cols` is what the kernel
    /// reads. A source may hold fewer rows (the implicit zero rows of a padded or
    /// partitioned tensor): the harness makes them explicit.
    fn weight(
        &self,
        buffer: &str,
        role: WeightRole,
        rows: usize,
        cols: usize,
    ) -> Result<Cow<'_, [u16]>, HarnessError>;
}

/// Seeded weights, one stream per buffer name: projections N(0, 1/K) so outputs
/// stay near unit scale, norm scales uniform in [0.75, 1.25).
#[derive(Debug, Clone, Copy)]
pub struct DrawnWeights {
    pub seed: u64,
}

impl WeightOperands for DrawnWeights {
    fn weight(
        &self,
        buffer: &str,
        role: WeightRole,
        rows: usize,
        cols: usize,
    ) -> Result<Cow<'_, [u16]>, HarnessError> {
        let mut rng = SplitMix64::for_stream(self.seed, &format!("weight.{buffer}"));
        let n = rows * cols;
        let bits = match role {
            WeightRole::Projection => {
                let scale = 1.0 / (cols.max(1) as f32).sqrt();
                (0..n)
                    .map(|_| bf16::from_f32(scale * rng.next_normal()))
                    .collect()
            }
            WeightRole::NormScale => (0..n)
                .map(|_| bf16::from_f32(1.0 + 0.25 * rng.next_signed()))
                .collect(),
        };
        Ok(Cow::Owned(bits))
    }
}

/// Why the harness could not run a launch (as opposed to a refusal or a mismatch,
/// which are results).
#[derive(Debug, Clone, thiserror::Error)]
pub enum HarnessError {
    /// The source has no such buffer or cannot fill it (the message names it).
    #[error("{message}")]
    Weight { buffer: String, message: String },
    #[error(transparent)]
    Kernel(KernelError),
}

/// At which shape a launch runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// The launch as given.
    Production,
    /// The reduced shape of [`validation_launch`].
    Validation,
}

/// One harness run.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelRun {
    pub kernel: Kernel,
    /// The launch's own shape (its plan label).
    pub shape: String,
    /// The shape that ran (the production one when the device refused it).
    pub ran_shape: String,
    pub tolerance: Tolerance,
    pub outcome: RunOutcome,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    Compared {
        comparison: Deviation,
        /// Cosine of the output with the reference (diagnosis, not the verdict).
        cosine: f64,
    },
    /// The device refused the configuration.
    Refused(Vec<ConstraintViolation>),
}

impl KernelRun {
    /// Ran, and every element within the tolerance.
    pub fn passed(&self) -> bool {
        matches!(&self.outcome, RunOutcome::Compared { comparison, .. } if comparison.passed())
    }

    pub fn comparison(&self) -> Option<&Deviation> {
        match &self.outcome {
            RunOutcome::Compared { comparison, .. } => Some(comparison),
            RunOutcome::Refused(_) => None,
        }
    }
}

/// The registry tolerance of a launch (its kernel at its precision).
pub fn tolerance_of(launch: &Launch) -> Tolerance {
    let precision = match launch {
        Launch::Gemm { spec, .. } => spec.precision,
        _ => Precision::Bf16,
    };
    numerics::tolerance(launch.kernel(), precision)
}

/// What one launch runs against.
pub struct Harness<'a> {
    pub device: &'a Device,
    pub arch: &'a Architecture,
    pub weights: &'a dyn WeightOperands,
    /// The RoPE table the NPU path uses; the architecture's own when absent.
    pub rope_table: Option<&'a [u16]>,
    pub seed: u64,
}

impl Harness<'_> {
    /// Checks `launch` against the device at its own shape (a refusal is a result),
    /// then runs it at `scale` and compares it with the reference at `tolerance`.
    pub fn check(
        &self,
        launch: &Launch,
        tolerance: Tolerance,
        scale: Scale,
    ) -> Result<KernelRun, HarnessError> {
        let shape = launch.shape_label();
        let refused = |violations| KernelRun {
            kernel: launch.kernel(),
            shape: shape.clone(),
            ran_shape: shape.clone(),
            tolerance,
            outcome: RunOutcome::Refused(violations),
        };
        let violations = launch.check(self.device);
        if !violations.is_empty() {
            return Ok(refused(violations));
        }
        let ran = match scale {
            Scale::Production => launch.clone(),
            Scale::Validation => validation_launch(launch, self.device),
        };
        match self.run(&ran) {
            Ok((out, reference)) => Ok(KernelRun {
                kernel: launch.kernel(),
                shape: shape.clone(),
                ran_shape: ran_label(&ran),
                tolerance,
                outcome: RunOutcome::Compared {
                    comparison: numerics::compare(&out, &reference, tolerance),
                    cosine: cosine(&out, &reference),
                },
            }),
            Err(HarnessError::Kernel(KernelError::Refused { violations, .. })) => {
                Ok(refused(violations))
            }
            Err(e) => Err(e),
        }
    }

    fn weight(
        &self,
        buffer: &str,
        role: WeightRole,
        rows: usize,
        cols: usize,
    ) -> Result<Cow<'_, [u16]>, HarnessError> {
        let bits = self.weights.weight(buffer, role, rows, cols)?;
        if bits.len() >= rows * cols {
            return Ok(bits);
        }
        let mut padded = bits.into_owned();
        padded.resize(rows * cols, 0);
        Ok(Cow::Owned(padded))
    }

    /// The emulated output and the reference, both as f32.
    fn run(&self, launch: &Launch) -> Result<(Vec<f32>, Vec<f32>), HarnessError> {
        let (d, seed) = (self.device, self.seed);
        match launch {
            Launch::Gemm { b, spec, .. } => {
                let w = self.weight(b, WeightRole::Projection, spec.n, spec.k)?;
                let a = draws(seed, "gemm-a", spec.m * spec.k, 1.0);
                let reference = reference_matmul(&a, spec.m, &w, spec.k);
                let out = match spec.tile.epilogue {
                    Epilogue::F32 => kernels::gemm_f32(d, spec, &a, BOperand::NxK(&w)),
                    _ => {
                        kernels::gemm(d, spec, &a, BOperand::NxK(&w)).map(|o| bf16::to_f32_vec(&o))
                    }
                };
                Ok((out.map_err(HarnessError::Kernel)?, reference))
            }
            Launch::Gemv { w, spec, .. } => {
                let wd = self.weight(w, WeightRole::Projection, spec.m, spec.k)?;
                let x = draws(seed, "gemv-x", spec.k, 1.0);
                let residual = spec.residual.then(|| draws(seed, "gemv-r", spec.m, 1.0));
                let mut reference = reference_gemv(&wd, spec.k, &bf16::to_f32_vec(&x));
                if let Some(r) = &residual {
                    for (y, &b) in reference.iter_mut().zip(r) {
                        *y += bf16::to_f32(b);
                    }
                }
                let out = kernels::gemv(d, spec, &wd, &x, residual.as_deref());
                Ok((bf16_out(out)?, reference))
            }
            Launch::GemvSwiglu {
                norm,
                gate,
                up,
                spec,
                eps,
                ..
            } => {
                let nw = self.weight(norm, WeightRole::NormScale, 1, spec.k)?;
                let gw = self.weight(gate, WeightRole::Projection, spec.m, spec.k)?;
                let uw = self.weight(up, WeightRole::Projection, spec.m, spec.k)?;
                let x = draws(seed, "swiglu-x", spec.k, 1.0);
                let mut normed = vec![0.0f32; spec.k];
                blocks::rms_norm(&bf16::to_f32_vec(&x), &nw, *eps as f32, &mut normed);
                let mut g = reference_gemv(&gw, spec.k, &normed);
                let u = reference_gemv(&uw, spec.k, &normed);
                blocks::gated_activation(self.arch.activation, &mut g, &u);
                let out = kernels::gemv_swiglu(d, spec, *eps as f32, &x, &nw, &gw, &uw);
                Ok((bf16_out(out)?, g))
            }
            Launch::Rmsnorm {
                weight, spec, eps, ..
            } => {
                let w = match weight {
                    Some(name) => Some(self.weight(name, WeightRole::NormScale, 1, spec.cols)?),
                    None => None,
                };
                self.norm(spec, *eps as f32, w.as_deref(), Kernel::Rmsnorm)
            }
            Launch::Layernorm {
                weight,
                bias,
                spec,
                eps,
                ..
            } => {
                let vector = |name: &Option<String>| match name {
                    Some(name) => self
                        .weight(name, WeightRole::NormScale, 1, spec.cols)
                        .map(Some),
                    None => Ok(None),
                };
                let (w, b) = (vector(weight)?, vector(bias)?);
                self.layer_norm(spec, *eps as f32, w.as_deref(), b.as_deref())
            }
            Launch::QkRmsnorm {
                weight, spec, eps, ..
            } => {
                let w = self.weight(weight, WeightRole::NormScale, 1, spec.cols)?;
                self.norm(spec, *eps as f32, Some(&w), Kernel::QkRmsnorm)
            }
            Launch::Rope { spec, .. } => self.rope(spec),
            Launch::SiluMul { spec, .. } => self.eltwise(spec, Kernel::SiluMul),
            Launch::GeluMul { spec, .. } => self.eltwise(spec, Kernel::GeluMul),
            Launch::EltwiseAdd { spec, .. } => self.eltwise(spec, Kernel::EltwiseAdd),
            Launch::Softmax { spec, .. } => {
                let x = draws(seed, "softmax-x", spec.rows * spec.cols, 2.0);
                let mut reference = bf16::to_f32_vec(&x);
                reference
                    .chunks_mut(spec.cols.max(1))
                    .for_each(blocks::softmax_in_place);
                Ok((bf16_out(kernels::softmax(d, spec, &x))?, reference))
            }
            Launch::FlashAttention { spec, .. } => {
                let hd = spec.head_dim;
                let q = draws(seed, "fa-q", spec.lq * spec.heads * hd, 1.0);
                let k = draws(seed, "fa-k", spec.lk * spec.kv_heads * hd, 1.0);
                let v = draws(seed, "fa-v", spec.lk * spec.kv_heads * hd, 1.0);
                let reference = reference_attention(spec, &q, &k, &v);
                Ok((
                    bf16_out(kernels::flash_attention(d, spec, &q, &k, &v))?,
                    reference,
                ))
            }
            Launch::DecodeAttention { spec, .. } => Ok(decode_attention_case(spec, seed)),
            Launch::KvAppend { spec, .. } => {
                // The row lands in the last slot of an empty region: every
                // other slot stays zero.
                let k = draws(seed, "kv-append-k", spec.kv_width, 1.0);
                let slot = spec.context.saturating_sub(1);
                let mut region = Vec::new();
                kernels::append_rows(&mut region, slot * spec.kv_width, &k);
                let mut reference = vec![0.0f32; spec.context * spec.kv_width];
                reference[slot * spec.kv_width..].copy_from_slice(&bf16::to_f32_vec(&k));
                Ok((bf16::to_f32_vec(&region), reference))
            }
            Launch::LmHeadGemv { w, spec, part, .. } => {
                let k = spec.part.k;
                let rows = spec.rows(*part);
                let wd = self.weight(w, WeightRole::Projection, rows.len(), k)?;
                let x = draws(seed, "lm-head-x", k, 1.0);
                let reference = reference_gemv(&wd[..rows.len() * k], k, &bf16::to_f32_vec(&x));
                let mut logits = vec![0u16; spec.vocab];
                let out = kernels::lm_head_partition(d, spec, *part, &wd, &x, &mut logits)
                    .map(|()| logits[rows.clone()].to_vec());
                Ok((bf16_out(out)?, reference))
            }
        }
    }

    fn norm(
        &self,
        spec: &NormSpec,
        eps: f32,
        w: Option<&[u16]>,
        kernel: Kernel,
    ) -> Result<(Vec<f32>, Vec<f32>), HarnessError> {
        let (x, xf) = self.norm_input(spec, kernel.name());
        let ones;
        let weight_bits = match w.filter(|_| spec.weighted) {
            Some(w) => w,
            None => {
                ones = vec![bf16::from_f32(1.0); spec.cols];
                &ones
            }
        };
        // A padded row's mean is over its real columns; the rest are normalised
        // by the same factor (the kernel's inputs there are zeros in a plan).
        let real = spec.mean_cols();
        let reference = per_row(spec, &xf, |o, row| {
            blocks::rms_norm(&row[..real], &weight_bits[..real], eps, &mut o[..real]);
            let mean_square = row[..real].iter().map(|v| v * v).sum::<f32>() / real.max(1) as f32;
            let inv = 1.0 / (mean_square + eps).sqrt();
            for ((slot, &x), &w) in o.iter_mut().zip(row).zip(weight_bits).skip(real) {
                *slot = bf16::to_f32(w) * (x * inv);
            }
        });
        let out = match kernel {
            Kernel::QkRmsnorm => kernels::qk_rms_norm(self.device, spec, eps, &x, weight_bits),
            _ => kernels::rms_norm(self.device, spec, eps, &x, w),
        };
        Ok((bf16_out(out)?, reference))
    }

    /// LayerNorm against the reference's norm: over a padded row's real
    /// columns, zeros past them (the kernel writes zeros there).
    fn layer_norm(
        &self,
        spec: &NormSpec,
        eps: f32,
        w: Option<&[u16]>,
        b: Option<&[u16]>,
    ) -> Result<(Vec<f32>, Vec<f32>), HarnessError> {
        let (x, xf) = self.norm_input(spec, "layernorm");
        let real = spec.mean_cols();
        let out = kernels::layer_norm(self.device, spec, eps, &x, (w, b));
        let w = w.filter(|_| spec.weighted).map(bf16::to_f32_vec);
        let b = b.map(bf16::to_f32_vec);
        let how = (NormKind::Layer, NormWeight::Direct, eps);
        let reference = per_row(spec, &xf, |o, row| {
            o[..real].copy_from_slice(&row[..real]);
            let (wr, br) = (
                w.as_ref().map(|v| &v[..real]),
                b.as_ref().map(|v| &v[..real]),
            );
            blocks::norm_rows_in_place(&mut o[..real], real, how, wr, br);
        });
        Ok((bf16_out(out)?, reference))
    }

    /// A norm's input: `spec`'s rows of seeded bf16 values, and as f32.
    fn norm_input(&self, spec: &NormSpec, stream: &str) -> (Vec<u16>, Vec<f32>) {
        let x = draws(self.seed, stream, spec.rows * spec.cols, 2.0);
        let xf = bf16::to_f32_vec(&x);
        (x, xf)
    }

    fn rope(&self, spec: &RopeSpec) -> Result<(Vec<f32>, Vec<f32>), HarnessError> {
        let (hd, width) = (spec.head_dim, spec.heads * spec.head_dim);
        // Zero-padded heads rotate their real dimensions and pass the rest.
        let rotated = spec.rotated();
        let x = draws(self.seed, "rope-x", spec.rows * width, 1.0);
        let arch = Architecture {
            head_dim: rotated,
            ..self.arch.clone()
        };
        let inv_freq = blocks::inv_freq(&arch);
        let own_table;
        let table = match self.rope_table {
            Some(table) => table,
            None => {
                own_table = kernels::rope_lut(&inv_freq, spec.rows);
                &own_table
            }
        };
        let mut reference = bf16::to_f32_vec(&x);
        reference
            .par_chunks_mut(width.max(1))
            .with_min_len(threads::min_len(width))
            .enumerate()
            .for_each(|(p, row)| {
                let (cos, sin) = blocks::rope_angles(&inv_freq, p);
                row.chunks_mut(hd.max(1))
                    .for_each(|head| blocks::apply_rope(&mut head[..rotated], &cos, &sin));
            });
        let out = kernels::rope(self.device, spec, &x, table, 0);
        Ok((bf16_out(out)?, reference))
    }

    fn eltwise(
        &self,
        spec: &EltwiseSpec,
        kernel: Kernel,
    ) -> Result<(Vec<f32>, Vec<f32>), HarnessError> {
        let a = draws(self.seed, "eltwise-a", spec.n, 2.0);
        let b = draws(self.seed, "eltwise-b", spec.n, 2.0);
        let (af, bf) = (bf16::to_f32_vec(&a), bf16::to_f32_vec(&b));
        // A gated activation is judged against the model's activation: a SiLU
        // kernel where the model gates with GELU-tanh fails here.
        let (reference, out) = if kernel == Kernel::SiluMul || kernel == Kernel::GeluMul {
            let mut g = af;
            blocks::gated_activation(self.arch.activation, &mut g, &bf);
            let out = if kernel == Kernel::SiluMul {
                kernels::silu_mul(self.device, spec, &a, &b)
            } else {
                kernels::gelu_mul(self.device, spec, &a, &b)
            };
            (g, out)
        } else {
            let sum = af.iter().zip(&bf).map(|(x, y)| x + y).collect();
            (sum, kernels::eltwise_add(self.device, spec, &a, &b))
        };
        Ok((bf16_out(out)?, reference))
    }
}

/// The launch [`Scale::Validation`] runs (see the module documentation).
pub fn validation_launch(launch: &Launch, device: &Device) -> Launch {
    let mut small = launch.clone();
    match &mut small {
        Launch::Gemm { spec, .. } => spec.m = spec.m.min(spec.tile.tile_m * spec.herd.cols()),
        Launch::Rmsnorm { spec, .. }
        | Launch::Layernorm { spec, .. }
        | Launch::QkRmsnorm { spec, .. } => {
            let tiles = spec.herd.tiles().max(1);
            spec.rows = spec.rows.min(tiles * (64 / tiles).max(1));
        }
        Launch::Softmax { spec, .. } => spec.rows = spec.rows.min(spec.herd.tiles() * 4),
        Launch::SiluMul { spec, .. }
        | Launch::GeluMul { spec, .. }
        | Launch::EltwiseAdd { spec, .. } => {
            let block = (spec.tile.tile * spec.herd.tiles()).max(1);
            spec.n = spec.n.min(block * (spec.n / block).clamp(1, 4));
        }
        Launch::FlashAttention { spec, .. } => {
            let key = device.limits.fa_key_block;
            let block = lcm(spec.tile.lqp.max(1), key * spec.tile.cascade.max(1));
            // Long enough for a window mask to cut keys off (a window past the
            // sequence masks nothing).
            let need = spec.window.map_or(256, |w| w + 256).max(block);
            let len = spec.lq.min(need.div_ceil(block) * block);
            (spec.lq, spec.lk) = (len, len);
        }
        Launch::DecodeAttention { spec, .. } => spec.context = spec.context.min(256),
        Launch::KvAppend { spec, .. } => spec.context = spec.context.min(256),
        Launch::Gemv { .. }
        | Launch::GemvSwiglu { .. }
        | Launch::Rope { .. }
        | Launch::LmHeadGemv { .. } => {}
    }
    small
}

/// The label of the shape that ran: the plan label, with the positions a RoPE
/// table covers and the rows an LM-head partition holds.
fn ran_label(launch: &Launch) -> String {
    match launch {
        Launch::Rope { spec, .. } => format!(
            "{}x{} positions 0..{}",
            spec.rows * spec.heads,
            spec.head_dim,
            spec.rows
        ),
        Launch::LmHeadGemv { spec, part, .. } => {
            let rows = spec.rows(*part);
            format!(
                "{}x{} (rows {}..{})",
                spec.part.m, spec.part.k, rows.start, rows.end
            )
        }
        other => other.shape_label(),
    }
}

fn bf16_out(result: Result<Vec<u16>, KernelError>) -> Result<Vec<f32>, HarnessError> {
    result
        .map(|out| bf16::to_f32_vec(&out))
        .map_err(HarnessError::Kernel)
}

/// Seeded normal draws as bf16.
pub(crate) fn draws(seed: u64, stream: &str, n: usize, scale: f32) -> Vec<u16> {
    let mut rng = SplitMix64::for_stream(seed, stream);
    (0..n)
        .map(|_| bf16::from_f32(scale * rng.next_normal()))
        .collect()
}

/// A row-wise reference over `spec`'s rows of `x`: `row` fills each output
/// row from its input row.
fn per_row(spec: &NormSpec, x: &[f32], mut row: impl FnMut(&mut [f32], &[f32])) -> Vec<f32> {
    let width = spec.cols.max(1);
    let mut reference = vec![0.0f32; x.len()];
    for (o, r) in reference.chunks_mut(width).zip(x.chunks(width)) {
        row(o, r);
    }
    reference
}

/// `x · Wᵀ` in f32 with the oracle's linear layer (`w` holds `[N, K]`).
fn reference_matmul(a: &[u16], m: usize, w: &[u16], k: usize) -> Vec<f32> {
    let rows = w.len() / k.max(1);
    let tensor = BfTensor::owned("validation", vec![rows, k], w.to_vec());
    let mut y = vec![0.0f32; m * rows];
    linear::matmul(&bf16::to_f32_vec(a), m, &tensor, &mut y);
    y
}

/// `W · x` in f32, one oracle dot product per row.
fn reference_gemv(w: &[u16], k: usize, x: &[f32]) -> Vec<f32> {
    w.par_chunks(k.max(1))
        .with_min_len(threads::min_len(k))
        .map(|row| linear::dot(row, x))
        .collect()
}

fn lcm(a: usize, b: usize) -> usize {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x.max(1) * b
}

/// Causal GQA attention in f32 over bf16 inputs laid out as the spec says.
/// The decode attention on seeded inputs against a reference in f64: one query
/// per head, softmax over every cached position, its own group's KV head.
fn decode_attention_case(spec: &DecodeAttentionSpec, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let (heads, kv, hd, n) = (spec.heads, spec.kv_heads, spec.head_dim, spec.context);
    let q = draws(seed, "decode-attention-q", heads * hd, 1.0);
    let k = draws(seed, "decode-attention-k", n * kv * hd, 1.0);
    let v = draws(seed, "decode-attention-v", n * kv * hd, 1.0);
    let scale_dim = spec.scale_dim.unwrap_or(hd);
    let out = kernels::decode_attention(&q, (&k, &v), n, (heads, kv, hd, scale_dim), (0, None));
    let f = |bits: u16| f64::from(bf16::to_f32(bits));
    let group = heads / kv.max(1);
    let mut reference = Vec::with_capacity(heads * hd);
    for h in 0..heads {
        let at = |p: usize| (p * kv + h / group.max(1)) * hd;
        let scores: Vec<f64> = (0..n)
            .map(|p| {
                (0..hd)
                    .map(|i| f(q[h * hd + i]) * f(k[at(p) + i]))
                    .sum::<f64>()
                    / (scale_dim as f64).sqrt()
            })
            .collect();
        let top = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
        let total: f64 = weights.iter().sum();
        reference.extend((0..hd).map(|i| {
            let sum: f64 = (0..n).map(|p| weights[p] * f(v[at(p) + i])).sum();
            (sum / total) as f32
        }));
    }
    (bf16::to_f32_vec(&out), reference)
}

fn reference_attention(spec: &FlashAttentionSpec, q: &[u16], k: &[u16], v: &[u16]) -> Vec<f32> {
    let hd = spec.head_dim;
    let at = |len: usize, heads: usize, pos: usize, head: usize| match spec.layout {
        QkvLayout::SeqFirst => (pos * heads + head) * hd,
        QkvLayout::HeadFirst => (head * len + pos) * hd,
    };
    let (lq, lk) = (spec.lq, spec.lk);
    let group = spec.heads / spec.kv_heads.max(1);
    let scale = spec.score_scale();
    let mut out = vec![0.0f32; q.len()];
    let rows: Vec<(usize, Vec<f32>)> = (0..spec.heads * lq)
        .into_par_iter()
        .with_min_len(threads::min_len(2 * lk * hd))
        .map(|job| {
            let (head, pos) = (job / lq, job % lq);
            let kv = head / group.max(1);
            let qs = bf16::to_f32_vec(&q[at(lq, spec.heads, pos, head)..][..hd]);
            let visible = if spec.causal {
                (pos + lk.saturating_sub(lq) + 1).min(lk)
            } else {
                lk
            };
            // The sliding window keeps the last `window` of the visible keys.
            let first = spec.window.map_or(0, |w| visible.saturating_sub(w));
            let mut scores: Vec<f32> = (first..visible)
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
            for (j, &p) in (first..visible).zip(&scores) {
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
