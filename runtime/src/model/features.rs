//! The code paths a decoder takes through the CPU reference and the NPU path,
//! read off its architecture: the RoPE scaling, the attention layout (MHA, GQA,
//! MQA), bias, Q/K norm, tied or untied embeddings and the other switches a
//! config flips. A model without transformers outputs of its own is trusted
//! path by path: phase 0 names, for each path it uses, the transformers fixture
//! that exercises the same path and matches its reference outputs.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::arch::{Activation, Architecture, NormKind, NormWeight, RopeScaling};

/// One code path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Feature {
    RopeDefault,
    RopeLlama3,
    RopeLinear,
    /// One query head per KV head.
    MultiHeadAttention,
    /// Several query heads share each of several KV heads.
    GroupedQueryAttention,
    /// Every query head reads the single KV head.
    MultiQueryAttention,
    /// `head_dim` set apart from `hidden_size / num_heads`.
    ExplicitHeadDim,
    QkvBias,
    QkNorm,
    TiedEmbeddings,
    UntiedEmbeddings,
    Silu,
    GeluTanh,
    OffsetOneNorm,
    SandwichNorms,
    ScaledEmbeddings,
    SlidingWindow,
    LocalRope,
    QueryPreAttnScalar,
    LayerNorm,
    NormBias,
    NonParametricNorm,
    PartialRotary,
    AttentionSoftcap,
    FinalLogitSoftcap,
    FusedProjections,
}

impl Feature {
    pub const ALL: [Feature; 26] = [
        Feature::RopeDefault,
        Feature::RopeLlama3,
        Feature::RopeLinear,
        Feature::MultiHeadAttention,
        Feature::GroupedQueryAttention,
        Feature::MultiQueryAttention,
        Feature::ExplicitHeadDim,
        Feature::QkvBias,
        Feature::QkNorm,
        Feature::TiedEmbeddings,
        Feature::UntiedEmbeddings,
        Feature::Silu,
        Feature::GeluTanh,
        Feature::OffsetOneNorm,
        Feature::SandwichNorms,
        Feature::ScaledEmbeddings,
        Feature::SlidingWindow,
        Feature::LocalRope,
        Feature::QueryPreAttnScalar,
        Feature::LayerNorm,
        Feature::NormBias,
        Feature::NonParametricNorm,
        Feature::PartialRotary,
        Feature::AttentionSoftcap,
        Feature::FinalLogitSoftcap,
        Feature::FusedProjections,
    ];

    /// The name a lesson's condition reads it by (`if qk_norm`), see
    /// `ops::conditions`.
    pub fn word(self) -> &'static str {
        match self {
            Feature::RopeDefault => "rope_default",
            Feature::RopeLlama3 => "rope_llama3",
            Feature::RopeLinear => "rope_linear",
            Feature::MultiHeadAttention => "mha",
            Feature::GroupedQueryAttention => "gqa",
            Feature::MultiQueryAttention => "mqa",
            Feature::ExplicitHeadDim => "explicit_head_dim",
            Feature::QkvBias => "qkv_bias",
            Feature::QkNorm => "qk_norm",
            Feature::TiedEmbeddings => "tied_embeddings",
            Feature::UntiedEmbeddings => "untied_embeddings",
            Feature::Silu => "silu",
            Feature::GeluTanh => "gelu_tanh",
            Feature::OffsetOneNorm => "offset_one_norm",
            Feature::SandwichNorms => "sandwich_norms",
            Feature::ScaledEmbeddings => "scaled_embeddings",
            Feature::SlidingWindow => "sliding_window",
            Feature::LocalRope => "local_rope",
            Feature::QueryPreAttnScalar => "query_pre_attn_scalar",
            Feature::LayerNorm => "layer_norm",
            Feature::NormBias => "norm_bias",
            Feature::NonParametricNorm => "non_parametric_norm",
            Feature::PartialRotary => "partial_rotary",
            Feature::AttentionSoftcap => "attn_softcap",
            Feature::FinalLogitSoftcap => "final_logit_softcap",
            Feature::FusedProjections => "fused_projections",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Feature::RopeDefault => "RoPE without scaling",
            Feature::RopeLlama3 => "llama3 RoPE scaling",
            Feature::RopeLinear => "linear RoPE scaling",
            Feature::MultiHeadAttention => "multi-head attention (one query head per KV head)",
            Feature::GroupedQueryAttention => "grouped-query attention (several KV heads)",
            Feature::MultiQueryAttention => "multi-query attention (one KV head)",
            Feature::ExplicitHeadDim => "head_dim other than hidden_size / num_heads",
            Feature::QkvBias => "q/k/v projection bias",
            Feature::QkNorm => "per-head q/k RMSNorm",
            Feature::TiedEmbeddings => "tied embeddings (LM head = embedding matrix)",
            Feature::UntiedEmbeddings => "untied LM head",
            Feature::Silu => "SiLU-gated MLP",
            Feature::GeluTanh => "GELU-tanh-gated MLP",
            Feature::OffsetOneNorm => "(1 + w) RMSNorm",
            Feature::SandwichNorms => "sandwich norms",
            Feature::ScaledEmbeddings => "embeddings scaled by sqrt(hidden_size)",
            Feature::SlidingWindow => "sliding-window attention",
            Feature::LocalRope => "a local RoPE base on sliding-window layers",
            Feature::QueryPreAttnScalar => "query_pre_attn_scalar attention scale",
            Feature::LayerNorm => "LayerNorm (mean-subtracted) norms",
            Feature::NormBias => "a bias on every norm",
            Feature::NonParametricNorm => "norms without a weight",
            Feature::PartialRotary => "RoPE on part of each head",
            Feature::AttentionSoftcap => "attention score soft-capping",
            Feature::FinalLogitSoftcap => "final logit soft-capping",
            Feature::FusedProjections => "fused qkv and gate_up projections split on load",
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Every path `arch` takes.
pub fn features(arch: &Architecture) -> BTreeSet<Feature> {
    let mut out = BTreeSet::from([
        match arch.rope_scaling {
            RopeScaling::Default => Feature::RopeDefault,
            RopeScaling::Llama3 { .. } => Feature::RopeLlama3,
            RopeScaling::Linear { .. } => Feature::RopeLinear,
        },
        match (arch.num_kv_heads, arch.gqa_group()) {
            (1, _) => Feature::MultiQueryAttention,
            (_, 1) => Feature::MultiHeadAttention,
            _ => Feature::GroupedQueryAttention,
        },
        if arch.tie_word_embeddings {
            Feature::TiedEmbeddings
        } else {
            Feature::UntiedEmbeddings
        },
        match arch.activation {
            Activation::Silu => Feature::Silu,
            Activation::GeluTanh => Feature::GeluTanh,
        },
    ]);
    let switches = [
        (
            arch.head_dim * arch.num_heads != arch.hidden_size,
            Feature::ExplicitHeadDim,
        ),
        (arch.qkv_bias, Feature::QkvBias),
        (arch.qk_norm, Feature::QkNorm),
        (
            arch.norm_weight == NormWeight::OffsetOne,
            Feature::OffsetOneNorm,
        ),
        (arch.sandwich_norms, Feature::SandwichNorms),
        (arch.scale_embeddings, Feature::ScaledEmbeddings),
        (arch.sliding_window.is_some(), Feature::SlidingWindow),
        (arch.local_rope.is_some(), Feature::LocalRope),
        (
            arch.query_pre_attn_scalar.is_some(),
            Feature::QueryPreAttnScalar,
        ),
        (arch.norm_kind == NormKind::Layer, Feature::LayerNorm),
        (arch.norm_bias, Feature::NormBias),
        (
            arch.norm_weight == NormWeight::Absent,
            Feature::NonParametricNorm,
        ),
        (arch.partial_rotary_dim.is_some(), Feature::PartialRotary),
        (arch.attn_logit_softcap.is_some(), Feature::AttentionSoftcap),
        (
            arch.final_logit_softcap.is_some(),
            Feature::FinalLogitSoftcap,
        ),
        (arch.fused_projections, Feature::FusedProjections),
    ];
    out.extend(switches.into_iter().filter(|(on, _)| *on).map(|(_, f)| f));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::load_config;

    fn arch(dir: &str) -> Architecture {
        let path = format!(
            "{}/../../shared/{dir}/config.json",
            env!("CARGO_MANIFEST_DIR")
        );
        load_config(std::path::Path::new(&path)).expect("config")
    }

    #[test]
    fn the_paths_follow_the_config() {
        let llama = features(&arch("models/llama-3.2-1b"));
        assert!(llama.contains(&Feature::RopeLlama3));
        assert!(llama.contains(&Feature::GroupedQueryAttention));
        assert!(!llama.contains(&Feature::QkvBias));
        let qwen3 = features(&arch("models/qwen3-0.6b"));
        assert!(qwen3.contains(&Feature::QkNorm));
        assert!(qwen3.contains(&Feature::ExplicitHeadDim));
        assert!(qwen3.contains(&Feature::RopeDefault));
        assert!(features(&arch("models/qwen2.5-0.5b")).contains(&Feature::QkvBias));
        let smol = features(&arch("models/smollm2-1.7b"));
        assert!(smol.contains(&Feature::MultiHeadAttention));
        let mut untied = arch("models/smollm2-1.7b");
        untied.tie_word_embeddings = false;
        assert!(features(&untied).contains(&Feature::UntiedEmbeddings));
        assert!(features(&arch("fixtures/qwen25-odd")).contains(&Feature::MultiQueryAttention));
    }
}
