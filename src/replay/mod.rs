//! `skillc replay`: re-executes a trajectory on the XDNA 2 emulator and checks
//! every recorded observation against what the emulator produces now, so the
//! recorded figures stay evidence as the emulator evolves.
//!
//! The walk is in trajectory order. Each action changes the deployment state
//! ([`state`]) or runs something: `select-tiling` builds and checks a kernel
//! configuration ([`kernel`]), `validate-kernel` runs it on seeded inputs against
//! the f32 reference ([`harness`]), plan transforms switch the emulator's plan
//! options and check the plan, `profile-*` time the current plans with the cost
//! model ([`emulator`]); [`actions`] holds these. Each observation is then
//! recomputed under its conditions ([`measure`]) and judged ([`judge`]) in
//! [`observe`]: gate verdicts must agree, modeled times must lie within the
//! row's band of the recorded figure. Each row says what its agreement can
//! prove ([`kind`]): only out-of-sample rows are evidence.
//!
//! Functional scope (`--functional`): `kernels` (the default) reruns every kernel
//! validation at its recorded shape; `full` also runs the model-level checks on
//! the model's weights (seeded when the directory has none): weight loading, the
//! comparison with the transformers outputs when the directory has them
//! (`reference.safetensors`), and the block, diagnosis and verify gates with the
//! emulator executing the deployment's plans ([`model_run`]); `none` keeps to
//! constraint checks and the cost model.

mod actions;
mod emulator;
mod harness;
pub mod judge;
mod kernel;
pub mod kind;
mod measure;
mod model_run;
mod observe;
mod params;
mod remedy;
mod state;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use petgraph::graph::NodeIndex;
use serde::Serialize;

use skillc_runtime::model::Model;
use skillc_runtime::ops::Metric;
use skillc_runtime::xdna2::plan::Launch;

use crate::graph::{Graph, Node, NodeData};

pub use emulator::{Band, EmulatorError};
pub use judge::Outcome;
pub use kind::RowKind;

use emulator::Emulator;
use harness::KernelCheck;
use state::State;

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
    Values(Vec<(Metric, f64)>, bool),
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
}
