//! Phase 4's techniques reverted because the modeled TTFT did not drop, tried once more
//! after phase 5 changed what both plans share; a step kept then amends its phase-4
//! record.

use crate::bundle::ReadStep;
use crate::exec::artifacts::record::{PhaseRecord, Reversion, StepOrigin, StepOutcome, StepRecord};
use crate::exec::phases::DeployPhase;
use crate::exec::run::Run;
use crate::exec::DeployError;

use super::technique::try_technique;
use super::{target, State, Target};

/// Phase 4's techniques that were reverted because the modeled TTFT did not drop
/// are tried once more after phase 5: the decode techniques change what both plans
/// share (the LM-head partitions), so a prefill change that lost then may win now.
/// Kept only when TTFT strictly drops and decode does not slow down.
pub(super) fn revisit_prefill(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    mut current: State,
) -> Result<State, DeployError> {
    let reverted: Vec<String> = run
        .report
        .phases
        .iter()
        .filter(|p| p.index == DeployPhase::Prefill)
        .flat_map(|p| &p.steps)
        .filter_map(|s| match (&s.origin, &s.outcome) {
            (
                StepOrigin::Bundle { step, .. },
                StepOutcome::Reverted {
                    why: Reversion::NoSpeedup { .. },
                },
            ) => Some(step.clone()),
            _ => None,
        })
        .collect();
    let steps: Vec<ReadStep<'_>> = run
        .steps
        .of(DeployPhase::Prefill)
        .iter()
        .filter(|s| reverted.contains(&s.step.id))
        .cloned()
        .collect();
    if steps.is_empty() {
        return Ok(current);
    }
    let t = Target {
        revisit: true,
        ..target(DeployPhase::Prefill)
    };
    // Phase-4 operations, recorded in a phase-4 session (the language checks
    // that an operation belongs to its session's phase).
    let started = run.options.started.clone();
    run.traj.session(
        &started,
        DeployPhase::Prefill,
        "Prefill optimization, re-tried after phase 5",
    );
    for read in &steps {
        let step = read.step;
        run.progress
            .step(&format!("{} {} (re-tried after phase 5)", step.op, step.id));
        let (outcome, next) = try_technique(run, rec, &t, read, &current)?;
        if let Some(next) = next {
            current = next;
        }
        if let StepOutcome::Kept { why } = &outcome {
            amend_phase4_step(run, &step.id, why);
        }
        rec.steps.push(StepRecord {
            op: step.op.to_string(),
            params: step.params.clone(),
            origin: StepOrigin::Derived {
                why: format!(
                    "phase 4 reverted bundle step {} (modeled TTFT did not drop); re-tried once the decode techniques changed the shared design",
                    step.id
                ),
            },
            outcome,
            recorded: None,
        });
    }
    run.traj
        .session(&started, DeployPhase::Decode, "Decode optimization, result");
    Ok(current)
}

/// The phase-4 record of a step kept when re-tried: it ran, later than recorded.
fn amend_phase4_step(run: &mut Run<'_>, id: &str, kept: &str) {
    let records = run
        .report
        .phases
        .iter_mut()
        .filter(|p| p.index == DeployPhase::Prefill)
        .flat_map(|p| p.steps.iter_mut());
    for record in records {
        let StepOrigin::Bundle { step, .. } = &record.origin else {
            continue;
        };
        if step != id {
            continue;
        }
        if let StepOutcome::Reverted { why } = &record.outcome {
            record.outcome = StepOutcome::Rederived {
                why: format!("{why} in phase 4; re-tried after phase 5 and kept: {kept}"),
            };
        }
    }
}
