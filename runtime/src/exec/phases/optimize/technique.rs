//! One technique of an optimization phase tried on the current design: applied (scaled
//! to this model where the recorded value only bounds it), its new kernel
//! configurations validated, its numerics proven by fingerprint or probed, and kept
//! only when the modeled time strictly drops.
//!
//! A try has two halves so that alternatives (`alternatives.rs`) can be timed
//! side by side before any is confirmed: [`time_technique`] applies the change
//! and runs the checks that come before the modeled figure (the plans build and
//! place, the numerics probe, the strict-drop gate), and [`confirm`] runs the
//! ones that cost a verification (new kernel configurations, the short check or
//! the full re-verification) and keeps the change.

use crate::bundle::{Comparison, ReadStep};
use crate::exec::artifacts::record::{ModeledTimes, PhaseRecord, Reversion, StepOutcome};
use crate::exec::artifacts::registry::RegistryRow;
use crate::exec::artifacts::trajectory::ActionLinks;
use crate::exec::design::{self, fingerprint, modeled, Design, Plans};
use crate::exec::gates::gate::{GateCheck, ThresholdSource};
use crate::exec::phases::full_model::{run_gates, run_verification};
use crate::exec::phases::kernels::{check_site, kernel_gate};
use crate::exec::phases::long_context;
use crate::exec::phases::recorded_format;
use crate::exec::run::Run;
use crate::exec::DeployError;
use crate::model::arch::Architecture;
use crate::ops::{Op, WeightFormat};
use crate::xdna2::device::Device;
use crate::xdna2::kernels::LmHeadSpec;

use super::gates::{probe_gate, short_check, SHORT_STEPS};
use super::{value_of, State, Target};

/// A change that built, placed, passed its numerics probe and lowered the
/// modeled figure: what [`confirm`] needs to keep it.
pub(super) struct Timed {
    pub(super) design: Design,
    pub(super) plans: Plans,
    pub(super) times: ModeledTimes,
    /// The trajectory action that applied it.
    pub(super) action: String,
    /// Why the recorded parameters were scaled to this model, if they were.
    rederived: Option<String>,
    /// Recorded on other weights than the packed GEMVs it changes.
    pub(super) other: Option<(WeightFormat, WeightFormat)>,
}

/// How far a try got before its modeled figure was known.
pub(super) enum Timing {
    /// Decided before any confirmation: not applicable, covered or reverted;
    /// `other` as in [`Timed`], once the plans were built.
    Decided {
        outcome: StepOutcome,
        other: Option<(WeightFormat, WeightFormat)>,
    },
    Timed(Box<Timed>),
}

/// Applies one technique; returns the step's outcome and the new state when kept.
/// A technique recorded on other weights than the packed GEMVs it changes goes
/// into the report's weight-path section with its outcome.
pub(super) fn try_technique(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    t: &Target,
    read: &ReadStep<'_>,
    current: &State,
) -> Result<(StepOutcome, Option<State>), DeployError> {
    let (outcome, other, next) = match time_technique(run, rec, t, read, current)? {
        Timing::Decided { outcome, other } => (outcome, other, None),
        Timing::Timed(timed) => {
            let other = timed.other;
            let (outcome, next) = confirm(run, rec, t, read, current, *timed)?;
            (outcome, other, next)
        }
    };
    finish(run, read, &outcome, other);
    Ok((outcome, next))
}

/// Records a technique recorded on other weights with its final outcome.
pub(super) fn finish(
    run: &mut Run<'_>,
    read: &ReadStep<'_>,
    outcome: &StepOutcome,
    other: Option<(WeightFormat, WeightFormat)>,
) {
    if let Some(formats) = other {
        recorded_format::record_technique(run, read.step, outcome, formats);
    }
}

/// The reversion of `action` with `why`, as the trajectory decides it.
pub(super) fn revert(run: &mut Run<'_>, action: &str, why: Reversion) -> StepOutcome {
    run.traj.decision(&format!("reverted: {why}"), &[action]);
    StepOutcome::Reverted { why }
}

/// Applies `read` to the current design and runs every check that comes before
/// keeping it: the plans build and place, a fingerprint change passes the
/// numerics probe, and the modeled figure strictly drops (its gate recorded).
pub(super) fn time_technique(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    t: &Target,
    read: &ReadStep<'_>,
    current: &State,
) -> Result<Timing, DeployError> {
    let step = read.step;
    let (arch, name) = (run.loaded.model.arch.clone(), run.loaded.name.clone());
    let mut d = current.0.clone();
    let mut rederived = None;
    let op = fit_to_model(read.op.clone(), &arch, &run.device, &mut rederived);
    let applied = design::apply_change(&mut d, &arch, &run.device, &op, None);
    let decided = |outcome| Timing::Decided {
        outcome,
        other: None,
    };
    if let Err(why) = applied {
        let why = why.to_string();
        return Ok(decided(StepOutcome::NotApplicable { why }));
    }
    if d == current.0 {
        return Ok(decided(StepOutcome::Covered {
            why: "already in the plan (an earlier step or the baseline applied it)".into(),
        }));
    }
    let action = run
        .traj
        .action(step.op, &step.params, &ActionLinks::default());
    let plans = match d.plans(&name, &arch, &run.device) {
        Ok(p) => p,
        Err(e) => {
            let why = Reversion::Unbuildable { why: e.to_string() };
            return Ok(decided(revert(run, &action, why)));
        }
    };
    // Recorded on other weights and changing packed GEMVs: their kernels are
    // checked again before the change is kept.
    let other = recorded_format::technique_mismatch(run, step)
        .filter(|_| recorded_format::changes_packed(&current.1, &plans));
    let reverted = |run: &mut Run<'_>, why: Reversion| -> Result<Timing, DeployError> {
        let outcome = revert(run, &action, why);
        Ok(Timing::Decided { outcome, other })
    };
    for plan in [&plans.prefill, &plans.decode] {
        if let Err(v) = plan.check(&run.device) {
            let why: Vec<String> = v.iter().take(3).map(|v| v.to_string()).collect();
            let violations = why.join("; ");
            let why = Reversion::Unplaced {
                plan: plan.phase,
                violations,
            };
            return reverted(run, why);
        }
    }
    if fingerprint(&current.1, &current.0.path) != fingerprint(&plans, &d.path) {
        let probe = probe_gate(run, &plans, &d, step)?;
        let passed = probe.passed;
        let summary = probe.summary();
        run.traj.observe(
            Some("numerics probe before timing"),
            &[&probe],
            Some(&action),
        );
        run.gate(rec, probe);
        if !passed {
            return reverted(run, Reversion::NumericsFailed { failed: summary });
        }
        if let Some(failed) = long_probe(run, rec, current, (&plans, &d.path), &action, step)? {
            return reverted(run, Reversion::NumericsFailed { failed });
        }
    }
    let times = modeled(&plans, &run.device, &run.params);
    let (before, after) = (value_of(t, &current.2), value_of(t, &times));
    let gate = GateCheck::named(format!("{} {}", step.op, step.id), t.profile_op)
        .measures(t.metric, after)
        .when(design::at_seq_len())
        .against(
            Comparison::Lt,
            before,
            ThresholdSource::rule("keep a change only when the modeled time strictly drops"),
        )
        .modeled()
        .attempt();
    run.traj.observe(None, &[&gate], Some(&action));
    run.gate(rec, gate);
    if t.revisit && times.ms_per_token > current.2.ms_per_token {
        let change = Reversion::change(current.2.ms_per_token, times.ms_per_token, "ms");
        return reverted(run, Reversion::DecodeSlower { change });
    }
    if after >= before {
        let change = Reversion::change(before, after, t.unit());
        let why = Reversion::NoSpeedup {
            metric: t.metric,
            change,
        };
        return reverted(run, why);
    }
    Ok(Timing::Timed(Box::new(Timed {
        design: d,
        plans,
        times,
        action,
        rederived,
        other,
    })))
}

/// Keeps a timed change once its new kernel configurations validate and its
/// numerics are proven: by an unchanged fingerprint, a bit-identical short
/// check, or the full greedy re-verification.
pub(super) fn confirm(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    t: &Target,
    read: &ReadStep<'_>,
    current: &State,
    timed: Timed,
) -> Result<(StepOutcome, Option<State>), DeployError> {
    let step = read.step;
    let Timed {
        design: d,
        plans,
        times,
        action,
        rederived,
        other,
    } = timed;
    let (old_fp, new_fp) = (
        fingerprint(&current.1, &current.0.path),
        fingerprint(&plans, &d.path),
    );
    if old_fp != new_fp || other.is_some() {
        if let Some(why) = validate_new_sites(run, rec, &plans, other.is_some())? {
            return Ok((revert(run, &action, why), None));
        }
    }
    let short_identical = old_fp != new_fp && {
        run.progress.step(&format!(
            "{}: short check against the verified plan",
            step.op
        ));
        short_check(run, (&current.1, &current.0), (&plans, &d))?
    };
    let how = if old_fp == new_fp {
        let how = "numerics fingerprint unchanged (same launches, specs, host ops and weight transforms): outputs bit-identical to the verified plan by construction, not re-run".to_string();
        run.traj.note(&how, &[&action]);
        how
    } else if short_identical {
        let how = format!(
            "numerics fingerprint changed but the logits of a short check (prefill of prompt 1 and {SHORT_STEPS} teacher-forced decode steps) are bit-identical to the verified plan's: the change moves data, not arithmetic; the full greedy verification is not re-run"
        );
        run.traj.note(&how, &[&action]);
        how
    } else {
        run.progress
            .step(&format!("{}: re-verifying (numerics changed)", step.op));
        let v = run_verification(run, &plans, d.path, false)?;
        let gates = run_gates(run, &v);
        let refs: Vec<&GateCheck> = gates.iter().collect();
        run.traj.observe(
            Some("re-verification after a numerics change"),
            &refs,
            Some(&action),
        );
        let failed: Vec<String> = gates
            .iter()
            .filter(|g| !g.passed)
            .map(|g| g.summary())
            .collect();
        run.record_gates(rec, gates);
        if !failed.is_empty() {
            let failed = failed.join("; ");
            let why = Reversion::NumericsFailed { failed };
            return Ok((revert(run, &action, why), None));
        }
        format!(
            "numerics changed: new kernel configurations validated, greedy {} tokens re-verified on {} prompts",
            crate::exec::gates::topk::GATE_N_TOKENS,
            run.report.prompts.len()
        )
    };
    run.verified
        .entry(new_fp)
        .or_insert_with(|| format!("phase {}: {} ({how})", rec.index, step.op));
    rec.notes.push(format!("{} {}: {how}", step.op, step.id));
    let (before, after) = (value_of(t, &current.2), value_of(t, &times));
    let why = format!(
        "{}{}modeled {} {} -> {} {}",
        rederived.map_or(String::new(), |r| format!("{r}; ")),
        other.map_or(String::new(), |(r, d)| format!(
            "recorded on {} weights: every {} GEMV of the plan re-validated by phase 1's check; ",
            crate::ops::formats::word(r),
            crate::ops::formats::word(d)
        )),
        t.metric,
        crate::exec::gates::gate::format_value(before),
        crate::exec::gates::gate::format_value(after),
        t.unit()
    );
    Ok((StepOutcome::Kept { why }, Some((d, plans, times))))
}

/// The long-context probes of a change (`long_context`), when it changes the
/// per-position work of prefill or decode: their gates recorded, the failed
/// ones' summaries when any failed.
fn long_probe(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    current: &State,
    new: (&Plans, &crate::xdna2::interpreter::NpuPath),
    action: &str,
    step: &crate::bundle::Step,
) -> Result<Option<String>, DeployError> {
    let checks = long_context::changed((&current.1, &current.0.path), new);
    if !checks.prefill && !checks.decode {
        return Ok(None);
    }
    run.progress
        .step(&format!("{}: long-context probes", step.op));
    let label = format!("{} {}", step.op, step.id);
    let name = |what: &str| format!("probe: {what} after {label}");
    let (gates, note) = long_context::gates(run, new.0, new.1, checks, &name)?;
    let refs: Vec<&GateCheck> = gates.iter().collect();
    run.traj.observe(
        Some("long-context probes before timing"),
        &refs,
        Some(action),
    );
    rec.notes.push(format!("{label}: {note}"));
    let failed: Vec<String> = gates
        .iter()
        .filter(|g| !g.passed)
        .map(|g| g.summary())
        .collect();
    run.record_gates(rec, gates);
    Ok((!failed.is_empty()).then(|| failed.join("; ")))
}

/// A technique recorded on a larger model, scaled to this one where the
/// recorded value only bounds it: an LM head partitioned into more parts than
/// this model's vocabulary has row blocks is partitioned into as many as it has
/// (`why` says so).
pub(super) fn fit_to_model(
    op: Op,
    arch: &Architecture,
    device: &Device,
    why: &mut Option<String>,
) -> Op {
    match op {
        Op::PartitionLmHead { parts } => {
            let most = LmHeadSpec::max_parts(device, arch.vocab_size, arch.hidden_size);
            if parts > most && most > 1 {
                *why = Some(format!(
                    "recorded parts={parts}; this model's LM head has {most} row blocks, so {most} parts"
                ));
                return Op::PartitionLmHead { parts: most };
            }
            op
        }
        other => other,
    }
}

/// Validates configurations the registry has not seen, and with `packed_again`
/// the packed GEMVs even when it has (a change recorded on other weights);
/// `Some(reason)` when one fails.
fn validate_new_sites(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    plans: &Plans,
    packed_again: bool,
) -> Result<Option<Reversion>, DeployError> {
    for (key, (_, launch)) in design::sites(plans) {
        let seen = run.registry.validated(&key, &launch);
        let packed = recorded_format::launch_format(&launch) != crate::ops::WeightFormat::Bf16;
        if seen && !(packed_again && packed) {
            continue;
        }
        run.progress
            .step(&format!("validate-kernel {key} (new configuration)"));
        let check = check_site(run, plans, &launch, run.design.path.rope)?;
        let gate = kernel_gate(&key, &launch, &check);
        let passed = run.gate(rec, gate);
        if !passed {
            return Ok(Some(Reversion::SiteFails { site: key }));
        }
        if seen {
            continue;
        }
        let used_by = vec![run.loaded.name.clone()];
        run.registry.record(RegistryRow {
            key,
            launch,
            check,
            source: format!("introduced by a phase-{} optimization", rec.index),
            used_by,
        });
    }
    Ok(None)
}
