//! Work the host does between a plan's calls: embedding gathers, the KV cache,
//! decode attention and glue of the plans that keep them on the host.

use serde::{Deserialize, Serialize};

use super::super::kernels::QkvLayout;

/// Work the host does between calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum HostOp {
    /// Token embedding gather of `rows` positions from `table`.
    Embed {
        table: String,
        out: String,
        rows: usize,
        hidden: usize,
        /// Each gathered row times this factor rounded to bf16, the product
        /// rounded to bf16 (Gemma's `embed_scale`, which transformers casts to
        /// the weights' dtype before multiplying).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scale: Option<f32>,
    },
    /// Stores this layer's K and V rows in the host KV cache (prefill: all
    /// rows with the head-major transpose; decode: one appended row).
    KvStore {
        k: String,
        v: String,
        rows: usize,
        kv_width: usize,
    },
    /// Attention of one query per head over the host KV cache.
    DecodeAttention {
        q: String,
        out: String,
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
        /// The real head_dim of zero-padded heads, which scales the scores.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scale_dim: Option<usize>,
        /// Gemma-2's soft-cap on every score, `tanh(s / cap) · cap`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        softcap: Option<f64>,
    },
    /// Re-lays a `[rows, heads, head_dim]` tensor between seq-first and head-first.
    Transpose {
        from: String,
        to: String,
        rows: usize,
        heads: usize,
        head_dim: usize,
        to_layout: QkvLayout,
    },
    /// Adds a projection bias after RoPE: RoPE(x + b) = RoPE(x) + RoPE(b), so
    /// the rotated bias is added when `rotate`, the plain bias otherwise.
    BiasAdd {
        x: String,
        bias: String,
        rows: usize,
        heads: usize,
        head_dim: usize,
        /// The RoPE table when the bias is rotated (q and k; not v).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lut: Option<String>,
        /// Dimensions of each head the table rotates, when the heads are
        /// zero-padded past them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rotary_dim: Option<usize>,
    },
    /// Element-wise add on the host (decode glue).
    Add {
        a: String,
        b: String,
        out: String,
        n: usize,
    },
    /// RMSNorm on the host: of the last real row in prefill (`last_row`), of
    /// the single row in decode.
    RmsNorm {
        x: String,
        weight: String,
        out: String,
        cols: usize,
        eps: f64,
        last_row: bool,
        /// The real columns of a zero-padded row, over which the mean square
        /// is taken.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        real_cols: Option<usize>,
    },
    /// LayerNorm on the host, as `RmsNorm` (the last real row in prefill, the
    /// single row in decode), with the weight and bias the model has.
    LayerNorm {
        x: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        weight: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bias: Option<String>,
        out: String,
        cols: usize,
        eps: f64,
        last_row: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        real_cols: Option<usize>,
    },
    /// `tanh(x / cap) · cap` on every logit, on the host after the LM head
    /// (Gemma-2's final logit soft-cap).
    SoftCap { x: String, n: usize, cap: f64 },
    /// SiLU·mul on the host (decode glue).
    SiluMul {
        gate: String,
        up: String,
        out: String,
        n: usize,
    },
    /// A matrix-vector product on the CPU (unoptimized decode, CPU LM head).
    Matvec {
        w: String,
        x: String,
        out: String,
        m: usize,
        k: usize,
    },
    /// Host scheduling between calls (Python loop, argument set-up): time only.
    Scheduling { what: String },
}

impl HostOp {
    pub fn name(&self) -> &'static str {
        match self {
            HostOp::Embed { .. } => "embed",
            HostOp::KvStore { .. } => "kv_store",
            HostOp::DecodeAttention { .. } => "decode_attention",
            HostOp::Transpose { .. } => "transpose",
            HostOp::BiasAdd { .. } => "bias_add",
            HostOp::Add { .. } => "add",
            HostOp::RmsNorm { .. } => "rms_norm",
            HostOp::LayerNorm { .. } => "layer_norm",
            HostOp::SoftCap { .. } => "soft_cap",
            HostOp::SiluMul { .. } => "silu_mul",
            HostOp::Matvec { .. } => "matvec",
            HostOp::Scheduling { .. } => "scheduling",
        }
    }
}
