//! The plan structure each of the nine models was published with (mlir-air,
//! calibration §6 and each model's ARCHITECTURE.md): how many ELF calls a
//! layer runs, where the prefill O+FFN splits, whether the Q/K/V bias is added
//! on the NPU, how the LM head is partitioned. The calibration's whole-model
//! points are predicted from these structures, so a held-out error measures
//! the cost model and not a plan the published deployment did not run; `bench
//! deploy` times the same structures as the anchor skillc's own plans are
//! compared with.
//!
//! A structure is data in `calibration.json` (`published_plans`, hashed with
//! the fit); [`published_plan`] builds it with the reference builder and
//! checks that the built plan has the published call counts.

use serde::{Deserialize, Serialize};

use super::builder::{plan_for, PlanError};
use super::constraints::ConstraintViolation;
use super::device::Device;
use super::plan::{CallSplit, Phase, Plan, PlanOptions};
use crate::model::arch::Architecture;

/// One model's published plan structure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedPlan {
    /// Model family (what leave-one-family-out leaves out together).
    pub family: String,
    /// NPU calls per decoder layer, prefill and decode, as published (§6).
    pub calls_per_layer: [usize; 2],
    /// Where the merged prefill O+FFN splits (empty: one call).
    #[serde(default)]
    pub o_ffn_calls: Vec<CallSplit>,
    /// Q/K/V bias added on the NPU inside the attention-input call.
    #[serde(default)]
    pub bias_on_npu: bool,
    /// LM-head GEMV partitions.
    pub lm_head_parts: usize,
    /// All partitions stitched into one call.
    #[serde(default)]
    pub lm_head_one_call: bool,
    /// Rows of the LM-head GEMV as published: per partition (16384 for the
    /// Llama heads, 8192 for the Qwen ones), or the whole head where only
    /// that is named (SmolLM2's 49152). The emulator rounds its partitions to
    /// its GEMV block instead; this names the shape the registry measured.
    pub lm_head_gemv_rows: usize,
    /// Decode GEMVs single-buffered (`omit_pingpong`): none, or only the
    /// standalone down projection.
    #[serde(default)]
    pub single_buffered_down: bool,
    /// The decode O+FFN cascade (`o_gemv_ffn`) single-buffered, the rest
    /// double-buffered.
    #[serde(default)]
    pub single_buffered_o_ffn: bool,
    /// Where the structure is published.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum PublishedError {
    #[error(transparent)]
    Build(#[from] PlanError),
    #[error("{model} {phase:?}: the published structure runs {published} calls per layer, the built plan {built}")]
    Calls {
        model: String,
        phase: Phase,
        published: usize,
        built: usize,
    },
    #[error("{model} {phase:?}: the hardware would refuse the published plan: {}", .violations.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("; "))]
    Refused {
        model: String,
        phase: Phase,
        violations: Vec<ConstraintViolation>,
    },
}

impl PublishedPlan {
    /// The reference plan options with this structure: no phantom heads (the
    /// published plans pad inside the GEMM tiles instead), double-buffered
    /// GEMVs except where published otherwise, the published O+FFN split,
    /// bias placement and LM-head partitions.
    pub fn options(&self) -> PlanOptions {
        PlanOptions {
            pad_heads: false,
            omit_pingpong: false,
            single_buffered_down: self.single_buffered_down,
            single_buffered_o_ffn: self.single_buffered_o_ffn,
            bias_on_npu: self.bias_on_npu,
            o_ffn_calls: self.o_ffn_calls.clone(),
            lm_head_parts: self.lm_head_parts,
            lm_head_one_call: self.lm_head_one_call,
            published_calls: true,
            ..PlanOptions::reference()
        }
    }

    /// The most launches one published call stitches.
    fn launches_per_call(plan: &Plan) -> usize {
        plan.calls()
            .map(|(_, c)| c.launches.len())
            .max()
            .unwrap_or(0)
    }
}

/// The device a published plan is checked against: the published Qwen plans
/// stitch 9 launches (`rms_qkv_bias_rope`) and 19 (`lm_head_gemv`) into one
/// ELF, past the 8 the device description keeps skillc's own plans to (a
/// compile-time limit, calibration §1), so the launch limit is the plan's own.
pub fn checking_device(device: &Device, plan: &Plan) -> Device {
    let mut device = device.clone();
    device.limits.launches_per_call_max = device
        .limits
        .launches_per_call_max
        .max(PublishedPlan::launches_per_call(plan));
    device
}

/// The published plan of `phase` for `model`, checked against the hardware
/// constraints and the published call count.
pub fn published_plan(
    model: &str,
    arch: &Architecture,
    device: &Device,
    phase: Phase,
    seq_len: usize,
    published: &PublishedPlan,
) -> Result<Plan, PublishedError> {
    let plan = plan_for(model, arch, device, phase, seq_len, &published.options())?;
    let expected = match phase {
        Phase::Prefill => published.calls_per_layer[0],
        Phase::Decode => published.calls_per_layer[1],
    };
    if plan.calls_per_layer() != expected {
        return Err(PublishedError::Calls {
            model: model.to_string(),
            phase,
            published: expected,
            built: plan.calls_per_layer(),
        });
    }
    plan.check(&checking_device(device, &plan))
        .map_err(|violations| PublishedError::Refused {
            model: model.to_string(),
            phase,
            violations,
        })?;
    Ok(plan)
}
