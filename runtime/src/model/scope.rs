//! Phase 0's description of a parsed [`Architecture`]: the structural features
//! worth telling a deployment engineer about.
//!
//! What the runtime refuses is refused before an architecture exists: config
//! parsing (`config/`) lists every blocking feature (mixture-of-experts,
//! multi-head latent attention, encoder–decoder stacks, multimodal wrappers,
//! quantized checkpoints, unknown families, keys a family would not honour)
//! with the field that gave each away, why, and what would lift it. Every architecture that parses, the CPU reference executes; what
//! the NPU plans cannot place yet is listed by `xdna2::builder::unsupported_features`.

use serde::Serialize;

use super::arch::{Architecture, NormKind, NormWeight, RopeScaling};

/// The verdict of the scope check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScopeReport {
    /// Structural features worth telling a deployment engineer about.
    pub notes: Vec<String>,
}

pub fn check_scope(arch: &Architecture) -> ScopeReport {
    ScopeReport { notes: notes(arch) }
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
    if let Some(note) = scaling_note("", &arch.rope_scaling) {
        notes.push(note);
    }
    if arch.qkv_bias {
        notes.push("bias on q/k/v projections".into());
    }
    if arch.qk_norm {
        notes.push("per-head RMSNorm on q and k before RoPE".into());
    }
    if arch.norm_weight == NormWeight::OffsetOne {
        notes.push("RMSNorm weights applied as (1 + w)".into());
    }
    if arch.norm_kind == NormKind::Layer {
        notes.push(format!(
            "LayerNorm (mean-subtracted){}{}",
            if arch.norm_weight == NormWeight::Absent {
                ", non-parametric: no weight"
            } else {
                ""
            },
            if arch.norm_bias { ", with bias" } else { "" }
        ));
    }
    if let Some(rot) = arch.partial_rotary_dim {
        notes.push(format!(
            "partial rotary: RoPE on the first {rot} of {} dimensions of each head",
            arch.head_dim
        ));
    }
    if let Some(cap) = arch.attn_logit_softcap {
        notes.push(format!(
            "attention scores soft-capped at {cap} (tanh(s / cap) · cap)"
        ));
    }
    if let Some(cap) = arch.final_logit_softcap {
        notes.push(format!("final logits soft-capped at {cap}"));
    }
    if arch.fused_projections {
        notes.push("fused qkv_proj and gate_up_proj, split on load".into());
    }
    if arch.sandwich_norms {
        notes.push(
            "sandwich norms: attention and MLP outputs normalised before each residual add".into(),
        );
    }
    if arch.scale_embeddings {
        notes.push(format!(
            "embeddings scaled by sqrt(hidden_size) = {}",
            arch.embedding_scale()
        ));
    }
    if let Some(scalar) = arch.query_pre_attn_scalar {
        notes.push(format!(
            "attention scores scaled by query_pre_attn_scalar^-1/2 ({scalar})"
        ));
    }
    if arch.tie_word_embeddings {
        notes.push(format!(
            "LM head tied to the embeddings ({} × {})",
            arch.vocab_size, arch.hidden_size
        ));
    }
    if let Some(sw) = &arch.sliding_window {
        notes.push(format!(
            "sliding-window attention (window {}) on {} of {} layers, in prefill and over \
             the decode KV cache",
            sw.window,
            sw.layers.len(),
            arch.num_layers
        ));
    }
    if let Some(local) = &arch.local_rope {
        let mut note = format!(
            "sliding-window layers rotate with RoPE base {} (global layers {})",
            local.theta, arch.rope_theta
        );
        if let Some(scaling) = scaling_note(" on the local base", &local.scaling) {
            note += &format!("; {scaling}");
        }
        notes.push(note);
    }
    notes
}

fn scaling_note(which: &str, scaling: &RopeScaling) -> Option<String> {
    match scaling {
        RopeScaling::Default => None,
        RopeScaling::Llama3 {
            factor,
            original_max_position_embeddings,
            ..
        } => Some(format!(
            "llama3 RoPE scaling{which} (factor {factor}, original context \
             {original_max_position_embeddings})"
        )),
        RopeScaling::Linear { factor } => {
            Some(format!("linear RoPE scaling{which} (factor {factor})"))
        }
    }
}
