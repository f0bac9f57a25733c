//! The model features a lesson may depend on: the names a lesson's condition reads
//! (`if qk_norm and head_dim >= 128`), and their values for one model.
//!
//! A lesson learnt on one model is meant for the next, but some hold only for
//! models of a kind: an MHA model's fused Q/K/V, Qwen3's per-head QK-norm, a Down
//! GEMV whose K is longer than one launch streams. Such a lesson carries a
//! condition over these names. The front end checks every name and its use
//! against this table (a flag is a truth value, a size a number), the distiller
//! lowers the condition into `bundle.json` ([`crate::bundle::Condition`]), and the
//! executor evaluates it on the model it deploys ([`facts`]), applying the lesson
//! only where it holds. Flags are the code paths of `model::features` under their
//! condition words; sizes are read off the resolved architecture and the device.
//! This table is the one list: nothing else names a feature.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::arch::Architecture;
use crate::model::features::{features, Feature};
use crate::xdna2::device::Device;

/// What a name holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FactKind {
    /// A truth value: the model takes that code path or not.
    Flag,
    /// A whole number: a width, a head count, a device limit.
    Size,
}

/// One name a condition may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FactSpec {
    pub name: &'static str,
    pub kind: FactKind,
    /// What it is.
    pub doc: &'static str,
    /// Where an engineer reads it: the `config.json` field, or how it is derived.
    pub source: &'static str,
}

const fn size(name: &'static str, doc: &'static str, source: &'static str) -> FactSpec {
    FactSpec {
        name,
        kind: FactKind::Size,
        doc,
        source,
    }
}

/// The sizes a condition may read.
pub const SIZES: &[FactSpec] = &[
    size("hidden_size", "model width", "`hidden_size`"),
    size("intermediate_size", "FFN width", "`intermediate_size`"),
    size(
        "head_dim",
        "attention head size",
        "`head_dim`, else `hidden_size / num_attention_heads`",
    ),
    size("n_heads", "query heads", "`num_attention_heads`"),
    size(
        "n_kv_heads",
        "key/value heads",
        "`num_key_value_heads`, else `num_attention_heads`",
    ),
    size("q_dim", "width of the query projection", "n_heads x head_dim"),
    size(
        "kv_dim",
        "width of each key and value projection",
        "n_kv_heads x head_dim",
    ),
    size("vocab_size", "vocabulary size", "`vocab_size`"),
    size("n_layers", "decoder layers", "`num_hidden_layers`"),
    size(
        "gemv_k_values",
        "distinct reduction lengths (K) of one layer's decode GEMVs",
        "how many of hidden_size (Q, K, V, Gate, Up), q_dim (O) and intermediate_size (Down) differ",
    ),
    size(
        "gemv_k_limit",
        "longest GEMV reduction one launch streams",
        "npu2: the DMA repeat limit (255) x the 64-element K granule",
    ),
];

/// The flag a feature is read as.
fn flag(feature: Feature) -> FactSpec {
    FactSpec {
        name: feature.word(),
        kind: FactKind::Flag,
        doc: feature.describe(),
        source: flag_source(feature),
    }
}

/// Where a flag comes from in `config.json`.
fn flag_source(feature: Feature) -> &'static str {
    match feature {
        Feature::RopeDefault => "no `rope_scaling`",
        Feature::RopeLlama3 => "`rope_scaling.rope_type` = llama3",
        Feature::RopeLinear => "`rope_scaling.rope_type` = linear",
        Feature::MultiHeadAttention => "`num_key_value_heads` = `num_attention_heads`",
        Feature::GroupedQueryAttention => "1 < `num_key_value_heads` < `num_attention_heads`",
        Feature::MultiQueryAttention => "`num_key_value_heads` = 1",
        Feature::ExplicitHeadDim => "`head_dim` x `num_attention_heads` != `hidden_size`",
        Feature::QkvBias => "a qwen2 `model_type`, or stablelm with `use_qkv_bias` = true",
        Feature::QkNorm => "a qwen3 or gemma3 `model_type` (q_norm, k_norm weights)",
        Feature::TiedEmbeddings => "`tie_word_embeddings` = true",
        Feature::UntiedEmbeddings => "`tie_word_embeddings` = false",
        Feature::Silu => "`hidden_act` = silu",
        Feature::GeluTanh => "`hidden_act` = gelu_pytorch_tanh",
        Feature::OffsetOneNorm => "a Gemma `model_type`",
        Feature::SandwichNorms => "a Gemma `model_type`",
        Feature::ScaledEmbeddings => "a Gemma `model_type`",
        Feature::SlidingWindow => "`sliding_window` on some layers",
        Feature::LocalRope => "`rope_local_base_freq`",
        Feature::QueryPreAttnScalar => "`query_pre_attn_scalar`",
        Feature::LayerNorm => "a stablelm or olmo `model_type`",
        Feature::NormBias => "a stablelm `model_type`",
        Feature::NonParametricNorm => "an olmo `model_type`",
        Feature::PartialRotary => {
            "`partial_rotary_factor` (stablelm 0.25 unless set; phi3 when below 1)"
        }
        Feature::AttentionSoftcap => "`attn_logit_softcapping` (gemma2)",
        Feature::FinalLogitSoftcap => "`final_logit_softcapping` (gemma2)",
        Feature::FusedProjections => "a phi3 `model_type` (`qkv_proj`, `gate_up_proj`)",
    }
}

/// Every name a condition may read: the sizes, then the flags.
pub fn vocabulary() -> Vec<FactSpec> {
    SIZES
        .iter()
        .copied()
        .chain(Feature::ALL.into_iter().map(flag))
        .collect()
}

/// The name's row, if it is one.
pub fn fact_spec(name: &str) -> Option<FactSpec> {
    SIZES.iter().copied().find(|s| s.name == name).or_else(|| {
        Feature::ALL
            .into_iter()
            .find(|f| f.word() == name)
            .map(flag)
    })
}

/// The value of every name for one model on one device: sizes as numbers, flags
/// as 1 (taken) or 0.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts(BTreeMap<String, f64>);

impl Facts {
    pub fn values(&self) -> &BTreeMap<String, f64> {
        &self.0
    }

    /// `qk_norm = false`, `head_dim = 64`: a name with its value, as a report shows it.
    pub fn describe(&self, name: &str) -> String {
        match (fact_spec(name).map(|s| s.kind), self.0.get(name)) {
            (Some(FactKind::Flag), Some(v)) => format!("{name} = {}", *v != 0.0),
            (_, Some(v)) => format!("{name} = {v}"),
            (_, None) => format!("{name} unknown"),
        }
    }
}

/// Every name's value for `arch` on `device`.
pub fn facts(arch: &Architecture, device: &Device) -> Facts {
    let taken = features(arch);
    let q_dim = arch.q_dim();
    let mut ks = vec![arch.hidden_size, q_dim, arch.intermediate_size];
    ks.sort_unstable();
    ks.dedup();
    let sizes = [
        ("hidden_size", arch.hidden_size),
        ("intermediate_size", arch.intermediate_size),
        ("head_dim", arch.head_dim),
        ("n_heads", arch.num_heads),
        ("n_kv_heads", arch.num_kv_heads),
        ("q_dim", q_dim),
        ("kv_dim", arch.kv_dim()),
        ("vocab_size", arch.vocab_size),
        ("n_layers", arch.num_layers),
        ("gemv_k_values", ks.len()),
        ("gemv_k_limit", device.limits.gemv_k_max()),
    ];
    let mut values: BTreeMap<String, f64> = sizes
        .into_iter()
        .map(|(name, v)| (name.to_string(), v as f64))
        .collect();
    for feature in Feature::ALL {
        let on = if taken.contains(&feature) { 1.0 } else { 0.0 };
        values.insert(feature.word().to_string(), on);
    }
    Facts(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::load_config;

    fn arch(dir: &str) -> Architecture {
        let path = format!(
            "{}/../../shared/models/{dir}/config.json",
            env!("CARGO_MANIFEST_DIR")
        );
        load_config(std::path::Path::new(&path)).expect("config")
    }

    #[test]
    fn every_name_has_a_value_and_the_values_follow_the_config() {
        let device = Device::npu2();
        let llama = facts(&arch("llama-3.2-1b"), &device);
        for spec in vocabulary() {
            assert!(llama.values().contains_key(spec.name), "{}", spec.name);
            assert_eq!(fact_spec(spec.name), Some(spec));
        }
        assert_eq!(llama.values().len(), vocabulary().len());
        assert_eq!(llama.describe("mha"), "mha = false");
        assert_eq!(llama.describe("head_dim"), "head_dim = 64");
        assert_eq!(llama.describe("gemv_k_values"), "gemv_k_values = 2");
        assert_eq!(llama.describe("gemv_k_limit"), "gemv_k_limit = 16320");
        let smol = facts(&arch("smollm2-1.7b"), &device);
        assert_eq!(smol.describe("mha"), "mha = true");
        let qwen3 = facts(&arch("qwen3-4b"), &device);
        assert_eq!(qwen3.describe("qk_norm"), "qk_norm = true");
        assert_eq!(qwen3.describe("q_dim"), "q_dim = 4096");
        assert_eq!(qwen3.describe("gemv_k_values"), "gemv_k_values = 3");
        assert_eq!(fact_spec("qk_norms"), None);
    }

    #[test]
    fn names_are_unique_words_of_the_language() {
        let names: std::collections::BTreeSet<&str> = vocabulary().iter().map(|s| s.name).collect();
        assert_eq!(names.len(), vocabulary().len());
        for name in names {
            assert!(!crate::ops::is_keyword(name), "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{name}"
            );
        }
    }
}
