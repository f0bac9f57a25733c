//! Every kernel against a plain f32-input computation (accumulated in f64)
//! at the kernel registry's tolerances: rtol 1.6e-2 plus the per-kernel atol
//! of `numerics::tolerance` (snapshot `xdna2_kernels__tolerances`). Shapes
//! come from the nine models' configs; M (rows) is scaled down where a
//! kernel's numerics do not depend on it. Inputs: activations N(0,1),
//! weights N(0, 1/K) as in the seeded random models, norm weights near 1.

use rayon::prelude::*;
use skillc_runtime::bf16;
use skillc_runtime::rng::SplitMix64;
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::kernels::*;
use skillc_runtime::xdna2::numerics::{compare, tolerance, Deviation};

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

fn f32s(bits: &[u16]) -> Vec<f32> {
    bf16::to_f32_vec(bits)
}

fn gate(kernel: Kernel, precision: Precision, out: &[u16], reference: &[f32]) -> Deviation {
    let c = compare(&f32s(out), reference, tolerance(kernel, precision));
    assert_eq!(c.mismatches, 0, "{} {:?}: {c:?}", kernel.name(), precision);
    c
}

/// `A·B` with B given as `[N,K]`, in f64.
fn matmul_reference(a: &[u16], b_nk: &[u16], m: usize, k: usize, n: usize) -> Vec<f32> {
    let a: Vec<f64> = a.iter().map(|&v| bf16::to_f32(v) as f64).collect();
    let b: Vec<f64> = b_nk.iter().map(|&v| bf16::to_f32(v) as f64).collect();
    let mut c = vec![0.0f64; m * n];
    // SAFETY: buffers hold m·k, n·k and m·n values with the given strides.
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
    c.iter().map(|&v| v as f32).collect()
}

/// (model, K, N) of projections in the nine configs (Qwen2.5-0.5B's query
/// width padded to 16 heads, as its plan does).
const GEMM_SHAPES: &[(&str, usize, usize)] = &[
    ("llama-3.2-1b q/o", 2048, 2048),
    ("llama-3.2-1b k/v", 2048, 512),
    ("llama-3.2-1b down", 8192, 2048),
    ("qwen2.5-0.5b q padded", 896, 1024),
    ("qwen2.5-0.5b k/v", 896, 128),
    ("qwen2.5-0.5b down", 4864, 896),
    ("qwen2.5-1.5b up", 1536, 8960),
    ("qwen3-4b up", 2560, 9728),
];

const ROWS: usize = 128;

#[test]
fn gemm_bf16_matches_f32_on_model_shapes() {
    let device = Device::npu2();
    for (i, &(name, k, n)) in GEMM_SHAPES.iter().enumerate() {
        let a = normal(10 + i as u64, ROWS * k, 1.0);
        let b_nk = normal(100 + i as u64, n * k, 1.0 / (k as f32).sqrt());
        let spec = GemmSpec::select(&device, ROWS, k, n, Precision::Bf16, Dtype::Bf16);
        assert_eq!(spec.unwritten_columns(), 0, "{name}");
        let out = gemm(&device, &spec, &a, BOperand::NxK(&b_nk)).expect(name);
        gate(
            Kernel::Gemm,
            Precision::Bf16,
            &out,
            &matmul_reference(&a, &b_nk, ROWS, k, n),
        );
    }
}

#[test]
fn gemm_f32_epilogue_and_pre_transposed_operand() {
    let device = Device::npu2();
    let (k, n) = (2048, 512);
    let a = normal(1, ROWS * k, 1.0);
    let b_nk = normal(2, n * k, 1.0 / (k as f32).sqrt());
    let mut b_kn = vec![0u16; k * n];
    for j in 0..n {
        for kk in 0..k {
            b_kn[kk * n + j] = b_nk[j * k + kk];
        }
    }
    let spec = GemmSpec::select(&device, ROWS, k, n, Precision::Bf16, Dtype::F32);
    let out = gemm_f32(&device, &spec, &a, BOperand::KxN(&b_kn)).expect("runs");
    let c = compare(
        &out,
        &matmul_reference(&a, &b_nk, ROWS, k, n),
        tolerance(Kernel::Gemm, Precision::Bf16),
    );
    assert_eq!(c.mismatches, 0, "{c:?}");
    // f32 output skips the bf16 rounding: far below bf16's 2^-9 relative step.
    assert!(c.mean_rel_l1 < 1e-5, "{c:?}");
}

fn uniform(seed: u64, n: usize) -> Vec<u16> {
    let mut g = SplitMix64::new(seed);
    (0..n).map(|_| bf16::from_f32(g.next_f32())).collect()
}

/// BFP16 operands on uniform [0, 1) data (our assumption of the registry
/// harness's inputs; the registry does not print them): a larger error than
/// exact bf16 products, still inside the low-precision gate.
#[test]
fn bfp16_operands_cost_accuracy_but_stay_inside_their_gate() {
    let device = Device::npu2();
    for (i, &(name, k, n)) in GEMM_SHAPES.iter().take(4).enumerate() {
        let a = uniform(20 + i as u64, ROWS * k);
        let b_nk = uniform(200 + i as u64, n * k);
        let reference = matmul_reference(&a, &b_nk, ROWS, k, n);
        let run = |precision| {
            let spec = GemmSpec::select(&device, ROWS, k, n, precision, Dtype::Bf16);
            gemm(&device, &spec, &a, BOperand::NxK(&b_nk)).expect(name)
        };
        let exact = gate(
            Kernel::Gemm,
            Precision::Bf16,
            &run(Precision::Bf16),
            &reference,
        );
        let blocked = gate(
            Kernel::Gemm,
            Precision::Bfp16,
            &run(Precision::Bfp16),
            &reference,
        );
        assert!(
            blocked.mean_rel_l1 > exact.mean_rel_l1 && blocked.max_abs > exact.max_abs,
            "{name}: BFP16 {blocked:?} vs bf16 {exact:?}"
        );
        // Without the bf16 epilogue's rounding the operand error stands out.
        let operand_error = |precision| {
            let spec = GemmSpec::select(&device, ROWS, k, n, precision, Dtype::F32);
            let out = gemm_f32(&device, &spec, &a, BOperand::NxK(&b_nk)).expect(name);
            compare(&out, &reference, tolerance(Kernel::Gemm, precision)).mean_rel_l1
        };
        let (exact, blocked) = (
            operand_error(Precision::Bf16),
            operand_error(Precision::Bfp16),
        );
        assert!(
            blocked > 100.0 * exact,
            "{name}: operand error BFP16 {blocked:e} vs bf16 {exact:e}"
        );
    }
}

/// On signed N(0,1) activations and N(0, 1/K) weights the BFP16 path fails
/// the element-wise gate on many near-zero outputs while its mean_rel_L1
/// sits at the registry's printed ~9.3e-3; exact bf16 products pass. This is
/// a property of the format, recorded here so nobody loosens the gate to hide it.
#[test]
fn bfp16_on_signed_data_fails_the_element_gate_that_bf16_passes() {
    let device = Device::npu2();
    let (k, n) = (2048, 2048);
    let a = normal(21, ROWS * k, 1.0);
    let b_nk = normal(201, n * k, 1.0 / (k as f32).sqrt());
    let reference = matmul_reference(&a, &b_nk, ROWS, k, n);
    let run = |precision| {
        let spec = GemmSpec::select(&device, ROWS, k, n, precision, Dtype::Bf16);
        f32s(&gemm(&device, &spec, &a, BOperand::NxK(&b_nk)).expect("runs"))
    };
    let exact = compare(
        &run(Precision::Bf16),
        &reference,
        tolerance(Kernel::Gemm, Precision::Bf16),
    );
    let blocked = compare(
        &run(Precision::Bfp16),
        &reference,
        tolerance(Kernel::Gemm, Precision::Bfp16),
    );
    assert_eq!(exact.mismatches, 0, "{exact:?}");
    assert!(blocked.mismatches * 20 > blocked.elements, "{blocked:?}");
    assert!((5e-3..2e-2).contains(&blocked.mean_rel_l1), "{blocked:?}");
}

fn matvec_reference(w: &[u16], x: &[u16], k: usize) -> Vec<f32> {
    let x: Vec<f64> = x.iter().map(|&v| bf16::to_f32(v) as f64).collect();
    w.par_chunks(k)
        .map(|row| {
            row.iter()
                .zip(&x)
                .map(|(&a, b)| bf16::to_f32(a) as f64 * b)
                .sum::<f64>() as f32
        })
        .collect()
}

#[test]
fn gemv_matches_f32_on_decode_shapes() {
    let device = Device::npu2();
    // (M, K): Llama-1B q, k, down; Qwen3-4B gate; Qwen2.5-3B down (K 11008).
    for (i, &(m, k)) in [
        (2048, 2048),
        (512, 2048),
        (2048, 8192),
        (9728, 2560),
        (2048, 11008),
    ]
    .iter()
    .enumerate()
    {
        let w = normal(30 + i as u64, m * k, 1.0 / (k as f32).sqrt());
        let x = normal(300 + i as u64, k, 1.0);
        let residual = normal(3000 + i as u64, m, 1.0);
        let spec = GemvSpec {
            residual: true,
            ..GemvSpec::select(&device, m, k, Herd::ROW)
        };
        let out = gemv(&device, &spec, &w, &x, Some(&residual)).expect("runs");
        let reference: Vec<f32> = matvec_reference(&w, &x, k)
            .iter()
            .zip(&residual)
            .map(|(y, &r)| y + bf16::to_f32(r))
            .collect();
        gate(Kernel::Gemv, Precision::Bf16, &out, &reference);
    }
}

#[test]
fn cascade_swiglu_matches_f32_at_llama_dims() {
    let device = Device::npu2();
    let (m, k, eps) = (8192, 2048, 1e-5f32);
    let x = normal(40, k, 1.0);
    let norm = near_one(41, k);
    let (wg, wu) = (
        normal(42, m * k, 1.0 / (k as f32).sqrt()),
        normal(43, m * k, 1.0 / (k as f32).sqrt()),
    );
    let spec = GemvSpec::select(&device, m, k, Herd([8, 4]));
    let out = gemv_swiglu(&device, &spec, eps, &x, &norm, &wg, &wu).expect("runs");
    let xf = f32s(&x);
    let inv = 1.0 / (xf.iter().map(|v| v * v).sum::<f32>() / k as f32 + eps).sqrt();
    let normed: Vec<u16> = xf
        .iter()
        .zip(&norm)
        .map(|(v, &w)| bf16::from_f32(v * inv * bf16::to_f32(w)))
        .collect();
    let (g, u) = (
        matvec_reference(&wg, &normed, k),
        matvec_reference(&wu, &normed, k),
    );
    let reference: Vec<f32> = g
        .iter()
        .zip(&u)
        .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
        .collect();
    gate(Kernel::GemvSwiglu, Precision::Bf16, &out, &reference);
}

#[test]
fn lm_head_partitions_match_f32_at_a_qwen_vocabulary() {
    let device = Device::npu2();
    let (vocab, k) = (151_936, 896);
    let w = normal(50, vocab * k, 1.0 / (k as f32).sqrt());
    let x = normal(51, k, 1.0);
    let spec = LmHeadSpec::select(&device, vocab, k, 8);
    assert!(spec.check(&device).is_empty());
    let out = lm_head_gemv(&device, &spec, &w, &x).expect("runs");
    gate(
        Kernel::LmHeadGemv,
        Precision::Bf16,
        &out,
        &matvec_reference(&w, &x, k),
    );
}

fn rms_reference(x: &[u16], w: Option<&[u16]>, cols: usize, eps: f32) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| {
            let r = f32s(row);
            let inv = 1.0
                / (r.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / cols as f64 + eps as f64)
                    .sqrt();
            r.into_iter()
                .enumerate()
                .map(move |(i, v)| (v as f64 * inv) as f32 * w.map_or(1.0, |w| bf16::to_f32(w[i])))
        })
        .collect()
}

#[test]
fn rms_norm_plain_weighted_and_per_head() {
    let device = Device::npu2();
    for (i, &cols) in [2048usize, 896, 2560, 3072].iter().enumerate() {
        let x = normal(60 + i as u64, ROWS * cols, 2.0);
        let w = near_one(600 + i as u64, cols);
        let spec = NormSpec {
            rows: ROWS,
            cols,
            herd: Herd::ROW,
            weighted: true,
            real_cols: None,
        };
        let out = rms_norm(&device, &spec, 1e-6, &x, Some(&w)).expect("runs");
        gate(
            Kernel::Rmsnorm,
            Precision::Bf16,
            &out,
            &rms_reference(&x, Some(&w), cols, 1e-6),
        );
        let plain = NormSpec {
            weighted: false,
            ..spec
        };
        let out = rms_norm(&device, &plain, 1e-6, &x, None).expect("runs");
        gate(
            Kernel::Rmsnorm,
            Precision::Bf16,
            &out,
            &rms_reference(&x, None, cols, 1e-6),
        );
    }
    // Qwen3 Q norm: 16 heads of 128 per position.
    let (heads, hd) = (16, 128);
    let x = normal(70, ROWS * heads * hd, 3.0);
    let w = near_one(71, hd);
    let spec = NormSpec {
        rows: ROWS * heads,
        cols: hd,
        herd: Herd::ROW,
        weighted: true,
        real_cols: None,
    };
    let out = qk_rms_norm(&device, &spec, 1e-6, &x, &w).expect("runs");
    gate(
        Kernel::QkRmsnorm,
        Precision::Bf16,
        &out,
        &rms_reference(&x, Some(&w), hd, 1e-6),
    );
}

fn inv_freq(theta: f32, hd: usize) -> Vec<f32> {
    (0..hd / 2)
        .map(|j| 1.0 / theta.powf((2 * j) as f32 / hd as f32))
        .collect()
}

#[test]
fn rope_half_split_from_the_table() {
    let device = Device::npu2();
    // Llama-1B (32 heads of 64, theta 5e5) late in a 2048 context; Qwen3 (16 of 128, theta 1e6).
    for (i, &(heads, hd, theta, base)) in [
        (32usize, 64usize, 500_000.0f32, 1900usize),
        (16, 128, 1_000_000.0, 0),
    ]
    .iter()
    .enumerate()
    {
        let freqs = inv_freq(theta, hd);
        let lut = rope_lut(&freqs, 2048);
        let x = normal(80 + i as u64, ROWS * heads * hd, 1.0);
        let spec = RopeSpec {
            rows: ROWS,
            heads,
            head_dim: hd,
            herd: Herd::ROW,
            rotary_dim: None,
        };
        let out = rope(&device, &spec, &x, &lut, base).expect("runs");
        let half = hd / 2;
        let mut reference = vec![0.0f32; x.len()];
        for r in 0..ROWS {
            let p = (base + r) as f64;
            for h in 0..heads {
                let o = (r * heads + h) * hd;
                for j in 0..half {
                    let (c, s) = ((p * freqs[j] as f64).cos(), (p * freqs[j] as f64).sin());
                    let (a, b) = (
                        bf16::to_f32(x[o + j]) as f64,
                        bf16::to_f32(x[o + half + j]) as f64,
                    );
                    reference[o + j] = (a * c - b * s) as f32;
                    reference[o + half + j] = (b * c + a * s) as f32;
                }
            }
        }
        gate(Kernel::Rope, Precision::Bf16, &out, &reference);
    }
}

#[test]
fn silu_mul_add_and_softmax() {
    let device = Device::npu2();
    let n = ROWS * 8192;
    let (g, u) = (normal(90, n, 2.0), normal(91, n, 1.0));
    let spec = EltwiseSpec::select(&device, n, Herd::ROW);
    let out = silu_mul(&device, &spec, &g, &u).expect("runs");
    let reference: Vec<f32> = f32s(&g)
        .iter()
        .zip(f32s(&u))
        .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
        .collect();
    gate(Kernel::SiluMul, Precision::Bf16, &out, &reference);

    let n = ROWS * 2048;
    let (a, b) = (normal(92, n, 1.0), normal(93, n, 1.0));
    let spec = EltwiseSpec::select(&device, n, Herd::ROW);
    let out = eltwise_add(&device, &spec, &a, &b).expect("runs");
    let reference: Vec<f32> = f32s(&a).iter().zip(f32s(&b)).map(|(a, b)| a + b).collect();
    gate(Kernel::EltwiseAdd, Precision::Bf16, &out, &reference);

    let cols = 2048;
    let x = normal(94, ROWS * cols, 3.0);
    let spec = NormSpec {
        rows: ROWS,
        cols,
        herd: Herd::ROW,
        weighted: false,
        real_cols: None,
    };
    let out = softmax(&device, &spec, &x).expect("runs");
    let reference: Vec<f32> = x
        .chunks(cols)
        .flat_map(|row| {
            let r: Vec<f64> = f32s(row).iter().map(|&v| v as f64).collect();
            let max = r.iter().cloned().fold(f64::MIN, f64::max);
            let sum: f64 = r.iter().map(|v| (v - max).exp()).sum();
            r.into_iter().map(move |v| ((v - max).exp() / sum) as f32)
        })
        .collect();
    gate(Kernel::Softmax, Precision::Bf16, &out, &reference);
}

#[test]
fn embedding_gathers_rows_exactly() {
    let (vocab, hidden) = (1000, 896);
    let table = normal(95, vocab * hidden, 1.0);
    let ids = [0u32, 999, 17, 17];
    let out = embedding(&table, hidden, &ids).expect("in range");
    let reference: Vec<f32> = ids
        .iter()
        .flat_map(|&i| f32s(&table[i as usize * hidden..][..hidden]))
        .collect();
    gate(Kernel::Embedding, Precision::Bf16, &out, &reference);
    assert!(embedding(&table, hidden, &[1000]).is_err());
}

fn attention_reference(q: &[u16], k: &[u16], v: &[u16], spec: &FlashAttentionSpec) -> Vec<f32> {
    let (hd, heads, kv) = (spec.head_dim, spec.heads, spec.kv_heads);
    let at = |len: usize, n_heads: usize, pos: usize, h: usize| match spec.layout {
        QkvLayout::SeqFirst => (pos * n_heads + h) * hd,
        QkvLayout::HeadFirst => (h * len + pos) * hd,
    };
    let mut out = vec![0.0f32; q.len()];
    let group = heads / kv;
    out.par_chunks_mut(hd).enumerate().for_each(|(slot, o)| {
        let (h, i) = match spec.layout {
            QkvLayout::SeqFirst => (slot % heads, slot / heads),
            QkvLayout::HeadFirst => (slot / spec.lq, slot % spec.lq),
        };
        let qv = f32s(&q[at(spec.lq, heads, i, h)..][..hd]);
        let visible = if spec.causal {
            i + spec.lk - spec.lq + 1
        } else {
            spec.lk
        };
        let scores: Vec<f64> = (0..visible)
            .map(|j| {
                let kk = &k[at(spec.lk, kv, j, h / group)..][..hd];
                qv.iter()
                    .zip(kk)
                    .map(|(a, &b)| *a as f64 * bf16::to_f32(b) as f64)
                    .sum::<f64>()
                    / (hd as f64).sqrt()
            })
            .collect();
        let max = scores.iter().cloned().fold(f64::MIN, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let sum: f64 = weights.iter().sum();
        for (d, slot) in o.iter_mut().enumerate() {
            let acc: f64 = (0..visible)
                .map(|j| weights[j] * bf16::to_f32(v[at(spec.lk, kv, j, h / group) + d]) as f64)
                .sum();
            *slot = (acc / sum) as f32;
        }
    });
    out
}

#[test]
fn flash_attention_gqa_causal_head_dim_64_and_128() {
    let device = Device::npu2();
    // (heads, kv heads, head_dim, length, causal): Llama-1B, padded Qwen2.5-0.5B,
    // Qwen3 (head_dim 128, head-first chunks), Qwen2.5-1.5B padded, a non-causal MHA.
    let cases = [
        (32, 8, 64, 256, true),
        (16, 2, 64, 256, true),
        (16, 8, 128, 256, true),
        (16, 2, 128, 256, true),
        (2, 2, 64, 512, false),
    ];
    for (i, &(heads, kv, hd, len, causal)) in cases.iter().enumerate() {
        let spec = FlashAttentionSpec::select(len, len, heads, kv, hd, causal);
        assert_eq!(spec.layout == QkvLayout::HeadFirst, hd > 64);
        let q = normal(110 + i as u64, len * heads * hd, 1.0);
        let k = normal(120 + i as u64, len * kv * hd, 1.0);
        let v = normal(130 + i as u64, len * kv * hd, 1.0);
        let out = flash_attention(&device, &spec, &q, &k, &v).expect("runs");
        gate(
            Kernel::FlashAttention,
            Precision::Bf16,
            &out,
            &attention_reference(&q, &k, &v, &spec),
        );
    }
}

#[test]
fn tolerances() {
    let table: Vec<String> = Kernel::ALL
        .iter()
        .flat_map(|&k| [Precision::Bf16, Precision::Bfp16].map(move |p| (k, p)))
        .filter(|&(k, p)| k == Kernel::Gemm || p == Precision::Bf16)
        .map(|(k, p)| {
            let t = tolerance(k, p);
            format!(
                "{:<16} {:<6} rtol {:e} atol {:e}  ({})",
                k.name(),
                format!("{p:?}"),
                t.rtol,
                t.atol,
                t.source
            )
        })
        .collect();
    insta::assert_snapshot!(table.join("\n"));
}
