//! The numerics of an optimization phase's plans: the probe of each change and the
//! kept plan's exit gates (teacher-forced logits against the reference's cached run,
//! the modeled figure not above the phase-3 plan's), and the short check that a change
//! of the plans leaves every logit bit-identical.

use std::collections::BTreeMap;

use crate::bundle::{Comparison, Step, Value};
use crate::exec::design::{self, modeled, Design, Plans};
use crate::exec::gates::decode::ReferenceRun;
use crate::exec::gates::gate::{GateCheck, ThresholdSource};
use crate::exec::run::Run;
use crate::exec::{DeployError, Internal};
use crate::model::Model;
use crate::ops::{OpKind, RuntimeMetric};
use crate::xdna2::cost::Params;
use crate::xdna2::device::Device;

use super::{value_of, Target};

/// What the exit gates of an optimization phase run the kept plan against: the
/// model, the first verification prompt and the reference's run of it.
pub(super) struct KeptPlanInputs<'r> {
    device: &'r Device,
    params: &'r Params,
    model: &'r Model,
    prompt: &'r [u32],
    reference: &'r ReferenceRun,
    /// The teacher-forced logits limit (phase 0's floor).
    limit: &'r crate::exec::gates::floor::DerivedLimit,
}

impl<'r> KeptPlanInputs<'r> {
    pub(super) fn of(run: &'r Run<'_>) -> Result<Self, DeployError> {
        let model = &run.loaded.model;
        let (Some(prompt), Some(reference)) = (
            run.report.prompts.first(),
            run.loaded.reference_runs.first(),
        ) else {
            return Err(Internal::NoPromptOrReference.into());
        };
        Ok(Self {
            device: &run.device,
            params: &run.params,
            model,
            prompt,
            reference,
            limit: &run.loaded.decode_limits.logits,
        })
    }
}

/// The exit gates of an optimization phase, about the plan it keeps (the
/// phase-3 plan when no technique won): its numerics, teacher-forced like the
/// probe of every change, and its modeled figure, not above the phase-3
/// plan's. Neither asks for a speed-up: "no technique beat the baseline under
/// the model" is an outcome, not a failed deployment.
pub(super) fn kept_plan_gates(
    inputs: &KeptPlanInputs<'_>,
    t: &Target,
    baseline: f64,
    (plans, design): (&Plans, &Design),
    threshold: ThresholdSource,
) -> Result<[GateCheck; 2], DeployError> {
    let numerics = teacher_forced_gate(inputs, plans, design, "kept plan: teacher-forced logits")?;
    let times = modeled(plans, inputs.device, inputs.params);
    let time = GateCheck::named(
        format!(
            "kept plan: modeled {} not above the phase-3 plan's",
            t.metric
        ),
        t.profile_op,
    )
    .measures(t.metric, value_of(t, &times))
    .when(design::at_seq_len())
    .against(Comparison::Le, baseline, threshold)
    .modeled();
    Ok([numerics, time])
}

/// Decode steps of the short check and of the numerics probe.
pub(super) const SHORT_STEPS: usize = 4;

/// The numerics probe of a change, run before it is timed (cheap: one prompt,
/// five logits), so a change whose arithmetic is wrong fails in the phase that
/// makes it even when its modeled time would have had it reverted anyway.
pub(super) fn probe_gate(
    run: &Run<'_>,
    plans: &Plans,
    design: &Design,
    step: &Step,
) -> Result<GateCheck, DeployError> {
    let inputs = KeptPlanInputs::of(run)?;
    teacher_forced_gate(
        &inputs,
        plans,
        design,
        &format!("probe: teacher-forced logits after {} {}", step.op, step.id),
    )
}

/// The first prompt's prefill and `SHORT_STEPS` decode steps of `plans` fed the
/// reference's tokens, logits against the reference's at the teacher-forced limit.
pub(super) fn teacher_forced_gate(
    inputs: &KeptPlanInputs<'_>,
    plans: &Plans,
    design: &Design,
    name: &str,
) -> Result<GateCheck, DeployError> {
    use crate::exec::gates::decode::teacher_forced_logits;
    use crate::xdna2::interpreter::Interpreter;
    let model = inputs.model;
    let mut npu = Interpreter::new(inputs.device, &model.arch, &model.weights, design.path);
    let worst = teacher_forced_logits(
        &mut npu,
        plans,
        inputs.prompt,
        inputs.reference,
        SHORT_STEPS,
    )?;
    Ok(GateCheck::named(name.to_string(), OpKind::VerifyModel)
        .measures(RuntimeMetric::LogitsMaxRel, worst.value)
        .when(BTreeMap::from([
            ("prompts".to_string(), Value::Int(1)),
            ("tokens".to_string(), Value::Int(SHORT_STEPS as i64 + 1)),
            ("worst".to_string(), Value::Text(worst.at)),
        ]))
        .against(
            Comparison::Le,
            inputs.limit.limit,
            ThresholdSource::Measured(inputs.limit.clone()),
        ))
}

/// The short check: both plans' NPU paths run the first prompt's prefill and
/// `SHORT_STEPS` decode steps fed the reference's greedy tokens (the same inputs on
/// both sides); true when every logit is bit-identical. Stops at the first
/// difference.
pub(super) fn short_check(
    run: &Run<'_>,
    old: (&Plans, &Design),
    new: (&Plans, &Design),
) -> Result<bool, DeployError> {
    use crate::xdna2::interpreter::Interpreter;
    let model = &run.loaded.model;
    let Some(prompt) = run.report.prompts.first() else {
        return Err(Internal::NoPrompt.into());
    };
    let npu = |path| Interpreter::new(&run.device, &model.arch, &model.weights, path);
    let (mut a, mut b) = (npu(old.1.path), npu(new.1.path));
    let same = |x: &[f32], y: &[f32]| {
        x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
    };
    if !same(
        &a.prefill(&old.0.prefill, prompt)?,
        &b.prefill(&new.0.prefill, prompt)?,
    ) {
        return Ok(false);
    }
    let fed: Vec<u32> = run
        .loaded
        .reference_runs
        .first()
        .map(|r| r.steps.iter().take(SHORT_STEPS).map(|s| s.token).collect())
        .unwrap_or_default();
    for token in fed {
        if !same(
            &a.decode(&old.0.decode, token)?,
            &b.decode(&new.0.decode, token)?,
        ) {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::gates::verify::reference_runs;
    use crate::exec::phases::optimize::target;
    use crate::exec::phases::DeployPhase;
    use crate::xdna2::fit::committed_params;

    /// The exit gates pass the phase-3 plan kept as it is and fail a kept plan
    /// that is modeled slower than the baseline or computes something else: no
    /// speed-up is demanded, but the gates still hold.
    #[test]
    fn the_exit_gates_hold_the_kept_plan_to_its_numerics_and_the_baseline_time() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/fixtures/qwen25-tiny");
        let model = Model::load(&dir, None).expect("fixture weights");
        let device = Device::npu2();
        let params = committed_params();
        let prompt: Vec<u32> = vec![3, 17, 29, 41, 5, 11, 7, 23];
        let prompts = std::slice::from_ref(&prompt);
        let (runs, _) =
            reference_runs(&model, prompts, crate::exec::gates::topk::TopKGate::DEFAULT)
                .expect("reference");
        let limits = crate::exec::gates::floor::DecodeLimits::measure(&model, prompts, &runs)
            .expect("floor");
        let inputs = KeptPlanInputs {
            device: &device,
            params: &params,
            model: &model,
            prompt: &prompt,
            reference: &runs[0],
            limit: &limits.logits,
        };
        let t = target(DeployPhase::Decode);
        let plans_of = |d: &Design| d.plans("qwen25-tiny", &model.arch, &device).expect("plans");
        let rule = || ThresholdSource::rule("test");
        let gates = |baseline: f64, d: &Design| {
            kept_plan_gates(&inputs, &t, baseline, (&plans_of(d), d), rule()).expect("gates")
        };
        let baseline = Design::baseline();
        let baseline_ms = modeled(&plans_of(&baseline), &device, &params).ms_per_token;
        let passed = |g: &[GateCheck; 2]| g.each_ref().map(|g| g.passed);

        assert_eq!(
            passed(&gates(baseline_ms, &baseline)),
            [true, true],
            "the phase-3 plan kept"
        );

        let mut faster = baseline.clone();
        faster.options.static_weights = true;
        faster.options.merge_launches = true;
        let faster_ms = modeled(&plans_of(&faster), &device, &params).ms_per_token;
        assert!(faster_ms < baseline_ms, "{faster_ms} vs {baseline_ms}");
        let slower = gates(faster_ms, &baseline);
        assert_eq!(
            passed(&slower),
            [true, false],
            "a kept plan slower than the baseline"
        );
        assert_eq!(
            (slower[1].value, slower[1].threshold),
            (baseline_ms, faster_ms)
        );

        let mut wrong = baseline.clone();
        wrong.path.defects.stale_kv = true;
        let wrong = gates(baseline_ms, &wrong);
        assert_eq!(
            passed(&wrong),
            [false, true],
            "a kept plan that computes something else"
        );
        assert!(wrong[0].value > wrong[0].threshold, "{}", wrong[0].value);
    }
}
