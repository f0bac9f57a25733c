//! Hardware number formats and the element-wise gate the kernel registry uses.
//!
//! BFP16 (`v64bfp16ebs8`): blocks of 8 values share one 8-bit exponent and
//! keep an 8-bit signed mantissa each, so the largest value of a block keeps
//! 7 magnitude bits and smaller ones lose bits in proportion to how far they
//! sit below it. npu2 feeds bf16 GEMM operands through this format.
//!
//! The gate is `|out − ref| ≤ atol + rtol·|ref|` per element with rtol 1.6e-2
//! and a per-kernel atol (skill-system §6), never a cosine.

use serde::Serialize;

use super::kernels::{Kernel, Precision};

/// Values per BFP16 block.
pub const BFP16_BLOCK: usize = 8;
/// Mantissa bits including the sign.
const BFP16_MANTISSA_BITS: i32 = 8;

/// Rounds one block in place to BFP16: a shared exponent taken from the
/// block's largest magnitude, mantissas rounded to nearest-even and clamped
/// to the signed 8-bit range.
pub fn bfp16_block(block: &mut [f32]) {
    let max = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if max == 0.0 || !max.is_finite() {
        return;
    }
    let exponent = exponent_of(max);
    // max / step lies in [64, 128): 7 magnitude bits for the largest value.
    let step = 2f32.powi(exponent - (BFP16_MANTISSA_BITS - 2));
    let limit = (1 << (BFP16_MANTISSA_BITS - 1)) as f32;
    for v in block.iter_mut() {
        let mantissa = (*v / step).round_ties_even().clamp(-limit, limit - 1.0);
        *v = mantissa * step;
    }
}

/// Rounds every row of a row-major matrix to BFP16 blocks along the row.
pub fn bfp16_rows(data: &mut [f32], row_len: usize) {
    for row in data.chunks_mut(row_len.max(1)) {
        for block in row.chunks_mut(BFP16_BLOCK) {
            bfp16_block(block);
        }
    }
}

/// floor(log2(|x|)) for finite non-zero x, subnormals included.
fn exponent_of(x: f32) -> i32 {
    let bits = x.abs().to_bits();
    let biased = ((bits >> 23) & 0xff) as i32;
    if biased == 0 {
        // Subnormal: the exponent is that of the highest set mantissa bit.
        let mantissa = bits & 0x7f_ffff;
        -127 - (mantissa.leading_zeros() as i32 - 9)
    } else {
        biased - 127
    }
}

/// A kernel's element-wise tolerance.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
    /// Where the numbers come from.
    pub source: &'static str,
}

/// rtol everywhere in the registry (skill-system §6).
pub const RTOL: f64 = 1.6e-2;

const REGISTRY: &str = "kernel registry tolerances (skill-system §6)";

/// The registry's tolerance for `kernel` at `precision`; kernels the registry
/// does not list say so in `source`.
pub fn tolerance(kernel: Kernel, precision: Precision) -> Tolerance {
    let registry = |atol| Tolerance {
        rtol: RTOL,
        atol,
        source: REGISTRY,
    };
    match (kernel, precision) {
        (Kernel::Gemm, Precision::Bf16) => registry(1.5e-3),
        (Kernel::Gemm, Precision::Bfp16) => registry(4e-3),
        (Kernel::Gemv | Kernel::LmHeadGemv, _) => registry(1e-3),
        (Kernel::Rmsnorm | Kernel::QkRmsnorm, _) => registry(5e-2),
        (Kernel::Layernorm, _) => Tolerance {
            rtol: RTOL,
            atol: 5e-2,
            source: "ours: not in the registry; RMSNorm's atol, since LayerNorm is the same reduction with its mean removed first (one more f32 pass, the same bf16 rounding of the output)",
        },
        (Kernel::FlashAttention, _) => registry(1e-1),
        (Kernel::EltwiseAdd, _) => registry(5e-2),
        (Kernel::SiluMul, _) => registry(8e-2),
        (Kernel::GeluMul, _) => Tolerance {
            rtol: RTOL,
            atol: 8e-2,
            source: "ours: not in the registry; the gated activation's atol (SiLU-mul's), since GELU-tanh-mul has the same structure (one transcendental, bf16 intermediates, one product)",
        },
        (Kernel::Rope, _) => registry(5e-2),
        (Kernel::GemvSwiglu, _) => Tolerance {
            rtol: RTOL,
            atol: 8e-2,
            source: "ours: fused RMSNorm + GEMV + SiLU-mul takes the widest atol of its parts (SiLU-mul), per the registry rule 'fused kernels get wider atol, not wider rtol'",
        },
        (Kernel::Softmax, _) => Tolerance {
            rtol: RTOL,
            atol: 1e-3,
            source: "ours: not in the registry; probabilities in [0,1] rounded once to bf16",
        },
        (Kernel::Embedding, _) => Tolerance {
            rtol: 0.0,
            atol: 0.0,
            source: "ours: a gather copies bits, so it must be exact",
        },
        (Kernel::KvAppend, _) => Tolerance {
            rtol: 0.0,
            atol: 0.0,
            source: "ours: the append copies the row's bits into its slot, so it must be exact",
        },
        (Kernel::DecodeAttention, _) => Tolerance {
            rtol: RTOL,
            atol: 1e-2,
            source: "ours: not in the registry; one query row over bf16 keys and values with f32 scores and sums, the output rounded once to bf16 (tighter than flash attention's 1e-1, which rounds its probabilities to bf16)",
        },
    }
}

/// Result of the element-wise gate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Deviation {
    pub elements: usize,
    /// Elements outside `atol + rtol·|ref|` (non-finite outputs count).
    pub mismatches: usize,
    pub first_mismatch: Option<usize>,
    pub max_abs: f64,
    pub max_rel: f64,
    /// mean|out − ref| / mean|ref|.
    pub mean_rel_l1: f64,
    pub non_finite: usize,
}

impl Deviation {
    pub fn passed(&self) -> bool {
        self.mismatches == 0
    }
}

/// Compares `out` with `reference` element by element.
pub fn compare(out: &[f32], reference: &[f32], tol: Tolerance) -> Deviation {
    let n = out.len().min(reference.len());
    let mut result = Deviation {
        elements: n,
        mismatches: out.len().abs_diff(reference.len()),
        first_mismatch: None,
        max_abs: 0.0,
        max_rel: 0.0,
        mean_rel_l1: 0.0,
        non_finite: 0,
    };
    let (mut sum_err, mut sum_ref) = (0.0f64, 0.0f64);
    for i in 0..n {
        let (o, r) = (out[i] as f64, reference[i] as f64);
        let err = (o - r).abs();
        let ok = o.is_finite() && err <= tol.atol + tol.rtol * r.abs();
        if !o.is_finite() {
            result.non_finite += 1;
        }
        if !ok {
            result.mismatches += 1;
            result.first_mismatch.get_or_insert(i);
        }
        if err.is_finite() {
            result.max_abs = result.max_abs.max(err);
            if r != 0.0 {
                result.max_rel = result.max_rel.max(err / r.abs());
            }
            sum_err += err;
        }
        sum_ref += r.abs();
    }
    result.mean_rel_l1 = if sum_ref > 0.0 {
        sum_err / sum_ref
    } else {
        0.0
    };
    result
}

/// Cosine similarity in f64; 0 when either side is all zeros, NaN when any value is.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64, y as f64);
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na.is_nan() || nb.is_nan() || dot.is_nan() {
        return f64::NAN;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_keeps_the_largest_value_to_seven_bits() {
        let mut block = [1.0f32, 0.5, 0.01, -0.75, 0.0, 0.126, 3.0e-3, -1.0];
        bfp16_block(&mut block);
        // Step is 2^(0 − 6) = 1/64: values snap to multiples of 1/64.
        assert_eq!(block, [1.0, 0.5, 0.015625, -0.75, 0.0, 0.125, 0.0, -1.0]);
    }

    #[test]
    fn mantissa_clamps_at_the_top_of_the_range() {
        // 1.999 / (1/64) = 127.94 rounds to 128, which does not fit: clamps to 127.
        let mut block = [1.999f32, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        bfp16_block(&mut block);
        assert_eq!(block[0], 127.0 / 64.0);
    }

    #[test]
    fn exponents_of_subnormals() {
        assert_eq!(exponent_of(1.0), 0);
        assert_eq!(exponent_of(0.75), -1);
        assert_eq!(exponent_of(f32::from_bits(1)), -149);
    }

    #[test]
    fn gate_counts_mismatches() {
        let tol = tolerance(Kernel::Gemv, Precision::Bf16);
        let c = compare(&[1.0, 2.0, 0.0015, f32::NAN], &[1.0, 2.1, 0.0, 0.0], tol);
        assert_eq!(c.mismatches, 3);
        assert_eq!(c.first_mismatch, Some(1));
        assert_eq!(c.non_finite, 1);
    }
}
