//! Phase-1 kernel validation: runs one launch of a plan on seeded inputs
//! (activations N(0,1), weights N(0, 1/K), norm weights near 1) and compares
//! it element-wise with a plain computation on the same bf16 inputs
//! (accumulated in f64) at the kernel's registry tolerance. A launch the
//! hardware refuses is an error; one that runs but corrupts (a GEMM tile that
//! does not divide N) comes back with mismatches, as on the device.

use rayon::prelude::*;
use serde::Serialize;

use super::device::Device;
use super::kernels::{
    eltwise_add, flash_attention, gemm, gemv, gemv_swiglu, lm_head_partition, qk_rms_norm,
    rms_norm, rope, rope_lut, silu_mul, softmax, BOperand, FlashAttentionSpec, Kernel, KernelError,
    Precision, QkvLayout,
};
use super::numerics::{compare, tolerance, Comparison, Tolerance};
use super::plan::Launch;
use crate::bf16;
use crate::rng::SplitMix64;

/// A validated launch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Validation {
    pub kernel: Kernel,
    pub shape: String,
    pub tolerance: Tolerance,
    pub comparison: Comparison,
}

impl Validation {
    pub fn passed(&self) -> bool {
        self.comparison.passed()
    }
}

fn normal(seed: u64, n: usize, scale: f32) -> Vec<u16> {
    let mut g = SplitMix64::new(seed);
    (0..n)
        .map(|_| bf16::from_f32(g.next_normal() * scale))
        .collect()
}

fn near_one(seed: u64, n: usize) -> Vec<u16> {
    let mut g = SplitMix64::new(seed);
    (0..n)
        .map(|_| bf16::from_f32(1.0 + 0.25 * g.next_signed()))
        .collect()
}

fn f64s(bits: &[u16]) -> Vec<f64> {
    bits.iter().map(|&b| bf16::to_f32(b) as f64).collect()
}

/// Runs `launch` on inputs drawn from `seed` and gates it.
pub fn validate_launch(
    device: &Device,
    launch: &Launch,
    seed: u64,
) -> Result<Validation, KernelError> {
    let (out, reference, precision) = run(device, launch, seed)?;
    let tolerance = tolerance(launch.kernel(), precision);
    let out: Vec<f32> = out.iter().map(|&b| bf16::to_f32(b)).collect();
    let reference: Vec<f32> = reference.iter().map(|&v| v as f32).collect();
    Ok(Validation {
        kernel: launch.kernel(),
        shape: launch.shape_label(),
        tolerance,
        comparison: compare(&out, &reference, tolerance),
    })
}

type Outcome = (Vec<u16>, Vec<f64>, Precision);

fn run(device: &Device, launch: &Launch, seed: u64) -> Result<Outcome, KernelError> {
    let inv_sqrt = |k: usize| 1.0 / (k.max(1) as f32).sqrt();
    Ok(match launch {
        Launch::Gemm { spec, .. } => {
            let (m, k, n) = (spec.m, spec.k, spec.n);
            let a = normal(seed, m * k, 1.0);
            let b = normal(seed + 1, n * k, inv_sqrt(k));
            let out = gemm(device, spec, &a, BOperand::NxK(&b))?;
            (out, matmul(&a, &b, m, k, n), spec.precision)
        }
        Launch::Gemv { spec, residual, .. } => {
            let w = normal(seed, spec.m * spec.k, inv_sqrt(spec.k));
            let x = normal(seed + 1, spec.k, 1.0);
            let r = residual.as_ref().map(|_| normal(seed + 2, spec.m, 1.0));
            let out = gemv(device, spec, &w, &x, r.as_deref())?;
            let mut reference = matvec(&w, &f64s(&x), spec.k);
            if let Some(r) = &r {
                reference.iter_mut().zip(f64s(r)).for_each(|(y, r)| *y += r);
            }
            (out, reference, Precision::Bf16)
        }
        Launch::GemvSwiglu { spec, eps, .. } => {
            let x = normal(seed, spec.k, 1.0);
            let norm = near_one(seed + 1, spec.k);
            let (g, u) = (
                normal(seed + 2, spec.m * spec.k, inv_sqrt(spec.k)),
                normal(seed + 3, spec.m * spec.k, inv_sqrt(spec.k)),
            );
            let out = gemv_swiglu(device, spec, *eps as f32, &x, &norm, &g, &u)?;
            let normed: Vec<f64> = rms(&x, Some(&norm), spec.k, *eps);
            let normed_bits: Vec<u16> = normed.iter().map(|&v| bf16::from_f32(v as f32)).collect();
            let (gate, up) = (
                matvec(&g, &f64s(&normed_bits), spec.k),
                matvec(&u, &f64s(&normed_bits), spec.k),
            );
            (
                out,
                gate.iter()
                    .zip(up)
                    .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                    .collect(),
                Precision::Bf16,
            )
        }
        Launch::LmHeadGemv { spec, part, .. } => {
            let k = spec.part.k;
            let rows = spec.rows(*part);
            let w = normal(seed, rows.len() * k, inv_sqrt(k));
            let x = normal(seed + 1, k, 1.0);
            let mut logits = vec![0u16; spec.vocab];
            lm_head_partition(device, spec, *part, &w, &x, &mut logits)?;
            (
                logits[rows].to_vec(),
                matvec(&w, &f64s(&x), k),
                Precision::Bf16,
            )
        }
        Launch::Rmsnorm {
            spec, eps, weight, ..
        } => {
            let x = normal(seed, spec.rows * spec.cols, 2.0);
            let w = weight.as_ref().map(|_| near_one(seed + 1, spec.cols));
            let out = rms_norm(device, spec, *eps as f32, &x, w.as_deref())?;
            (
                out,
                rms(&x, w.as_deref().filter(|_| spec.weighted), spec.cols, *eps),
                Precision::Bf16,
            )
        }
        Launch::QkRmsnorm { spec, eps, .. } => {
            let x = normal(seed, spec.rows * spec.cols, 2.0);
            let w = near_one(seed + 1, spec.cols);
            let out = qk_rms_norm(device, spec, *eps as f32, &x, &w)?;
            (out, rms(&x, Some(&w), spec.cols, *eps), Precision::Bf16)
        }
        Launch::Rope { spec, .. } => {
            let hd = spec.head_dim;
            let inv_freq: Vec<f32> = (0..hd / 2)
                .map(|j| 1.0 / 10_000f32.powf((2 * j) as f32 / hd as f32))
                .collect();
            let lut = rope_lut(&inv_freq, spec.rows);
            let x = normal(seed, spec.rows * spec.heads * hd, 1.0);
            let out = rope(device, spec, &x, &lut, 0)?;
            (
                out,
                rope_reference(&x, &inv_freq, spec.heads, hd),
                Precision::Bf16,
            )
        }
        Launch::SiluMul { spec, .. } => {
            let (g, u) = (normal(seed, spec.n, 2.0), normal(seed + 1, spec.n, 1.0));
            let out = silu_mul(device, spec, &g, &u)?;
            (
                out,
                f64s(&g)
                    .iter()
                    .zip(f64s(&u))
                    .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                    .collect(),
                Precision::Bf16,
            )
        }
        Launch::EltwiseAdd { spec, .. } => {
            let (a, b) = (normal(seed, spec.n, 1.0), normal(seed + 1, spec.n, 1.0));
            let out = eltwise_add(device, spec, &a, &b)?;
            (
                out,
                f64s(&a).iter().zip(f64s(&b)).map(|(a, b)| a + b).collect(),
                Precision::Bf16,
            )
        }
        Launch::Softmax { spec, .. } => {
            let x = normal(seed, spec.rows * spec.cols, 3.0);
            let out = softmax(device, spec, &x)?;
            let reference = f64s(&x)
                .chunks(spec.cols.max(1))
                .flat_map(|row| {
                    let max = row.iter().cloned().fold(f64::MIN, f64::max);
                    let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
                    row.iter()
                        .map(move |v| (v - max).exp() / sum)
                        .collect::<Vec<_>>()
                })
                .collect();
            (out, reference, Precision::Bf16)
        }
        Launch::FlashAttention { spec, .. } => {
            let hd = spec.head_dim;
            let q = normal(seed, spec.lq * spec.heads * hd, 1.0);
            let k = normal(seed + 1, spec.lk * spec.kv_heads * hd, 1.0);
            let v = normal(seed + 2, spec.lk * spec.kv_heads * hd, 1.0);
            let out = flash_attention(device, spec, &q, &k, &v)?;
            (out, attention(&q, &k, &v, spec), Precision::Bf16)
        }
    })
}

/// `A[M,K] · B[N,K]ᵀ` in f64.
fn matmul(a: &[u16], b: &[u16], m: usize, k: usize, n: usize) -> Vec<f64> {
    let (a, b) = (f64s(a), f64s(b));
    let mut c = vec![0.0f64; m * n];
    // SAFETY: the buffers hold m·k, n·k and m·n values with these strides.
    unsafe {
        matrixmultiply::dgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            k as isize,
            1,
            b.as_ptr(),
            1,
            k as isize,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
    c
}

fn matvec(w: &[u16], x: &[f64], k: usize) -> Vec<f64> {
    w.par_chunks(k.max(1))
        .map(|row| {
            row.iter()
                .zip(x)
                .map(|(&a, b)| bf16::to_f32(a) as f64 * b)
                .sum()
        })
        .collect()
}

fn rms(x: &[u16], w: Option<&[u16]>, cols: usize, eps: f64) -> Vec<f64> {
    f64s(x)
        .chunks(cols.max(1))
        .flat_map(|row| {
            let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / cols as f64 + eps).sqrt();
            row.iter()
                .enumerate()
                .map(|(i, v)| v * inv * w.map_or(1.0, |w| bf16::to_f32(w[i]) as f64))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn rope_reference(x: &[u16], inv_freq: &[f32], heads: usize, hd: usize) -> Vec<f64> {
    let half = hd / 2;
    let x = f64s(x);
    let mut out = vec![0.0f64; x.len()];
    for (r, (o, row)) in out
        .chunks_mut(heads * hd)
        .zip(x.chunks(heads * hd))
        .enumerate()
    {
        for (oh, xh) in o.chunks_mut(hd).zip(row.chunks(hd)) {
            for j in 0..half {
                let angle = r as f64 * inv_freq[j] as f64;
                let (c, s) = (angle.cos(), angle.sin());
                oh[j] = xh[j] * c - xh[half + j] * s;
                oh[half + j] = xh[half + j] * c + xh[j] * s;
            }
        }
    }
    out
}

fn attention(q: &[u16], k: &[u16], v: &[u16], spec: &FlashAttentionSpec) -> Vec<f64> {
    let (hd, heads, kv) = (spec.head_dim, spec.heads, spec.kv_heads);
    let at = |len: usize, n: usize, pos: usize, h: usize| match spec.layout {
        QkvLayout::SeqFirst => (pos * n + h) * hd,
        QkvLayout::HeadFirst => (h * len + pos) * hd,
    };
    let (q, k, v) = (f64s(q), f64s(k), f64s(v));
    let group = heads / kv.max(1);
    let mut out = vec![0.0f64; q.len()];
    out.par_chunks_mut(hd).enumerate().for_each(|(slot, o)| {
        let (h, i) = match spec.layout {
            QkvLayout::SeqFirst => (slot % heads, slot / heads),
            QkvLayout::HeadFirst => (slot / spec.lq, slot % spec.lq),
        };
        let qv = &q[at(spec.lq, heads, i, h)..][..hd];
        let visible = if spec.causal {
            i + spec.lk - spec.lq + 1
        } else {
            spec.lk
        };
        let scores: Vec<f64> = (0..visible)
            .map(|j| {
                qv.iter()
                    .zip(&k[at(spec.lk, kv, j, h / group)..][..hd])
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
                    / (hd as f64).sqrt()
            })
            .collect();
        let max = scores.iter().cloned().fold(f64::MIN, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let sum: f64 = weights.iter().sum();
        for (d, slot) in o.iter_mut().enumerate() {
            *slot = (0..visible)
                .map(|j| weights[j] * v[at(spec.lk, kv, j, h / group) + d])
                .sum::<f64>()
                / sum;
        }
    });
    out
}
