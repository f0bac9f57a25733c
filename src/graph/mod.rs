//! The action/lesson graph: what everything after the parser reads.
//!
//! [`build`] resolves the parsed files of one trajectory directory into a [`Graph`]
//! and validates it against the operation vocabulary (`skillc_runtime::ops`),
//! returning every problem as a [`Diagnostic`]. The graph is plain data:
//!
//! - one [`Node`] per entry, in trajectory order (files by name, entries by position):
//!   its id, kind, phase, session, span, whether it is on the effective path, and its
//!   typed, resolved data ([`NodeData`]: an action's operation and parameters, an
//!   observation's measurements, conditions and verdict, a lesson's symptom, cause and
//!   executable remedies);
//! - one [`Edge`] per reference, directed from the entry that holds the clause to the
//!   entry it names, plus derived edges (`derived: true`): an observation measures the
//!   latest earlier action of its session when it names none, a lesson's fix changes
//!   an action, a lesson cited by `fixes … by` takes those observations as evidence.
//!
//! Node indices are `petgraph` indices into [`Graph::inner`], assigned in trajectory
//! order, so iterating `0..node_count()` walks the trajectory as written. Entries with
//! errors of their own (unknown operation, …) are still nodes; entries that cannot be
//! placed (duplicate id, no session) are left out. A graph that came with errors is for
//! inspection only: compile only when `diag::error_count` is zero.

mod entry;
pub mod export;
mod expr;

pub use expr::to_text as expr_text;
mod resolve;
pub mod skills;
mod suggest;
mod weights;

use std::collections::HashMap;
use std::path::PathBuf;

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use serde::Serialize;
use skillc_runtime::ops::{OpKind, WeightFormat};
use skillc_runtime::phase::DeployPhase;

use skillc_runtime::bundle::LessonKind;

use crate::diag::Diagnostic;
use crate::syntax::{
    self, Cause, EntryKind, Expr, FileId, LoadError, Measurement, Param, ParsedFile, Provenance,
    SourceFile, Span, Symptom, Verdict,
};

/// Resolves and validates one trajectory (the parsed files of one directory, in file
/// order), consuming the syntax tree. Diagnostics come sorted by file and position.
pub fn build(files: Vec<ParsedFile>) -> (Graph, Vec<Diagnostic>) {
    resolve::build(files)
}

/// Several trajectory directories loaded, parsed and resolved together.
#[derive(Debug)]
pub struct Loaded {
    /// Every file of every directory; a span's `FileId` indexes this list.
    pub sources: Vec<SourceFile>,
    /// One graph per directory, in the order given.
    pub trajectories: Vec<(PathBuf, Graph)>,
    /// Parse and resolve diagnostics of all directories, sorted by file and position.
    pub diagnostics: Vec<Diagnostic>,
}

impl Loaded {
    pub fn error_count(&self) -> usize {
        crate::diag::error_count(&self.diagnostics)
    }
}

/// Loads, parses and resolves each directory as one trajectory. Fails only on I/O
/// (unreadable directory, no `.traj` file, non-UTF-8 text); everything wrong with the
/// contents is a diagnostic.
pub fn load_dirs(dirs: &[PathBuf]) -> Result<Loaded, LoadError> {
    let mut sources = Vec::new();
    let mut ranges = Vec::new();
    for dir in dirs {
        let files = syntax::load_dir(dir)?;
        ranges.push(sources.len()..sources.len() + files.len());
        sources.extend(files);
    }
    let (parsed, mut diagnostics) = syntax::parse_sources(&sources, 0);
    let mut parsed = parsed.into_iter();
    let mut trajectories = Vec::new();
    for (dir, range) in dirs.iter().zip(ranges) {
        let files: Vec<ParsedFile> = parsed.by_ref().take(range.len()).collect();
        let (graph, more) = build(files);
        diagnostics.extend(more);
        trajectories.push((dir.clone(), graph));
    }
    crate::diag::sort(&mut diagnostics);
    Ok(Loaded {
        sources,
        trajectories,
        diagnostics,
    })
}

/// The resolved trajectory. `export::to_json` writes it out; the struct itself is not
/// serialised because node indices and the id table are in-memory conveniences.
#[derive(Debug, Clone)]
pub struct Graph {
    pub header: Option<HeaderInfo>,
    pub files: Vec<FileInfo>,
    pub sessions: Vec<SessionInfo>,
    /// Declared skills, in the order written; [`Node::skill`] indexes this list.
    pub skills: Vec<SkillInfo>,
    /// Nodes in trajectory order; edges from the citing entry to the cited one.
    pub inner: DiGraph<Node, Edge>,
    /// Entry id to node.
    pub index: HashMap<String, NodeIndex>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HeaderInfo {
    pub name: String,
    pub model: Option<String>,
    pub target: Option<String>,
    pub baseline: Option<String>,
    /// `weights bf16`: what the whole trajectory was recorded on, unless a session
    /// or an entry says otherwise.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "skillc_runtime::ops::formats::serde_word"
    )]
    pub weights: Option<WeightFormat>,
    pub span: Span,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileInfo {
    pub id: FileId,
    pub path: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct SessionInfo {
    pub timestamp: String,
    /// `None` when the session names no phase of the eight or its line did not parse
    /// (both are errors, so such a graph is never compiled).
    pub phase: Option<DeployPhase>,
    pub title: Option<String>,
    /// `draft` after the phase: imported, its phase not yet confirmed by a person.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub draft: bool,
    /// `weights …` after the phase: what the session's entries were recorded on.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "skillc_runtime::ops::formats::serde_word"
    )]
    pub weights: Option<WeightFormat>,
    pub span: Span,
}

/// Index into [`Graph::sessions`].
pub type SessionId = usize;

/// A declared skill: `skill debug-bo-corruption debug "title" trigger "…"`.
#[derive(Debug, Clone, Serialize)]
pub struct SkillInfo {
    /// The skill's directory name in the bundle.
    pub name: String,
    pub kind: LessonKind,
    /// What the skill does.
    pub title: String,
    /// The literal messages and symptoms of a failing run that call for it.
    pub triggers: Vec<String>,
    pub span: Span,
}

/// Index into [`Graph::skills`].
pub type SkillId = usize;

#[derive(Debug, Clone, Serialize)]
pub struct Node {
    pub id: String,
    pub kind: EntryKind,
    /// Its session's phase (`None` only in a graph with errors).
    pub phase: Option<DeployPhase>,
    pub session: SessionId,
    pub span: Span,
    /// False when an effective entry reverts or supersedes this one (for an
    /// observation: when the action it measures is not effective).
    pub effective: bool,
    /// The skill the entry joined with `in <skill>`.
    pub skill: Option<SkillId>,
    /// The entry's own `weights` clause ([`Graph::recorded_weights`] adds the
    /// session's and the header's).
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "skillc_runtime::ops::formats::serde_word"
    )]
    pub weights: Option<WeightFormat>,
    /// The record line the entry was drafted from (`source "…"`): carried into the
    /// bundle's provenance beside the entry's own `file:line`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub data: NodeData,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeData {
    Action(ActionData),
    Observation(ObservationData),
    Lesson(Box<LessonData>),
    Note {
        text: String,
        /// `note draft …`: imported and not reviewed; `skillc build` refuses it.
        #[serde(skip_serializing_if = "Option::is_none")]
        draft: Option<crate::syntax::Draft>,
    },
    Decision {
        text: String,
    },
    /// An action whose operation is not in the vocabulary: an error, kept as a
    /// node so that references to it resolve and report nothing more.
    UnknownAction {
        op: String,
        params: Vec<Param>,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct ActionData {
    pub op: OpKind,
    pub params: Vec<Param>,
}

impl ActionData {
    pub fn param(&self, key: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.key.text == key)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ObservationData {
    pub provenance: Provenance,
    pub label: Option<String>,
    pub measurements: Vec<Measurement>,
    pub conditions: Vec<Param>,
    pub verdict: Option<Verdict>,
    /// Whether every threshold holds (units converted); `None` without thresholds.
    pub thresholds_met: Option<bool>,
}

impl ObservationData {
    /// The written verdict, else the one the thresholds imply.
    pub fn outcome(&self) -> Option<Verdict> {
        self.verdict.or(self
            .thresholds_met
            .map(|met| if met { Verdict::Pass } else { Verdict::Fail }))
    }

    pub fn measurement(&self, metric: &str) -> Option<&Measurement> {
        self.measurements.iter().find(|m| m.metric.text == metric)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LessonData {
    pub title: String,
    pub symptom: Option<Symptom>,
    pub cause: Option<Cause>,
    /// Applied in order.
    pub remedies: Vec<Remedy>,
    pub conditions: Vec<Param>,
    /// The model features it depends on (`if …`), checked against the vocabulary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<Expr>,
}

/// One `fix` clause, resolved against the vocabulary.
#[derive(Debug, Clone, Serialize)]
pub struct Remedy {
    /// The fix in words, as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    pub op: OpKind,
    pub changes: Vec<Change>,
    #[serde(skip)]
    pub span: Span,
}

/// One parameter change of a remedy.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// The operation's parameter (`tile` for `tile_n=…`).
    pub param: String,
    /// The list slot when the key named one (`tile_n` is slot 3 of `tile`).
    pub slot: Option<usize>,
    /// The key as written.
    pub key: String,
    /// A literal or a remedy expression; bare words naming variables of numeric
    /// parameters are already [`ExprKind::Var`](crate::syntax::ExprKind::Var).
    #[serde(skip)]
    pub value: Expr,
    /// The value in canonical source form, e.g. `divisor(N / herd_n)`.
    pub text: String,
    #[serde(skip)]
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// `after`: the source follows from, or measures, the target.
    After,
    /// `about`: a note or decision about the target.
    About,
    /// `evidence`: the target supports the lesson.
    Evidence,
    /// `fixes`: the action repairs the failure the target observation saw.
    Fixes,
    /// `fixes … by`: the action applies the target lesson.
    By,
    Supersedes,
    Reverts,
    /// Derived: the lesson's fix changes the target action.
    Changes,
}

impl EdgeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::After => "after",
            EdgeKind::About => "about",
            EdgeKind::Evidence => "evidence",
            EdgeKind::Fixes => "fixes",
            EdgeKind::By => "by",
            EdgeKind::Supersedes => "supersedes",
            EdgeKind::Reverts => "reverts",
            EdgeKind::Changes => "changes",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Edge {
    pub kind: EdgeKind,
    pub derived: bool,
    /// Where the reference was written; `None` for derived edges.
    pub span: Option<Span>,
}

impl Graph {
    pub fn node_count(&self) -> usize {
        self.inner.node_count()
    }

    /// The node of entry `id`.
    pub fn find(&self, id: &str) -> Option<NodeIndex> {
        self.index.get(id).copied()
    }

    pub fn node(&self, index: NodeIndex) -> &Node {
        &self.inner[index]
    }

    /// The skill entry `index` joined with `in <skill>`, if any.
    pub fn skill_of(&self, index: NodeIndex) -> Option<&SkillInfo> {
        self.inner[index].skill.and_then(|s| self.skills.get(s))
    }

    /// Every node in trajectory order.
    pub fn nodes(&self) -> impl Iterator<Item = (NodeIndex, &Node)> {
        self.inner
            .node_indices()
            .map(move |index| (index, &self.inner[index]))
    }

    /// Targets of `index`'s edges of `kind`, in the order they were written.
    pub fn targets(&self, index: NodeIndex, kind: EdgeKind) -> Vec<NodeIndex> {
        let mut found: Vec<_> = self
            .inner
            .edges_directed(index, Direction::Outgoing)
            .filter(|e| e.weight().kind == kind)
            .map(|e| (e.id(), e.target()))
            .collect();
        found.sort();
        found.into_iter().map(|(_, target)| target).collect()
    }

    /// Targets of `index`'s written (not derived) edges of `kind`, in the order
    /// they were written.
    pub fn written_targets(&self, index: NodeIndex, kind: EdgeKind) -> Vec<NodeIndex> {
        let mut found: Vec<_> = self
            .inner
            .edges_directed(index, Direction::Outgoing)
            .filter(|e| e.weight().kind == kind && !e.weight().derived)
            .map(|e| (e.id(), e.target()))
            .collect();
        found.sort();
        found.into_iter().map(|(_, target)| target).collect()
    }

    /// Sources of edges of `kind` that point at `index`, in trajectory order.
    pub fn sources(&self, index: NodeIndex, kind: EdgeKind) -> Vec<NodeIndex> {
        let mut found: Vec<_> = self
            .inner
            .edges_directed(index, Direction::Incoming)
            .filter(|e| e.weight().kind == kind)
            .map(|e| e.source())
            .collect();
        found.sort();
        found.dedup();
        found
    }

    /// The action an observation measures (its `after` target that is an action,
    /// written or derived).
    pub fn measured_action(&self, observation: NodeIndex) -> Option<NodeIndex> {
        self.targets(observation, EdgeKind::After)
            .into_iter()
            .find(|t| self.inner[*t].kind == EntryKind::Action)
    }

    /// Observations that measure `action`.
    pub fn observations_of(&self, action: NodeIndex) -> Vec<NodeIndex> {
        self.sources(action, EdgeKind::After)
            .into_iter()
            .filter(|s| self.inner[*s].kind == EntryKind::Observation)
            .collect()
    }

    /// `path:line:col` of a span of this trajectory.
    pub fn location(&self, span: Span) -> String {
        let path = self
            .files
            .iter()
            .find(|f| f.id == span.file)
            .map_or("?", |f| f.path.as_str());
        format!("{path}:{}:{}", span.line, span.col)
    }
}
