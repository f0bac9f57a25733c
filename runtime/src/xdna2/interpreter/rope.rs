//! The NPU side's RoPE frequencies, computed from the model's config by code of
//! its own. The CPU reference (`model::oracle::blocks`) has its own f32 version of
//! the same formulas; the two are written independently on purpose, so a mistake
//! in either (llama3 scaling left out, a wrong band edge) shows up as a
//! disagreement in phase 1's RoPE kernel check and the phase 3 decode gate instead
//! of passing on both sides. Here the arithmetic is f64, rounded to f32 once per
//! frequency, and the llama3 bands are tested on the frequency, not the
//! wavelength.

use std::f64::consts::TAU;

use crate::model::arch::{Architecture, Rope, RopeScaling};

/// `theta^(-2j / head_dim)` for `j < head_dim / 2`, in f64 (`head_dim` the
/// dimensions RoPE rotates: all of a head, or its partial rotary part).
fn base_frequencies(theta: f64, head_dim: usize) -> Vec<f64> {
    let d = head_dim.max(1) as f64;
    (0..head_dim / 2)
        .map(|j| (-((2 * j) as f64) / d * theta.ln()).exp())
        .collect()
}

/// Llama 3's band scaling of one frequency: below the low band edge the
/// frequency is divided by `factor`, above the high edge kept, in between
/// interpolated linearly in `original · f / 2π`.
fn llama3_scaled(f: f64, factor: f64, low: f64, high: f64, original: f64) -> f64 {
    let cycles = original * f / TAU;
    if cycles < low {
        f / factor
    } else if cycles > high {
        f
    } else {
        let smooth = (cycles - low) / (high - low);
        f * ((1.0 - smooth) / factor + smooth)
    }
}

/// The RoPE `arch` rotates with: the global one, or the local base of its
/// sliding-window layers (Gemma-3's `rope_local_base_freq`) when `local`.
fn rope_of(arch: &Architecture, local: bool) -> Rope {
    match (&arch.local_rope, local) {
        (Some(rope), true) => rope.clone(),
        _ => Rope {
            theta: arch.rope_theta,
            scaling: arch.rope_scaling.clone(),
        },
    }
}

/// The frequencies of `arch`'s global (or `local`) RoPE with its scaling applied.
pub fn scaled_frequencies(arch: &Architecture, local: bool) -> Vec<f32> {
    let rope = rope_of(arch, local);
    let base = base_frequencies(rope.theta, arch.rotary_dim());
    let scaled: Vec<f64> = match rope.scaling {
        RopeScaling::Default => base,
        RopeScaling::Linear { factor } => base.iter().map(|f| f / factor).collect(),
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        } => base
            .iter()
            .map(|&f| {
                llama3_scaled(
                    f,
                    factor,
                    low_freq_factor,
                    high_freq_factor,
                    original_max_position_embeddings as f64,
                )
            })
            .collect(),
    };
    scaled.into_iter().map(|f| f as f32).collect()
}

/// The frequencies without any scaling (what a table that forgets it holds).
pub fn unscaled_frequencies(arch: &Architecture, local: bool) -> Vec<f32> {
    base_frequencies(rope_of(arch, local).theta, arch.rotary_dim())
        .into_iter()
        .map(|f| f as f32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Llama-3.2's parameters: the lowest frequencies slowed 32x, the highest kept,
    /// the band between strictly inside.
    #[test]
    fn llama3_bands_divide_keep_and_interpolate() {
        let (factor, low, high, original) = (32.0, 1.0, 4.0, 8192.0);
        let slow = TAU / 100_000.0;
        assert_eq!(
            llama3_scaled(slow, factor, low, high, original),
            slow / 32.0
        );
        let fast = TAU / 100.0;
        assert_eq!(llama3_scaled(fast, factor, low, high, original), fast);
        let mid = TAU / 4096.0;
        let got = llama3_scaled(mid, factor, low, high, original);
        assert!(got > mid / 32.0 && got < mid, "{got}");
    }

    #[test]
    fn base_frequencies_fall_from_one_to_near_one_over_theta() {
        let f = base_frequencies(10_000.0, 64);
        assert_eq!(f.len(), 32);
        assert_eq!(f[0], 1.0);
        assert!((f[31] - 10_000f64.powf(-62.0 / 64.0)).abs() < 1e-15);
    }
}
