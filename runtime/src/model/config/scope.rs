//! What a config is refused for, naming the field that gave it away: a model
//! that is not a dense decoder-only transformer (checked before anything else
//! is read), an unknown `model_type` or class, and variant features the
//! runtime does not implement (Gemma's soft-capping, extra biases).

use serde_json::Value;

use super::super::arch::Family;
use super::{Config, ConfigError};

impl Config<'_> {
    /// Refuses what is not a dense decoder-only transformer, before anything else
    /// is read, so the reason names the feature rather than a missing size.
    pub(super) fn check_scope(&self) -> Result<(), ConfigError> {
        const MOE_KEYS: &[&str] = &[
            "num_experts",
            "num_local_experts",
            "n_routed_experts",
            "moe_intermediate_size",
            "num_experts_per_tok",
        ];
        for key in MOE_KEYS {
            if self.is_set(key) {
                return Err(self.out_of_scope(
                    "mixture of experts",
                    key,
                    "routed expert MLPs are not supported: the reference, the plans and the cost \
                     model have one dense FFN per layer, and routing tokens to experts is \
                     data-dependent control flow neither expresses"
                        .into(),
                ));
            }
        }
        for key in ["kv_lora_rank", "q_lora_rank"] {
            if self.is_set(key) {
                return Err(self.out_of_scope(
                    "multi-head latent attention",
                    key,
                    "low-rank compressed KV (MLA) is not supported: the attention kernels and the \
                     KV cache take full per-head keys and values (MHA/GQA only)"
                        .into(),
                ));
            }
        }
        if self.is_set("is_encoder_decoder") {
            return Err(self.out_of_scope(
                "encoder-decoder",
                "is_encoder_decoder",
                "only decoder-only models are supported: the reference and the plans have no \
                 encoder pass and no cross-attention"
                    .into(),
            ));
        }
        for key in ["encoder_layers", "decoder_layers", "num_decoder_layers"] {
            if self.is_set(key) {
                return Err(self.out_of_scope(
                    "encoder-decoder",
                    key,
                    "separate encoder and decoder stacks; only decoder-only models are supported: \
                     the reference and the plans have no encoder pass and no cross-attention"
                        .into(),
                ));
            }
        }
        for key in [
            "partial_rotary_factor",
            "rope_parameters.partial_rotary_factor",
        ] {
            if let Some(factor) = self.get(key).and_then(Value::as_f64) {
                if factor != 1.0 {
                    return Err(self.out_of_scope(
                        "partial rotary embeddings",
                        key,
                        format!(
                            "RoPE on a fraction {factor} of each head is not supported: the \
                             reference and the NPU RoPE kernel rotate every dimension pair of a head"
                        ),
                    ));
                }
            }
        }
        for key in ["text_config", "vision_config", "audio_config"] {
            if self.is_set(key) {
                return Err(self.out_of_scope(
                    "multimodal wrapper",
                    key,
                    "this config wraps several models; point at a text-only decoder config".into(),
                ));
            }
        }
        if self.is_set("quantization_config") {
            return Err(self.out_of_scope(
                "quantized checkpoint",
                "quantization_config",
                "weights must be bf16, f16 or f32 tensors, not a quantized format".into(),
            ));
        }
        Ok(())
    }

    pub(super) fn family(&self) -> Result<Family, ConfigError> {
        let model_type = self
            .opt_str("model_type")?
            .ok_or_else(|| self.missing("model_type"))?;
        if let Some((_, family)) = FAMILIES.iter().find(|(name, _)| *name == model_type) {
            return Ok(*family);
        }
        let lower = model_type.to_ascii_lowercase();
        if lower.contains("moe") || lower == "mixtral" || lower.starts_with("deepseek") {
            return Err(self.out_of_scope(
                "mixture of experts",
                "model_type",
                format!("`{model_type}` is a mixture-of-experts family; only dense decoder-only models are supported"),
            ));
        }
        let known: Vec<&str> = FAMILIES.iter().map(|(name, _)| *name).collect();
        Err(self.unsupported(
            "model_type",
            format!("\"{model_type}\""),
            format!("known families are {}", known.join(", ")),
        ))
    }

    pub(super) fn class_name(&self, family: Family) -> Result<String, ConfigError> {
        let default = match family {
            Family::Llama => "LlamaForCausalLM",
            Family::Qwen2 => "Qwen2ForCausalLM",
            Family::Qwen3 => "Qwen3ForCausalLM",
            Family::Gemma3Text => "Gemma3ForCausalLM",
        };
        let Some(list) = self.get("architectures") else {
            return Ok(default.to_string());
        };
        let first = list.as_array().and_then(|a| a.first()).ok_or_else(|| {
            self.wrong_type("architectures", "a non-empty list of class names", list)
        })?;
        let name = first
            .as_str()
            .ok_or_else(|| self.wrong_type("architectures", "a list of strings", list))?;
        if !name.ends_with("ForCausalLM") {
            return Err(self.unsupported(
                "architectures",
                format!("\"{name}\""),
                "only *ForCausalLM checkpoints (a decoder with an LM head) can be run",
            ));
        }
        Ok(name.to_string())
    }

    /// Gemma variants whose extra features are not implemented: Gemma 2's
    /// logit soft-capping and EmbeddingGemma's bidirectional attention.
    pub(super) fn check_gemma(&self, family: Family) -> Result<(), ConfigError> {
        if family != Family::Gemma3Text {
            return Ok(());
        }
        for key in ["attn_logit_softcapping", "final_logit_softcapping"] {
            if let Some(v) = self.opt_f64(key)? {
                return Err(self.unsupported(
                    key,
                    v,
                    "logit soft-capping (tanh(x / cap) · cap) is not implemented; Gemma 3 \
                     checkpoints set it to null",
                ));
            }
        }
        if self.opt_bool("use_bidirectional_attention")? == Some(true) {
            return Err(self.unsupported(
                "use_bidirectional_attention",
                true,
                "bidirectional (encoder-style) attention is not a causal decoder",
            ));
        }
        Ok(())
    }

    /// Bias layouts the reference executes: none, or q/k/v only (Qwen2, always).
    /// Llama/Qwen3 `attention_bias: true` also biases o_proj, and `mlp_bias`
    /// biases the MLP; neither occurs in the supported checkpoints.
    pub(super) fn check_biases(&self, family: Family) -> Result<(), ConfigError> {
        if family != Family::Qwen2 && self.opt_bool("attention_bias")? == Some(true) {
            return Err(self.unsupported(
                "attention_bias",
                true,
                "bias on all four attention projections (including o_proj) is not implemented",
            ));
        }
        if self.opt_bool("mlp_bias")? == Some(true) {
            return Err(self.unsupported(
                "mlp_bias",
                true,
                "biased MLP projections are not implemented",
            ));
        }
        Ok(())
    }
}

/// Supported `model_type` values and their families.
const FAMILIES: &[(&str, Family)] = &[
    ("llama", Family::Llama),
    ("qwen2", Family::Qwen2),
    ("qwen3", Family::Qwen3),
    ("gemma3_text", Family::Gemma3Text),
];
