//! The skill IR: what the distiller extracts from the action/lesson graph and the
//! emitter lowers to SKILL.md files and `bundle.json`. Plain data, no behaviour.
//!
//! Values, remedies and provenance reuse the bundle schema's types so that lowering
//! to `bundle.json` is a copy; the IR additionally keeps what only the Markdown half
//! shows (free text, dead ends, whether a figure was measured or modeled).

use std::collections::BTreeMap;

use skillc_runtime::bundle::{
    Baseline, Comparison, LessonKind, Provenance, Remedy, Symptom, Value,
};

/// A whole bundle: eight phases, the lessons they refer to and the cross-phase
/// optimization and debugging skills.
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
}

/// A skill a trajectory declares: what it does and the literal situations that call
/// for it, with the notes and decisions that joined it (`in <skill>`).
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredSkillIr {
    pub name: String,
    pub kind: LessonKind,
    pub title: String,
    pub triggers: Vec<String>,
    pub notes: Vec<NoteIr>,
    pub provenance: Vec<Provenance>,
}

/// A note or decision, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct NoteIr {
    /// The entry id (qualified like step ids).
    pub id: String,
    pub text: String,
    pub provenance: Provenance,
}

/// One trajectory the bundle was built from.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceIr {
    pub trajectory: String,
    pub model: String,
    pub target: String,
    /// Path relative to the trajectory directory's parent → sha256 of the content.
    pub files: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PhaseIr {
    pub index: u8,
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
}

/// One executable action on the effective path.
#[derive(Debug, Clone, PartialEq)]
pub struct StepIr {
    /// `p<phase>-<entry id>`, qualified by trajectory when entry ids collide.
    pub id: String,
    pub op: String,
    pub params: BTreeMap<String, Value>,
    /// Ids of lessons whose fixes change this step, sorted.
    pub guarded_by: Vec<String>,
    /// Notes and decisions recorded about the action, in trajectory order.
    pub notes: Vec<String>,
    /// The declared skill the action joined (`in <skill>`).
    pub skill: Option<String>,
    pub provenance: Vec<Provenance>,
}

/// Whether a figure was measured on hardware or produced by a cost model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FigureSource {
    Measured,
    Modeled,
}

impl FigureSource {
    pub fn as_str(self) -> &'static str {
        match self {
            FigureSource::Measured => "measured",
            FigureSource::Modeled => "modeled",
        }
    }
}

/// A check that must hold to leave a phase.
#[derive(Debug, Clone, PartialEq)]
pub struct GateIr {
    pub metric: String,
    pub comparison: Comparison,
    pub threshold: f64,
    pub unit: String,
    pub baseline: Baseline,
    /// The operation whose result the gate reads.
    pub op: Option<String>,
    pub conditions: BTreeMap<String, Value>,
    /// The value the trajectory recorded when the gate passed.
    pub recorded: Option<f64>,
    pub recorded_source: FigureSource,
    pub provenance: Vec<Provenance>,
}

/// A performance figure reached in the trajectory.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetIr {
    pub metric: String,
    pub value: f64,
    pub unit: String,
    pub conditions: BTreeMap<String, Value>,
    pub source: FigureSource,
    pub provenance: Vec<Provenance>,
}

/// Where a lesson came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LessonOrigin {
    /// Written as a `lesson` entry.
    Recorded,
    /// Distilled from an abandoned action and the action that replaced it.
    DeadEnd,
}

/// Symptom → cause → fix, with its evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct LessonIr {
    pub id: String,
    pub kind: LessonKind,
    pub origin: LessonOrigin,
    pub title: String,
    /// The machine-matchable symptom (its first predicate only: the bundle holds one).
    pub symptom: Symptom,
    /// The whole symptom in trajectory notation, every predicate included.
    pub symptom_line: String,
    pub cause: String,
    /// The cause as an executable condition, in trajectory notation.
    pub cause_condition: Option<String>,
    pub fix: Remedy,
    /// Further fix clauses, applied in order after `fix`.
    pub then: Vec<Remedy>,
    /// Phases where the lesson applies, sorted.
    pub phases: Vec<u8>,
    /// The skill it belongs to (`opt-…` / `debug-…`).
    pub skill: String,
    /// Ids of the steps whose parameters the fix changes, sorted.
    pub guards: Vec<String>,
    pub evidence_count: u32,
    pub evidence: Vec<Provenance>,
    pub provenance: Vec<Provenance>,
}

/// An action that was tried and abandoned: reverted, superseded, or failed with no
/// recorded fix.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadEndIr {
    /// The abandoned action's entry id (qualified like step ids).
    pub id: String,
    pub phase: u8,
    pub op: String,
    pub params: BTreeMap<String, Value>,
    pub outcome: DeadEndOutcome,
    /// The first failed check as a machine-matchable symptom (the comparison that
    /// held instead of the threshold), when a check with a threshold failed.
    pub symptom: Option<Symptom>,
    /// Checks that failed after the action, in trajectory notation.
    pub failed_checks: Vec<String>,
    /// Notes and decisions explaining why it was abandoned.
    pub reasons: Vec<String>,
    /// The recorded lesson that explains the failure, if one does.
    pub explained_by: Option<String>,
    /// The debugging skill that keeps it.
    pub skill: String,
    pub provenance: Vec<Provenance>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadEndOutcome {
    /// Undone by the given entry.
    Reverted { by: String },
    /// Replaced by the given step (or abandoned action).
    Superseded { by: String },
    /// Failed and never fixed or replaced.
    Failed,
}

/// One cross-phase skill: a trigger and hypotheses (lessons) in the order to try.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillSetIr {
    pub name: String,
    pub kind: LessonKind,
    /// What the skill does: the declaration's title, empty for a derived skill.
    pub title: String,
    /// The literal situations that call for it, from the declaration.
    pub triggers: Vec<String>,
    /// Notes and decisions that joined the skill.
    pub context: Vec<NoteIr>,
    pub description: String,
    /// The whole trigger as one line (what `bundle.json` carries).
    pub trigger: String,
    /// Failure patterns in trajectory notation, any of which calls for the skill.
    pub trigger_patterns: Vec<String>,
    /// When the skill applies besides the patterns (optimization skills), or empty.
    pub trigger_note: String,
    pub hypotheses: Vec<HypothesisIr>,
    /// Steps of the effective path that apply the technique (optimization skills).
    pub applied_steps: Vec<String>,
    /// Ids of dead ends kept as debugging knowledge (debugging skills).
    pub dead_ends: Vec<String>,
    pub evidence_count: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HypothesisIr {
    pub lesson: String,
    /// How to confirm the hypothesis before applying its fix.
    pub check: String,
    pub evidence_count: u32,
}
