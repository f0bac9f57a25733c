//! Phases 4 and 5, prefill and decode optimization: the bundle's techniques applied
//! one at a time; a change is kept only when the plans still place, verification
//! still passes and the modeled time (TTFT for phase 4, ms/token for phase 5, at
//! seq_len 2048 like the published figures) strictly drops. Techniques that
//! replace the same part of the plan (the fused decode and the decode cascade)
//! are tried as alternatives from one plan and the fastest kept
//! (`alternatives.rs`), so the plan kept does not depend on which the bundle
//! lists first. The exit gates are
//! about the plan kept, which is the phase-3 plan when no technique wins under
//! the model: its numerics and a modeled time not above the phase-3 plan's.
//!
//! What "verification still passes" costs depends on the change. A change that
//! leaves the numerics fingerprint of the plans unchanged (call grouping, which
//! buffers the host re-writes) computes bit-identical outputs by construction: it
//! is proven by the fingerprint, not re-run. A change of the fingerprint (other
//! kernels, specs, host ops or weight transforms) validates every new kernel
//! configuration with the phase-1 harness and re-runs the NPU side of the full
//! greedy verification against the reference's cached runs.

mod alternatives;
mod gates;
mod revisit;
mod technique;

use gates::{kept_plan_gates, KeptPlanInputs};
use revisit::revisit_prefill;
use technique::try_technique;

use std::collections::BTreeMap;

use crate::bundle::{BundleSteps, ReadStep};
use crate::exec::artifacts::record::{ModeledTimes, PhaseRecord, StepRecord};
use crate::exec::artifacts::trajectory::ActionLinks;
use crate::exec::design::{self, fingerprint, modeled, Design, Plans};
use crate::exec::gates::gate::{GateCheck, ThresholdSource};
use crate::exec::phases::DeployPhase;
use crate::exec::run::{PhaseEnd, Run};
use crate::exec::DeployError;
use crate::ops::{Metric, OpKind};

struct Target {
    phase: DeployPhase,
    metric: Metric,
    profile_op: OpKind,
    /// A prefill technique re-tried after phase 5: decode must not slow down either.
    revisit: bool,
}

impl Target {
    /// The unit its figures are in, as the notes write it.
    fn unit(&self) -> &'static str {
        crate::metrics::unit_symbol(self.metric.canonical_unit())
    }
}

fn target(phase: DeployPhase) -> Target {
    if phase == DeployPhase::Prefill {
        Target {
            phase,
            metric: Metric::TtftS,
            profile_op: OpKind::ProfilePrefill,
            revisit: false,
        }
    } else {
        Target {
            phase,
            metric: Metric::MsPerToken,
            profile_op: OpKind::ProfileDecode,
            revisit: false,
        }
    }
}

fn value_of(t: &Target, times: &ModeledTimes) -> f64 {
    if t.phase == DeployPhase::Prefill {
        times.ttft_s
    } else {
        times.ms_per_token
    }
}

/// Phase 4: prefill optimization.
pub(crate) fn prefill(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    baseline: &ModeledTimes,
) -> Result<PhaseEnd, DeployError> {
    optimize(run, rec, DeployPhase::Prefill, baseline)
}

/// Phase 5: decode optimization, then the prefill techniques once more.
pub(crate) fn decode(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    baseline: &ModeledTimes,
) -> Result<PhaseEnd, DeployError> {
    optimize(run, rec, DeployPhase::Decode, baseline)
}

fn optimize(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    phase: DeployPhase,
    baseline: &ModeledTimes,
) -> Result<PhaseEnd, DeployError> {
    let t = target(phase);
    let plans = run.plans()?;
    let start = modeled(&plans, &run.device, &run.params);
    // One baseline for both phases: phase 3's verified plan (the report's
    // "baseline" column), not whatever phase 4 left for phase 5.
    let baseline = value_of(&t, baseline);
    profile(run, &t, &start, "before");
    let mut current = (run.design.clone(), plans, start.clone());
    let all: &BundleSteps<'_> = run.steps;
    let techniques: Vec<&ReadStep<'_>> = all
        .of(phase)
        .iter()
        .filter(|s| s.op.kind().is_technique())
        .collect();
    // In bundle order: a technique alone is kept greedily; one that excludes
    // later ones is tried with them as alternatives from the same plan.
    let mut tried = vec![false; techniques.len()];
    while let Some(first) = tried.iter().position(|done| !done) {
        let remaining: Vec<usize> = (first..techniques.len()).filter(|&i| !tried[i]).collect();
        let members = alternatives::group(run, &t, &current.0, &techniques, &remaining);
        if let [only] = members[..] {
            let read = techniques[only];
            run.progress.step(&format!(
                "{} {}",
                read.step.op,
                crate::notation::text_value(&read.step.id)
            ));
            let (outcome, next) = try_technique(run, rec, &t, read, &current)?;
            if let Some(next) = next {
                current = next;
            }
            rec.steps.push(StepRecord::from_bundle(read.step, outcome));
            tried[only] = true;
            continue;
        }
        let reads: Vec<&ReadStep<'_>> = members.iter().map(|&i| techniques[i]).collect();
        let (outcomes, next) = alternatives::try_alternatives(run, rec, &t, &reads, &current)?;
        for (&i, outcome) in members.iter().zip(outcomes) {
            rec.steps
                .push(StepRecord::from_bundle(techniques[i].step, outcome));
            tried[i] = true;
        }
        if let Some(next) = next {
            current = next;
        }
    }
    if phase == DeployPhase::Decode {
        current = revisit_prefill(run, rec, current)?;
    }
    run.design = current.0.clone();
    let end = current.2.clone();
    let final_value = value_of(&t, &end);
    profile(run, &t, &end, "after");
    if final_value >= baseline {
        rec.notes.push(format!(
            "no technique lowered the modeled {} below the phase-3 plan's {} {}: the phase keeps that plan (each technique tried is listed with its modeled figure and why it was reverted)",
            t.metric,
            crate::exec::gates::gate::format_value(baseline),
            t.unit()
        ));
    }
    let gates = {
        let inputs = KeptPlanInputs::of(run)?;
        kept_plan_gates(
            &inputs,
            &t,
            baseline,
            (&current.1, &current.0),
            exit_threshold(run, &t),
        )?
    };
    let kept_fp = fingerprint(&current.1, &current.0.path);
    if let Some(how) = run.verified.get(&kept_fp) {
        rec.notes.push(format!(
            "the plan kept has the numerics fingerprint verified in {how}: the phase's verification gates hold for it"
        ));
    }
    let refs: Vec<&GateCheck> = gates.iter().collect();
    run.traj.observe(
        Some(&format!("phase {phase} result: the plan kept")),
        &refs,
        None,
    );
    let failed = run.record_gates(rec, gates);
    rec.notes.push(format!(
        "{}: {} -> {} {} (modeled at seq {}; {})",
        t.metric,
        crate::exec::gates::gate::format_value(baseline),
        crate::exec::gates::gate::format_value(final_value),
        t.unit(),
        design::SEQ_LEN,
        run.calibration_note()
    ));
    let Some(gate) = failed else {
        return Ok(PhaseEnd::Passed);
    };
    let why = if gate.metric == t.metric {
        "the plan kept is modeled slower than the phase-3 plan"
    } else {
        "the plan kept fails the teacher-forced numerics check"
    };
    let failure = crate::exec::gates::remedy::Failure {
        phase,
        op: gate.op,
        params: BTreeMap::new(),
        gate,
    };
    Ok(PhaseEnd::Failed(run.stop(rec, &failure, why)))
}

/// Where the exit gate's threshold comes from: the bundle's recorded gate on the
/// same metric, re-derived (the bundle compares with the previous phase and
/// demands a drop), or the runtime's rule when the bundle has none.
fn exit_threshold(run: &Run<'_>, t: &Target) -> ThresholdSource {
    let rule = "not above the modeled figure of this model's phase-3 plan: a phase whose techniques do not beat that plan keeps it";
    match run
        .bundle
        .phases
        .get(usize::from(t.phase.index()))
        .and_then(|p| p.exit_gates.iter().find(|g| g.metric == t.metric))
    {
        Some(g) => ThresholdSource::Rederived {
            why: format!(
                "the bundle's gate is relative to the previous phase (recorded {}); here {rule}",
                g.recorded
                    .map_or("-".to_string(), crate::exec::gates::gate::format_value)
            ),
            provenance: g.provenance.clone(),
        },
        None => ThresholdSource::rule(format!("reference system phase {}: {rule}", t.phase)),
    }
}

fn profile(run: &mut Run<'_>, t: &Target, times: &ModeledTimes, when: &str) {
    let params = design::at_seq_len();
    let a = run
        .traj
        .action(t.profile_op, &params, &ActionLinks::default());
    let g = GateCheck::named(
        format!("{} {when} the phase's techniques", t.metric),
        t.profile_op,
    )
    .measures(t.metric, value_of(t, times))
    .when(design::at_seq_len())
    .recorded("a modeled figure, recorded");
    run.traj.observe(
        Some(&format!("{when} the phase's techniques")),
        &[&g],
        Some(&a),
    );
}

type State = (Design, Plans, ModeledTimes);
