//! The state the phases share (the phase loop is `phase_loop`): the bundle, the model, the
//! reference's cached results, the design decisions the NPU path follows, the
//! report being built and the run's trajectory being written.
//!
//! Phase order is in the types: phase 0 runs on a `Run<Unloaded>` and returns
//! the [`Loaded`] model, phases 1 to 6 run on the `Run<Loaded>` made from it,
//! and phase 7 on a `Run<Unloaded>` again (the model released before the
//! evaluator loads its own), so no phase can ask for a model that is not there.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::path::Path;

use super::artifacts::record::ContextDecode;
use super::artifacts::record::{
    DeployReport, PhaseRecord, RemedyAttempt, SkippedLesson, StepOutcome, StepRecord, Stop,
    Verdict, REPORT_SCHEMA,
};
use super::artifacts::registry::Registry;
use super::artifacts::report_md;
use super::artifacts::trajectory::{self, ActionLinks, TrajectoryWriter};
use super::design::{Design, Plans};
use super::gates::decode::ReferenceRun;
use super::gates::floor::DecodeLimits;
use super::gates::gate::GateCheck;
use super::gates::remedy::{apply_remedy, candidates, for_this_model, Failure, NotForThisModel};
use super::phases::{recorded_format, steps, DeployPhase};
use super::progress::Progress;
use super::{files, DeployError, DeployOptions};
use crate::bundle::{Bundle, BundleSteps, ReadStep, Value};
use crate::model::oracle::compare::ReferenceTensors;
use crate::model::oracle::{LogitRows, PrefillOutput, Reference};
use crate::model::Model;
use crate::ops::{Metric, OpKind};
use crate::xdna2::cost::{time_plan, Params};
use crate::xdna2::device::Device;
use crate::xdna2::fit::committed_params;
use crate::xdna2::plan::{Launch, Phase};

/// How a phase ended.
#[derive(Debug)]
pub(crate) enum PhaseEnd {
    Passed,
    /// A gate failed and no lesson fixed it.
    Failed(Stop),
    /// Phase 0 refused the model.
    Refused(Stop),
}

/// Everything the phases share, with what phase 0 loaded (`S`).
pub(crate) struct Run<'a, S = Loaded> {
    pub bundle: &'a Bundle,
    /// The bundle's steps, each read as its typed operation once ([`Bundle::read`]).
    pub steps: &'a BundleSteps<'a>,
    pub options: &'a DeployOptions,
    pub progress: &'a mut dyn Progress,
    pub report: DeployReport,
    pub traj: TrajectoryWriter,
    /// The model and the reference's results ([`Loaded`]), or nothing yet or
    /// any more ([`Unloaded`]).
    pub loaded: S,
    pub device: Device,
    pub params: Params,
    pub design: Design,
    /// Configurations validated by this run (and given by `--registry`).
    pub registry: Registry,
    /// The registry given with `--registry`, tried first.
    pub input_registry: Option<Registry>,
    /// Where each GEMM tiling came from, by site key.
    pub tiling_sources: BTreeMap<String, String>,
    /// Numerics fingerprints verified by a full greedy run, with how.
    pub verified: BTreeMap<String, String>,
    /// This model's kernel shapes, by kernel (phase 1).
    pub model_shapes: steps::ModelShapes,
    /// The decode GEMV buffers the 4-bit weight path can pack (phase 1), also
    /// on a run that keeps bf16, for modeling both paths.
    pub packable: BTreeMap<String, crate::xdna2::kernels::PackedFormat>,
}

/// A run before phase 0 has loaded a model, or after phase 6 released it.
pub(crate) struct Unloaded;

/// What phase 0 loaded and checked, which phases 1 to 6 run on.
pub(crate) struct Loaded {
    /// The model directory's name, the run's display name.
    pub name: String,
    /// The SHA-256 of the model's config (or GGUF file).
    pub config_sha256: String,
    pub model: Model,
    /// The transformers outputs shipped with a fixture.
    pub fixture: Option<ReferenceTensors>,
    /// The reference's greedy runs, one per prompt, verified against.
    pub reference_runs: Vec<ReferenceRun>,
    /// The teacher-forced gates' limits, from the bf16-storage floor.
    pub decode_limits: DecodeLimits,
    /// The reference's prefill of the first prompt with every layer's output,
    /// computed when a phase first needs it ([`Loaded::reference_prefill`]).
    pub reference_prefill: OnceCell<PrefillOutput>,
    /// The oracle's side of the long-context probes, computed when phase 3
    /// first needs it (`phases::long_context`).
    pub long: OnceCell<super::gates::long::LongReference>,
    /// The NPU's state after the long prompt's prefill, by the key of the
    /// prefill path that made it, for the decode probes of later changes.
    pub long_state: std::cell::RefCell<Option<(String, crate::xdna2::interpreter::CacheState)>>,
}

impl Loaded {
    /// The reference's prefill of `prompt` (the run's first) with every layer's
    /// output, computed the first time it is asked for.
    pub fn reference_prefill(&self, prompt: &[u32]) -> Result<&PrefillOutput, DeployError> {
        if let Some(out) = self.reference_prefill.get() {
            return Ok(out);
        }
        let out = Reference::new(&self.model)?.prefill(prompt, LogitRows::Last)?;
        Ok(self.reference_prefill.get_or_init(|| out))
    }
}

impl<'a> Run<'a, Unloaded> {
    pub(super) fn new(
        bundle: &'a Bundle,
        steps: &'a BundleSteps<'a>,
        options: &'a DeployOptions,
        progress: &'a mut dyn Progress,
    ) -> Self {
        let name = model_name(&options.model_dir);
        let report = DeployReport {
            schema_version: REPORT_SCHEMA.to_string(),
            bundle: bundle.name.clone(),
            bundle_sources: bundle
                .sources
                .iter()
                .map(|s| format!("{} ({})", s.trajectory, s.model))
                .collect(),
            bundle_notes: options.bundle_notes.clone(),
            model_dir: name.clone(),
            model: None,
            estimate: None,
            padding: None,
            seed: options.seed,
            faults: options.faults.clone(),
            prompts: Vec::new(),
            phases: Vec::new(),
            verification: Vec::new(),
            texts: Vec::new(),
            free_running: Vec::new(),
            diagnosis: Vec::new(),
            feature_proofs: Vec::new(),
            weight_path: None,
            verified: BTreeMap::new(),
            decode_limits: None,
            performance: None,
            verdict: Verdict::Fail,
            stop: None,
            evaluation: None,
            wall_s: 0.0,
        };
        let traj = TrajectoryWriter::new(
            &format!("run-{}", trajectory::id_slug(&name)),
            &name,
            &name,
            &format!("skill bundle {}", bundle.name),
        );
        Self {
            bundle,
            steps,
            options,
            progress,
            report,
            traj,
            loaded: Unloaded,
            device: Device::npu2(),
            params: committed_params(),
            design: Design::baseline(),
            registry: Registry::new(),
            input_registry: None,
            tiling_sources: BTreeMap::new(),
            verified: BTreeMap::new(),
            model_shapes: steps::ModelShapes::new(),
            packable: BTreeMap::new(),
        }
    }
}

impl<'a, S> Run<'a, S> {
    /// The same run holding `loaded` instead, and what it held.
    pub(super) fn replace<T>(self, loaded: T) -> (Run<'a, T>, S) {
        let Run {
            bundle,
            steps,
            options,
            progress,
            report,
            traj,
            loaded: held,
            device,
            params,
            design,
            registry,
            input_registry,
            tiling_sources,
            verified,
            model_shapes,
            packable,
        } = self;
        let run = Run {
            bundle,
            steps,
            options,
            progress,
            report,
            traj,
            loaded,
            device,
            params,
            design,
            registry,
            input_registry,
            tiling_sources,
            verified,
            model_shapes,
            packable,
        };
        (run, held)
    }

    /// Every bundle step of `phase` running `op`, in order.
    pub fn bundle_steps(&self, phase: DeployPhase, op: OpKind) -> Vec<&'a ReadStep<'a>> {
        let steps: &'a BundleSteps<'a> = self.steps;
        steps.running(phase, op).collect()
    }

    /// Records every bundle step of `op` in `phase` with `outcome`.
    pub fn record_bundle_steps(
        &self,
        rec: &mut PhaseRecord,
        phase: DeployPhase,
        op: OpKind,
        outcome: StepOutcome,
    ) {
        for read in self.bundle_steps(phase, op) {
            rec.steps
                .push(StepRecord::from_bundle(read.step, outcome.clone()));
        }
    }

    /// The parameters the bundle recorded for `op` in any phase (a fix's base).
    pub fn any_bundle_params(&self, op: OpKind) -> BTreeMap<String, Value> {
        self.steps
            .all()
            .find(|s| s.op.kind() == op)
            .map(|s| s.step.params.clone())
            .unwrap_or_default()
    }

    /// A step that could not run at all (the plan builder refused the model, …).
    pub fn fail_step(
        &mut self,
        rec: &mut PhaseRecord,
        phase: DeployPhase,
        op: OpKind,
        reason: &str,
    ) -> PhaseEnd {
        rec.steps.push(super::artifacts::record::StepRecord {
            op: op.to_string(),
            params: BTreeMap::new(),
            origin: super::artifacts::record::StepOrigin::Derived {
                why: format!("phase {phase} always runs `{op}`"),
            },
            outcome: super::artifacts::record::StepOutcome::Failed {
                why: reason.to_string(),
            },
            recorded: None,
        });
        self.traj.verdict(&format!("{op}: {reason}"), false, None);
        PhaseEnd::Failed(Stop::failed_step(phase, op.name(), Metric::Errors, reason))
    }

    /// Writes the kernel registry file.
    pub fn write_registry(&self) -> Result<(), DeployError> {
        let path = self.options.out_dir.join(files::REGISTRY);
        write(&path, &self.registry.to_json())
    }

    /// The first bundle step of `phase` running `op`.
    pub fn bundle_step(&self, phase: DeployPhase, op: OpKind) -> Option<&'a ReadStep<'a>> {
        let steps: &'a BundleSteps<'a> = self.steps;
        steps.running(phase, op).next()
    }

    /// Records a gate in the phase and shows it.
    pub fn gate(&mut self, rec: &mut PhaseRecord, gate: GateCheck) -> bool {
        self.progress.gate(&gate);
        let passed = gate.passed;
        rec.gates.push(gate);
        passed
    }

    /// Records `gates` in the phase in order, showing each: the first that
    /// failed, which the phase goes on to fix or stops at.
    pub fn record_gates(
        &mut self,
        rec: &mut PhaseRecord,
        gates: impl IntoIterator<Item = GateCheck>,
    ) -> Option<GateCheck> {
        let mut failed = None;
        for gate in gates {
            if !gate.passed && failed.is_none() {
                failed = Some(gate.clone());
            }
            self.gate(rec, gate);
        }
        failed
    }

    /// The stop record for a failure no lesson fixed.
    pub fn stop(&self, rec: &PhaseRecord, failure: &Failure, reason: &str) -> Stop {
        let tried = rec
            .attempts
            .iter()
            .filter(|a| a.gate == failure.gate.name)
            .map(|a| format!("{} ({}): {}", a.lesson, a.fix, a.note))
            .collect();
        Stop::at(failure.phase, &failure.gate, reason, tried)
    }
}

impl Run<'_, Loaded> {
    /// The plans of the current design.
    pub fn plans(&self) -> Result<Plans, DeployError> {
        self.plans_of(&self.design)
    }

    /// The plans of `design` for this run's model.
    pub fn plans_of(&self, design: &Design) -> Result<Plans, DeployError> {
        let loaded = &self.loaded;
        Ok(design.plans(&loaded.name, &loaded.model.arch, &self.device)?)
    }

    /// The current design with a fix's `changes` applied (a tiling fix at the failing
    /// `site`), for re-checking the fix before keeping it.
    pub(crate) fn with_changes(
        &self,
        changes: &[Change],
        site: Option<&Launch>,
    ) -> Result<Design, DeployError> {
        let arch = &self.loaded.model.arch;
        let mut design = self.design.clone();
        super::design::apply_changes(&mut design, arch, &self.device, changes, site)?;
        Ok(design)
    }

    /// Keeps a fix that passed its re-check: its changes applied to the run's design.
    pub(crate) fn keep_fix(
        &mut self,
        changes: &[Change],
        site: Option<&Launch>,
    ) -> Result<(), DeployError> {
        self.design = self.with_changes(changes, site)?;
        Ok(())
    }

    /// Modeled decode of the current design at a `context` other than the
    /// production one (the published decode figures were measured at short context).
    pub fn decode_at(&self, context: usize) -> Result<ContextDecode, DeployError> {
        let loaded = &self.loaded;
        let plan = self.design.plan(
            &loaded.name,
            &loaded.model.arch,
            &self.device,
            Phase::Decode,
            context,
        )?;
        let seconds = time_plan(&plan, &self.device, &self.params).total_s;
        Ok(ContextDecode {
            context,
            ms_per_token: seconds * 1e3,
            tok_s: if seconds > 0.0 { 1.0 / seconds } else { 0.0 },
        })
    }

    /// The cost model's calibration note, printed beside modeled figures.
    pub fn calibration_note(&self) -> String {
        let mut note = crate::xdna2::fit::FittedFile::committed().note();
        let mut parts = crate::xdna2::cost::uncalibrated_parts(&self.loaded.model.arch);
        if self.design.options.fused_decode.is_some() {
            note.push_str(&format!(
                "; the single-dispatch fused decode: {}",
                crate::xdna2::calibration::FittedFourBit::committed().fused_note()
            ));
            if self.design.packed.is_empty() {
                parts.push(
                    "the fused decode on bf16 weights (its structure is calibrated on the published 4-bit deployments and its GEMV bodies on the bf16 registry; no bf16 fused decode is published to check the two together)",
                );
            }
        }
        if parts.is_empty() {
            return note;
        }
        format!(
            "{note}; **uncalibrated** for this model: {}",
            parts.join("; ")
        )
    }

    /// The sizes remedy expressions may read (`ops::VARIABLES`).
    pub fn model_vars(&self) -> BTreeMap<String, f64> {
        let a = &self.loaded.model.arch;
        [
            ("hidden_size", a.hidden_size),
            ("intermediate_size", a.intermediate_size),
            ("head_dim", a.head_dim),
            ("n_heads", a.num_heads),
            ("n_kv_heads", a.num_kv_heads),
            ("vocab_size", a.vocab_size),
            ("n_layers", a.num_layers),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v as f64))
        .collect()
    }

    /// Tries the bundle's matching lessons on `failure` in order. For each, the fix
    /// is evaluated against `action` (the parameters of the action it changes) and
    /// handed to `attempt`, which re-checks the gate with the new parameters without
    /// committing them. Every attempt is recorded in the report and the trajectory;
    /// the first fix whose re-check passes is returned for the caller to commit.
    pub fn try_lessons(
        &mut self,
        rec: &mut PhaseRecord,
        failure: &Failure,
        failing_obs: &str,
        action: (OpKind, &BTreeMap<String, Value>),
        attempt: &mut dyn FnMut(&mut Run<'_>, &[Change]) -> Attempt,
    ) -> Option<Fixed> {
        let bundle = self.bundle;
        let facts = crate::ops::facts(&self.loaded.model.arch, &self.device);
        for lesson in candidates(bundle, failure) {
            if let Err(not) = for_this_model(lesson, &facts) {
                self.skip_lesson(rec, failure, failing_obs, lesson, not);
                continue;
            }
            self.progress
                .step(&format!("lesson {}: {}", lesson.id, lesson.title));
            let remedies: Vec<&crate::bundle::Remedy> =
                std::iter::once(&lesson.fix).chain(&lesson.then).collect();
            let mut record = RemedyAttempt {
                gate: failure.gate.name.clone(),
                lesson: lesson.id.clone(),
                title: lesson.title.clone(),
                fix: remedies
                    .iter()
                    .map(|r| trajectory::fix(r))
                    .collect::<Vec<_>>()
                    .join("; "),
                params: None,
                before: failure.gate.value,
                after: None,
                fixed: false,
                note: String::new(),
                deployments: lesson.deployments.clone(),
            };
            let changes = match self.evaluate_remedies(&remedies, action) {
                Ok(c) => c,
                Err(e) => {
                    record.note = format!("fix not applicable: {e}");
                    rec.attempts.push(record);
                    continue;
                }
            };
            // Recorded on other weights than the failing kernel reads: adapted, noted.
            let (changes, other) = recorded_format::adapt_lesson(self, lesson, failure, changes);
            if let Some(other) = other {
                record.note = format!("{}; ", other.detail);
                recorded_format::record(self, other);
            }
            record.params = changes.first().map(|(_, p)| p.clone());
            let skill = self.bundle.skills.iter().find(|s| s.name == lesson.skill);
            let lesson_id = self.traj.lesson(lesson, skill, &[failing_obs]);
            let action_ids: Vec<String> = changes
                .iter()
                .map(|(op, params)| {
                    self.traj.action(
                        *op,
                        params,
                        &ActionLinks {
                            fixes: vec![failing_obs],
                            by: Some(&lesson_id),
                            ..Default::default()
                        },
                    )
                })
                .collect();
            let last = action_ids.last().cloned().unwrap_or_default();
            let all: Vec<&str> = action_ids.iter().map(String::as_str).collect();
            match attempt(self, &changes) {
                Attempt::Inapplicable(why) => {
                    record.note += &format!("fix not applicable: {why}");
                    self.traj.decision(
                        &format!("the fix of {} does not apply here: {why}", lesson.id),
                        &all,
                    );
                    rec.attempts.push(record);
                }
                Attempt::Checked(gate) => {
                    self.traj.observe(None, &[&gate], Some(&last));
                    record.after = Some(gate.value);
                    record.fixed = gate.passed;
                    // The failure is gone when the gate passes, or when what fails
                    // now is another check (the fix cleared this one and exposed
                    // the next, which the caller's next round handles).
                    let cleared = gate.metric != failure.gate.metric || gate.op != failure.gate.op;
                    self.progress.gate(&gate);
                    if gate.passed || cleared {
                        record.fixed = true;
                        record.note += &if gate.passed {
                            "the gate passes after the fix".into()
                        } else {
                            format!(
                                "the failure is gone; the next check fails: {}",
                                gate.summary()
                            )
                        };
                        rec.attempts.push(record);
                        return Some(Fixed {
                            lesson: lesson.id.clone(),
                            changes,
                        });
                    }
                    record.note += "the gate still fails; the fix was reverted";
                    self.traj.decision(
                        &format!("{} did not fix {}; reverted", lesson.id, failure.gate.name),
                        &all,
                    );
                    rec.attempts.push(record);
                }
            }
        }
        None
    }

    /// Records a matching lesson left out because its condition is false on this
    /// model, in the report and as a note of the run's trajectory.
    fn skip_lesson(
        &mut self,
        rec: &mut PhaseRecord,
        failure: &Failure,
        failing_obs: &str,
        lesson: &crate::bundle::Lesson,
        not: NotForThisModel,
    ) {
        self.progress.step(&format!(
            "lesson {} skipped: if {} is false here",
            lesson.id, not.condition
        ));
        self.traj.note(
            &format!(
                "lesson {} ({}) matches this failure but is not for this model: its condition `if {}` is false here ({})",
                lesson.id,
                lesson.title,
                not.condition,
                not.values.join(", ")
            ),
            &[failing_obs],
        );
        rec.skipped.push(SkippedLesson {
            gate: failure.gate.name.clone(),
            lesson: lesson.id.clone(),
            title: lesson.title.clone(),
            condition: not.condition,
            values: not.values,
        });
    }

    /// Each remedy's parameters: a fix of the failing action starts from its
    /// parameters, a fix by another operation from that operation's recorded ones.
    fn evaluate_remedies(
        &self,
        remedies: &[&crate::bundle::Remedy],
        action: (OpKind, &BTreeMap<String, Value>),
    ) -> Result<Vec<Change>, crate::exec::gates::remedy::RemedyError> {
        remedies
            .iter()
            .map(|r| {
                let base = if r.op == action.0 {
                    action.1.clone()
                } else {
                    let mut p = self.any_bundle_params(r.op);
                    p.retain(|k, _| r.op.spec().param(k).is_some());
                    p
                };
                apply_remedy(r, &base, &self.model_vars()).map(|p| (r.op, p))
            })
            .collect()
    }
}

/// What re-checking a fix gave.
pub(crate) enum Attempt {
    Checked(GateCheck),
    Inapplicable(String),
}

/// One operation of a fix with its evaluated parameters.
pub(crate) type Change = (OpKind, BTreeMap<String, Value>);

/// A fix that made the gate pass.
#[derive(Debug)]
pub(crate) struct Fixed {
    pub lesson: String,
    pub changes: Vec<Change>,
}

/// The model directory's name, the run's display name.
pub(crate) fn model_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty() && n != "." && n != "..")
        .unwrap_or_else(|| "model".to_string())
}

/// Writes report.json, report.md and the run's trajectory.
pub(crate) fn write_report<S>(run: &Run<'_, S>) -> Result<(), DeployError> {
    let out = &run.options.out_dir;
    let json =
        serde_json::to_string_pretty(&run.report).map_err(|source| DeployError::Serialize {
            path: out.join(files::REPORT_JSON),
            source,
        })?;
    write(&out.join(files::REPORT_JSON), &(json + "\n"))?;
    write(&out.join(files::REPORT_MD), &report_md::render(&run.report))?;
    let dir = out.join(files::TRAJECTORY_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| DeployError::io(&dir, e))?;
    write(&dir.join(files::TRAJECTORY_FILE), run.traj.text())
}

pub(crate) fn write(path: &Path, text: &str) -> Result<(), DeployError> {
    std::fs::write(path, text).map_err(|e| DeployError::io(path, e))
}
