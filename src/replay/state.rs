//! The deployment state replay carries from action to action: the plan options of
//! the prefill and the decode plan, which launch groups are merged, and the kernel
//! choices made so far (the registry being built in phase 1).
//!
//! The trajectory starts from the unoptimized deployment: one call per launch,
//! every buffer written per call, activations head-first around attention, the
//! prefill LM head as a full-sequence GEMM and the decode LM head on the host.
//! Facts only a model-level numerical run would show (the RoPE pairing, how static
//! weight buffers are keyed) are not kept: replay does not run whole models.
//! Actions switch the emulator's plan options one at a time; the session's phase
//! says which plan a buffer technique applies to (phase 4 prefill, phase 5 decode).

use std::collections::{BTreeMap, BTreeSet};

use skillc_runtime::xdna2::kernels::QkvLayout;
use skillc_runtime::xdna2::plan::{Launch, Phase, PlanOptions};

/// Launch groups the emulator's builder merges, per plan phase.
pub const PREFILL_GROUPS: &[&str] = &["rms_gemms_rope", "o_ffn"];
pub const DECODE_GROUPS: &[&str] = &["rms_gemv_rope", "o_gemv_ffn"];

#[derive(Debug, Clone)]
pub struct State {
    pub prefill: PlanOptions,
    pub decode: PlanOptions,
    /// Groups currently merged (builder groups only; `a-b` merges are checked,
    /// never kept).
    pub merged: BTreeSet<String>,
    /// Kernel choices by (kernel name, shape).
    pub kernels: BTreeMap<(String, Vec<usize>), Launch>,
}

impl State {
    pub fn initial() -> Self {
        let first = PlanOptions {
            last_token_lm_head: false,
            npu_lm_head: false,
            layout: QkvLayout::HeadFirst,
            ..PlanOptions::naive()
        };
        State {
            prefill: first.clone(),
            decode: first,
            merged: BTreeSet::new(),
            kernels: BTreeMap::new(),
        }
    }

    /// The options of `phase`'s plan, with merging on once all its groups are.
    pub fn options(&self, phase: Phase) -> PlanOptions {
        let (base, groups) = match phase {
            Phase::Prefill => (&self.prefill, PREFILL_GROUPS),
            Phase::Decode => (&self.decode, DECODE_GROUPS),
        };
        PlanOptions {
            merge_launches: groups.iter().all(|g| self.merged.contains(*g)),
            ..base.clone()
        }
    }

    /// The plan options a buffer technique in a session of `phase` changes.
    pub fn options_of_session(&mut self, session_phase: u8) -> &mut PlanOptions {
        if session_phase >= 5 {
            &mut self.decode
        } else {
            &mut self.prefill
        }
    }

    /// Both plans' options, for changes that apply to the whole deployment.
    pub fn both(&mut self) -> [&mut PlanOptions; 2] {
        [&mut self.prefill, &mut self.decode]
    }
}

/// The plan phase a builder group belongs to.
pub fn group_phase(group: &str) -> Option<Phase> {
    if PREFILL_GROUPS.contains(&group) || group == "flash_attn" {
        Some(Phase::Prefill)
    } else if DECODE_GROUPS.contains(&group) {
        Some(Phase::Decode)
    } else {
        None
    }
}

/// The builder groups a merge names: `a-b` is groups a and b in one call.
pub fn group_parts(group: &str) -> Vec<&str> {
    group.split('-').filter(|p| !p.is_empty()).collect()
}
