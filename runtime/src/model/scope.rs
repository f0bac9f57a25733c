//! Phase 0's scope check on a parsed [`Architecture`]: what the reference can
//! execute, what it cannot (with the reason), and the features worth reporting.
//!
//! Config parsing already refuses what is not a dense decoder-only model; this
//! classifies what parsed, so a family can be described before it is executable.

use serde::Serialize;

use super::arch::{Architecture, Family, RopeScaling};

/// A feature that keeps the reference from executing the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blocker {
    pub feature: &'static str,
    pub reason: String,
}

/// The verdict of the scope check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScopeReport {
    /// Empty when the reference can execute the model.
    pub blockers: Vec<Blocker>,
    /// Structural features worth telling a deployment engineer about.
    pub notes: Vec<String>,
}

impl ScopeReport {
    pub fn executable(&self) -> bool {
        self.blockers.is_empty()
    }
}

pub fn check_scope(arch: &Architecture) -> ScopeReport {
    ScopeReport {
        blockers: blockers(arch),
        notes: notes(arch),
    }
}

fn blockers(arch: &Architecture) -> Vec<Blocker> {
    match arch.family {
        Family::Gemma3Text => vec![
            Blocker {
                feature: "gemma3 normalisation",
                reason: "RMSNorm weights are applied as (1 + w), with extra norms after \
                         attention and MLP (sandwich norms)"
                    .into(),
            },
            Blocker {
                feature: "gemma3 embedding scale",
                reason: "embeddings are multiplied by sqrt(hidden_size)".into(),
            },
            Blocker {
                feature: "gemma3 attention scale and local RoPE",
                reason: "scores use query_pre_attn_scalar and sliding layers a separate RoPE \
                         base (rope_local_base_freq)"
                    .into(),
            },
        ],
        Family::Llama | Family::Qwen2 | Family::Qwen3 => Vec::new(),
    }
}

fn notes(arch: &Architecture) -> Vec<String> {
    let mut notes = Vec::new();
    let group = arch.gqa_group();
    notes.push(if group == 1 {
        format!("multi-head attention ({} heads)", arch.num_heads)
    } else {
        format!(
            "grouped-query attention: {} query heads share {} KV head{} ({group}:1)",
            arch.num_heads,
            arch.num_kv_heads,
            if arch.num_kv_heads == 1 { "" } else { "s" }
        )
    });
    if arch.q_dim() != arch.hidden_size {
        notes.push(format!(
            "heads × head_dim = {} differs from hidden_size {}",
            arch.q_dim(),
            arch.hidden_size
        ));
    }
    match &arch.rope_scaling {
        RopeScaling::Default => {}
        RopeScaling::Llama3 {
            factor,
            original_max_position_embeddings,
            ..
        } => notes.push(format!(
            "llama3 RoPE scaling (factor {factor}, original context {original_max_position_embeddings})"
        )),
        RopeScaling::Linear { factor } => {
            notes.push(format!("linear RoPE scaling (factor {factor})"))
        }
    }
    if arch.qkv_bias {
        notes.push("bias on q/k/v projections".into());
    }
    if arch.qk_norm {
        notes.push("per-head RMSNorm on q and k before RoPE".into());
    }
    if arch.tie_word_embeddings {
        notes.push(format!(
            "LM head tied to the embeddings ({} × {})",
            arch.vocab_size, arch.hidden_size
        ));
    }
    if let Some(sw) = &arch.sliding_window {
        notes.push(format!(
            "sliding-window attention (window {}) on {} of {} layers: executed as full \
             attention while a sequence fits the window, refused beyond it",
            sw.window,
            sw.layers.len(),
            arch.num_layers
        ));
    }
    notes
}
