//! Accounts for every bundle step of a phase: the phase runners record the steps
//! they execute; whatever is left (profiling, verification repeats, host notes,
//! conventions the runtime's kernels already follow, per-kernel configurations of
//! other shapes) is recorded here with what became of it and why, so the report can
//! list which of the bundle's steps were re-derived for the new model.

use std::collections::{BTreeMap, BTreeSet};

use crate::bundle::ReadStep;
use crate::exec::artifacts::record::{PhaseRecord, StepOrigin, StepOutcome, StepRecord};
use crate::ops::{Op, OpKind, RopeConvention};
use crate::phase::DeployPhase;
use crate::xdna2::kernels::Kernel;

/// Kernel × shape keys of this model (`gemm [2048, 2048, 512]`), from phase 1.
pub type ModelShapes = BTreeMap<String, BTreeSet<Vec<i64>>>;

/// Records every bundle step of `phase` (`steps`) that its runner did not, with
/// what became of it.
pub fn account(
    phase: DeployPhase,
    steps: &[ReadStep<'_>],
    rec: &mut PhaseRecord,
    shapes: &ModelShapes,
) {
    let recorded: BTreeSet<String> = rec
        .steps
        .iter()
        .filter_map(|s| match &s.origin {
            StepOrigin::Bundle { step, .. } => Some(step.clone()),
            _ => None,
        })
        .collect();
    let mut seen_ops: BTreeSet<OpKind> = BTreeSet::new();
    for read in steps {
        if recorded.contains(&read.step.id) {
            continue;
        }
        let repeat = !seen_ops.insert(read.op.kind());
        let outcome = outcome(phase.index(), &read.op, shapes, repeat);
        rec.steps.push(StepRecord::from_bundle(read.step, outcome));
    }
}

fn outcome(phase: u8, op: &Op, shapes: &ModelShapes, repeat: bool) -> StepOutcome {
    let na = |why: &str| StepOutcome::NotApplicable {
        why: why.to_string(),
    };
    let done = StepOutcome::AsRecorded;
    match op {
        Op::VerifyModel { .. } | Op::DiagnoseLayers | Op::BuildModel | Op::BuildBlock { .. } | Op::ValidateBlock { .. } => done,
        Op::ProfilePrefill { .. } | Op::ProfileDecode { .. } => done,
        Op::WriteArtifacts | Op::RecordLessons | Op::EnumerateKernels | Op::CheckScope => done,
        Op::PretransposeWeights => done,
        Op::Evaluate { .. } if repeat => na("one fresh-process evaluation per run"),
        Op::Evaluate { .. } => done,
        Op::NoteHost { .. } => na("a host-side change with no effect on the emulated NPU or its cost model"),
        Op::RopeConvention { convention: RopeConvention::HalfSplit } => done,
        Op::RopeConvention { .. } => {
            na("the runtime's RoPE kernel pairs dimension i with i + head_dim/2 (half-split), as the checkpoints do")
        }
        Op::SelectTiling(choice) => configuration(phase, choice.kernel, &choice.shape, shapes),
        Op::ValidateKernel(check) => configuration(phase, check.kernel, &check.shape, shapes),
        Op::RegisterKernel { kernel, shape } => {
            configuration(phase, *kernel, shape.as_deref().unwrap_or_default(), shapes)
        }
        Op::TuneTiling { kernel, .. } => configuration(phase, *kernel, &[], shapes),
        other => na(&format!("`{}` is not executed by this runtime's phase {phase}", other.kind())),
    }
}

/// A per-kernel step of a shape this model may not have (no shape: any of them).
fn configuration(phase: u8, kernel: Kernel, shape: &[usize], shapes: &ModelShapes) -> StepOutcome {
    let kernel = kernel.name();
    let shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let ours = shapes.get(kernel);
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
