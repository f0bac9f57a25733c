//! Hugging Face `config.json` → [`Architecture`], with the scope check of phase 0.
//!
//! Both layouts real checkpoints use are accepted: the classic one (`rope_theta`,
//! `rope_scaling`, `torch_dtype`) and the transformers 5 one (`rope_parameters`,
//! `dtype`, `layer_types`). Everything outside the decoder-only families the
//! runtime knows (MoE, MLA, encoder-decoder, multimodal wrappers, partial rotary
//! embeddings, quantized checkpoints) is refused here, naming the field that
//! gave it away and why; so are sizes that are zero, absurd or inconsistent
//! (heads not dividing). Every error carries
//! the dotted field path and, when the key occurs in the source text, its
//! line and column so the CLI can point at it.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use thiserror::Error;

use super::arch::{
    Activation, Architecture, DType, Family, NormWeight, Rope, RopeScaling, SlidingWindow,
};

/// Line and column (1-based) of a key in the config text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

/// Why a config was not turned into an [`Architecture`].
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    #[error("cannot read {}: {message}", path.display())]
    Io { path: PathBuf, message: String },
    #[error("not valid JSON: {message}")]
    Syntax { message: String, at: Location },
    #[error("the config must be a JSON object, found {found}")]
    NotAnObject { found: &'static str },
    #[error("`{field}` is missing")]
    Missing { field: String, at: Option<Location> },
    #[error("`{field}` must be {expected}, found {found}")]
    WrongType {
        field: String,
        expected: &'static str,
        found: String,
        at: Option<Location>,
    },
    #[error("`{field}` = {value}: {reason}")]
    Invalid {
        field: String,
        value: String,
        reason: String,
        at: Option<Location>,
    },
    #[error("`{field}` = {value} is not supported: {reason}")]
    Unsupported {
        field: String,
        value: String,
        reason: String,
        at: Option<Location>,
    },
    #[error("out of scope ({feature}, from `{field}`): {reason}")]
    OutOfScope {
        feature: &'static str,
        field: String,
        reason: String,
        at: Option<Location>,
    },
}

impl ConfigError {
    /// The dotted path of the offending field, when one is to blame.
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Missing { field, .. }
            | ConfigError::WrongType { field, .. }
            | ConfigError::Invalid { field, .. }
            | ConfigError::Unsupported { field, .. }
            | ConfigError::OutOfScope { field, .. } => Some(field),
            ConfigError::Io { .. }
            | ConfigError::Syntax { .. }
            | ConfigError::NotAnObject { .. } => None,
        }
    }

    /// Where in the config text the error points, when known.
    pub fn location(&self) -> Option<Location> {
        match self {
            ConfigError::Syntax { at, .. } => Some(*at),
            ConfigError::Missing { at, .. }
            | ConfigError::WrongType { at, .. }
            | ConfigError::Invalid { at, .. }
            | ConfigError::Unsupported { at, .. }
            | ConfigError::OutOfScope { at, .. } => *at,
            ConfigError::Io { .. } | ConfigError::NotAnObject { .. } => None,
        }
    }
}

/// Reads and parses a config. `path` is the `config.json` file or the model
/// directory holding it.
pub fn load_config(path: &Path) -> Result<Architecture, ConfigError> {
    let file = if path.is_dir() {
        path.join("config.json")
    } else {
        path.to_path_buf()
    };
    let text = crate::input::read_to_string(&file).map_err(|e| ConfigError::Io {
        path: file.clone(),
        message: e.problem.to_string(),
    })?;
    parse_config(&text)
}

/// Parses the text of a `config.json` (either layout).
pub fn parse_config(json: &str) -> Result<Architecture, ConfigError> {
    let value: Value = serde_json::from_str(json).map_err(|e| ConfigError::Syntax {
        message: strip_serde_position(&e.to_string()),
        at: Location {
            line: e.line(),
            column: e.column(),
        },
    })?;
    let Value::Object(obj) = &value else {
        return Err(ConfigError::NotAnObject {
            found: json_kind(&value),
        });
    };
    let config = Config { obj, source: json };
    config.check_scope()?;
    config.architecture()
}

/// Largest sizes accepted; anything above is a typo or a hostile file, and would
/// otherwise turn into multi-terabyte allocations downstream.
const MAX_LAYERS: usize = 1024;
const MAX_HIDDEN: usize = 1 << 17;
const MAX_INTERMEDIATE: usize = 1 << 20;
const MAX_HEADS: usize = 1024;
const MAX_HEAD_DIM: usize = 1024;
const MAX_VOCAB: usize = 1 << 24;

/// Supported `model_type` values and their families.
const FAMILIES: &[(&str, Family)] = &[
    ("llama", Family::Llama),
    ("qwen2", Family::Qwen2),
    ("qwen3", Family::Qwen3),
    ("gemma3_text", Family::Gemma3Text),
];

struct Config<'a> {
    obj: &'a Map<String, Value>,
    source: &'a str,
}

impl Config<'_> {
    fn at(&self, field: &str) -> Option<Location> {
        locate_key(self.source, field)
    }

    /// The value at a dotted path (`rope_scaling.factor`); `null` counts as absent.
    fn get(&self, field: &str) -> Option<&Value> {
        let mut parts = field.split('.');
        let mut current = self.obj.get(parts.next()?)?;
        for part in parts {
            current = current.as_object()?.get(part)?;
        }
        (!current.is_null()).then_some(current)
    }

    fn wrong_type(&self, field: &str, expected: &'static str, found: &Value) -> ConfigError {
        ConfigError::WrongType {
            field: field.to_string(),
            expected,
            found: describe(found),
            at: self.at(field),
        }
    }

    fn invalid(&self, field: &str, value: impl ToString, reason: impl ToString) -> ConfigError {
        ConfigError::Invalid {
            field: field.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
            at: self.at(field),
        }
    }

    fn unsupported(&self, field: &str, value: impl ToString, reason: impl ToString) -> ConfigError {
        ConfigError::Unsupported {
            field: field.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
            at: self.at(field),
        }
    }

    fn out_of_scope(&self, feature: &'static str, field: &str, reason: String) -> ConfigError {
        ConfigError::OutOfScope {
            feature,
            field: field.to_string(),
            reason,
            at: self.at(field),
        }
    }

    /// A missing key points at the object that should hold it, if nested.
    fn missing(&self, field: &str) -> ConfigError {
        ConfigError::Missing {
            field: field.to_string(),
            at: field
                .rsplit_once('.')
                .and_then(|(parent, _)| self.at(parent)),
        }
    }

    fn opt_uint(&self, field: &str) -> Result<Option<u64>, ConfigError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.wrong_type(field, "a non-negative integer", v)),
        }
    }

    /// A size: present, a positive integer, at most `max`.
    fn size(&self, field: &str, max: usize) -> Result<usize, ConfigError> {
        let value = self.opt_uint(field)?.ok_or_else(|| self.missing(field))?;
        self.check_size(field, value, max)
    }

    fn opt_size(&self, field: &str, max: usize) -> Result<Option<usize>, ConfigError> {
        self.opt_uint(field)?
            .map(|v| self.check_size(field, v, max))
            .transpose()
    }

    fn check_size(&self, field: &str, value: u64, max: usize) -> Result<usize, ConfigError> {
        if value == 0 {
            return Err(self.invalid(field, value, "must be at least 1"));
        }
        if value > max as u64 {
            return Err(self.invalid(field, value, format!("exceeds the limit of {max}")));
        }
        Ok(value as usize)
    }

    fn opt_f64(&self, field: &str) -> Result<Option<f64>, ConfigError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.wrong_type(field, "a number", v)),
        }
    }

    /// A strictly positive, finite number.
    fn positive(&self, field: &str, value: f64) -> Result<f64, ConfigError> {
        if value.is_finite() && value > 0.0 {
            Ok(value)
        } else {
            Err(self.invalid(field, value, "must be a positive finite number"))
        }
    }

    fn opt_bool(&self, field: &str) -> Result<Option<bool>, ConfigError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.wrong_type(field, "true or false", v)),
        }
    }

    fn opt_str(&self, field: &str) -> Result<Option<&str>, ConfigError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| self.wrong_type(field, "a string", v)),
        }
    }

    /// True when `field` is present with a value that switches a feature on
    /// (a non-zero number, `true`, a non-empty string/object/array).
    fn is_set(&self, field: &str) -> bool {
        match self.get(field) {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(Value::Number(n)) => n.as_f64().is_some_and(|x| x != 0.0),
            Some(Value::String(s)) => !s.is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            Some(Value::Object(o)) => !o.is_empty(),
            Some(Value::Null) => false,
        }
    }

    /// Refuses what is not a dense decoder-only transformer, before anything else
    /// is read, so the reason names the feature rather than a missing size.
    fn check_scope(&self) -> Result<(), ConfigError> {
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

    fn family(&self) -> Result<Family, ConfigError> {
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

    fn class_name(&self, family: Family) -> Result<String, ConfigError> {
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

    fn architecture(&self) -> Result<Architecture, ConfigError> {
        let family = self.family()?;
        let class_name = self.class_name(family)?;
        let num_layers = self.size("num_hidden_layers", MAX_LAYERS)?;
        let hidden_size = self.size("hidden_size", MAX_HIDDEN)?;
        let intermediate_size = self.size("intermediate_size", MAX_INTERMEDIATE)?;
        let num_heads = self.size("num_attention_heads", MAX_HEADS)?;
        let num_kv_heads = self
            .opt_size("num_key_value_heads", MAX_HEADS)?
            .unwrap_or(num_heads);
        if num_heads % num_kv_heads != 0 {
            return Err(self.invalid(
                "num_key_value_heads",
                num_kv_heads,
                format!(
                    "must divide num_attention_heads ({num_heads}) for grouped-query attention"
                ),
            ));
        }
        let head_dim = self.head_dim(hidden_size, num_heads)?;
        let vocab_size = self.size("vocab_size", MAX_VOCAB)?;
        let max_position_embeddings = match self.opt_uint("max_position_embeddings")? {
            Some(0) => {
                return Err(self.invalid("max_position_embeddings", 0, "must be at least 1"))
            }
            Some(n) => n,
            None => default_max_positions(family),
        };
        let (rope_theta, rope_scaling) = self.rope(family)?;
        let local_rope = self.local_rope(family, rope_theta, &rope_scaling)?;
        let gemma = family == Family::Gemma3Text;
        self.check_gemma(family)?;
        let rms_norm_eps = match self.opt_f64("rms_norm_eps")? {
            Some(eps) => self.positive("rms_norm_eps", eps)?,
            None => 1e-6,
        };
        self.check_biases(family)?;
        Ok(Architecture {
            family,
            class_name,
            num_layers,
            hidden_size,
            intermediate_size,
            num_heads,
            num_kv_heads,
            head_dim,
            vocab_size,
            max_position_embeddings,
            rope_theta,
            rope_scaling,
            rms_norm_eps,
            tie_word_embeddings: self
                .opt_bool("tie_word_embeddings")?
                .unwrap_or(family == Family::Gemma3Text),
            qkv_bias: family == Family::Qwen2,
            qk_norm: matches!(family, Family::Qwen3 | Family::Gemma3Text),
            activation: self.activation(family)?,
            dtype: self.dtype()?,
            sliding_window: self.sliding_window(family, num_layers)?,
            local_rope,
            norm_weight: if gemma {
                NormWeight::OffsetOne
            } else {
                NormWeight::Direct
            },
            sandwich_norms: gemma,
            scale_embeddings: gemma,
            query_pre_attn_scalar: self.query_pre_attn_scalar(family)?,
            bos_token_id: self.opt_uint("bos_token_id")?,
            eos_token_ids: self.eos_token_ids()?,
        })
    }

    fn head_dim(&self, hidden_size: usize, num_heads: usize) -> Result<usize, ConfigError> {
        let head_dim = match self.opt_size("head_dim", MAX_HEAD_DIM)? {
            Some(explicit) => explicit,
            None if hidden_size % num_heads == 0 => hidden_size / num_heads,
            None => {
                return Err(self.invalid(
                    "num_attention_heads",
                    num_heads,
                    format!("does not divide hidden_size ({hidden_size}) and no head_dim is given"),
                ))
            }
        };
        if head_dim % 2 != 0 {
            return Err(self.invalid(
                "head_dim",
                head_dim,
                "must be even: rotary embeddings rotate pairs of dimensions",
            ));
        }
        if head_dim > MAX_HEAD_DIM {
            return Err(self.invalid(
                "head_dim",
                head_dim,
                format!("hidden_size / num_attention_heads exceeds the limit of {MAX_HEAD_DIM}"),
            ));
        }
        Ok(head_dim)
    }

    /// RoPE base and scaling from either layout. transformers 5 nests them in
    /// `rope_parameters`, per layer type for models that mix attention kinds
    /// (the global `full_attention` entry is the one the architecture records).
    fn rope(&self, family: Family) -> Result<(f64, RopeScaling), ConfigError> {
        let prefix = match self.get("rope_parameters") {
            Some(Value::Object(p)) if p.contains_key("full_attention") => {
                "rope_parameters.full_attention"
            }
            Some(Value::Object(_)) => "rope_parameters",
            Some(other) => return Err(self.wrong_type("rope_parameters", "an object", other)),
            None => "",
        };
        let (theta_field, scaling_prefix) = if prefix.is_empty() {
            ("rope_theta".to_string(), "rope_scaling".to_string())
        } else {
            (format!("{prefix}.rope_theta"), prefix.to_string())
        };
        let rope = self.rope_at(&theta_field, &scaling_prefix, default_rope_theta(family))?;
        Ok((rope.theta, rope.scaling))
    }

    /// A RoPE base at `theta_field` (default `default_theta`) with the scaling
    /// object at `scaling_prefix`.
    fn rope_at(
        &self,
        theta_field: &str,
        scaling_prefix: &str,
        default_theta: f64,
    ) -> Result<Rope, ConfigError> {
        let theta = match self.opt_f64(theta_field)? {
            Some(t) => self.positive(theta_field, t)?,
            None => default_theta,
        };
        if let Some(v) = self.get(scaling_prefix) {
            if !v.is_object() {
                return Err(self.wrong_type(scaling_prefix, "an object or null", v));
            }
        }
        Ok(Rope {
            theta,
            scaling: self.rope_scaling(scaling_prefix)?,
        })
    }

    /// The RoPE of sliding-window layers when it is not the global one:
    /// transformers 5's `rope_parameters.sliding_attention`, or Gemma 3's
    /// classic `rope_local_base_freq` (unscaled: transformers gives the local
    /// rotary embedding the default rope type, whatever `rope_scaling` says;
    /// 10000 when absent, its config default).
    fn local_rope(
        &self,
        family: Family,
        theta: f64,
        scaling: &RopeScaling,
    ) -> Result<Option<Rope>, ConfigError> {
        let local = if self.get("rope_parameters.sliding_attention").is_some() {
            let prefix = "rope_parameters.sliding_attention";
            Some(self.rope_at(&format!("{prefix}.rope_theta"), prefix, theta)?)
        } else if family == Family::Gemma3Text {
            let theta = match self.opt_f64("rope_local_base_freq")? {
                Some(t) => self.positive("rope_local_base_freq", t)?,
                None => 10_000.0,
            };
            Some(Rope {
                theta,
                scaling: RopeScaling::Default,
            })
        } else {
            None
        };
        Ok(local.filter(|l| !(l.theta == theta && l.scaling == *scaling)))
    }

    /// Gemma's attention-score scale: `query_pre_attn_scalar` (transformers'
    /// default 256 when absent); other families scale by head_dim.
    fn query_pre_attn_scalar(&self, family: Family) -> Result<Option<f64>, ConfigError> {
        if family != Family::Gemma3Text {
            return Ok(None);
        }
        match self.opt_f64("query_pre_attn_scalar")? {
            Some(s) => Ok(Some(self.positive("query_pre_attn_scalar", s)?)),
            None => Ok(Some(256.0)),
        }
    }

    /// Gemma variants whose extra features are not implemented: Gemma 2's
    /// logit soft-capping and EmbeddingGemma's bidirectional attention.
    fn check_gemma(&self, family: Family) -> Result<(), ConfigError> {
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

    fn rope_scaling(&self, prefix: &str) -> Result<RopeScaling, ConfigError> {
        if self.get(prefix).is_none() {
            return Ok(RopeScaling::Default);
        }
        let type_field = if self.get(&format!("{prefix}.rope_type")).is_some() {
            format!("{prefix}.rope_type")
        } else {
            format!("{prefix}.type")
        };
        let kind = self.opt_str(&type_field)?.unwrap_or("default");
        let number = |name: &str| -> Result<f64, ConfigError> {
            let field = format!("{prefix}.{name}");
            let value = self.opt_f64(&field)?.ok_or_else(|| self.missing(&field))?;
            self.positive(&field, value)
        };
        match kind {
            "default" => Ok(RopeScaling::Default),
            "linear" => Ok(RopeScaling::Linear {
                factor: number("factor")?,
            }),
            "llama3" => {
                let low_freq_factor = number("low_freq_factor")?;
                let high_freq_factor = number("high_freq_factor")?;
                if high_freq_factor <= low_freq_factor {
                    return Err(self.invalid(
                        &format!("{prefix}.high_freq_factor"),
                        high_freq_factor,
                        format!("must exceed low_freq_factor ({low_freq_factor})"),
                    ));
                }
                let original_field = format!("{prefix}.original_max_position_embeddings");
                let original = self
                    .opt_uint(&original_field)?
                    .ok_or_else(|| self.missing(&original_field))?;
                if original == 0 {
                    return Err(self.invalid(&original_field, 0, "must be at least 1"));
                }
                Ok(RopeScaling::Llama3 {
                    factor: number("factor")?,
                    low_freq_factor,
                    high_freq_factor,
                    original_max_position_embeddings: original,
                })
            }
            other => Err(self.unsupported(
                &type_field,
                format!("\"{other}\""),
                "supported RoPE types are default, linear and llama3",
            )),
        }
    }

    /// Bias layouts the reference executes: none, or q/k/v only (Qwen2, always).
    /// Llama/Qwen3 `attention_bias: true` also biases o_proj, and `mlp_bias`
    /// biases the MLP; neither occurs in the supported checkpoints.
    fn check_biases(&self, family: Family) -> Result<(), ConfigError> {
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

    fn activation(&self, family: Family) -> Result<Activation, ConfigError> {
        let field = if self.get("hidden_activation").is_some() {
            "hidden_activation"
        } else {
            "hidden_act"
        };
        let default = match family {
            Family::Gemma3Text => "gelu_pytorch_tanh",
            _ => "silu",
        };
        match self.opt_str(field)?.unwrap_or(default) {
            "silu" | "swish" => Ok(Activation::Silu),
            "gelu_pytorch_tanh" | "gelu_new" => Ok(Activation::GeluTanh),
            other => Err(self.unsupported(
                field,
                format!("\"{other}\""),
                "known activations are silu (swish) and gelu_pytorch_tanh (gelu_new)",
            )),
        }
    }

    /// `torch_dtype` (classic) or `dtype` (transformers 5). transformers loads a
    /// config without either in float32, so that is the default.
    fn dtype(&self) -> Result<DType, ConfigError> {
        let field = if self.get("dtype").is_some() {
            "dtype"
        } else {
            "torch_dtype"
        };
        match self.opt_str(field)?.unwrap_or("float32") {
            "bfloat16" => Ok(DType::Bf16),
            "float16" => Ok(DType::F16),
            "float32" => Ok(DType::F32),
            other => Err(self.unsupported(
                field,
                format!("\"{other}\""),
                "weights must be bfloat16, float16 or float32",
            )),
        }
    }

    /// Which layers attend within a window. transformers 5 lists `layer_types`;
    /// the classic layouts derive it (Qwen2/3: `use_sliding_window` from
    /// `max_window_layers` on; Gemma 3: every `sliding_window_pattern`-th layer is
    /// global).
    fn sliding_window(
        &self,
        family: Family,
        num_layers: usize,
    ) -> Result<Option<SlidingWindow>, ConfigError> {
        let layers = match self.layer_types(num_layers)? {
            Some(layers) => layers,
            None => self.derived_sliding_layers(family, num_layers)?,
        };
        if layers.is_empty() {
            return Ok(None);
        }
        let window = self
            .opt_uint("sliding_window")?
            .ok_or_else(|| self.missing("sliding_window"))?;
        if window == 0 {
            return Err(self.invalid("sliding_window", 0, "must be at least 1"));
        }
        Ok(Some(SlidingWindow { window, layers }))
    }

    fn layer_types(&self, num_layers: usize) -> Result<Option<Vec<usize>>, ConfigError> {
        let Some(value) = self.get("layer_types") else {
            return Ok(None);
        };
        let list = value
            .as_array()
            .ok_or_else(|| self.wrong_type("layer_types", "a list of strings", value))?;
        if list.len() != num_layers {
            return Err(self.invalid(
                "layer_types",
                format!("[{} entries]", list.len()),
                format!("must list one type per layer (num_hidden_layers = {num_layers})"),
            ));
        }
        let mut sliding = Vec::new();
        for (i, entry) in list.iter().enumerate() {
            match entry.as_str() {
                Some("full_attention") => {}
                Some("sliding_attention") => sliding.push(i),
                Some(other) => {
                    return Err(self.unsupported(
                        "layer_types",
                        format!("\"{other}\" (layer {i})"),
                        "known layer types are full_attention and sliding_attention",
                    ))
                }
                None => return Err(self.wrong_type("layer_types", "a list of strings", value)),
            }
        }
        Ok(Some(sliding))
    }

    fn derived_sliding_layers(
        &self,
        family: Family,
        num_layers: usize,
    ) -> Result<Vec<usize>, ConfigError> {
        match family {
            Family::Llama => Ok(Vec::new()),
            Family::Qwen2 | Family::Qwen3 => {
                if self.opt_bool("use_sliding_window")? != Some(true) {
                    return Ok(Vec::new());
                }
                let first = self
                    .opt_uint("max_window_layers")?
                    .unwrap_or(num_layers as u64) as usize;
                Ok((first.min(num_layers)..num_layers).collect())
            }
            Family::Gemma3Text => {
                let pattern = self.opt_uint("sliding_window_pattern")?.unwrap_or(6);
                if pattern == 0 {
                    return Err(self.invalid("sliding_window_pattern", 0, "must be at least 1"));
                }
                let pattern = pattern as usize;
                Ok((0..num_layers).filter(|i| (i + 1) % pattern != 0).collect())
            }
        }
    }

    fn eos_token_ids(&self) -> Result<Vec<u64>, ConfigError> {
        match self.get("eos_token_id") {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_u64().ok_or_else(|| {
                        self.wrong_type("eos_token_id", "an integer or a list of integers", item)
                    })
                })
                .collect(),
            Some(v) => v.as_u64().map(|id| vec![id]).ok_or_else(|| {
                self.wrong_type("eos_token_id", "an integer or a list of integers", v)
            }),
        }
    }
}

/// transformers' per-family defaults for keys real configs always carry.
fn default_max_positions(family: Family) -> u64 {
    match family {
        Family::Llama => 2048,
        Family::Qwen2 | Family::Qwen3 | Family::Gemma3Text => 32768,
    }
}

fn default_rope_theta(family: Family) -> f64 {
    match family {
        Family::Gemma3Text => 1_000_000.0,
        Family::Llama | Family::Qwen2 | Family::Qwen3 => 10_000.0,
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A short rendering of a found value for messages.
fn describe(value: &Value) -> String {
    match value {
        Value::Array(_) | Value::Object(_) => json_kind(value).to_string(),
        other => other.to_string(),
    }
}

/// serde_json appends " at line L column C"; the location is reported apart.
fn strip_serde_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// Finds a dotted key path in pretty-printed JSON text: each segment is searched
/// after the previous one, which is exact for the nested objects configs use.
pub fn locate_key(source: &str, field: &str) -> Option<Location> {
    let parts: Vec<&str> = field.split('.').collect();
    let mut offset = 0;
    for (i, part) in parts.iter().enumerate() {
        let needle = format!("\"{part}\"");
        offset += source[offset..].find(&needle)?;
        if i + 1 < parts.len() {
            offset += needle.len();
        }
    }
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(offset, |nl| offset - nl - 1) + 1;
    Some(Location { line, column })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_nested_keys() {
        let text = "{\n  \"a\": 1,\n  \"rope\": {\n    \"a\": 2\n  }\n}";
        assert_eq!(locate_key(text, "a"), Some(Location { line: 2, column: 3 }));
        assert_eq!(
            locate_key(text, "rope.a"),
            Some(Location { line: 4, column: 5 })
        );
        assert_eq!(locate_key(text, "missing"), None);
    }

    #[test]
    fn derives_head_dim_and_kv_heads() {
        let arch = parse_config(
            r#"{"model_type":"llama","num_hidden_layers":2,"hidden_size":64,
                "intermediate_size":128,"num_attention_heads":4,"vocab_size":10}"#,
        )
        .unwrap();
        assert_eq!(arch.head_dim, 16);
        assert_eq!(arch.num_kv_heads, 4);
        assert_eq!(arch.rope_scaling, RopeScaling::Default);
        assert_eq!(arch.dtype, DType::F32);
        assert!(!arch.tie_word_embeddings);
    }
}
