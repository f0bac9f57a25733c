//! Seeded random weights for a config alone, so full-size models can be
//! deployed and timed without a model hub. Every value depends only on
//! (seed, tensor name, position): each tensor is cut into fixed chunks with a
//! stream of their own, generated in parallel, so the result is identical
//! whatever the thread count or generation order.
//!
//! Scales keep activations O(1) through the layers, as the shared fixtures do:
//! embeddings and projections N(0, 1/fan_in), norm weights exp(N(0, 0.25²)),
//! biases N(0, 0.5²) (a LayerNorm's N(0, 0.2²)), and a final norm scaled so
//! logits have a std near 3.5.
//! Where norms apply `(1 + w)` (Gemma) the stored w is that draw minus one, so
//! the factor a row is multiplied by has the same law in every family.

use std::convert::Infallible;

use super::arch::{Architecture, NormWeight};
use super::tensor::BfTensor;
use super::weights::{build, TensorRole, TensorSpec, Weights};
use crate::bf16;
use crate::rng::SplitMix64;

/// Elements per random stream; part of the generated values' definition.
const CHUNK: usize = 1 << 16;
/// Logit standard deviation the final norm aims for (as in the fixtures).
const LOGIT_STD: f32 = 3.5;

/// Generates every tensor of `arch` under `seed`, as bf16.
pub fn random_weights(arch: &Architecture, seed: u64) -> Weights {
    let result: Result<Weights, Infallible> = build(arch, &mut |spec: &TensorSpec| {
        Ok(random_tensor(arch, spec, seed))
    });
    match result {
        Ok(weights) => weights,
        Err(never) => match never {},
    }
}

fn random_tensor(arch: &Architecture, spec: &TensorSpec, seed: u64) -> BfTensor {
    let law = Law::of(arch, spec.role);
    BfTensor::generate(
        spec.name.clone(),
        spec.shape.clone(),
        CHUNK,
        |chunk, out| {
            let mut rng = SplitMix64::for_stream(seed, &format!("{}#{chunk}", spec.name));
            law.fill(&mut rng, out);
        },
    )
}

/// The distribution of one tensor's values, from a standard normal draw z.
#[derive(Debug, Clone, Copy)]
enum Law {
    /// `scale · z`
    Normal { scale: f32 },
    /// `factor · exp(scale · z) + offset`: around `factor + offset` (norm
    /// weights; offset −1 where the norm adds one back).
    LogNormal {
        scale: f32,
        factor: f32,
        offset: f32,
    },
}

impl Law {
    fn of(arch: &Architecture, role: TensorRole) -> Self {
        let offset = match arch.norm_weight {
            NormWeight::Direct | NormWeight::Absent => 0.0,
            NormWeight::OffsetOne => -1.0,
        };
        match role {
            TensorRole::Embedding => Law::Normal {
                scale: 1.0 / (arch.hidden_size as f32).sqrt(),
            },
            TensorRole::Projection(fan_in) => Law::Normal {
                scale: 1.0 / (fan_in as f32).sqrt(),
            },
            TensorRole::Norm => Law::LogNormal {
                scale: 0.25,
                factor: 1.0,
                offset,
            },
            TensorRole::FinalNorm => Law::LogNormal {
                scale: 0.25,
                factor: LOGIT_STD,
                offset,
            },
            TensorRole::Bias => Law::Normal { scale: 0.5 },
            TensorRole::NormBias => Law::Normal { scale: 0.2 },
        }
    }

    /// Separate loops per law: the exponential must not be paid for the
    /// billions of projection weights.
    fn fill(self, rng: &mut SplitMix64, out: &mut [u16]) {
        match self {
            Law::Normal { scale } => {
                for b in out {
                    *b = bf16::from_f32(scale * rng.next_normal());
                }
            }
            Law::LogNormal {
                scale,
                factor,
                offset,
            } => {
                for b in out {
                    *b = bf16::from_f32(factor * (scale * rng.next_normal()).exp() + offset);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::parse_config;

    fn tiny() -> Architecture {
        parse_config(
            r#"{"model_type":"qwen2","num_hidden_layers":1,"hidden_size":32,
                "intermediate_size":64,"num_attention_heads":4,"num_key_value_heads":2,
                "vocab_size":100000}"#,
        )
        .unwrap()
    }

    #[test]
    fn same_seed_same_bits_other_seed_other_bits() {
        let arch = tiny();
        let a = random_weights(&arch, 7);
        let b = random_weights(&arch, 7);
        let c = random_weights(&arch, 8);
        assert_eq!(a.embed_tokens.bits(), b.embed_tokens.bits());
        assert_ne!(a.embed_tokens.bits(), c.embed_tokens.bits());
        assert!(a.layers[0].q_bias.is_some());
    }

    #[test]
    fn bits_do_not_depend_on_thread_count() {
        let arch = tiny();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let single = pool.install(|| random_weights(&arch, 3));
        let many = random_weights(&arch, 3);
        assert_eq!(single.embed_tokens.bits(), many.embed_tokens.bits());
    }

    #[test]
    fn projection_scale_follows_fan_in() {
        let arch = tiny();
        let w = random_weights(&arch, 1);
        let values = w.embed_tokens.to_f32_vec();
        let var = values.iter().map(|v| v * v).sum::<f32>() / values.len() as f32;
        assert!((var * arch.hidden_size as f32 - 1.0).abs() < 0.05, "{var}");
    }
}
