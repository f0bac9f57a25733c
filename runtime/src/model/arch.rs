//! The architecture description every other part of the runtime reads: plain data
//! resolved from a Hugging Face `config.json` (see `config.rs`), with every default
//! already applied, so no consumer re-derives head_dim or kv heads on its own.

use serde::{Deserialize, Serialize};

/// Model family, from `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Llama,
    Qwen2,
    Qwen3,
    Gemma3Text,
    /// Llama with sliding-window attention on every layer.
    Mistral,
    /// Llama-like with q/k/v and gate/up fused in the checkpoint (split on
    /// load), sliding-window attention and optionally partial rotary.
    Phi3,
    /// LayerNorm with bias, partial rotary, q/k/v bias.
    StableLm,
    /// Non-parametric LayerNorm.
    Olmo,
    /// Gemma-2: attention and final logit soft-capping, alternating
    /// sliding-window and global layers, Gemma's norms.
    Gemma2,
}

impl Family {
    /// The `model_type` that names it.
    pub fn model_type(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
            Family::Gemma3Text => "gemma3_text",
            Family::Mistral => "mistral",
            Family::Phi3 => "phi3",
            Family::StableLm => "stablelm",
            Family::Olmo => "olmo",
            Family::Gemma2 => "gemma2",
        }
    }

    /// Gemma's conventions: `(1 + w)` norms, sandwich norms, scaled
    /// embeddings, `query_pre_attn_scalar`, GELU-tanh.
    pub fn is_gemma(self) -> bool {
        matches!(self, Family::Gemma3Text | Family::Gemma2)
    }
}

/// RoPE frequency scaling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rope_type", rename_all = "snake_case")]
pub enum RopeScaling {
    Default,
    Llama3 {
        factor: f64,
        low_freq_factor: f64,
        high_freq_factor: f64,
        original_max_position_embeddings: u64,
    },
    /// Linear position interpolation (`rope_type: linear`), seen in Gemma 3.
    Linear {
        factor: f64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    Silu,
    GeluTanh,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DType {
    Bf16,
    F16,
    F32,
}

impl DType {
    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bf16 | DType::F16 => 2,
            DType::F32 => 4,
        }
    }
}

/// Sliding-window attention as the config declares it: on the listed layers a
/// query at position p attends to positions p − window + 1 ..= p (transformers'
/// `kv_idx > q_idx − sliding_window`), in prefill and over the decode KV cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlidingWindow {
    pub window: u64,
    /// Layers that use it (indices), from `layer_types`, `max_window_layers` or
    /// `sliding_window_pattern`.
    pub layers: Vec<usize>,
}

impl SlidingWindow {
    /// The first position a query at `position` still sees.
    pub fn first_visible(&self, position: usize) -> usize {
        (position + 1).saturating_sub(self.window as usize)
    }
}

/// How a norm applies its weight to the normalised row x̂.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NormWeight {
    /// `w · x̂` (Llama, Qwen).
    #[default]
    Direct,
    /// `(1 + w) · x̂`, with `1 + w` formed in f32 (Gemma: checkpoints store the
    /// offset from one, so a zero weight is the identity).
    OffsetOne,
    /// No weight at all (OLMo's non-parametric LayerNorm): x̂ as it is; the
    /// checkpoint holds no norm tensors.
    Absent,
}

/// What a norm normalises by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NormKind {
    /// `x / sqrt(mean(x²) + eps)` (Llama, Qwen, Gemma, Mistral, Phi-3).
    #[default]
    Rms,
    /// `(x − mean) / sqrt(var + eps)`, the biased variance (StableLM, OLMo).
    Layer,
}

impl NormKind {
    pub fn is_rms(&self) -> bool {
        *self == NormKind::Rms
    }
}

impl NormWeight {
    pub fn is_direct(&self) -> bool {
        *self == NormWeight::Direct
    }

    /// The factor the normalised value is multiplied by (1 without a weight).
    pub fn factor(self, w: f32) -> f32 {
        match self {
            NormWeight::Direct => w,
            NormWeight::OffsetOne => 1.0 + w,
            NormWeight::Absent => 1.0,
        }
    }

    /// Whether the checkpoint holds a weight tensor for each norm.
    pub fn has_tensor(self) -> bool {
        self != NormWeight::Absent
    }
}

/// A RoPE base with its frequency scaling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rope {
    pub theta: f64,
    pub scaling: RopeScaling,
}

/// A decoder-only transformer, fully resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Architecture {
    pub family: Family,
    /// `architectures[0]`, e.g. `LlamaForCausalLM`.
    pub class_name: String,
    pub num_layers: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    /// Explicit in the config (Qwen3, Llama-3.2) or hidden_size / num_heads.
    pub head_dim: usize,
    pub vocab_size: usize,
    pub max_position_embeddings: u64,
    pub rope_theta: f64,
    pub rope_scaling: RopeScaling,
    pub rms_norm_eps: f64,
    pub tie_word_embeddings: bool,
    /// Bias on q/k/v projections (Qwen2.5).
    pub qkv_bias: bool,
    /// Per-head RMSNorm on q and k before RoPE (Qwen3).
    pub qk_norm: bool,
    pub activation: Activation,
    pub dtype: DType,
    pub sliding_window: Option<SlidingWindow>,
    /// RoPE of the sliding-window layers when it differs from the global
    /// `rope_theta`/`rope_scaling` (Gemma 3: `rope_local_base_freq`, unscaled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rope: Option<Rope>,
    /// `w` or `(1 + w)` in every RMSNorm, q/k norms and the final norm included.
    #[serde(default, skip_serializing_if = "NormWeight::is_direct")]
    pub norm_weight: NormWeight,
    /// Gemma's sandwich norms: the attention and MLP outputs are normalised
    /// (`post_attention_layernorm`, `post_feedforward_layernorm`) before their
    /// residual add, and `pre_feedforward_layernorm` is the norm in front of the MLP.
    #[serde(default, skip_serializing_if = "is_false")]
    pub sandwich_norms: bool,
    /// Embedding rows multiplied by √hidden_size (Gemma), see
    /// [`Architecture::embedding_scale`].
    #[serde(default, skip_serializing_if = "is_false")]
    pub scale_embeddings: bool,
    /// Attention scores are scaled by `query_pre_attn_scalar^-1/2` instead of
    /// `head_dim^-1/2` (Gemma).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_pre_attn_scalar: Option<f64>,
    /// RMSNorm or LayerNorm, in every norm of the model.
    #[serde(default, skip_serializing_if = "NormKind::is_rms")]
    pub norm_kind: NormKind,
    /// A bias added after every norm's weight (StableLM's LayerNorm).
    #[serde(default, skip_serializing_if = "is_false")]
    pub norm_bias: bool,
    /// Dimensions of each head RoPE rotates when it is a part only
    /// (`partial_rotary_factor`: StableLM, some Phi-3): the first
    /// `rotary_dim`, pairing i with i + rotary_dim/2; the rest pass through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_rotary_dim: Option<usize>,
    /// `tanh(s / cap) · cap` on every attention score before the mask
    /// (Gemma-2's `attn_logit_softcapping`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attn_logit_softcap: Option<f64>,
    /// `tanh(z / cap) · cap` on every logit (Gemma-2's `final_logit_softcapping`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_logit_softcap: Option<f64>,
    /// The checkpoint stores q/k/v as one `qkv_proj` and gate/up as one
    /// `gate_up_proj` (Phi-3); they are split on load into the separate
    /// tensors every other part reads.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fused_projections: bool,
    pub bos_token_id: Option<u64>,
    pub eos_token_ids: Vec<u64>,
}

impl Architecture {
    pub fn q_dim(&self) -> usize {
        self.num_heads * self.head_dim
    }

    pub fn kv_dim(&self) -> usize {
        self.num_kv_heads * self.head_dim
    }

    /// Query heads per KV head.
    pub fn gqa_group(&self) -> usize {
        self.num_heads / self.num_kv_heads
    }

    /// The multiplier of the embedding rows: √hidden_size rounded to f32, as
    /// transformers' `embed_scale` buffer holds it (a float32 tensor, cast to
    /// the weights' dtype at use: the f32 reference multiplies by exactly this;
    /// a bf16 run by its bf16 rounding). 1 without `scale_embeddings`.
    pub fn embedding_scale(&self) -> f32 {
        if self.scale_embeddings {
            (self.hidden_size as f64).sqrt() as f32
        } else {
            1.0
        }
    }

    /// The factor on `q·k`: `query_pre_attn_scalar^-1/2` or `head_dim^-1/2`.
    pub fn attention_scale(&self) -> f32 {
        match self.query_pre_attn_scalar {
            // transformers takes `query_pre_attn_scalar**-0.5` in f64.
            Some(scalar) => scalar.powf(-0.5) as f32,
            None => 1.0 / (self.head_dim as f32).sqrt(),
        }
    }

    /// Dimensions of each head RoPE rotates.
    pub fn rotary_dim(&self) -> usize {
        self.partial_rotary_dim.unwrap_or(self.head_dim)
    }

    /// The sliding window of `layer`, if it has one.
    pub fn window_of(&self, layer: usize) -> Option<&SlidingWindow> {
        self.sliding_window
            .as_ref()
            .filter(|sw| sw.layers.contains(&layer))
    }

    /// The RoPE `layer` rotates with: the local one on sliding-window layers
    /// when the model has one, the global one otherwise.
    pub fn rope_of(&self, layer: usize) -> Rope {
        match (&self.local_rope, self.window_of(layer)) {
            (Some(local), Some(_)) => local.clone(),
            _ => Rope {
                theta: self.rope_theta,
                scaling: self.rope_scaling.clone(),
            },
        }
    }

    /// Parameter count, counting a tied LM head once.
    pub fn parameter_count(&self) -> u64 {
        let (h, f, v) = (
            self.hidden_size as u64,
            self.intermediate_size as u64,
            self.vocab_size as u64,
        );
        let (q, kv) = (self.q_dim() as u64, self.kv_dim() as u64);
        let norm_vectors = u64::from(self.norm_weight.has_tensor()) + u64::from(self.norm_bias);
        let mut per_layer = h * q + 2 * h * kv + q * h + 3 * h * f + 2 * h * norm_vectors;
        if self.qkv_bias {
            per_layer += q + 2 * kv;
        }
        if self.qk_norm {
            per_layer += 2 * self.head_dim as u64;
        }
        if self.sandwich_norms {
            per_layer += 2 * h * norm_vectors;
        }
        let head = if self.tie_word_embeddings { 0 } else { v * h };
        v * h + self.num_layers as u64 * per_layer + h * norm_vectors + head
    }
}

fn is_false(value: &bool) -> bool {
    !*value
}
