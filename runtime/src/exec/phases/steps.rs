//! Accounts for every bundle step of a phase: the phase runners record the steps
//! they execute; whatever is left (profiling, verification repeats, host notes,
//! conventions the runtime's kernels already follow, per-kernel configurations of
//! other shapes) is recorded here with what became of it and why, so the report can
//! list which of the bundle's steps were re-derived for the new model.

use std::collections::{BTreeMap, BTreeSet};

use crate::bundle::{Phase, Step, Value};
use crate::exec::artifacts::record::{PhaseRecord, StepOrigin, StepOutcome, StepRecord};
use crate::ops::OpKind;

/// Kernel × shape keys of this model (`gemm [2048, 2048, 512]`), from phase 1.
pub type ModelShapes = BTreeMap<String, BTreeSet<Vec<i64>>>;

pub fn account(phase: &Phase, rec: &mut PhaseRecord, shapes: &ModelShapes) {
    let recorded: BTreeSet<String> = rec
        .steps
        .iter()
        .filter_map(|s| match &s.origin {
            StepOrigin::Bundle { step, .. } => Some(step.clone()),
            _ => None,
        })
        .collect();
    let mut seen_ops: BTreeSet<OpKind> = BTreeSet::new();
    for step in &phase.steps {
        if recorded.contains(&step.id) {
            continue;
        }
        let repeat = !seen_ops.insert(step.op);
        let outcome = outcome(phase.index, step, shapes, repeat);
        rec.steps.push(StepRecord::from_bundle(step, outcome));
    }
}

fn text(step: &Step, key: &str) -> Option<String> {
    match step.params.get(key) {
        Some(Value::Text(t)) => Some(t.clone()),
        _ => None,
    }
}

fn outcome(phase: u8, step: &Step, shapes: &ModelShapes, repeat: bool) -> StepOutcome {
    let na = |why: &str| StepOutcome::NotApplicable {
        why: why.to_string(),
    };
    let done = StepOutcome::AsRecorded;
    match step.op {
        OpKind::VerifyModel | OpKind::DiagnoseLayers | OpKind::BuildModel | OpKind::BuildBlock | OpKind::ValidateBlock => done,
        OpKind::ProfilePrefill | OpKind::ProfileDecode => done,
        OpKind::WriteArtifacts | OpKind::RecordLessons | OpKind::EnumerateKernels | OpKind::CheckScope => done,
        OpKind::PretransposeWeights => done,
        OpKind::Evaluate if repeat => na("one fresh-process evaluation per run"),
        OpKind::Evaluate => done,
        OpKind::NoteHost => na("a host-side change with no effect on the emulated NPU or its cost model"),
        OpKind::RopeConvention => match text(step, "convention").as_deref() {
            Some("half-split") => done,
            _ => na("the runtime's RoPE kernel pairs dimension i with i + head_dim/2 (half-split), as the checkpoints do"),
        },
        OpKind::SelectTiling | OpKind::ValidateKernel | OpKind::RegisterKernel | OpKind::TuneTiling => {
            configuration(phase, step, shapes)
        }
        other => na(&format!("`{other}` is not executed by this runtime's phase {phase}")),
    }
}

/// A per-kernel step of a shape this model may not have.
fn configuration(phase: u8, step: &Step, shapes: &ModelShapes) -> StepOutcome {
    let Some(kernel) = text(step, "kernel") else {
        return StepOutcome::AsRecorded;
    };
    let shape = match step.params.get("shape") {
        Some(Value::IntList(s)) => s.clone(),
        _ => Vec::new(),
    };
    let ours = shapes.get(&kernel);
    match ours {
        Some(set) if shape.is_empty() || set.contains(&shape) => StepOutcome::AsRecorded,
        Some(set) => StepOutcome::Rederived {
            why: format!(
                "recorded at {shape:?}; this model's {kernel} shapes are {}, configured by phase {} from the bundle or the emulator's rule and validated",
                set.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", "),
                phase.min(1)
            ),
        },
        None => StepOutcome::NotApplicable {
            why: format!("this model's plans have no {kernel} launch"),
        },
    }
}
