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
    /// Parsed and classified; executing it needs features listed by `unsupported`.
    Gemma3Text,
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

/// Sliding-window attention as the config declares it; classified and reported,
/// not executed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlidingWindow {
    pub window: u64,
    /// Layers that use it (indices), from `layer_types` or `max_window_layers`.
    pub layers: Vec<usize>,
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

    /// Parameter count, counting a tied LM head once.
    pub fn parameter_count(&self) -> u64 {
        let (h, f, v) = (
            self.hidden_size as u64,
            self.intermediate_size as u64,
            self.vocab_size as u64,
        );
        let (q, kv) = (self.q_dim() as u64, self.kv_dim() as u64);
        let mut per_layer = h * q + 2 * h * kv + q * h + 3 * h * f + 2 * h;
        if self.qkv_bias {
            per_layer += q + 2 * kv;
        }
        if self.qk_norm {
            per_layer += 2 * self.head_dim as u64;
        }
        let head = if self.tie_word_embeddings { 0 } else { v * h };
        v * h + self.num_layers as u64 * per_layer + h + head
    }
}
