//! The kernel harness replay uses for `validate-kernel`: seeded inputs, the
//! emulated kernel (hardware numerics, constraints, the silent-corruption case),
//! and an f32 reference computed from the same bf16 inputs with the oracle's
//! building blocks, compared element-wise at the recorded tolerance.
//!
//! Inputs are uniform in [-1, 1) (norm weights in [0.5, 1.5)), drawn from one
//! named stream per operand so a result depends only on the seed and the shape.

use rayon::prelude::*;

use skillc_runtime::bf16;
use skillc_runtime::model::arch::Architecture;
use skillc_runtime::model::oracle::{blocks, linear};
use skillc_runtime::model::tensor::BfTensor;
use skillc_runtime::rng::SplitMix64;
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::kernels::{
    self, BOperand, Epilogue, FlashAttentionSpec, KernelError, QkvLayout,
};
use skillc_runtime::xdna2::numerics::{self, Comparison, Tolerance};
use skillc_runtime::xdna2::plan::Launch;

/// What one validation run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelCheck {
    pub comparison: Comparison,
    /// Cosine similarity of the output with the reference.
    pub cosine: f64,
}

/// Runs `launch` on seeded inputs and compares it with the f32 reference.
/// A configuration the hardware would refuse comes back as the kernel's error.
pub fn validate(
    launch: &Launch,
    arch: &Architecture,
    device: &Device,
    tolerance: Tolerance,
    seed: u64,
) -> Result<KernelCheck, HarnessError> {
    let (out, reference) = run(launch, arch, device, seed)?;
    Ok(KernelCheck {
        comparison: numerics::compare(&out, &reference, tolerance),
        cosine: cosine(&out, &reference),
    })
}

#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error("the harness does not run {0} standalone")]
    Unsupported(&'static str),
}

/// The emulated output and the reference, both as f32.
fn run(
    launch: &Launch,
    arch: &Architecture,
    device: &Device,
    seed: u64,
) -> Result<(Vec<f32>, Vec<f32>), HarnessError> {
    let inputs = Inputs { seed };
    match launch {
        Launch::Gemm { spec, .. } => {
            let a = inputs.signed("gemm.a", spec.m * spec.k);
            let b = inputs.signed("gemm.b", spec.n * spec.k);
            let out = match spec.tile.epilogue {
                Epilogue::F32 => kernels::gemm_f32(device, spec, &a, BOperand::NxK(&b))?,
                _ => bf16::to_f32_vec(&kernels::gemm(device, spec, &a, BOperand::NxK(&b))?),
            };
            let weight = BfTensor::owned("b", vec![spec.n, spec.k], b);
            let mut reference = vec![0.0f32; spec.m * spec.n];
            linear::matmul(&bf16::to_f32_vec(&a), spec.m, &weight, &mut reference);
            Ok((out, reference))
        }
        Launch::Gemv { spec, .. } => {
            let w = inputs.signed("gemv.w", spec.m * spec.k);
            let x = inputs.signed("gemv.x", spec.k);
            let out = kernels::gemv(device, spec, &w, &x, None)?;
            Ok((bf16::to_f32_vec(&out), matvec(w, spec.m, spec.k, &x)))
        }
        Launch::LmHeadGemv { spec, .. } => {
            let k = spec.part.k;
            let w = inputs.signed("lm_head.w", spec.vocab * k);
            let x = inputs.signed("lm_head.x", k);
            let out = kernels::lm_head_gemv(device, spec, &w, &x)?;
            Ok((bf16::to_f32_vec(&out), matvec(w, spec.vocab, k, &x)))
        }
        Launch::Rmsnorm { spec, eps, .. } => {
            let x = inputs.signed("rmsnorm.x", spec.rows * spec.cols);
            let w = inputs.scale("rmsnorm.w", spec.cols);
            let out = kernels::rms_norm(device, spec, *eps as f32, &x, Some(&w))?;
            let x32 = bf16::to_f32_vec(&x);
            let mut reference = vec![0.0f32; x32.len()];
            for (row, dst) in x32.chunks(spec.cols).zip(reference.chunks_mut(spec.cols)) {
                blocks::rms_norm(row, &w, *eps as f32, dst);
            }
            Ok((bf16::to_f32_vec(&out), reference))
        }
        Launch::Rope { spec, .. } => {
            let rows = spec.rows * spec.heads;
            let x = inputs.signed("rope.x", rows * spec.head_dim);
            let arch = Architecture {
                head_dim: spec.head_dim,
                ..arch.clone()
            };
            let inv_freq = blocks::inv_freq(&arch);
            let lut = kernels::rope_lut(&inv_freq, spec.rows);
            let out = kernels::rope(device, spec, &x, &lut, 0)?;
            let mut reference = bf16::to_f32_vec(&x);
            reference
                .par_chunks_mut(spec.heads * spec.head_dim)
                .enumerate()
                .for_each(|(position, row)| {
                    let (cos, sin) = blocks::rope_angles(&inv_freq, position);
                    for head in row.chunks_mut(spec.head_dim) {
                        blocks::apply_rope(head, &cos, &sin);
                    }
                });
            Ok((bf16::to_f32_vec(&out), reference))
        }
        Launch::SiluMul { spec, .. } => {
            let (g, u) = (
                inputs.signed("silu.g", spec.n),
                inputs.signed("silu.u", spec.n),
            );
            let out = kernels::silu_mul(device, spec, &g, &u)?;
            let reference = g
                .iter()
                .zip(&u)
                .map(|(&g, &u)| blocks::silu(bf16::to_f32(g)) * bf16::to_f32(u))
                .collect();
            Ok((bf16::to_f32_vec(&out), reference))
        }
        Launch::EltwiseAdd { spec, .. } => {
            let (a, b) = (
                inputs.signed("add.a", spec.n),
                inputs.signed("add.b", spec.n),
            );
            let out = kernels::eltwise_add(device, spec, &a, &b)?;
            let reference = a
                .iter()
                .zip(&b)
                .map(|(&a, &b)| bf16::to_f32(a) + bf16::to_f32(b))
                .collect();
            Ok((bf16::to_f32_vec(&out), reference))
        }
        Launch::FlashAttention { spec, .. } => {
            let hd = spec.head_dim;
            let q = inputs.signed("fa.q", spec.lq * spec.heads * hd);
            let k = inputs.signed("fa.k", spec.lk * spec.kv_heads * hd);
            let v = inputs.signed("fa.v", spec.lk * spec.kv_heads * hd);
            let out = kernels::flash_attention(device, spec, &q, &k, &v)?;
            Ok((
                bf16::to_f32_vec(&out),
                attention_reference(spec, &q, &k, &v),
            ))
        }
        other => Err(HarnessError::Unsupported(other.kernel().name())),
    }
}

/// `y = W·x` in f32 for a bf16 `[m, k]` matrix.
fn matvec(w: Vec<u16>, m: usize, k: usize, x: &[u16]) -> Vec<f32> {
    let weight = BfTensor::owned("w", vec![m, k], w);
    let mut y = vec![0.0f32; m];
    linear::gemv(&weight, &bf16::to_f32_vec(x), &mut y);
    y
}

/// Causal grouped-query attention in f32, in the spec's layout.
fn attention_reference(spec: &FlashAttentionSpec, q: &[u16], k: &[u16], v: &[u16]) -> Vec<f32> {
    let hd = spec.head_dim;
    let index = |len: usize, heads: usize, pos: usize, head: usize| match spec.layout {
        QkvLayout::SeqFirst => (pos * heads + head) * hd,
        QkvLayout::HeadFirst => (head * len + pos) * hd,
    };
    let (q, k, v) = (
        bf16::to_f32_vec(q),
        bf16::to_f32_vec(k),
        bf16::to_f32_vec(v),
    );
    let group = spec.heads / spec.kv_heads.max(1);
    let scale = 1.0 / (hd as f32).sqrt();
    let rows: Vec<(usize, Vec<f32>)> = (0..spec.heads * spec.lq)
        .into_par_iter()
        .map(|job| {
            let (head, pos) = (job / spec.lq, job % spec.lq);
            let kv = head / group;
            let query = &q[index(spec.lq, spec.heads, pos, head)..][..hd];
            let visible = if spec.causal {
                (pos + spec.lk.saturating_sub(spec.lq) + 1).min(spec.lk)
            } else {
                spec.lk
            };
            let mut scores: Vec<f32> = (0..visible)
                .map(|j| {
                    let key = &k[index(spec.lk, spec.kv_heads, j, kv)..][..hd];
                    linear::dot_f32(query, key) * scale
                })
                .collect();
            blocks::softmax_in_place(&mut scores);
            let mut out = vec![0.0f32; hd];
            for (j, &p) in scores.iter().enumerate() {
                let value = &v[index(spec.lk, spec.kv_heads, j, kv)..][..hd];
                for (o, &x) in out.iter_mut().zip(value) {
                    *o += p * x;
                }
            }
            (index(spec.lq, spec.heads, pos, head), out)
        })
        .collect();
    let mut reference = vec![0.0f32; q.len()];
    for (start, row) in rows {
        reference[start..start + hd].copy_from_slice(&row);
    }
    reference
}

/// Seeded bf16 operands, one stream per operand name.
struct Inputs {
    seed: u64,
}

impl Inputs {
    fn draw(&self, stream: &str, n: usize, f: impl Fn(&mut SplitMix64) -> f32) -> Vec<u16> {
        let mut rng = SplitMix64::for_stream(self.seed, stream);
        (0..n).map(|_| bf16::from_f32(f(&mut rng))).collect()
    }

    fn signed(&self, stream: &str, n: usize) -> Vec<u16> {
        self.draw(stream, n, SplitMix64::next_signed)
    }

    /// Norm weights: positive, around one.
    fn scale(&self, stream: &str, n: usize) -> Vec<u16> {
        self.draw(stream, n, |r| 0.5 + r.next_f32())
    }
}

/// Cosine similarity in f64; 0 when either side is all zeros.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64, y as f64);
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}
