//! The [`Architecture`] a config describes: its sizes (within limits, heads
//! dividing), the family's fixed features and defaults (norm kind and
//! weighting, biases, partial rotary, soft-capping, fused projections), the
//! activation, the dtype and the special tokens.

use serde_json::Value;

use super::super::arch::{Activation, Architecture, DType, Family, NormKind, NormWeight};
use super::{Config, ConfigError};

/// Largest sizes accepted; anything above is a typo or a hostile file, and would
/// otherwise turn into multi-terabyte allocations downstream.
const MAX_LAYERS: usize = 1024;
const MAX_HIDDEN: usize = 1 << 17;
const MAX_INTERMEDIATE: usize = 1 << 20;
const MAX_HEADS: usize = 1024;
const MAX_HEAD_DIM: usize = 1024;
const MAX_VOCAB: usize = 1 << 24;

impl Config<'_> {
    pub(super) fn architecture(&self) -> Result<Architecture, ConfigError> {
        let family = self.family()?;
        let class_name = self.class_name(family)?;
        self.check_compute_keys(family);
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
        let gemma = family.is_gemma();
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
            rms_norm_eps: self.norm_eps(family)?,
            tie_word_embeddings: self.opt_bool("tie_word_embeddings")?.unwrap_or(gemma),
            qkv_bias: family == Family::Qwen2
                || (family == Family::StableLm && self.opt_bool("use_qkv_bias")? == Some(true)),
            qk_norm: matches!(family, Family::Qwen3 | Family::Gemma3Text),
            activation: self.activation(family)?,
            dtype: self.dtype()?,
            sliding_window: self.sliding_window(family, num_layers)?,
            local_rope,
            norm_weight: match family {
                Family::Gemma3Text | Family::Gemma2 => NormWeight::OffsetOne,
                Family::Olmo => NormWeight::Absent,
                _ => NormWeight::Direct,
            },
            sandwich_norms: gemma,
            scale_embeddings: gemma,
            query_pre_attn_scalar: self.query_pre_attn_scalar(family)?,
            norm_kind: match family {
                Family::StableLm | Family::Olmo => NormKind::Layer,
                _ => NormKind::Rms,
            },
            norm_bias: family == Family::StableLm,
            partial_rotary_dim: self.partial_rotary_dim(family, head_dim)?,
            attn_logit_softcap: self.softcap(gemma, "attn_logit_softcapping")?,
            final_logit_softcap: self.softcap(gemma, "final_logit_softcapping")?,
            fused_projections: family == Family::Phi3,
            bos_token_id: self.token_id("bos_token_id", vocab_size)?,
            eos_token_ids: self.eos_token_ids(vocab_size)?,
        })
    }

    /// A special token's id, which must name a row of the embedding: an id past
    /// the vocabulary would index memory that holds no token.
    fn token_id(&self, field: &str, vocab_size: usize) -> Result<Option<u64>, ConfigError> {
        let id = self.opt_uint(field)?;
        self.within_vocabulary(field, id.into_iter(), vocab_size)?;
        Ok(id)
    }

    fn within_vocabulary(
        &self,
        field: &str,
        mut ids: impl Iterator<Item = u64>,
        vocab_size: usize,
    ) -> Result<(), ConfigError> {
        match ids.find(|&id| id >= vocab_size as u64) {
            Some(id) => Err(self.invalid(
                field,
                id,
                format!(
                    "outside the vocabulary (vocab_size {vocab_size}: ids 0 to {})",
                    vocab_size - 1
                ),
            )),
            None => Ok(()),
        }
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

    /// The epsilon of every norm: `rms_norm_eps` (1e-6 when absent),
    /// StableLM's `layer_norm_eps` (1e-5), OLMo's fixed 1e-5 (its
    /// non-parametric LayerNorm takes no key).
    fn norm_eps(&self, family: Family) -> Result<f64, ConfigError> {
        let (field, default) = match family {
            Family::Olmo => return Ok(1e-5),
            Family::StableLm => ("layer_norm_eps", 1e-5),
            _ => ("rms_norm_eps", 1e-6),
        };
        match self.opt_f64(field)? {
            Some(eps) => self.positive(field, eps),
            None => Ok(default),
        }
    }

    /// Dimensions of each head RoPE rotates, when a part only: StableLM's and
    /// Phi-3's `partial_rotary_factor` (StableLM's default 0.25), as
    /// transformers takes it, `int(head_dim · factor)`.
    fn partial_rotary_dim(
        &self,
        family: Family,
        head_dim: usize,
    ) -> Result<Option<usize>, ConfigError> {
        let default = match family {
            Family::StableLm => 0.25,
            Family::Phi3 => 1.0,
            _ => return Ok(None),
        };
        let field = if self.get("rope_parameters.partial_rotary_factor").is_some() {
            "rope_parameters.partial_rotary_factor"
        } else {
            "partial_rotary_factor"
        };
        let factor = match self.opt_f64(field)? {
            Some(f) if f > 0.0 && f <= 1.0 => f,
            Some(f) => return Err(self.invalid(field, f, "must be in (0, 1]")),
            None => default,
        };
        let dim = (head_dim as f64 * factor) as usize;
        if dim == 0 || dim % 2 != 0 {
            return Err(self.invalid(
                field,
                factor,
                format!(
                    "rotates {dim} of head_dim {head_dim} dimensions; RoPE needs an even,                      positive number"
                ),
            ));
        }
        Ok((dim < head_dim).then_some(dim))
    }

    /// A Gemma soft-cap (`tanh(x / cap) · cap`) when the key holds one.
    fn softcap(&self, gemma: bool, field: &str) -> Result<Option<f64>, ConfigError> {
        if !gemma {
            return Ok(None);
        }
        self.opt_f64(field)?
            .map(|cap| self.positive(field, cap))
            .transpose()
    }

    /// Gemma's attention-score scale: `query_pre_attn_scalar` (transformers'
    /// default 256 when absent); other families scale by head_dim.
    fn query_pre_attn_scalar(&self, family: Family) -> Result<Option<f64>, ConfigError> {
        if !family.is_gemma() {
            return Ok(None);
        }
        match self.opt_f64("query_pre_attn_scalar")? {
            Some(s) => Ok(Some(self.positive("query_pre_attn_scalar", s)?)),
            None => Ok(Some(256.0)),
        }
    }

    fn activation(&self, family: Family) -> Result<Activation, ConfigError> {
        let field = if self.get("hidden_activation").is_some() {
            "hidden_activation"
        } else {
            "hidden_act"
        };
        let default = if family.is_gemma() {
            "gelu_pytorch_tanh"
        } else {
            "silu"
        };
        match self.opt_str(field)?.unwrap_or(default) {
            "silu" | "swish" => Ok(Activation::Silu),
            "gelu_pytorch_tanh" | "gelu_new" => Ok(Activation::GeluTanh),
            other => {
                self.block(
                    "unknown activation",
                    field,
                    format!("\"{other}\""),
                    "known activations are silu (swish) and gelu_pytorch_tanh (gelu_new)",
                    "the activation in the oracle's gated MLP, a kernel for it and its host op",
                );
                Ok(Activation::Silu)
            }
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

    fn eos_token_ids(&self, vocab_size: usize) -> Result<Vec<u64>, ConfigError> {
        let ids = self.eos_token_list()?;
        self.within_vocabulary("eos_token_id", ids.iter().copied(), vocab_size)?;
        Ok(ids)
    }

    fn eos_token_list(&self) -> Result<Vec<u64>, ConfigError> {
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
        Family::Llama | Family::Olmo => 2048,
        Family::Phi3 | Family::StableLm => 4096,
        Family::Gemma2 => 8192,
        Family::Qwen2 | Family::Qwen3 | Family::Gemma3Text => 32768,
        Family::Mistral => 131_072,
    }
}
