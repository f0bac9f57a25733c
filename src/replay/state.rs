//! The deployment state replay carries from action to action: the plan options of
//! the prefill and the decode plan, which launch groups are merged, the kernel
//! choices made so far (the registry being built in phase 1), and the two facts
//! only a model-level run shows (RoPE pairing, how weight buffers are keyed).
//!
//! The trajectory starts from the unoptimized deployment: one call per launch,
//! every buffer written per call, activations head-first around attention, the
//! prefill LM head as a full-sequence GEMM and the decode LM head on the host.
//! Actions switch the emulator's plan options one at a time, as `ops::effect`
//! defines; the session's phase says which plan a buffer technique applies to
//! (phase 4 prefill, phase 5 decode).

use std::collections::{BTreeMap, BTreeSet};

use skillc_runtime::ops::{BufferKey, PlanChange, PlanScope, RopeConvention};
use skillc_runtime::phase::DeployPhase;
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
    /// What only a model-level run shows: the RoPE pairing, and static weight
    /// buffers keyed per kernel (every layer reads the one written last).
    pub rope: RopeConvention,
    pub weight_buffers: BufferKey,
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
            rope: RopeConvention::HalfSplit,
            weight_buffers: BufferKey::PerLayer,
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

    /// Applies `change` to the plans of `scope` (a session of phase 5 or later
    /// optimizes decode, earlier ones prefill) and returns their phases.
    pub fn apply(
        &mut self,
        change: &PlanChange,
        scope: PlanScope,
        session_phase: DeployPhase,
    ) -> Vec<Phase> {
        let phases = match scope {
            PlanScope::Prefill => vec![Phase::Prefill],
            PlanScope::Decode => vec![Phase::Decode],
            PlanScope::Both => vec![Phase::Prefill, Phase::Decode],
            PlanScope::Session if session_phase >= DeployPhase::Decode => vec![Phase::Decode],
            PlanScope::Session => vec![Phase::Prefill],
        };
        for phase in &phases {
            change.apply(match phase {
                Phase::Prefill => &mut self.prefill,
                Phase::Decode => &mut self.decode,
            });
        }
        phases
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
