//! `skillc replay`: re-executes a trajectory on the XDNA 2 emulator and checks
//! every recorded observation against what the emulator produces now, so the
//! recorded figures stay evidence as the emulator evolves.
//!
//! The walk is in trajectory order. Each action changes the deployment state
//! ([`state`]) or runs something: `select-tiling` builds and checks a kernel
//! configuration ([`kernel`]), `validate-kernel` runs it on seeded inputs against
//! the f32 reference ([`harness`]), plan transforms switch the emulator's plan
//! options and check the plan, `profile-*` time the current plans with the cost
//! model ([`emulator`]). Each observation is then recomputed under its conditions
//! ([`measure`]) and judged ([`judge`]): gate verdicts must agree, modeled times
//! must lie within the cost model's calibration error of the recorded figure.
//!
//! Functional scope (`--functional`): `kernels` (the default) reruns every kernel
//! validation at its recorded shape; `full` also runs the model-level checks on
//! the model's weights (seeded when the directory has none): weight loading, the
//! comparison with the transformers outputs when the directory has them
//! (`reference.safetensors`), and the block, diagnosis and verify gates with the
//! emulator executing the deployment's plans ([`model_run`]); `none` keeps to
//! constraint checks and the cost model.

mod emulator;
mod harness;
pub mod judge;
mod kernel;
pub mod kind;
mod measure;
mod model_run;
mod params;
mod remedy;
mod state;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use petgraph::graph::NodeIndex;
use serde::Serialize;

use skillc_runtime::model::oracle::compare::{
    check_reference, ReferenceTensors, DEFAULT_TOLERANCE, REFERENCE_FILE,
};
use skillc_runtime::model::{Model, ModelError};
use skillc_runtime::ops::{self, Effect, Op, OpKind, PlanChange};
use skillc_runtime::xdna2::builder::unsupported_features;
use skillc_runtime::xdna2::calibration::PointSet;
use skillc_runtime::xdna2::kernels::Precision;
use skillc_runtime::xdna2::numerics::{self, Tolerance};
use skillc_runtime::xdna2::plan::{Binding, Call, Launch, Phase, Step};

use crate::distill::values;
use crate::graph::{ActionData, EdgeKind, Graph, LessonData, Node, NodeData, ObservationData};
use crate::syntax::{EntryKind, Verdict};

pub use emulator::{Band, EmulatorError};
pub use judge::Outcome;
pub use kind::RowKind;

use emulator::Emulator;
use harness::KernelCheck;
use judge::{Judgement, Recorded, Replayed};
use params::Params;
use state::{group_parts, group_phase, State};

/// How much functional (numerical) work replay redoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Functional {
    /// Kernel validations, plus weight loading and the transformers comparison.
    Full,
    /// Kernel validations at their recorded shapes (the default).
    Kernels,
    /// No numerical runs: constraint checks and the cost model only.
    None,
}

#[derive(Debug, Clone)]
pub struct Options {
    /// A model directory: `config.json`, optionally weights.
    pub model_dir: PathBuf,
    pub functional: Functional,
    /// Seed of the harness inputs.
    pub seed: u64,
}

/// One compared measurement (or verdict) of one observation.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub entry: String,
    /// `file:line:col` of the observation.
    pub location: String,
    /// The metric, or `verdict` for an observation that records only a verdict.
    pub metric: String,
    pub recorded: String,
    pub replayed: String,
    pub outcome: Outcome,
    pub reason: String,
    /// What the row's agreement can prove.
    pub kind: RowKind,
    /// The band a timing row was judged with, as a fraction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band: Option<f64>,
    /// The calibration point the recorded figure is, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub point: Option<String>,
}

/// Rows of one kind by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KindCount {
    pub rows: usize,
    pub agree: usize,
    pub disagree: usize,
    pub outside: usize,
    pub not_run: usize,
}

/// Entries by how replay treated them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Observations, and lessons whose fix an action applied (`fixes … by`).
    pub compared: usize,
    pub observations: usize,
    /// Compared entries whose every row agrees.
    pub agree: usize,
    pub disagree: usize,
    pub outside: usize,
    pub not_run: usize,
    pub actions: usize,
    pub lessons: usize,
    /// Lessons whose remedy was recomputed and compared with the applied fix.
    pub lessons_checked: usize,
    /// Notes and decisions: text, skipped.
    pub text: usize,
    /// Rows by what their agreement can prove; the headline is out-of-sample.
    pub rows_by_kind: BTreeMap<RowKind, KindCount>,
}

impl Counts {
    /// The rows of `kind` (all zero when there are none).
    pub fn of(&self, kind: RowKind) -> KindCount {
        self.rows_by_kind.get(&kind).copied().unwrap_or_default()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub trajectory: String,
    pub model: String,
    pub functional: Functional,
    pub band: Band,
    pub rows: Vec<Row>,
    pub counts: Counts,
}

impl Report {
    pub fn agrees(&self) -> bool {
        self.counts.disagree == 0
    }
}

/// What an action did on the emulator.
#[derive(Debug, Clone)]
pub enum ActionResult {
    /// Applied (or nothing to apply).
    Done,
    /// The emulator does not execute the action: nothing it holds changes.
    NoOp(String),
    /// The emulator's constraint checks refused the configuration.
    Refused(String),
    /// A kernel choice, with its validation when the action ran one.
    Kernel(Box<KernelRun>),
    NotRun(String),
    /// The action's parameters make no sense to the emulator.
    Problem(String),
    /// Metrics and whether the action passed: a model-level numerical run, or the
    /// scope check (`blockers`).
    Values(Vec<(&'static str, f64)>, bool),
    /// A model-level run on the NPU path, run when an observation reads it
    /// (its conditions say how many prompts).
    Model(model_run::Run),
}

/// The constraints a kernel configuration breaks, which the hardware would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", measure::join(.0))]
pub struct Refusal(pub Vec<skillc_runtime::xdna2::constraints::ConstraintViolation>);

#[derive(Debug, Clone)]
pub struct KernelRun {
    pub launch: Result<Launch, Refusal>,
    /// `None` when the functional scope skipped the run.
    pub check: Option<Result<KernelCheck, harness::CheckError>>,
    pub not_run: String,
}

/// Replays `graph` (one resolved trajectory without errors).
pub fn replay(graph: &Graph, options: &Options) -> Result<Report, EmulatorError> {
    replay_with_progress(graph, options, &mut |_, _, _| {})
}

/// [`replay`], telling `progress` before each entry: its position, the number of
/// entries and its id.
pub fn replay_with_progress(
    graph: &Graph,
    options: &Options,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Report, EmulatorError> {
    let emu = Emulator::new(&options.model_dir)?;
    let mut walk = Walk {
        graph,
        options,
        emu,
        model: None,
        runner: model_run::Runner::new(options.seed),
        state: State::initial(),
        done: HashMap::new(),
        rows: Vec::new(),
        counts: Counts::default(),
    };
    let total = graph.inner.node_count();
    for (done, (index, node)) in graph.nodes().enumerate() {
        progress(done, total, &node.id);
        walk.visit(index, node);
    }
    Ok(Report {
        trajectory: graph
            .header
            .as_ref()
            .map_or_else(String::new, |h| h.name.clone()),
        model: walk.emu.model.clone(),
        functional: options.functional,
        band: walk.emu.band.clone(),
        rows: walk.rows,
        counts: walk.counts,
    })
}

struct Walk<'g> {
    graph: &'g Graph,
    options: &'g Options,
    emu: Emulator,
    /// Weights, loaded by the first action that needs them (`--functional full`).
    model: Option<Model>,
    runner: model_run::Runner,
    state: State,
    /// Each action's result and the state right after it.
    done: HashMap<NodeIndex, (ActionResult, State)>,
    rows: Vec<Row>,
    counts: Counts,
}

impl Walk<'_> {
    fn visit(&mut self, index: NodeIndex, node: &Node) {
        match &node.data {
            NodeData::Action(action) => {
                self.counts.actions += 1;
                let result = self.apply(node, action);
                self.done.insert(index, (result, self.state.clone()));
            }
            NodeData::Observation(obs) => self.observe(index, node, obs),
            NodeData::Lesson(lesson) => self.lesson(index, node, lesson),
            NodeData::Note { .. } | NodeData::Decision { .. } => self.counts.text += 1,
            // Replay runs only on graphs without errors.
            NodeData::UnknownAction { .. } => {}
        }
    }

    // ------------------------------------------------------------------ actions

    fn apply(&mut self, node: &Node, action: &ActionData) -> ActionResult {
        let p = Params(&action.params);
        let op = match Op::read(action.op, &values::params(&action.params)) {
            Ok(op) => op,
            Err(e) => return ActionResult::Problem(e.to_string()),
        };
        let effect = match ops::effect(&op, &self.emu.arch, &self.emu.device) {
            Ok(effect) => effect,
            Err(e) => return ActionResult::Problem(e.to_string()),
        };
        match &op {
            Op::CheckScope => {
                let blockers = unsupported_features(&self.emu.arch);
                ActionResult::Values(
                    vec![("blockers", blockers.len() as f64)],
                    blockers.is_empty(),
                )
            }
            Op::SelectTiling(_) => self.select(p),
            Op::ValidateKernel(_) => self.validate(p),
            Op::LoadWeights { .. }
            | Op::CompareReference { .. }
            | Op::VerifyModel { .. }
            | Op::ValidateBlock { .. }
            | Op::DiagnoseLayers
            | Op::Evaluate { .. } => self.model_level(&op),
            _ => self.change(node.phase, effect),
        }
    }

    /// What an operation's effect does to the deployment state, with the plans it
    /// changed checked.
    fn change(&mut self, session_phase: u8, effect: Effect) -> ActionResult {
        match effect {
            Effect::Plan {
                change: PlanChange::MergeLaunches { group },
                ..
            } => self.merge(&group),
            Effect::Plan {
                change: PlanChange::SplitLaunches { group },
                ..
            } => {
                for part in group_parts(&group) {
                    self.state.merged.remove(part);
                }
                ActionResult::Done
            }
            Effect::Plan { change, plans } => {
                if let PlanChange::StaticWeights { key } = change {
                    self.state.weight_buffers = key;
                }
                let phases = self.state.apply(&change, plans, session_phase);
                self.check_plans(&phases)
            }
            Effect::RopePairing(convention) => {
                self.state.rope = convention;
                ActionResult::Done
            }
            // Building, bookkeeping, host-only and profiling actions change nothing
            // the emulator holds (profiles are evaluated per observation); its plan
            // interpreter takes the bias, the Q/K norm and the RoPE table from the
            // config, and retuned kernels from the builder's rule.
            Effect::Path(_) => {
                ActionResult::NoOp("the plan interpreter takes this from the model's config".into())
            }
            Effect::Kernel(_) => {
                ActionResult::NoOp("retuned kernels come from the builder's rule".into())
            }
            Effect::Measures => ActionResult::NoOp("a profile is evaluated per observation".into()),
            Effect::Records => ActionResult::NoOp("bookkeeping changes no plan".into()),
        }
    }

    /// Weight loading, the transformers comparison and the model-level gates:
    /// run at `--functional full` only.
    fn model_level(&mut self, op: &Op) -> ActionResult {
        if self.options.functional != Functional::Full {
            return ActionResult::NotRun(format!(
                "{} is a model-level run; it runs at --functional full",
                op.kind()
            ));
        }
        match *op {
            Op::LoadWeights { .. } => self.load_weights(),
            Op::CompareReference { tol, .. } => self.compare_reference(tol),
            Op::ValidateBlock { layer, .. } => ActionResult::Model(model_run::Run::Block {
                layer: layer.unwrap_or(0),
            }),
            Op::DiagnoseLayers => ActionResult::Model(model_run::Run::Diagnose),
            Op::VerifyModel { tokens, top_k } => ActionResult::Model(model_run::Run::Verify {
                tokens: tokens.unwrap_or(32),
                top_k: top_k.unwrap_or(5),
            }),
            _ => ActionResult::Model(model_run::Run::Verify {
                tokens: 32,
                top_k: 5,
            }),
        }
    }

    /// The model's weights (read, or seeded when the directory has none).
    fn model(&mut self) -> Result<&Model, ModelError> {
        let model = match self.model.take() {
            Some(model) => model,
            None => Model::load(&self.options.model_dir, Some(self.options.seed))?,
        };
        Ok(self.model.insert(model))
    }

    fn load_weights(&mut self) -> ActionResult {
        match self.model() {
            Ok(model) => {
                let bad: usize = model
                    .weights
                    .tensors()
                    .iter()
                    .map(|t| non_finite(t.bits()))
                    .sum();
                ActionResult::Values(vec![("nan_count", bad as f64)], bad == 0)
            }
            Err(why) => ActionResult::Problem(why.to_string()),
        }
    }

    fn compare_reference(&mut self, tol: Option<f64>) -> ActionResult {
        let path = self.options.model_dir.join(REFERENCE_FILE);
        if !path.exists() {
            return ActionResult::NotRun(format!(
                "the model directory has no {REFERENCE_FILE} to compare with"
            ));
        }
        let tolerance = tol.unwrap_or(DEFAULT_TOLERANCE);
        let reference = match ReferenceTensors::read(&path) {
            Ok(r) => r,
            Err(e) => return ActionResult::Problem(e.to_string()),
        };
        let model = match self.model() {
            Ok(model) => model,
            Err(why) => return ActionResult::Problem(why.to_string()),
        };
        match check_reference(model, &reference, tolerance) {
            Ok(check) => {
                let max_abs = check
                    .rows
                    .iter()
                    .map(|r| r.max_abs_error as f64)
                    .fold(0.0, f64::max);
                let nan = check
                    .rows
                    .iter()
                    .filter(|r| !r.pass && r.ratio <= tolerance)
                    .count();
                let values = vec![
                    ("max_abs", max_abs),
                    ("max_rel", check.worst_ratio()),
                    ("nan_count", nan as f64),
                ];
                ActionResult::Values(values, check.passed())
            }
            Err(e) => ActionResult::Problem(e.to_string()),
        }
    }

    fn kernel_context(&self) -> kernel::Context<'_> {
        kernel::Context {
            arch: &self.emu.arch,
            device: &self.emu.device,
            lm_head_parts: self.state.decode.lm_head_parts,
        }
    }

    fn select(&mut self, p: Params<'_>) -> ActionResult {
        let launch = match kernel::launch(p, self.kernel_context()) {
            Ok(launch) => launch,
            Err(e) => return ActionResult::Problem(e.to_string()),
        };
        let key = (
            p.word("kernel").unwrap_or_default().to_string(),
            p.dims("shape").unwrap_or_default(),
        );
        self.state.kernels.insert(key, launch.clone());
        let violations = launch.check(&self.emu.device);
        ActionResult::Kernel(Box::new(KernelRun {
            launch: if violations.is_empty() {
                Ok(launch)
            } else {
                Err(Refusal(violations))
            },
            check: None,
            not_run: "select-tiling only chooses a configuration".into(),
        }))
    }

    fn validate(&mut self, p: Params<'_>) -> ActionResult {
        let key = (
            p.word("kernel").unwrap_or_default().to_string(),
            p.dims("shape").unwrap_or_default(),
        );
        let launch = match self.state.kernels.get(&key) {
            Some(launch) => launch.clone(),
            None => match kernel::launch(p, self.kernel_context()) {
                Ok(launch) => launch,
                Err(e) => return ActionResult::Problem(e.to_string()),
            },
        };
        let violations = launch.check(&self.emu.device);
        if !violations.is_empty() {
            let why = Refusal(violations);
            return ActionResult::Kernel(Box::new(KernelRun {
                launch: Err(why.clone()),
                check: Some(Err(why.into())),
                not_run: String::new(),
            }));
        }
        let check = match self.options.functional {
            Functional::None => None,
            Functional::Kernels | Functional::Full => Some(harness::validate(
                &launch,
                &self.emu.arch,
                &self.emu.device,
                tolerance(&launch, p),
                self.options.seed,
            )),
        };
        ActionResult::Kernel(Box::new(KernelRun {
            launch: Ok(launch),
            check,
            not_run: "--functional none skips kernel runs".into(),
        }))
    }

    /// Merges a builder group, or checks a merge of several (`a-b`) that the
    /// builder does not make, by placing their launches in one call.
    fn merge(&mut self, group: &str) -> ActionResult {
        let parts = group_parts(group);
        let phase = parts.iter().find_map(|p| group_phase(p));
        let Some(phase) = phase else {
            return ActionResult::Problem(format!(
                "no launch group of the emulator's plans is named {group}"
            ));
        };
        if parts.len() == 1 {
            self.state.merged.insert(group.to_string());
            return self.check_plans(&[phase]);
        }
        let mut options = self.state.options(phase);
        options.merge_launches = false;
        let seq_len = if phase == Phase::Prefill {
            2048
        } else {
            self.emu.decode_context
        };
        let built = match self.emu.plan(phase, seq_len, &options) {
            Ok(built) => built,
            Err(e) => return ActionResult::Problem(e.to_string()),
        };
        let mut plan = built.plan.clone();
        plan.layer = fuse_groups(&plan.layer, group, &parts);
        match plan.check(&self.emu.device) {
            Ok(()) => ActionResult::Problem(format!(
                "the merge {group} places on the emulator, but its plans cannot keep it"
            )),
            Err(v) => ActionResult::Refused(measure::join(&v)),
        }
    }

    /// Checks the current plans of `phases`.
    fn check_plans(&mut self, phases: &[Phase]) -> ActionResult {
        let mut refused = Vec::new();
        for &phase in phases {
            let options = self.state.options(phase);
            let seq_len = if phase == Phase::Prefill {
                2048
            } else {
                self.emu.decode_context
            };
            match self.emu.plan(phase, seq_len, &options) {
                Ok(built) if !built.violations.is_empty() => {
                    refused.push(measure::join(&built.violations))
                }
                Ok(_) => {}
                Err(e) => return ActionResult::Problem(e.to_string()),
            }
        }
        if refused.is_empty() {
            ActionResult::Done
        } else {
            ActionResult::Refused(refused.join("; "))
        }
    }

    // ------------------------------------------------------------- observations

    fn observe(&mut self, index: NodeIndex, node: &Node, obs: &ObservationData) {
        self.counts.observations += 1;
        let rows = self.replay_observation(index, obs);
        self.record(node, rows);
    }

    /// Recomputes a lesson's fix from the action that failed and compares it
    /// with each action that applied the lesson.
    fn lesson(&mut self, index: NodeIndex, node: &Node, lesson: &LessonData) {
        self.counts.lessons += 1;
        let mut rows = Vec::new();
        for applying in self.graph.sources(index, EdgeKind::By) {
            let NodeData::Action(applied) = &self.graph.node(applying).data else {
                continue;
            };
            for remedy in lesson.remedies.iter().filter(|r| r.op == applied.op) {
                let Some(failed) = self.failed_action(applying, remedy.op) else {
                    let j = Judgement {
                        outcome: Outcome::Disagree,
                        reason: "the fixed observation measures no action".into(),
                    };
                    rows.push(RowParts::new(
                        format!("fix {}", remedy.op),
                        String::new(),
                        String::new(),
                        j,
                    ));
                    continue;
                };
                for c in remedy::check(remedy, failed, applied, &self.emu.arch) {
                    let agree = c.agrees();
                    let (shown, reason) = match &c.computed {
                        Ok(v) => (
                            v.clone(),
                            format!("computed from {}", self.graph.node(applying).id),
                        ),
                        Err(why) => ("?".to_string(), why.to_string()),
                    };
                    let j = Judgement {
                        outcome: if agree {
                            Outcome::Agree
                        } else {
                            Outcome::Disagree
                        },
                        reason: if agree {
                            reason
                        } else {
                            format!("the remedy gives {shown}, the fix applied {}", c.applied)
                        },
                    };
                    rows.push(RowParts::new(
                        format!("fix {}", c.key),
                        format!("{} (applied)", c.applied),
                        shown,
                        j,
                    ));
                }
            }
        }
        if !rows.is_empty() {
            self.counts.lessons_checked += 1;
            self.record(node, rows);
        }
    }

    /// The action whose failure `applying` fixes: among the `after` actions of
    /// the observation it fixes, the one running `op`, else the measured one.
    fn failed_action(&self, applying: NodeIndex, op: OpKind) -> Option<&ActionData> {
        let fixed = self
            .graph
            .targets(applying, EdgeKind::Fixes)
            .into_iter()
            .next()?;
        let actions: Vec<&ActionData> = self
            .graph
            .targets(fixed, EdgeKind::After)
            .into_iter()
            .filter_map(|t| match &self.graph.node(t).data {
                NodeData::Action(a) => Some(a),
                _ => None,
            })
            .collect();
        actions
            .iter()
            .find(|a| a.op == op)
            .or(actions.first())
            .copied()
    }

    fn record(&mut self, node: &Node, rows: Vec<RowParts>) {
        self.counts.compared += 1;
        let location = self.graph.location(node.span);
        let before = self.rows.len();
        for parts in rows {
            let count = self.counts.rows_by_kind.entry(parts.kind).or_default();
            count.rows += 1;
            match parts.judgement.outcome {
                Outcome::Agree => count.agree += 1,
                Outcome::Disagree => count.disagree += 1,
                Outcome::Outside => count.outside += 1,
                Outcome::NotRun => count.not_run += 1,
            }
            self.rows.push(Row {
                entry: node.id.clone(),
                location: location.clone(),
                metric: parts.metric,
                recorded: parts.recorded,
                replayed: parts.replayed,
                outcome: parts.judgement.outcome,
                reason: parts.judgement.reason,
                kind: parts.kind,
                band: parts.band,
                point: parts.point,
            });
        }
        let outcomes: Vec<Outcome> = self.rows[before..].iter().map(|r| r.outcome).collect();
        let worst = outcomes.iter().copied().max_by_key(|o| match o {
            Outcome::Disagree => 3,
            Outcome::Outside => 2,
            Outcome::NotRun => 1,
            Outcome::Agree => 0,
        });
        match worst {
            Some(Outcome::Disagree) => self.counts.disagree += 1,
            Some(Outcome::Outside) => self.counts.outside += 1,
            Some(Outcome::NotRun) => self.counts.not_run += 1,
            _ => self.counts.agree += 1,
        }
    }

    /// Rows of one observation: (metric, recorded, replayed, judgement).
    fn replay_observation(&mut self, index: NodeIndex, obs: &ObservationData) -> Vec<RowParts> {
        let conditions = Params(&obs.conditions);
        let provenance = match obs.provenance {
            crate::syntax::Provenance::Measured => "measured",
            crate::syntax::Provenance::Modeled => "modeled",
        };
        let after: Vec<NodeIndex> = self
            .graph
            .targets(index, EdgeKind::After)
            .into_iter()
            .filter(|t| self.graph.node(*t).kind == EntryKind::Action)
            .collect();
        let Some(&measured) = after.first() else {
            let j = Judgement {
                outcome: Outcome::Disagree,
                reason: "no action measured by this observation".into(),
            };
            return vec![RowParts::new(
                "verdict".into(),
                String::new(),
                String::new(),
                j,
            )];
        };
        let skip = self.skip_reason(conditions, &after);
        let (result, state) = self.done[&measured].clone();
        let result = self.resolve(result, &state, conditions);
        let NodeData::Action(action) = &self.graph.node(measured).data else {
            unreachable!("after targets were filtered to actions")
        };
        let mut rows = Vec::new();
        for m in &obs.measurements {
            let Some(spec) = ops::metric_spec(&m.metric.text) else {
                continue;
            };
            let recorded = recorded_value(spec, m);
            let replayed = match &skip {
                Some(r) => r.clone(),
                None if judge::kind_of(spec) == judge::Kind::Unmodeled => {
                    Replayed::Outside(format!("the cost model has no {}", spec.name))
                }
                None => self.metric(spec.name, action, &result, conditions, &state),
            };
            let timing = judge::kind_of(spec) == judge::Kind::Timing;
            let point = self
                .emu
                .points
                .find(spec, recorded.value)
                .filter(|_| timing);
            let band = point.map_or(kind::STATED_BAND, |p| p.band());
            let row_kind = match (obs.provenance, point) {
                (crate::syntax::Provenance::Modeled, _) => RowKind::SelfProduced,
                (_, Some(p)) if p.set == PointSet::Fit => RowKind::FitPoint,
                _ => RowKind::OutOfSample,
            };
            rows.push(RowParts {
                metric: spec.name.to_string(),
                recorded: recorded_text(spec, recorded, provenance),
                replayed: replayed_text(spec, &replayed, band),
                judgement: judge::judge(spec, recorded, &replayed, band),
                kind: row_kind,
                band: timing.then_some(band),
                point: point.map(|p| p.id.clone()),
            });
        }
        if let (true, Some(verdict)) = (obs.measurements.is_empty(), obs.verdict) {
            let no_op = matches!(result, ActionResult::NoOp(_));
            let replayed = match skip {
                Some(r) => Err(r),
                None => action_verdict(&result),
            };
            let mut parts = verdict_parts(verdict == Verdict::Pass, replayed, provenance);
            parts.kind = match (no_op, obs.provenance) {
                (true, _) => RowKind::NoOpVerdict,
                (false, crate::syntax::Provenance::Modeled) => RowKind::SelfProduced,
                (false, _) => RowKind::OutOfSample,
            };
            rows.push(parts);
        }
        rows
    }

    /// Why the observation is not compared, or is wrong, before anything runs:
    /// an unmodeled condition, or a condition that contradicts its action.
    fn skip_reason(&self, conditions: Params<'_>, after: &[NodeIndex]) -> Option<Replayed> {
        let action_params: Vec<Params<'_>> = after
            .iter()
            .filter_map(|t| match &self.graph.node(*t).data {
                NodeData::Action(a) => Some(Params(&a.params)),
                _ => None,
            })
            .collect();
        measure::unmodeled_condition(conditions)
            .map(Replayed::Outside)
            .or_else(|| {
                measure::restatement_mismatch(conditions, &action_params).map(Replayed::Problem)
            })
    }

    /// Runs a model-level check the observation reads (with its prompt count).
    fn resolve(
        &mut self,
        result: ActionResult,
        state: &State,
        conditions: Params<'_>,
    ) -> ActionResult {
        let ActionResult::Model(run) = result else {
            return result;
        };
        let prompts = conditions.count("prompts").unwrap_or(2);
        if self.model().is_err() {
            return ActionResult::Problem("the model's weights could not be loaded".into());
        }
        let (Some(model), device) = (self.model.as_ref(), &self.emu.device) else {
            return ActionResult::Problem("no model".into());
        };
        match self.runner.run(model, device, state, run, prompts) {
            Ok(outcome) => ActionResult::Values(outcome.values, outcome.pass),
            Err(why) => ActionResult::Problem(why.to_string()),
        }
    }

    fn metric(
        &mut self,
        metric: &str,
        action: &ActionData,
        result: &ActionResult,
        conditions: Params<'_>,
        state: &State,
    ) -> Replayed {
        let p = Params(&action.params);
        match (action.op, result) {
            (_, ActionResult::Problem(why)) => Replayed::Problem(why.clone()),
            (_, ActionResult::NotRun(why)) => Replayed::NotRun(why.clone()),
            (OpKind::ProfilePrefill, _) => {
                measure::profile_metric(metric, Phase::Prefill, p, conditions, state, &mut self.emu)
            }
            (OpKind::ProfileDecode, _) => {
                measure::profile_metric(metric, Phase::Decode, p, conditions, state, &mut self.emu)
            }
            (_, ActionResult::Kernel(_)) => measure::kernel_metric(metric, result, &self.emu),
            (op, ActionResult::Values(values, _)) => {
                values.iter().find(|(name, _)| *name == metric).map_or_else(
                    || Replayed::Problem(format!("{op} produces no {metric}")),
                    |(_, v)| Replayed::Value(*v),
                )
            }
            (_, ActionResult::Refused(why)) => Replayed::Refused(why.clone()),
            (OpKind::WriteArtifacts, _) => Replayed::NotRun(
                "replay writes no artifacts; a deploy's phase 6 checks the ones it writes".into(),
            ),
            (op, _) => Replayed::Problem(format!("{op} produces no {metric}")),
        }
    }
}

/// The verdict an action's result implies on its own.
fn action_verdict(result: &ActionResult) -> Result<bool, Replayed> {
    match result {
        ActionResult::Done | ActionResult::NoOp(_) => Ok(true),
        ActionResult::Values(_, ok) => Ok(*ok),
        ActionResult::Model(_) => Err(Replayed::Problem(
            "a model-level run was not resolved".into(),
        )),
        ActionResult::Refused(why) => Err(Replayed::Refused(why.clone())),
        ActionResult::NotRun(why) => Err(Replayed::NotRun(why.clone())),
        ActionResult::Problem(why) => Err(Replayed::Problem(why.clone())),
        ActionResult::Kernel(run) => match (&run.launch, &run.check) {
            (Err(why), _) => Err(Replayed::Refused(why.to_string())),
            (Ok(_), Some(Ok(check))) => Ok(check.comparison.passed()),
            (Ok(_), Some(Err(why))) => Err(Replayed::Refused(why.to_string())),
            (Ok(_), None) => Ok(true),
        },
    }
}

/// bf16 values whose exponent is all ones (infinities and NaNs).
fn non_finite(bits: &[u16]) -> usize {
    bits.iter().filter(|&&b| b & 0x7f80 == 0x7f80).count()
}

/// The registry tolerance, overridden by the action's `rtol`/`atol`.
fn tolerance(launch: &Launch, p: Params<'_>) -> Tolerance {
    let precision = match launch {
        Launch::Gemm { spec, .. } => spec.precision,
        _ => Precision::Bf16,
    };
    let base = numerics::tolerance(launch.kernel(), precision);
    Tolerance {
        rtol: p.number("rtol").unwrap_or(base.rtol),
        atol: p.number("atol").unwrap_or(base.atol),
        source: base.source,
    }
}

/// The layer's steps with the calls of `parts` merged into one call named `name`
/// at the position of the first of them.
fn fuse_groups(layer: &[Step], name: &str, parts: &[&str]) -> Vec<Step> {
    let mut fused = Call {
        name: name.to_string(),
        group: name.to_string(),
        launches: Vec::new(),
        bindings: Vec::<Binding>::new(),
    };
    let mut out = Vec::new();
    let mut placed = false;
    for step in layer {
        match step {
            Step::Call(call) if parts.contains(&call.group.as_str()) => {
                fused.launches.extend(call.launches.iter().cloned());
                for b in &call.bindings {
                    if !fused.bindings.iter().any(|x| x.buffer == b.buffer) {
                        fused.bindings.push(b.clone());
                    }
                }
                if !placed {
                    out.push(Step::Call(Call {
                        launches: Vec::new(),
                        ..fused.clone()
                    }));
                    placed = true;
                }
            }
            other => out.push(other.clone()),
        }
    }
    for step in &mut out {
        if let Step::Call(call) = step {
            if call.name == name {
                *call = fused.clone();
            }
        }
    }
    out
}

/// A table row before it gets its entry.
struct RowParts {
    metric: String,
    recorded: String,
    replayed: String,
    judgement: Judgement,
    kind: RowKind,
    band: Option<f64>,
    point: Option<String>,
}

impl RowParts {
    /// An out-of-sample row without a band (gates, counts, verdicts, fixes).
    fn new(metric: String, recorded: String, replayed: String, judgement: Judgement) -> Self {
        RowParts {
            metric,
            recorded,
            replayed,
            judgement,
            kind: RowKind::OutOfSample,
            band: None,
            point: None,
        }
    }
}

/// A measurement as recorded, in the metric's canonical unit.
fn recorded_value(spec: &ops::MetricSpec, m: &crate::syntax::Measurement) -> Recorded {
    let canonical = |q: &crate::syntax::Quantity| {
        let unit = q.unit.as_ref().map(|u| u.text.as_str());
        judge::canonical(spec, q.number.as_f64(), unit).unwrap_or(f64::NAN)
    };
    Recorded {
        value: canonical(&m.value),
        threshold: m.threshold.as_ref().map(|t| (t.op, canonical(&t.value))),
    }
}

/// The row of an observation that records only a verdict.
fn verdict_parts(
    recorded_pass: bool,
    replayed: Result<bool, Replayed>,
    provenance: &str,
) -> RowParts {
    let shown = match &replayed {
        Ok(true) => "pass".to_string(),
        Ok(false) => "fail".to_string(),
        Err(r) => short(r),
    };
    let rec = if recorded_pass { "pass" } else { "fail" };
    let j = judge::verdict_row(recorded_pass, replayed);
    RowParts::new("verdict".into(), format!("{rec} ({provenance})"), shown, j)
}

fn recorded_text(spec: &ops::MetricSpec, r: Recorded, provenance: &str) -> String {
    let mut text = judge::with_unit(spec, r.value);
    if let Some((op, limit)) = r.threshold {
        text.push_str(&format!(" {} {}", op.symbol(), judge::number(limit)));
    }
    format!("{text} ({provenance})")
}

fn replayed_text(spec: &ops::MetricSpec, r: &Replayed, band: f64) -> String {
    match r {
        Replayed::Value(v) if judge::kind_of(spec) == judge::Kind::Timing => {
            format!(
                "{} (modeled ±{:.1}%)",
                judge::with_unit(spec, *v),
                band * 100.0
            )
        }
        Replayed::Value(v) => judge::with_unit(spec, *v),
        other => short(other),
    }
}

fn short(r: &Replayed) -> String {
    match r {
        Replayed::Value(v) => judge::number(*v),
        Replayed::Refused(_) => "refused".into(),
        Replayed::NotRun(_) => "-".into(),
        Replayed::Outside(_) => "-".into(),
        Replayed::Problem(_) => "?".into(),
    }
}
