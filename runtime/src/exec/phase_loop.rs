//! The phase loop: [`deploy`] checks its inputs, then runs phase 0 on an unloaded
//! run, phases 1 to 6 on the loaded model (4 to 6 only on the baseline phase 3
//! verified) and phase 7 on an unloaded run again, recording each phase, and
//! stopping at the first that fails or at `--stop-after`.

use std::time::Instant;

use super::artifacts::record::ModeledTimes;
use super::artifacts::record::{PhaseRecord, PhaseStatus, Stop, Verdict};
use super::artifacts::registry::Registry;
use super::phases::{
    block, evaluate, finalize, full_model, kernels, optimize, reference, steps, DeployPhase,
};
use super::progress::Progress;
use super::run::{write_report, PhaseEnd, Run, Unloaded};
use super::{DeployError, DeployOptions, DeployOutcome};
use crate::bundle::{Bundle, BundleSteps};

/// Runs `bundle` on the model of `options`; see the module documentation of `exec`.
pub fn deploy(
    bundle: &Bundle,
    options: &DeployOptions,
    progress: &mut dyn Progress,
) -> Result<DeployOutcome, DeployError> {
    let steps = bundle.read()?;
    let checked = super::preflight::preflight(options)?;
    // Read before anything is written: a registry that cannot be used stops
    // the run with nothing in the output folder.
    let registry = options
        .registry
        .as_deref()
        .map(Registry::load)
        .transpose()?;
    match checked {
        Some(checked) => crate::model::memory::checked_as_a_whole(|| {
            run_phases(bundle, &steps, options, progress, Some(&checked), registry)
        }),
        None => run_phases(bundle, &steps, options, progress, None, registry),
    }
}

/// The phases of [`deploy`], once its inputs passed the preflight.
fn run_phases(
    bundle: &Bundle,
    steps: &BundleSteps<'_>,
    options: &DeployOptions,
    progress: &mut dyn Progress,
    checked: Option<&super::preflight::Checked>,
    registry: Option<Registry>,
) -> Result<DeployOutcome, DeployError> {
    std::fs::create_dir_all(&options.out_dir).map_err(|e| DeployError::io(&options.out_dir, e))?;
    let started = Instant::now();
    let mut run = Run::new(bundle, steps, options, progress);
    if let Some(checked) = checked {
        let estimate = super::estimate::RunEstimate::of(&checked.arch, &checked.memory);
        run.progress.estimate(&estimate);
        run.report.estimate = Some(estimate);
    }
    if let Some(given) = registry {
        for row in given.rows.iter().cloned() {
            run.registry.record(row);
        }
        run.input_registry = Some(given);
    }
    let mut end = PhaseEnd::Passed;
    let loaded = run_phase(&mut run, &mut end, DeployPhase::Reference, reference::run)?;
    let mut run = match loaded {
        Some(loaded) => {
            let (mut run, Unloaded) = run.replace(loaded);
            on_the_model(&mut run, &mut end)?;
            // The evaluator loads its own copy of the model: release ours first
            // so two full-size models never sit in memory together.
            run.replace(Unloaded).0
        }
        None => {
            let model_phases = DeployPhase::Kernels..=DeployPhase::Finalize;
            for phase in DeployPhase::ALL
                .into_iter()
                .filter(|p| model_phases.contains(p))
            {
                skip_phase(&mut run, &mut end, phase);
            }
            run
        }
    };
    run_phase(&mut run, &mut end, DeployPhase::Evaluate, |run, rec| {
        passed(evaluate::run(run, rec)?)
    })?;
    run.report.verdict = match &end {
        PhaseEnd::Passed => run.report.verdict,
        PhaseEnd::Failed(_) => Verdict::Fail,
        PhaseEnd::Refused(_) => Verdict::Refused,
    };
    if let PhaseEnd::Failed(stop) | PhaseEnd::Refused(stop) = end {
        run.report.stop = Some(stop);
    }
    run.report.wall_s = started.elapsed().as_secs_f64();
    write_report(&run)?;
    let exit_code = match run.report.verdict {
        Verdict::Pass | Verdict::PassWithWarnings => 0,
        Verdict::Fail | Verdict::Refused => 1,
    };
    Ok(DeployOutcome {
        report: run.report,
        exit_code,
    })
}

/// Runs phase `index` with `body` unless the run has ended (a failed phase,
/// or `--stop-after` an earlier one), records it, and leaves how it ended in
/// `end`. `body` gives what the next phases need when the phase passes
/// (`Ok`), or how it ended otherwise (`Err`); that value is returned.
fn run_phase<S, T>(
    run: &mut Run<'_, S>,
    end: &mut PhaseEnd,
    phase: DeployPhase,
    body: impl FnOnce(&mut Run<'_, S>, &mut PhaseRecord) -> Result<Result<T, PhaseEnd>, DeployError>,
) -> Result<Option<T>, DeployError> {
    if skip_phase(run, end, phase) {
        return Ok(None);
    }
    let bundle = run.bundle;
    let recorded = &bundle.phases[usize::from(phase.index())];
    let mut rec = PhaseRecord::new(phase, &recorded.name, &recorded.title);
    run.progress.phase(phase, &recorded.title);
    run.traj
        .session(&run.options.started, phase, &recorded.title);
    let t = Instant::now();
    let (value, phase_end) = match body(run, &mut rec)? {
        Ok(value) => (Some(value), PhaseEnd::Passed),
        Err(end) => (None, end),
    };
    *end = phase_end;
    if matches!(end, PhaseEnd::Passed) {
        steps::account(phase, run.steps.of(phase), &mut rec, &run.model_shapes);
    }
    rec.wall_s = t.elapsed().as_secs_f64();
    rec.status = match end {
        PhaseEnd::Passed => PhaseStatus::Passed,
        _ => PhaseStatus::Failed,
    };
    run.progress.phase_done(phase, rec.status, rec.wall_s);
    run.report.phases.push(rec);
    Ok(value)
}

/// A phase's end as `run_phase` takes it: nothing to hand on when it passed.
fn passed(end: PhaseEnd) -> Result<Result<(), PhaseEnd>, DeployError> {
    Ok(match end {
        PhaseEnd::Passed => Ok(()),
        end => Err(end),
    })
}

/// Records phase `index` as not run when the run has ended before it (a failed
/// phase, or `--stop-after` the one before): returns whether it was skipped.
fn skip_phase<S>(run: &mut Run<'_, S>, end: &mut PhaseEnd, phase: DeployPhase) -> bool {
    if matches!(end, PhaseEnd::Passed) && run.options.stop_after.is_some_and(|last| phase > last) {
        if let Some(last) = phase.previous() {
            *end = PhaseEnd::Failed(Stop::stopped_after(last, super::STOP_AFTER_GATE));
        }
    }
    if matches!(end, PhaseEnd::Passed) {
        return false;
    }
    let recorded = &run.bundle.phases[usize::from(phase.index())];
    let rec = PhaseRecord::new(phase, &recorded.name, &recorded.title);
    run.report.phases.push(rec);
    true
}

/// A phase that runs on the loaded model before phase 3.
type Runner = fn(&mut Run<'_>, &mut PhaseRecord) -> Result<PhaseEnd, DeployError>;

/// A phase after phase 3, given the modeled figures of the plan phase 3 verified.
type OnBaseline =
    fn(&mut Run<'_>, &mut PhaseRecord, &ModeledTimes) -> Result<PhaseEnd, DeployError>;

/// Phases 1 and 2, in order, with their runners.
const BEFORE_BASELINE: [(DeployPhase, Runner); 2] = [
    (DeployPhase::Kernels, kernels::run),
    (DeployPhase::Block, block::run),
];

/// Phases 4 to 6, in order, with their runners.
const ON_BASELINE: [(DeployPhase, OnBaseline); 3] = [
    (DeployPhase::Prefill, optimize::prefill),
    (DeployPhase::Decode, optimize::decode),
    (DeployPhase::Finalize, finalize::run),
];

/// Phases 1 to 6 on the loaded model: phases 4 to 6 run only on the baseline
/// phase 3 returns, and are recorded as not run without it.
fn on_the_model(run: &mut Run<'_>, end: &mut PhaseEnd) -> Result<(), DeployError> {
    for (phase, runner) in BEFORE_BASELINE {
        run_phase(run, end, phase, |run, rec| passed(runner(run, rec)?))?;
    }
    let baseline = run_phase(run, end, DeployPhase::Model, full_model::run)?;
    for (phase, runner) in ON_BASELINE {
        match &baseline {
            Some(baseline) => {
                run_phase(run, end, phase, |run, rec| {
                    passed(runner(run, rec, baseline)?)
                })?;
            }
            None => {
                skip_phase(run, end, phase);
            }
        }
    }
    Ok(())
}
