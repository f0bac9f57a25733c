//! The reference's building blocks as free functions, so other parts (the
//! emulator's per-op gates, kernel validation) compare against exactly what the
//! oracle computes. Each follows the transformers 5 eager float32 convention
//! that `shared/fixtures/README.md` records, operation by operation.

use super::linear::dot_f32;
use crate::bf16;
use crate::model::arch::{Activation, Architecture, NormKind, NormWeight, Rope, RopeScaling};

/// RMSNorm of one vector: `w · (x · 1/sqrt(mean(x²) + eps))`, in that order.
pub fn rms_norm(x: &[f32], weight: &[u16], eps: f32, out: &mut [f32]) {
    rms_norm_with(x, weight, NormWeight::Direct, eps, out);
}

/// RMSNorm of one vector with the weight applied as `style` says:
/// `factor(w) · (x · 1/sqrt(mean(x²) + eps))` (transformers' Gemma norm forms
/// `1 + w` in f32 and multiplies the normalised row by it, the same product).
pub fn rms_norm_with(x: &[f32], weight: &[u16], style: NormWeight, eps: f32, out: &mut [f32]) {
    let inv = inverse_rms(x, eps);
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(weight) {
        *o = style.factor(bf16::to_f32(w)) * (v * inv);
    }
}

/// RMSNorm in place, for each `weight.len()`-wide row of `x`, the weight
/// applied as `style` says; the weight is in f32 (a tensor's exact values:
/// widened bf16, or a GGUF file's F32).
pub fn rms_norm_rows_in_place(x: &mut [f32], weight: &[f32], style: NormWeight, eps: f32) {
    for row in x.chunks_exact_mut(weight.len()) {
        let inv = inverse_rms(row, eps);
        for (v, &w) in row.iter_mut().zip(weight) {
            *v = style.factor(w) * (*v * inv);
        }
    }
}

/// One norm as a model applies it, in place on each `cols`-wide row of `x`:
/// RMSNorm `factor(w) · x / sqrt(mean(x²) + eps)` or LayerNorm
/// `factor(w) · (x − mean) / sqrt(mean((x − mean)²) + eps)` (torch's biased
/// variance), then `+ b` when there is a bias. Without a weight the factor is 1
/// (OLMo's non-parametric LayerNorm).
pub fn norm_rows_in_place(
    x: &mut [f32],
    cols: usize,
    (kind, style, eps): (NormKind, NormWeight, f32),
    weight: Option<&[f32]>,
    bias: Option<&[f32]>,
) {
    for row in x.chunks_exact_mut(cols) {
        let (mean, inv) = match kind {
            NormKind::Rms => (0.0, inverse_rms(row, eps)),
            NormKind::Layer => layer_stats(row, eps),
        };
        for (i, v) in row.iter_mut().enumerate() {
            let factor = weight.map_or(1.0, |w| style.factor(w[i]));
            *v = factor * ((*v - mean) * inv);
            if let Some(b) = bias {
                *v += b[i];
            }
        }
    }
}

/// The mean and `1 / sqrt(var + eps)` of a row (biased variance, in f32).
pub fn layer_stats(x: &[f32], eps: f32) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = x.iter().sum::<f32>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    (mean, 1.0 / (var + eps).sqrt())
}

fn inverse_rms(x: &[f32], eps: f32) -> f32 {
    let mean_square = dot_f32(x, x) / x.len() as f32;
    1.0 / (mean_square + eps).sqrt()
}

/// `1 / theta^(2j / head_dim)` for j < head_dim/2, computed in f32 like
/// transformers' default RoPE initialisation.
pub fn default_inv_freq(theta: f64, head_dim: usize) -> Vec<f32> {
    let base = theta as f32;
    (0..head_dim / 2)
        .map(|j| 1.0 / base.powf((2 * j) as f32 / head_dim as f32))
        .collect()
}

/// Llama 3 frequency scaling (transformers `_compute_llama3_parameters`):
/// wavelengths longer than `original / low_freq_factor` are slowed by `factor`,
/// shorter than `original / high_freq_factor` kept, and the band between
/// interpolated smoothly. f32 throughout, as there.
pub fn llama3_inv_freq(
    inv_freq: &[f32],
    factor: f64,
    low_freq_factor: f64,
    high_freq_factor: f64,
    original_max_position_embeddings: u64,
) -> Vec<f32> {
    let (factor, low, high) = (
        factor as f32,
        low_freq_factor as f32,
        high_freq_factor as f32,
    );
    let original = original_max_position_embeddings as f32;
    let low_freq_wavelen = original / low;
    let high_freq_wavelen = original / high;
    inv_freq
        .iter()
        .map(|&f| {
            let wavelen = 2.0 * std::f32::consts::PI / f;
            if wavelen > low_freq_wavelen {
                f / factor
            } else if wavelen < high_freq_wavelen {
                f
            } else {
                let smooth = (original / wavelen - low) / (high - low);
                (1.0 - smooth) * f / factor + smooth * f
            }
        })
        .collect()
}

/// The inverse frequencies of `arch`'s global RoPE, scaling applied, over
/// the dimensions it rotates (all of a head, or the partial rotary part).
pub fn inv_freq(arch: &Architecture) -> Vec<f32> {
    rope_inv_freq(
        &Rope {
            theta: arch.rope_theta,
            scaling: arch.rope_scaling.clone(),
        },
        arch.rotary_dim(),
    )
}

/// The inverse frequencies layer `layer` rotates with (Gemma's sliding-window
/// layers use the local base).
pub fn layer_inv_freq(arch: &Architecture, layer: usize) -> Vec<f32> {
    rope_inv_freq(&arch.rope_of(layer), arch.rotary_dim())
}

/// The inverse frequencies of one RoPE, scaling applied.
pub fn rope_inv_freq(rope: &Rope, head_dim: usize) -> Vec<f32> {
    let base = default_inv_freq(rope.theta, head_dim);
    match rope.scaling {
        RopeScaling::Default => base,
        RopeScaling::Linear { factor } => base.iter().map(|f| f / factor as f32).collect(),
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        } => llama3_inv_freq(
            &base,
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        ),
    }
}

/// cos and sin of `position · inv_freq[j]`, the angle rounded to f32 first.
pub fn rope_angles(inv_freq: &[f32], position: usize) -> (Vec<f32>, Vec<f32>) {
    let p = position as f32;
    inv_freq
        .iter()
        .map(|&f| {
            let angle = p * f;
            (angle.cos(), angle.sin())
        })
        .unzip()
}

/// Rotates one head in the non-interleaved ("rotate_half") layout: dimension i
/// pairs with i + head_dim/2.
pub fn apply_rope(head: &mut [f32], cos: &[f32], sin: &[f32]) {
    let half = head.len() / 2;
    let (first, second) = head.split_at_mut(half);
    for j in 0..half {
        let (a, b) = (first[j], second[j]);
        first[j] = a * cos[j] - b * sin[j];
        second[j] = b * cos[j] + a * sin[j];
    }
}

/// Softmax in place, max-subtracted, in f32.
pub fn softmax_in_place(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in x.iter_mut() {
        *v /= sum;
    }
}

/// Attention of one query row over every key and value it sees (`[positions,
/// kv_dim]`, row-major: the caller slices the causal range, and the window on
/// sliding-window layers). Query head h reads KV head `h / (heads / kv_heads)`;
/// scores are `q·k · attention_scale` (`head_dim^-1/2`, or Gemma's
/// `query_pre_attn_scalar^-1/2`), soft-capped when the model caps them.
pub fn attention_row(
    arch: &Architecture,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    out: &mut [f32],
) {
    let (d, kv_dim, group) = (arch.head_dim, arch.kv_dim(), arch.gqa_group());
    let scale = arch.attention_scale();
    let cap = arch.attn_logit_softcap.map(|c| c as f32);
    let positions = keys.len() / kv_dim;
    let mut scores = vec![0.0f32; positions];
    for (h, out_head) in out.chunks_exact_mut(d).enumerate() {
        let q_head = &q[h * d..(h + 1) * d];
        let kv_offset = (h / group) * d;
        for (p, s) in scores.iter_mut().enumerate() {
            let k = &keys[p * kv_dim + kv_offset..][..d];
            *s = dot_f32(q_head, k) * scale;
            if let Some(cap) = cap {
                *s = softcap(*s, cap);
            }
        }
        softmax_in_place(&mut scores);
        out_head.fill(0.0);
        for (p, &weight) in scores.iter().enumerate() {
            let v = &values[p * kv_dim + kv_offset..][..d];
            for (o, &x) in out_head.iter_mut().zip(v) {
                *o += weight * x;
            }
        }
    }
}

/// `tanh(x / cap) · cap` (Gemma-2's soft-capping, in transformers' order).
pub fn softcap(x: f32, cap: f32) -> f32 {
    (x / cap).tanh() * cap
}

pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// GELU, tanh approximation (`gelu_pytorch_tanh`).
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)).tanh())
}

/// The gated MLP's middle: `act(gate) · up`, into `gate`.
pub fn gated_activation(activation: Activation, gate: &mut [f32], up: &[f32]) {
    let act = match activation {
        Activation::Silu => silu,
        Activation::GeluTanh => gelu_tanh,
    };
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = act(*g) * u;
    }
}

/// Index of the largest value (the first on ties); NaN never wins.
pub fn argmax(values: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] || values[best].is_nan() {
            best = i;
        }
    }
    best
}

/// The `k` largest values with their indices, largest first (lower index first
/// on ties).
pub fn top_k(values: &[f32], k: usize) -> Vec<(usize, f32)> {
    let mut indexed: Vec<(usize, f32)> = values.iter().copied().enumerate().collect();
    indexed.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    indexed.truncate(k);
    indexed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The llama3 formula on its own, with the real Llama-3.2 parameters
    /// (theta 5e5, head_dim 64, factor 32, low 1, high 4, original 8192).
    /// Expected values were computed independently with numpy float32 from
    /// transformers' `_compute_llama3_parameters`; they cover all three bands
    /// (j ≤ 14 kept, 15..=17 interpolated, j ≥ 18 divided by 32).
    #[test]
    fn llama3_inverse_frequencies_match_transformers() {
        let base = default_inv_freq(500_000.0, 64);
        let scaled = llama3_inv_freq(&base, 32.0, 1.0, 4.0, 8192);
        let expected: [(usize, f32, f32); 8] = [
            (0, 1.0, 1.0),
            (1, 0.663_601_2, 0.663_601_2),
            (14, 0.003_211_446, 0.003_211_446),
            (15, 0.002_131_119_6, 0.001_290_548),
            (16, 0.001_414_213_4, 0.000_429_556_7),
            (17, 0.000_938_473_85, 9.708_286e-5),
            (18, 0.000_622_772_44, 1.946_163_9e-5),
            (31, 3.013_858_3e-6, 9.418_307e-8),
        ];
        for (j, want_base, want_scaled) in expected {
            let close = |got: f32, want: f32| (got - want).abs() <= 2e-6 * want;
            assert!(close(base[j], want_base), "inv_freq[{j}] = {}", base[j]);
            assert!(
                close(scaled[j], want_scaled),
                "llama3 inv_freq[{j}] = {}",
                scaled[j]
            );
        }
        let kept = (0..32).filter(|&j| scaled[j] == base[j]).count();
        let divided = (0..32).filter(|&j| scaled[j] == base[j] / 32.0).count();
        assert_eq!((kept, 32 - kept - divided, divided), (15, 3, 14));
    }

    #[test]
    fn rope_rotates_pairs_half_apart() {
        let mut head = [1.0, 2.0, 3.0, 4.0];
        let angle = std::f32::consts::FRAC_PI_2;
        apply_rope(&mut head, &[angle.cos(), 1.0], &[angle.sin(), 0.0]);
        // Pair (0, 2) is rotated by 90°, pair (1, 3) by 0°.
        assert!((head[0] + 3.0).abs() < 1e-6 && (head[2] - 1.0).abs() < 1e-6);
        assert_eq!((head[1], head[3]), (2.0, 4.0));
    }

    #[test]
    fn top_k_orders_and_breaks_ties_by_index() {
        assert_eq!(top_k(&[1.0, 3.0, 3.0, -1.0], 2), vec![(1, 3.0), (2, 3.0)]);
        assert_eq!(argmax(&[f32::NAN, 1.0, 0.5]), 1);
    }
}
