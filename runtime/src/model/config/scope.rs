//! What a config is refused for. Every blocking feature is collected, not only
//! the first: a model that is not a dense decoder-only transformer, an unknown
//! `model_type` or class, a key the family's transformers class would compute
//! with that the runtime does not (or that the family would silently ignore
//! although it changes the computation, as `sliding_window` on a config
//! relabelled `llama`). Each blocker names the field, its value, why it
//! blocks and what would lift it.

use serde_json::Value;

use super::super::arch::Family;
use super::{Blocker, Config, ConfigError};

/// Supported `model_type` values and their families.
const FAMILIES: &[(&str, Family)] = &[
    ("llama", Family::Llama),
    ("qwen2", Family::Qwen2),
    ("qwen3", Family::Qwen3),
    ("gemma3_text", Family::Gemma3Text),
    ("mistral", Family::Mistral),
    ("phi3", Family::Phi3),
    ("stablelm", Family::StableLm),
    ("olmo", Family::Olmo),
    ("gemma2", Family::Gemma2),
];

/// Where a new family is added.
const NEW_FAMILY: &str = "a family entry in runtime/src/model/config/scope.rs (tensor names, \
                          norms, MLP and attention layout) with its oracle path checked against a \
                          transformers fixture";

/// A key that changes what the model computes, the families whose
/// transformers classes read it (and whose path here implements it), and
/// why it blocks elsewhere.
struct ComputeKey {
    field: &'static str,
    feature: &'static str,
    honoured_by: &'static [Family],
    reason: &'static str,
    lift: &'static str,
}

use Family::*;

/// Partial rotation, which two spellings of the key ask for.
const PARTIAL_ROTARY: ComputeKey = ComputeKey {
    field: "",
    feature: "partial rotary embeddings",
    honoured_by: &[StableLm, Phi3],
    reason: "this family's attention rotates every dimension of a head, so the factor would \
             be dropped (or only half applied to the frequencies)",
    lift: "set `model_type` to a family that rotates part of each head (stablelm, phi3), or \
           add the partial rotation to this family's path",
};

const COMPUTE_KEYS: &[ComputeKey] = &[
    ComputeKey {
        field: "sliding_window",
        feature: "sliding-window attention",
        honoured_by: &[Mistral, Phi3, Gemma2, Gemma3Text, Qwen2, Qwen3],
        reason: "this family's transformers class ignores the key, so a checkpoint trained with a \
                 window would run with full attention",
        lift: "set `model_type` to the family the checkpoint was trained as (`mistral` attends \
               within the window on every layer), or set the key to null to run full attention \
               knowingly",
    },
    ComputeKey {
        field: "use_sliding_window",
        feature: "sliding-window attention",
        honoured_by: &[Qwen2, Qwen3],
        reason: "only the Qwen classes read `use_sliding_window`; this family would ignore it",
        lift: "set `model_type` to the family the checkpoint was trained as, or set the key to \
               false",
    },
    ComputeKey {
        field: "partial_rotary_factor",
        ..PARTIAL_ROTARY
    },
    ComputeKey {
        field: "rope_parameters.partial_rotary_factor",
        ..PARTIAL_ROTARY
    },
    ComputeKey {
        field: "rotary_pct",
        feature: "partial rotary embeddings (GPT-NeoX layout)",
        honoured_by: &[],
        reason: "`rotary_pct` belongs to GPT-NeoX-style models, whose fused, interleaved q/k/v \
                 layout no family here reads",
        lift: "a GPT-NeoX family entry (interleaved fused QKV, parallel residual)",
    },
    ComputeKey {
        field: "attn_logit_softcapping",
        feature: "attention logit soft-capping",
        honoured_by: &[Gemma2, Gemma3Text],
        reason: "this family's attention applies no cap to its scores",
        lift: "set `model_type` to a Gemma family (gemma2), or add the cap to this family's path",
    },
    ComputeKey {
        field: "final_logit_softcapping",
        feature: "final logit soft-capping",
        honoured_by: &[Gemma2, Gemma3Text],
        reason: "this family's LM head applies no cap to its logits",
        lift: "set `model_type` to a Gemma family (gemma2), or add the cap to this family's path",
    },
    ComputeKey {
        field: "query_pre_attn_scalar",
        feature: "query_pre_attn_scalar attention scale",
        honoured_by: &[Gemma2, Gemma3Text],
        reason: "this family scales attention scores by head_dim^-1/2 whatever the key says",
        lift: "set `model_type` to a Gemma family, or remove the key if head_dim^-1/2 is meant",
    },
    ComputeKey {
        field: "use_qkv_bias",
        feature: "q/k/v projection bias",
        honoured_by: &[StableLm],
        reason: "only StableLM reads `use_qkv_bias`; this family would load no bias",
        lift: "set `model_type` to stablelm, or set the key to false if the checkpoint has no \
               q/k/v bias",
    },
    ComputeKey {
        field: "qk_layernorm",
        feature: "per-head q/k LayerNorm",
        honoured_by: &[],
        reason: "StableLM's per-head LayerNorm on q and k (one weight per head) is implemented \
                 neither in the reference nor in the NPU plans",
        lift: "a per-head LayerNorm in the oracle's attention block and a q/k LayerNorm launch \
               in the plans (as `qk_rmsnorm` is for Qwen3)",
    },
    ComputeKey {
        field: "use_parallel_residual",
        feature: "parallel attention and MLP residual",
        honoured_by: &[],
        reason: "attention and MLP reading the same normed input and adding to one residual is \
                 not the sequential block the reference and the plans build",
        lift: "a parallel-residual layer in the oracle and an O+FFN group that adds both outputs",
    },
    ComputeKey {
        field: "clip_qkv",
        feature: "q/k/v clamping",
        honoured_by: &[],
        reason: "clamping the q/k/v projections to ±clip_qkv (OLMo) is implemented neither in \
                 the reference nor in the NPU plans",
        lift: "a clamp after the q/k/v projections in the oracle and a clamp launch (or host op) \
               in the plans",
    },
    ComputeKey {
        field: "logit_scale",
        feature: "logit scaling",
        honoured_by: &[],
        reason: "a multiplier on the logits (Cohere) is applied by no family here",
        lift: "a scaled LM head in the oracle and the plans",
    },
    ComputeKey {
        field: "logits_scaling",
        feature: "logit scaling",
        honoured_by: &[],
        reason: "a divisor on the logits (Granite) is applied by no family here",
        lift: "a scaled LM head in the oracle and the plans",
    },
    ComputeKey {
        field: "embedding_multiplier",
        feature: "embedding multiplier",
        honoured_by: &[],
        reason: "a multiplier on the embeddings (Granite) is applied by no family here",
        lift: "the multiplier in the oracle's embedding and the plans' embed host op",
    },
    ComputeKey {
        field: "residual_multiplier",
        feature: "residual multiplier",
        honoured_by: &[],
        reason: "a multiplier on each sublayer's output (Granite) is applied by no family here",
        lift: "the multiplier before each residual add in the oracle and the plans",
    },
    ComputeKey {
        field: "attention_multiplier",
        feature: "attention multiplier",
        honoured_by: &[],
        reason: "an attention score scale other than head_dim^-1/2 (Granite) is applied by no \
                 family here",
        lift: "the scale in the oracle's attention and the attention kernels",
    },
];

impl Config<'_> {
    /// Records one blocker (the refusal lists them all).
    pub(super) fn block(
        &self,
        feature: impl Into<String>,
        field: &str,
        value: impl ToString,
        reason: impl Into<String>,
        lift: impl Into<String>,
    ) {
        let blocker = Blocker {
            feature: feature.into(),
            field: field.to_string(),
            value: value.to_string(),
            reason: reason.into(),
            lift: lift.into(),
            at: super::fields::locate_key(self.source, field),
        };
        self.blockers.borrow_mut().push(blocker);
    }

    /// A found value, shortened for a blocker.
    fn shown(&self, field: &str) -> String {
        match self.get(field) {
            Some(Value::Array(_)) => "[…]".into(),
            Some(Value::Object(_)) => "{…}".into(),
            Some(v) => v.to_string(),
            None => "null".into(),
        }
    }

    /// Records every feature outside the dense decoder-only families, before
    /// anything else is read, so a refusal names the features rather than a
    /// missing size.
    pub(super) fn check_scope(&self) {
        const MOE_KEYS: &[&str] = &[
            "num_experts",
            "num_local_experts",
            "n_routed_experts",
            "moe_intermediate_size",
            "num_experts_per_tok",
        ];
        if let Some(key) = MOE_KEYS.iter().find(|key| self.is_set(key)) {
            self.block(
                "mixture of experts",
                key,
                self.shown(key),
                "routed expert MLPs are not supported: the reference, the plans and the cost \
                 model have one dense FFN per layer, and routing tokens to experts is \
                 data-dependent control flow neither expresses",
                "a router and per-expert FFNs in the oracle, expert GEMVs and a routing host op \
                 in the plans, and their costs",
            );
        }
        if let Some(key) = ["kv_lora_rank", "q_lora_rank"]
            .iter()
            .find(|key| self.is_set(key))
        {
            self.block(
                "multi-head latent attention",
                key,
                self.shown(key),
                "low-rank compressed KV (MLA) is not supported: the attention kernels and the \
                 KV cache take full per-head keys and values (MHA/GQA only)",
                "latent KV projections in the oracle and an MLA attention kernel with its cache",
            );
        }
        let encoder = [
            "is_encoder_decoder",
            "encoder_layers",
            "decoder_layers",
            "num_decoder_layers",
        ];
        if let Some(key) = encoder.iter().find(|key| self.is_set(key)) {
            self.block(
                "encoder-decoder",
                key,
                self.shown(key),
                "only decoder-only models are supported: the reference and the plans have no \
                 encoder pass and no cross-attention",
                "an encoder pass and cross-attention in the oracle and the plans",
            );
        }
        if let Some(key) = ["text_config", "vision_config", "audio_config"]
            .iter()
            .find(|key| self.is_set(key))
        {
            self.block(
                "multimodal wrapper",
                key,
                self.shown(key),
                "this config wraps several models",
                "point at the text decoder's own config (its `text_config` as a config.json)",
            );
        }
        if self.is_set("quantization_config") {
            self.block(
                "quantized checkpoint",
                "quantization_config",
                self.shown("quantization_config"),
                "weights must be bf16, f16 or f32 tensors, not a quantized format",
                "a dequantizing reader for the format (the GGUF reader does this for Q4_0, Q4_1 \
                 and Q8_0)",
            );
        }
    }

    /// The family `model_type` names. An unknown one is a blocker, recorded
    /// with what else the config shows; nothing more can be read then, so the
    /// refusal returns with every blocker found so far.
    pub(super) fn family(&self) -> Result<Family, ConfigError> {
        let model_type = self
            .opt_str("model_type")?
            .ok_or_else(|| self.missing("model_type"))?;
        if let Some((_, family)) = FAMILIES.iter().find(|(name, _)| *name == model_type) {
            return Ok(*family);
        }
        let lower = model_type.to_ascii_lowercase();
        let moe_named =
            lower.contains("moe") || lower == "mixtral" || lower.starts_with("deepseek");
        let already_moe = self
            .blockers
            .borrow()
            .iter()
            .any(|b| b.feature == "mixture of experts");
        if moe_named && !already_moe {
            self.block(
                "mixture of experts",
                "model_type",
                format!("\"{model_type}\""),
                format!("`{model_type}` is a mixture-of-experts family; only dense decoder-only models are supported"),
                "a router and per-expert FFNs in the oracle, expert GEMVs and a routing host op \
                 in the plans, and their costs",
            );
        }
        let known: Vec<&str> = FAMILIES.iter().map(|(name, _)| *name).collect();
        self.block(
            "unknown family",
            "model_type",
            format!("\"{model_type}\""),
            format!(
                "no family `{model_type}` (known: {}): its tensor names, norms and block layout \
                 are not known",
                known.join(", ")
            ),
            format!(
                "if the checkpoint is one of the known families under another name, set \
                 `model_type` to it; otherwise {NEW_FAMILY}"
            ),
        );
        self.unknown_family_signals();
        Err(ConfigError::Blocked {
            blockers: self.blockers.take(),
        })
    }

    /// What an unknown family's config shows about its block, so the refusal
    /// says more than the name.
    fn unknown_family_signals(&self) {
        if self.get("layer_norm_eps").is_some() || self.get("layer_norm_epsilon").is_some() {
            let field = if self.get("layer_norm_eps").is_some() {
                "layer_norm_eps"
            } else {
                "layer_norm_epsilon"
            };
            self.block(
                "LayerNorm",
                field,
                self.shown(field),
                "LayerNorm is implemented (stablelm, olmo), but which norms carry a weight and a \
                 bias is the family's to say",
                NEW_FAMILY,
            );
        }
        for field in ["n_embd", "d_model", "n_layer", "n_layers"] {
            if self.get(field).is_some() {
                self.block(
                    "non-Llama key names",
                    field,
                    self.shown(field),
                    "sizes are named as in GPT-2/OLMo-v0 style configs, which no family reads",
                    "a converted Hugging Face config (the transformers class of the checkpoint \
                     writes `hidden_size`, `num_hidden_layers`, …)",
                );
                break;
            }
        }
    }

    /// Records every computation-changing key the family's path does not
    /// implement or its transformers class would ignore.
    pub(super) fn check_compute_keys(&self, family: Family) {
        for key in COMPUTE_KEYS {
            if key.honoured_by.contains(&family) || !self.changes_computation(key.field) {
                continue;
            }
            let reason = if key.honoured_by.is_empty() {
                key.reason.to_string()
            } else {
                format!("`{}`: {}", family.model_type(), key.reason)
            };
            self.block(
                key.feature,
                key.field,
                self.shown(key.field),
                reason,
                key.lift,
            );
        }
        if family != Family::Qwen2 && self.opt_bool_lenient("attention_bias") {
            self.block(
                "bias on all four attention projections",
                "attention_bias",
                true,
                "bias on q, k, v and o_proj is not implemented (Qwen2's q/k/v bias and \
                 StableLM's `use_qkv_bias` are)",
                "an o_proj bias in the oracle and an add after the o_proj GEMM/GEMV in the plans",
            );
        }
        if self.opt_bool_lenient("mlp_bias") {
            self.block(
                "biased MLP projections",
                "mlp_bias",
                true,
                "biases on gate, up and down are not implemented",
                "the three biases in the oracle's MLP and adds after the MLP GEMMs/GEMVs",
            );
        }
        if self.opt_bool_lenient("use_bidirectional_attention") {
            self.block(
                "bidirectional attention",
                "use_bidirectional_attention",
                true,
                "bidirectional (encoder-style) attention is not a causal decoder",
                "a non-causal attention mask in the oracle and the attention kernels",
            );
        }
    }

    /// Whether `field` holds a value that changes the computation: a number
    /// other than the neutral one, `true`, a non-empty text or list.
    fn changes_computation(&self, field: &str) -> bool {
        match self.get(field) {
            None | Some(Value::Null) => false,
            Some(Value::Number(n))
                if field.ends_with("partial_rotary_factor") || field == "rotary_pct" =>
            {
                n.as_f64() != Some(1.0)
            }
            Some(Value::Number(n))
                if matches!(
                    field,
                    "logit_scale"
                        | "logits_scaling"
                        | "embedding_multiplier"
                        | "residual_multiplier"
                ) =>
            {
                n.as_f64() != Some(1.0)
            }
            _ => self.is_set(field),
        }
    }

    fn opt_bool_lenient(&self, field: &str) -> bool {
        self.get(field).and_then(Value::as_bool) == Some(true)
    }

    pub(super) fn class_name(&self, family: Family) -> Result<String, ConfigError> {
        let default = match family {
            Family::Llama => "LlamaForCausalLM",
            Family::Qwen2 => "Qwen2ForCausalLM",
            Family::Qwen3 => "Qwen3ForCausalLM",
            Family::Gemma3Text => "Gemma3ForCausalLM",
            Family::Mistral => "MistralForCausalLM",
            Family::Phi3 => "Phi3ForCausalLM",
            Family::StableLm => "StableLmForCausalLM",
            Family::Olmo => "OlmoForCausalLM",
            Family::Gemma2 => "Gemma2ForCausalLM",
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
            self.block(
                "not a causal LM head",
                "architectures",
                format!("\"{name}\""),
                "only *ForCausalLM checkpoints (a decoder with an LM head) can be run",
                "the checkpoint's causal-LM class (its `*ForCausalLM` config and weights)",
            );
        }
        Ok(name.to_string())
    }
}
