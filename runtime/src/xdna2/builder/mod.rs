//! Builds the reference deployment's plan structure for any architecture:
//! prefill as `rms_gemms_rope` → `flash_attn` → `o_ffn` per layer with host
//! KV extraction, a last-row host RMSNorm and the partitioned LM-head GEMV;
//! decode as `rms_gemv_rope` → host attention → `o_gemv_ffn` (the 3-launch
//! cascade where its rules allow, else standalone GEMV calls with host glue).
//! Each optimization is a switch in `PlanOptions`, so the unoptimized plan and
//! every step towards the reference are the same function with other options;
//! `apply` turns one switch on, which is how a deployment applies
//! optimizations one at a time.
//!
//! The builder's parts, in the order a plan is written: `phases` (each
//! phase's steps in order), `attention` and `ffn` (a layer's two halves),
//! `lm_head` (the end of the plan), on top of `buffers` (what the plan names),
//! `launches` (one kernel launch with its spec), `calls` (groups of launches
//! into calls) and `dims` (the padded dimensions).

mod attention;
mod buffers;
mod calls;
mod dims;
mod ffn;
mod fused;
mod launches;
mod lm_head;
mod phases;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::device::Device;
use super::kernels::QkvLayout;
use super::padding::{self, Padding, PaddingError, Shape};
use super::plan::{Buffer, Launch, Phase, Plan, PlanOptions, SlidingLayers, Step};
use crate::model::arch::Architecture;
use dims::Dims;

/// One optimization of the reference trajectory, as a plan transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Optimization {
    MergeLaunches,
    ReuseStaticWeights,
    MarkIntermediates,
    SharedIntermediates,
    LastTokenLmHead,
    NpuLmHead,
    CascadeFfn,
    AlignLayout,
    OmitPingpong,
}

impl PlanOptions {
    /// These options with one more optimization on.
    pub fn with(&self, optimization: Optimization) -> PlanOptions {
        let mut o = self.clone();
        match optimization {
            Optimization::MergeLaunches => o.merge_launches = true,
            Optimization::ReuseStaticWeights => o.static_weights = true,
            Optimization::MarkIntermediates => o.mark_intermediates = true,
            Optimization::SharedIntermediates => o.shared_intermediates = true,
            Optimization::LastTokenLmHead => o.last_token_lm_head = true,
            Optimization::NpuLmHead => o.npu_lm_head = true,
            Optimization::CascadeFfn => o.cascade_ffn = true,
            Optimization::AlignLayout => o.layout = QkvLayout::SeqFirst,
            Optimization::OmitPingpong => o.omit_pingpong = true,
        }
        o
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("{model}: {what} has no plan structure in the reference deployment")]
    Unsupported { model: String, what: String },
    #[error("{model}: the O+FFN split runs {split} launches, the group has {launches}")]
    Split {
        model: String,
        split: usize,
        launches: usize,
    },
    #[error("{model}: {why}")]
    Padding { model: String, why: String },
}

/// A feature of a model the plans cannot express, why, and what would lift it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedFeature {
    pub name: &'static str,
    pub reason: String,
    pub lift: &'static str,
}

/// Every feature of `arch` the plan builder cannot express (it refuses a model on
/// the first; phase 0 names them all).
pub fn unsupported_features(arch: &Architecture) -> Vec<UnsupportedFeature> {
    // Planned: Gemma's (1 + w) norms (`Transform::OffsetOne`), sandwich norms
    // (norm launches before the residual adds), the embedding scale
    // (`HostOp::Embed::scale`), the GELU-tanh MLP (`gelu_mul`), sliding-window
    // layers with their local RoPE table (`Plan::sliding`), LayerNorm with or
    // without weight and bias (`layernorm`), partial rotary (`RopeSpec::
    // rotary_dim`), Gemma-2's soft-caps (`FlashAttentionSpec::softcap`, the
    // host's decode attention and `HostOp::SoftCap`). What follows is not.
    let mut found = Vec::new();
    if let Some(scalar) = arch.query_pre_attn_scalar {
        if integer_scale_dim(scalar).is_none() {
            found.push(UnsupportedFeature {
                name: "query_pre_attn_scalar",
                reason: format!(
                    "scores are scaled by {scalar}^-1/2; the attention kernels scale by the \
                     inverse square root of a whole number of dimensions"
                ),
                lift: "a floating-point score scale in `FlashAttentionSpec` and the host's \
                       decode attention",
            });
        }
    }
    if let Some(cap) = arch.attn_logit_softcap {
        if !(cap.fract() == 0.0 && cap >= 1.0 && cap <= f64::from(u32::MAX)) {
            found.push(UnsupportedFeature {
                name: "attn_logit_softcapping",
                reason: format!(
                    "scores are capped at {cap}; the flash-attention kernel caps at a whole \
                     number"
                ),
                lift: "a floating-point cap in `FlashAttentionSpec`",
            });
        }
    }
    found
}

/// The buffer of the sliding-window layers' RoPE table.
const LOCAL_LUT: &str = "lut_local";

/// The local RoPE table's buffer, when the sliding-window layers rotate with a
/// base of their own.
fn local_lut(arch: &Architecture) -> Option<String> {
    (arch.local_rope.is_some() && arch.sliding_window.is_some()).then(|| LOCAL_LUT.to_string())
}

/// The plan's sliding-window layers, from the architecture.
fn sliding_layers(arch: &Architecture) -> Option<SlidingLayers> {
    arch.sliding_window.as_ref().map(|sw| SlidingLayers {
        window: sw.window as usize,
        layers: sw.layers.clone(),
        local_lut: local_lut(arch),
    })
}

/// `query_pre_attn_scalar` as the whole number the attention kernels scale by
/// (`scale_dim^-1/2`), when it is one.
fn integer_scale_dim(scalar: f64) -> Option<usize> {
    (scalar > 0.0 && scalar.fract() == 0.0 && scalar <= 1e6).then_some(scalar as usize)
}

/// Rebuilds `plan` for `arch` with one more optimization on.
pub fn apply(
    plan: &Plan,
    arch: &Architecture,
    device: &Device,
    optimization: Optimization,
) -> Result<Plan, PlanError> {
    let options = plan.options.with(optimization);
    plan_for(
        &plan.model,
        arch,
        device,
        plan.phase,
        plan.seq_len,
        &options,
    )
}

/// The dimensions the plans run before `pad-dims`: query heads after
/// `pad-heads`' intra-group phantom heads when that is on.
pub fn unpadded_shape(arch: &Architecture, options: &PlanOptions) -> Shape {
    Shape {
        hidden: arch.hidden_size,
        ffn: arch.intermediate_size,
        head_dim: arch.head_dim,
        heads: if options.pad_heads {
            padded_heads(arch)
        } else {
            arch.num_heads
        },
        kv_heads: arch.num_kv_heads,
        qk_norm: arch.qk_norm,
    }
}

/// What `pad-dims` pads `arch` to on `device`: nothing unless the option is on.
pub fn padding_of(
    arch: &Architecture,
    device: &Device,
    options: &PlanOptions,
) -> Result<Padding, PaddingError> {
    let shape = unpadded_shape(arch, options);
    if !options.pad_dims {
        return Ok(Padding::none(&shape));
    }
    Ok(padding::search(device, &shape)?.padding)
}

/// The plan of `phase` for `arch` at `seq_len` (prefill rows, or the decode
/// context) under `options`.
pub fn plan_for(
    model: &str,
    arch: &Architecture,
    device: &Device,
    phase: Phase,
    seq_len: usize,
    options: &PlanOptions,
) -> Result<Plan, PlanError> {
    let padding = padding_of(arch, device, options).map_err(|e| PlanError::Padding {
        model: model.to_string(),
        why: e.to_string(),
    })?;
    padded_plan(model, arch, device, (phase, seq_len), options, padding)
}

/// [`plan_for`] at the given padding (which must pad this model's unpadded
/// shape, `unpadded_shape`), whatever `options.pad_dims` says: how the
/// exactness of padding is tested one dimension at a time.
pub fn padded_plan(
    model: &str,
    arch: &Architecture,
    device: &Device,
    (phase, seq_len): (Phase, usize),
    options: &PlanOptions,
    padding: Padding,
) -> Result<Plan, PlanError> {
    let unsupported = |what: &str| PlanError::Unsupported {
        model: model.to_string(),
        what: what.to_string(),
    };
    if let Some(feature) = unsupported_features(arch).first() {
        return Err(unsupported(feature.name));
    }
    if phase == Phase::Decode && !options.gemv_decode {
        return Err(unsupported("decode with CPU projections"));
    }
    let base = unpadded_shape(arch, options);
    let consistent = padding.hidden.real == base.hidden
        && padding.ffn.real == base.ffn
        && padding.head_dim.real == base.head_dim
        && padding.heads.real == base.heads
        && padding.kv_heads.real == base.kv_heads
        && padding.heads.padded == padding.kv_heads.padded * padding.group()
        && padding.dims().iter().all(|(_, p)| p.padded >= p.real);
    if !consistent {
        return Err(PlanError::Padding {
            model: model.to_string(),
            why: format!("{padding:?} does not pad this model's dimensions {base:?}"),
        });
    }
    let mut b = Builder::new(model, arch, device, (phase, seq_len), options, padding);
    match phase {
        Phase::Prefill => b.prefill()?,
        Phase::Decode => b.decode(),
    }
    Ok(b.finish())
}

/// The smallest GQA-compatible head count that makes heads × head_dim a
/// multiple of 1024 (phase-2 prerequisite for non-aligned dims), if any
/// exists within twice the real count.
fn padded_heads(arch: &Architecture) -> usize {
    let (heads, kv, hd) = (arch.num_heads, arch.num_kv_heads.max(1), arch.head_dim);
    if (heads * hd) % 1024 == 0 {
        return heads;
    }
    (heads + 1..=2 * heads)
        .find(|h| h % kv == 0 && (h * hd) % 1024 == 0)
        .unwrap_or(heads)
}

struct Builder<'a> {
    model: String,
    arch: &'a Architecture,
    device: &'a Device,
    phase: Phase,
    seq: usize,
    options: &'a PlanOptions,
    padding: Option<Padding>,
    dims: Dims,
    buffers: BTreeMap<String, Buffer>,
    prologue: Vec<Step>,
    layer: Vec<Step>,
    epilogue: Vec<Step>,
}

/// A norm's weight and bias buffers, each when the model's norms have one.
#[derive(Debug, Clone, Default)]
struct NormBuffers {
    weight: Option<String>,
    bias: Option<String>,
}

/// Launches merged (or not) as one group, with the buffers consumed after it.
struct Group {
    name: &'static str,
    launches: Vec<Launch>,
    outputs: Vec<String>,
}

impl<'a> Builder<'a> {
    fn new(
        model: &str,
        arch: &'a Architecture,
        device: &'a Device,
        (phase, seq): (Phase, usize),
        options: &'a PlanOptions,
        padding: Padding,
    ) -> Self {
        let dims = Dims {
            hidden: padding.hidden.padded,
            real_hidden: padding.hidden.real,
            ffn: padding.ffn.padded,
            real_ffn: padding.ffn.real,
            head_dim: padding.head_dim.padded,
            real_head_dim: padding.head_dim.real,
            heads: padding.heads.padded,
            group: padding.group(),
            real_heads: arch.num_heads,
            kv_heads: padding.kv_heads.padded,
            real_kv_heads: padding.kv_heads.real,
            vocab: arch.vocab_size,
            eps: arch.rms_norm_eps,
            attn_scalar: arch.query_pre_attn_scalar.and_then(integer_scale_dim),
        };
        Builder {
            model: model.to_string(),
            arch,
            device,
            phase,
            seq,
            options,
            padding: Some(padding).filter(Padding::is_padded),
            dims,
            buffers: BTreeMap::new(),
            prologue: Vec::new(),
            layer: Vec::new(),
            epilogue: Vec::new(),
        }
    }

    fn finish(self) -> Plan {
        let fused = self.fused_layout();
        Plan {
            model: self.model,
            phase: self.phase,
            seq_len: self.seq,
            num_layers: self.arch.num_layers,
            options: self.options.clone(),
            padding: self.padding,
            sliding: sliding_layers(self.arch),
            fused,
            buffers: self.buffers,
            prologue: self.prologue,
            layer: self.layer,
            epilogue: self.epilogue,
        }
    }

    /// Rows every activation has: the sequence in prefill, one in decode.
    fn rows(&self) -> usize {
        match self.phase {
            Phase::Prefill => self.seq,
            Phase::Decode => 1,
        }
    }
}
