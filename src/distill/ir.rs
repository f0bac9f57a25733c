//! The skill IR: what the distiller extracts from the action/lesson graph and the
//! emitter lowers to SKILL.md files and `bundle.json`. Plain, typed data: values,
//! checks, symptoms and conditions are kept as data and printed by the emitter's
//! printer (`emit::print`), never stored as pre-rendered notation; free text is kept
//! as the engineer wrote it.
//!
//! Values, remedies and provenance reuse the bundle schema's types so that lowering
//! to `bundle.json` is a copy; the IR additionally keeps what only the Markdown half
//! shows: notes and decisions with the place each one lands, dead ends, how lessons
//! were diagnosed and applied, the trajectory text of every cited entry, and whether a
//! figure was measured or modeled.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, DefaultHasher};

use skillc_runtime::bundle::{
    Baseline, Comparison, Condition, LessonKind, Provenance, Remedy, Symptom, Value,
};
pub use skillc_runtime::bundle::{DeadEndOutcome, FigureSource};

use skillc_runtime::ops::{Metric, OpKind, Unit, WeightFormat};
use skillc_runtime::phase::DeployPhase;

use crate::syntax::{CmpOp, Expr, Span};

/// A whole bundle: eight phases, the lessons they refer to, the cross-phase
/// optimization and debugging skills, every note, and the account of where each
/// recorded note, lesson and dead end went.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillIr {
    /// Bundle name, e.g. `llama1b`; also the output directory name.
    pub name: String,
    /// Sorted by trajectory name.
    pub sources: Vec<SourceIr>,
    /// Exactly eight, in order 0..=7.
    pub phases: Vec<PhaseIr>,
    /// Every lesson by stable id.
    pub lessons: BTreeMap<String, LessonIr>,
    /// `opt-…` and `debug-…` skills, sorted by name.
    pub skills: Vec<SkillSetIr>,
    /// Skills the trajectories declare with `skill`, by name.
    pub declared: BTreeMap<String, DeclaredSkillIr>,
    /// Every note and decision by id, with the place it lands.
    pub notes: BTreeMap<String, NoteIr>,
    /// The trajectory text of every entry, by id, for the bundle's provenance files.
    /// Only looked up, never listed: hashed, where an ordered map's string
    /// comparisons grew faster than the entries (issue 27, item 11).
    pub entries: ById<EntryIr>,
    /// Recorded items that reach no page, each with the reason.
    pub dropped: Vec<DroppedIr>,
}

/// A map by id that is only looked up, never iterated into output. The hasher is
/// fixed (SipHash with zero keys) so that even its iteration order is the same on
/// every run.
pub type ById<V> = HashMap<String, V, BuildHasherDefault<DefaultHasher>>;

/// One trajectory the bundle was built from.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceIr {
    pub trajectory: String,
    pub model: String,
    pub target: String,
    /// The header's `weights`: what the trajectory says it was recorded on.
    pub weights: Option<WeightFormat>,
    /// Path relative to the trajectory directory's parent → sha256 of the content.
    pub files: BTreeMap<String, String>,
}

/// An entry as written in its trajectory file, for citations to resolve inside the
/// bundle.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryIr {
    /// As the bundle shows it (qualified when trajectories share the id).
    pub id: String,
    pub provenance: Provenance,
    /// The entry's source text, from its id to the start of the next item.
    pub text: String,
}

/// A skill a trajectory declares: what it does and the literal situations that call
/// for it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredSkillIr {
    pub name: String,
    pub kind: LessonKind,
    pub title: String,
    pub triggers: Vec<String>,
    pub provenance: Vec<Provenance>,
}

/// A note or a decision.
#[derive(Debug, Clone, PartialEq)]
pub struct NoteIr {
    /// The entry id (qualified like step ids).
    pub id: String,
    pub decision: bool,
    pub phase: DeployPhase,
    pub text: String,
    pub place: NotePlace,
    pub provenance: Provenance,
    /// Where it was written, for diagnostics.
    pub span: Span,
}

/// Where a note lands, found through its `in` and `about` (or `reverts`,
/// `supersedes`) edges only.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum NotePlace {
    /// It joined the skill with `in`.
    Skill(String),
    /// About a failed observation that is the lesson's evidence: how the failure was
    /// diagnosed.
    Diagnosis(String),
    /// About the lesson itself (its sources, its reading).
    Lesson(String),
    /// About a step, or an observation of it.
    Step(String),
    /// About an abandoned action, or the decision that undid it.
    DeadEnd(String),
    /// No `about`, or about entries that have different places: the phase's context.
    Phase(DeployPhase),
}

/// A recorded item that reaches no page of the bundle.
#[derive(Debug, Clone, PartialEq)]
pub struct DroppedIr {
    pub id: String,
    /// `lesson`, `note`, `dead end`.
    pub what: &'static str,
    pub reason: String,
    pub provenance: Provenance,
    /// Where it was written, for the warning that reports the drop.
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PhaseIr {
    pub index: DeployPhase,
    /// Skill directory name, e.g. `phase-1-kernel-validation`.
    pub name: String,
    pub title: String,
    /// Session titles recorded for this phase, in order, deduplicated.
    pub sessions: Vec<String>,
    /// The effective path, in dependency order.
    pub steps: Vec<StepIr>,
    /// All must hold to leave the phase.
    pub exit_gates: Vec<GateIr>,
    /// Ids of the lessons guarding this phase's steps, sorted.
    pub lessons: Vec<String>,
    pub targets: Vec<TargetIr>,
    /// Actions tried in this phase and abandoned.
    pub dead_ends: Vec<DeadEndIr>,
    /// Ids of the notes and decisions of the phase that belong to no single step,
    /// lesson, dead end or skill.
    pub context: Vec<String>,
}

/// One executable action on the effective path.
#[derive(Debug, Clone, PartialEq)]
pub struct StepIr {
    /// `p<phase>-<entry id>`, qualified by trajectory when entry ids collide.
    pub id: String,
    /// The trajectory entry it came from (qualified like the id).
    pub entry: String,
    pub op: OpKind,
    pub params: BTreeMap<String, Value>,
    /// Ids of lessons whose fixes change this step, sorted.
    pub guarded_by: Vec<String>,
    /// Lessons this step applied (`fixes … by <lesson>`), in the order written.
    pub applies: Vec<String>,
    /// Ids of the notes and decisions about the action, in trajectory order.
    pub notes: Vec<String>,
    /// The declared skill the action joined (`in <skill>`).
    pub skill: Option<String>,
    /// The weight format the step was recorded on, when its operation depends on
    /// it (the operation table's `weights`).
    pub weights: Option<WeightFormat>,
    pub provenance: Vec<Provenance>,
}

/// A check that must hold to leave a phase.
#[derive(Debug, Clone, PartialEq)]
pub struct GateIr {
    pub metric: Metric,
    pub comparison: Comparison,
    pub threshold: f64,
    /// The metric's canonical unit; `None` for a ratio or a count.
    pub unit: Option<Unit>,
    pub baseline: Baseline,
    /// The operation whose result the gate reads.
    pub op: Option<OpKind>,
    pub conditions: BTreeMap<String, Value>,
    /// The value the trajectory recorded when the gate passed.
    pub recorded: Option<f64>,
    pub recorded_source: FigureSource,
    pub provenance: Vec<Provenance>,
}

/// A performance figure reached in the trajectory.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetIr {
    pub metric: Metric,
    pub value: f64,
    /// As written, else the metric's canonical unit.
    pub unit: Option<Unit>,
    pub conditions: BTreeMap<String, Value>,
    pub source: FigureSource,
    pub provenance: Vec<Provenance>,
}

/// Where a lesson came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LessonOrigin {
    /// Written as a `lesson` entry.
    Recorded,
    /// Distilled from the abandoned action with this id and the action that
    /// replaced it.
    DeadEnd(String),
}

/// `metric cmp value unit`, as a symptom or a failed check writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct PredicateIr {
    pub metric: Metric,
    pub cmp: CmpOp,
    pub value: f64,
    /// As written; `None` when none.
    pub unit: Option<Unit>,
}

/// A lesson's whole symptom: the text, the failing operation with the lesson's
/// conditions, and every predicate.
#[derive(Debug, Clone, PartialEq)]
pub struct SymptomIr {
    pub text: String,
    pub op: Option<OpKind>,
    pub params: BTreeMap<String, Value>,
    pub predicates: Vec<PredicateIr>,
}

/// An observation that failed: its violated measurements (all of them when none is
/// violated), or its label when it has none.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckIr {
    /// The observation's entry id.
    pub entry: String,
    /// Measured value, then the threshold when there is one.
    pub measurements: Vec<(PredicateIr, Option<PredicateIr>)>,
    pub label: String,
}

/// Symptom → cause → fix, with its evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct LessonIr {
    pub id: String,
    pub kind: LessonKind,
    pub origin: LessonOrigin,
    /// As recorded; empty for a lesson distilled from a dead end.
    pub title: String,
    /// The whole symptom, every predicate included.
    pub symptom: SymptomIr,
    /// The machine-matchable symptom (one predicate: the bundle holds one).
    pub machine: Symptom,
    pub cause: String,
    /// The cause as an executable condition.
    pub cause_condition: Option<Expr>,
    pub fix: Remedy,
    /// Further fix clauses, applied in order after `fix`.
    pub then: Vec<Remedy>,
    /// The fix in words (`fix "…" op …`), one text per clause that has one.
    pub fix_text: Vec<String>,
    /// Steps (or abandoned actions) that applied the lesson, by step or entry id.
    pub applied_by: Vec<String>,
    /// Notes about its evidence: how the failure was diagnosed.
    pub diagnosis: Vec<String>,
    /// Notes about the lesson itself.
    pub notes: Vec<String>,
    /// Phases where the lesson applies, sorted.
    pub phases: Vec<DeployPhase>,
    /// The skill it belongs to (`opt-…` / `debug-…`).
    pub skill: String,
    /// Ids of the steps whose parameters the fix changes, sorted.
    pub guards: Vec<String>,
    /// The weight format the lesson was recorded on, when a fix depends on it.
    pub weights: Option<WeightFormat>,
    /// The model features it depends on (`if …`); `None`: every model.
    pub condition: Option<Condition>,
    /// The trajectories (deployments) that taught it, sorted.
    pub deployments: Vec<String>,
    /// Lessons other deployments taught for the same symptom with a different
    /// fix, by id, sorted: the pages show each beside the other with its condition.
    pub alternatives: Vec<String>,
    pub evidence_count: u32,
    pub evidence: Vec<Provenance>,
    pub provenance: Vec<Provenance>,
    /// Where it was first written, for diagnostics.
    pub span: Span,
}

/// An action that was tried and abandoned: reverted, superseded, or failed with no
/// recorded fix.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadEndIr {
    /// The abandoned action's entry id (qualified like step ids).
    pub id: String,
    pub phase: DeployPhase,
    pub op: OpKind,
    pub params: BTreeMap<String, Value>,
    pub outcome: DeadEndOutcome,
    /// The first failed check as a machine-matchable symptom (the comparison that
    /// held instead of the threshold), when a check with a threshold failed.
    pub symptom: Option<Symptom>,
    /// Checks that failed after the action.
    pub failed: Vec<CheckIr>,
    /// Ids of the notes and decisions explaining why it was abandoned.
    pub reasons: Vec<String>,
    /// The lesson that explains the failure, if one does.
    pub explained_by: Option<String>,
    /// The skill that keeps it; `None`: only its phase page shows it.
    pub skill: Option<String>,
    pub provenance: Vec<Provenance>,
}

/// One cross-phase skill: what calls for it, its hypotheses (debugging) or lessons
/// (optimization) in order, the steps that apply it and the dead ends it keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillSetIr {
    pub name: String,
    pub kind: LessonKind,
    /// What the skill does: the declaration's title, empty for a derived skill.
    pub title: String,
    /// The literal situations that call for it, from the declaration.
    pub triggers: Vec<String>,
    /// The runtime's checks that show its lessons' and dead ends' symptoms.
    pub patterns: Vec<Symptom>,
    /// Ids of the notes and decisions that joined the skill.
    pub context: Vec<String>,
    pub hypotheses: Vec<HypothesisIr>,
    /// Steps of the effective path that apply the technique.
    pub applied_steps: Vec<String>,
    /// Ids of dead ends it keeps.
    pub dead_ends: Vec<String>,
    /// Phases its members belong to, sorted.
    pub phases: Vec<DeployPhase>,
    pub evidence_count: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HypothesisIr {
    pub lesson: String,
    pub evidence_count: u32,
}
