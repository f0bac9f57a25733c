//! The machine-readable half of a skill bundle (`bundle.json`): what the compiler
//! emits and the executor runs. Plain serde data; the Markdown half (SKILL.md files)
//! is written for agents and never read back.
//!
//! Remedies are data too: a fix is an operation plus parameter changes whose values
//! are small expressions ([`Expr`]) evaluated against the failing context (the
//! kernel's shape, herd, tile, the model's dims), so a lesson recorded on one model
//! applies to the next.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::bundle_integrity::IntegrityProblems;
pub use crate::ops::Value;
use crate::ops::{Metric, Op, OpKind, ParamError, Unit, WeightFormat};
use crate::phase::DeployPhase;

mod condition;
mod expr;

pub use condition::{Condition, Relation};
pub use expr::{BinaryOp, EvalError, Expr};

/// Bumped on any incompatible change; the executor refuses other versions.
pub const SCHEMA_VERSION: &str = "skillc.bundle/1";

/// The name of this file in a bundle's folder.
pub const FILE_NAME: &str = "bundle.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bundle {
    pub schema_version: String,
    /// Bundle name, e.g. `llama1b`.
    pub name: String,
    pub sources: Vec<Source>,
    /// Exactly eight, in order 0..=7.
    pub phases: Vec<BundlePhase>,
    /// Every lesson, keyed by its stable id; phases and skills refer to these ids.
    pub lessons: BTreeMap<String, Lesson>,
    /// Cross-phase optimization and debugging skills (`opt-…`, `debug-…`).
    pub skills: Vec<SkillSet>,
    /// sha256 of every generated file, by path relative to the bundle root
    /// (bundle.json itself excluded).
    pub files: BTreeMap<String, String>,
}

impl Bundle {
    /// Every step and dead end read as a typed operation, every literal a remedy
    /// assigns checked against its parameter (kinds and ranges) and every name a
    /// lesson's condition reads against the model features, so a hand-edited
    /// `parts=0`, `rtol=-1`, `tile=[0,0,0,0]` or `if qk_norms` is refused before
    /// anything runs. A bundle the compiler wrote has none.
    pub fn parameter_problems(&self) -> Vec<ParameterProblem> {
        self.read_steps().1
    }

    /// Every step read as its typed operation, by phase in bundle order, and
    /// every parameter problem of the bundle.
    fn read_steps(&self) -> (Vec<Vec<ReadStep<'_>>>, Vec<ParameterProblem>) {
        let mut problems = Vec::new();
        let mut phases = Vec::with_capacity(self.phases.len());
        for phase in &self.phases {
            let mut steps = Vec::with_capacity(phase.steps.len());
            for step in &phase.steps {
                match Op::read(step.op, &step.params) {
                    Ok(op) => steps.push(ReadStep { step, op }),
                    Err(source) => problems.push(ParameterProblem::Step {
                        id: step.id.clone(),
                        source,
                    }),
                }
            }
            phases.push(steps);
            for dead_end in &phase.dead_ends {
                if let Err(source) = Op::read(dead_end.op, &dead_end.params) {
                    problems.push(ParameterProblem::DeadEnd {
                        id: dead_end.id.clone(),
                        source,
                    });
                }
            }
        }
        for lesson in self.lessons.values() {
            let names = lesson.condition.as_ref().map(Condition::names);
            for name in names.iter().flatten() {
                if crate::ops::fact_spec(name).is_none() {
                    problems.push(ParameterProblem::Condition {
                        id: lesson.id.clone(),
                        name: name.clone(),
                    });
                }
            }
            for remedy in std::iter::once(&lesson.fix).chain(&lesson.then) {
                for (key, expr) in &remedy.set {
                    if let Some(source) = remedy.literal_problem(key, expr) {
                        problems.push(ParameterProblem::Lesson {
                            id: lesson.id.clone(),
                            source,
                        });
                    }
                }
            }
        }
        (phases, problems)
    }

    /// Whether the executor can run this bundle: its schema version, its eight
    /// phases in order, and every parameter it holds ([`Bundle::parameter_problems`]).
    pub fn check(&self) -> Result<(), BundleError> {
        self.read().map(|_| ())
    }

    /// The bundle [`Bundle::check`] accepts, with every step read as its typed
    /// operation: the one reading of the steps the executor runs from.
    pub fn read(&self) -> Result<BundleSteps<'_>, BundleError> {
        if self.schema_version != SCHEMA_VERSION {
            return Err(BundleError::SchemaVersion {
                found: self.schema_version.clone(),
            });
        }
        let found: Vec<u8> = self.phases.iter().map(|p| p.index).collect();
        if found != (0..=7).collect::<Vec<u8>>() {
            return Err(BundleError::PhaseOrder { found });
        }
        let (phases, problems) = self.read_steps();
        if !problems.is_empty() {
            return Err(BundleError::Parameters(ParameterProblems(problems)));
        }
        let problems = crate::bundle_integrity::problems(self);
        if !problems.is_empty() {
            return Err(BundleError::Integrity(IntegrityProblems(problems)));
        }
        Ok(BundleSteps(phases))
    }
}

/// A bundle step with its operation read once, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadStep<'b> {
    pub step: &'b Step,
    pub op: Op,
}

/// The steps of a checked bundle ([`Bundle::read`]), typed, by phase.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleSteps<'b>(Vec<Vec<ReadStep<'b>>>);

impl<'b> BundleSteps<'b> {
    /// Every step of `phase`, in order.
    pub fn of(&self, phase: DeployPhase) -> &[ReadStep<'b>] {
        self.0
            .get(usize::from(phase.index()))
            .map_or(&[], Vec::as_slice)
    }

    /// The steps of `phase` running `op`, in order.
    pub fn running(
        &self,
        phase: DeployPhase,
        op: OpKind,
    ) -> impl Iterator<Item = &ReadStep<'b>> + '_ {
        self.of(phase).iter().filter(move |s| s.op.kind() == op)
    }

    /// Every step of every phase, in order.
    pub fn all(&self) -> impl Iterator<Item = &ReadStep<'b>> + '_ {
        self.0.iter().flatten()
    }
}

/// Why the executor refuses a bundle before anything runs.
#[derive(Debug, Error)]
pub enum BundleError {
    #[error("schema version `{found}`, this runtime executes `{SCHEMA_VERSION}`")]
    SchemaVersion { found: String },
    #[error("expected phases 0 to 7 in order, found {found:?}")]
    PhaseOrder { found: Vec<u8> },
    #[error(transparent)]
    Parameters(ParameterProblems),
    #[error(transparent)]
    Integrity(IntegrityProblems),
}

/// Every parameter problem of a bundle, shown as one line joined by `; `.
#[derive(Debug, Error)]
#[error("{}", join(.0))]
pub struct ParameterProblems(pub Vec<ParameterProblem>);

fn join(problems: &[ParameterProblem]) -> String {
    let texts: Vec<String> = problems.iter().map(ToString::to_string).collect();
    texts.join("; ")
}

/// A value of a bundle that its operation's table refuses, and where it is.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ParameterProblem {
    #[error("step {id}: {source}")]
    Step {
        id: String,
        #[source]
        source: ParamError,
    },
    #[error("dead end {id}: {source}")]
    DeadEnd {
        id: String,
        #[source]
        source: ParamError,
    },
    #[error("lesson {id}: {source}")]
    Lesson {
        id: String,
        #[source]
        source: LiteralProblem,
    },
    #[error("lesson {id}: its condition reads `{name}`, which is not a model feature")]
    Condition { id: String, name: String },
}

/// Why a literal a remedy assigns is not a value of its parameter or slot.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LiteralProblem {
    #[error("`{op}` has no parameter or slot `{key}`")]
    NoSuchParameter { op: OpKind, key: String },
    #[error("`{op}` {key}={value}: {rule}")]
    OutOfRange {
        op: OpKind,
        key: String,
        value: f64,
        rule: &'static str,
    },
}

impl Remedy {
    /// Why a literal this remedy assigns to `key` is not a value of that parameter
    /// or slot. Computed values are checked when they are evaluated.
    fn literal_problem(&self, key: &str, expr: &Expr) -> Option<LiteralProblem> {
        let Some((param, slot)) = self.op.spec().resolve_param(key) else {
            return Some(LiteralProblem::NoSuchParameter {
                op: self.op,
                key: key.to_string(),
            });
        };
        let numbers: Vec<f64> = match (expr, slot) {
            (Expr::Lit(Value::Int(i)), _) => vec![*i as f64],
            (Expr::Lit(Value::Float(f)), _) => vec![*f],
            (Expr::Lit(Value::IntList(items)), None) => items.iter().map(|&i| i as f64).collect(),
            _ => return None,
        };
        let value = *numbers.iter().find(|&&n| !param.bound.admits(n))?;
        Some(LiteralProblem::OutOfRange {
            op: self.op,
            key: key.to_string(),
            value,
            rule: param.bound.rule(),
        })
    }
}

/// One trajectory the bundle was built from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub trajectory: String,
    pub model: String,
    pub target: String,
    /// The weight format the trajectory says it was recorded on (its header's
    /// `weights`). Absent when it says none, and in bundles written before the
    /// field existed.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::ops::formats::serde_word"
    )]
    pub weights: Option<WeightFormat>,
    /// Relative file path → sha256 of its content.
    pub files: BTreeMap<String, String>,
}

/// Where a step, gate or lesson came from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Provenance {
    /// Path relative to the trajectory directory's parent, e.g. `llama1b/03-kernels.traj`.
    pub file: String,
    pub line: u32,
    pub entry: String,
    /// The record line the entry was drafted from (its `source` clause, e.g.
    /// `mlir-air:programming_examples/llms/qwen25_0_5b/README.md:42`), when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundlePhase {
    pub index: u8,
    /// Skill directory name, e.g. `phase-1-kernel-validation`.
    pub name: String,
    pub title: String,
    pub steps: Vec<Step>,
    /// All must hold to leave the phase.
    pub exit_gates: Vec<Gate>,
    /// Ids of lessons that guard this phase's steps.
    pub lessons: Vec<String>,
    pub targets: Vec<Target>,
    /// Actions the trajectory tried in this phase and abandoned; kept so that a run
    /// does not repeat them. Absent in bundles written before the field existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dead_ends: Vec<DeadEnd>,
}

/// An abandoned action: reverted, superseded, or failed with no recorded fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadEnd {
    /// Stable within the bundle, like step ids.
    pub id: String,
    pub op: OpKind,
    pub params: BTreeMap<String, Value>,
    /// `reverted by <entry>`, `superseded by <entry>` or `failed` in `bundle.json`.
    pub outcome: DeadEndOutcome,
    /// The failed check as a pattern the executor can match, when it had a threshold.
    pub symptom: Option<Symptom>,
    /// Checks that failed after the action, in trajectory notation.
    pub failed_checks: Vec<String>,
    /// Notes and decisions explaining why it was abandoned.
    pub reasons: Vec<String>,
    /// The lesson that explains the failure, if one does.
    pub explained_by: Option<String>,
    /// The debugging skill that keeps it.
    pub skill: String,
    pub provenance: Vec<Provenance>,
}

/// One executable action on the effective path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Stable within the bundle, e.g. `p1-s03`.
    pub id: String,
    pub op: OpKind,
    pub params: BTreeMap<String, Value>,
    /// Lessons whose fixes change this step.
    pub guarded_by: Vec<String>,
    /// The weight format the step was recorded on, when its operation depends on
    /// it (`OpSpec::weights`): on other weights the executor re-derives or
    /// re-validates it rather than applying it as recorded.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::ops::formats::serde_word"
    )]
    pub weights: Option<WeightFormat>,
    pub provenance: Vec<Provenance>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Comparison {
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "==")]
    Eq,
}

impl Comparison {
    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            Comparison::Ge => value >= threshold,
            Comparison::Gt => value > threshold,
            Comparison::Le => value <= threshold,
            Comparison::Lt => value < threshold,
            Comparison::Eq => value == threshold,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            Comparison::Ge => ">=",
            Comparison::Gt => ">",
            Comparison::Le => "<=",
            Comparison::Lt => "<",
            Comparison::Eq => "==",
        }
    }
}

/// What a threshold is measured against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Baseline {
    /// A fixed number.
    Absolute,
    /// The same metric at the end of the previous phase (e.g. "strictly below").
    PreviousPhase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    pub metric: Metric,
    pub comparison: Comparison,
    pub threshold: f64,
    /// Unit of `threshold`; none (`""` in the file) for unitless metrics.
    #[serde(with = "crate::metrics::optional_unit")]
    pub unit: Option<Unit>,
    pub baseline: Baseline,
    /// The operation whose result the gate reads, e.g. `validate-kernel`.
    pub op: Option<OpKind>,
    /// Conditions the value was observed under (shape, seq_len, kernel, …).
    pub conditions: BTreeMap<String, Value>,
    /// The value the trajectory recorded when the gate passed.
    pub recorded: Option<f64>,
    pub provenance: Vec<Provenance>,
}

/// How an abandoned action ended, written `reverted by <entry>`,
/// `superseded by <entry>` or `failed` (in `bundle.json` too).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum DeadEndOutcome {
    /// Undone by the given entry.
    Reverted { by: String },
    /// Replaced by the given step (or abandoned action).
    Superseded { by: String },
    /// Failed and never fixed or replaced.
    Failed,
}

impl fmt::Display for DeadEndOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeadEndOutcome::Reverted { by } => write!(f, "reverted by {by}"),
            DeadEndOutcome::Superseded { by } => write!(f, "superseded by {by}"),
            DeadEndOutcome::Failed => f.write_str("failed"),
        }
    }
}

impl From<DeadEndOutcome> for String {
    fn from(outcome: DeadEndOutcome) -> String {
        outcome.to_string()
    }
}

/// A dead end's outcome that is none of the three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "dead end outcome `{0}`: expected `reverted by <entry>`, `superseded by <entry>` or `failed`"
)]
pub struct UnknownOutcome(pub String);

impl TryFrom<String> for DeadEndOutcome {
    type Error = UnknownOutcome;

    fn try_from(text: String) -> Result<DeadEndOutcome, UnknownOutcome> {
        let by = |prefix: &str| {
            text.strip_prefix(prefix)
                .filter(|by| !by.is_empty())
                .map(str::to_string)
        };
        if text == "failed" {
            Ok(DeadEndOutcome::Failed)
        } else if let Some(by) = by("reverted by ") {
            Ok(DeadEndOutcome::Reverted { by })
        } else if let Some(by) = by("superseded by ") {
            Ok(DeadEndOutcome::Superseded { by })
        } else {
            Err(UnknownOutcome(text))
        }
    }
}

/// Whether a recorded figure was measured on hardware or produced by a cost model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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

impl fmt::Display for FigureSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A performance figure reached in the trajectory, for comparison on new models.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub metric: Metric,
    pub value: f64,
    #[serde(with = "crate::metrics::optional_unit")]
    pub unit: Option<Unit>,
    pub conditions: BTreeMap<String, Value>,
    /// Whether the recorded figure was measured on hardware or modeled.
    pub source: FigureSource,
    pub provenance: Vec<Provenance>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LessonKind {
    /// A failure and its fix.
    Debugging,
    /// A change that made the deployment faster.
    Optimization,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lesson {
    pub id: String,
    pub kind: LessonKind,
    pub title: String,
    pub symptom: Symptom,
    pub cause: String,
    pub fix: Remedy,
    /// Further remedies, applied in order after `fix` (a lesson may have several
    /// `fix` clauses). Absent in bundles written before the field existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub then: Vec<Remedy>,
    /// The fix in words, as recorded (the file, flag or command to change). Absent in
    /// bundles written before the field existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fix_text: String,
    /// Phases where the lesson applies.
    pub phases: Vec<u8>,
    /// The skill set it belongs to, e.g. `debug-gemm-silent-corruption`.
    pub skill: String,
    /// Number of supporting evidence entries, summed over trajectories.
    pub evidence_count: u32,
    /// The weight format the lesson was recorded on, when a fix depends on it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::ops::formats::serde_word"
    )]
    pub weights: Option<WeightFormat>,
    pub evidence: Vec<Provenance>,
    pub provenance: Vec<Provenance>,
    /// The model features the lesson depends on (`if qk_norm`): the executor
    /// applies it only to a model where this holds. Absent: every model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<Condition>,
    /// The trajectories (deployments) that taught the lesson, by name, sorted.
    /// Absent in bundles written before the field existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deployments: Vec<String>,
}

/// Condition keys of a symptom that record where a lesson was observed (the shape,
/// the model, the layer, tolerances), not what it is about: the executor does not
/// require them to match, and the compiler does not tell two lessons apart by them.
pub const RECORDING_CONDITIONS: &[&str] = &[
    "shape", "seq_len", "model", "prompt", "prompts", "layer", "head_dim", "rtol", "atol",
    "tokens", "top_k", "m", "k", "n",
];

/// A machine-matchable failure pattern: the executor compares it with a failed
/// gate (operation, its parameters, the metric and its value).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Symptom {
    /// Operation whose gate failed, e.g. `validate-kernel`.
    pub op: Option<OpKind>,
    /// Parameters that must match (e.g. `kernel = gemm`).
    pub params: BTreeMap<String, Value>,
    pub metric: Option<Metric>,
    pub comparison: Option<Comparison>,
    pub value: Option<f64>,
    /// The symptom as the engineer wrote it.
    pub text: String,
}

/// An executable fix: run `op` with these parameter changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Remedy {
    pub op: OpKind,
    /// Parameter or list component (`tile_n`) → new value.
    pub set: BTreeMap<String, Expr>,
}

/// One debugging or optimization skill: a trigger, hypotheses in order, each with
/// its check and its fix (a lesson).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillSet {
    /// Skill directory name, `opt-…` or `debug-…`.
    pub name: String,
    pub kind: LessonKind,
    /// What the skill does, as its `skill` declaration says; empty for a skill the
    /// compiler grouped by operation. Absent in bundles written before the field existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// The literal messages and symptoms that call for the skill, as declared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<String>,
    pub description: String,
    pub trigger: String,
    pub hypotheses: Vec<Hypothesis>,
    pub evidence_count: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hypothesis {
    pub lesson: String,
    pub check: String,
    pub evidence_count: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_end_outcomes_and_figure_sources_are_their_words_in_json() {
        let outcomes = [
            (DeadEndOutcome::Failed, "\"failed\""),
            (
                DeadEndOutcome::Reverted { by: "p4.a7".into() },
                "\"reverted by p4.a7\"",
            ),
            (
                DeadEndOutcome::Superseded { by: "a12".into() },
                "\"superseded by a12\"",
            ),
        ];
        for (outcome, json) in outcomes {
            assert_eq!(serde_json::to_string(&outcome).unwrap(), json);
            assert_eq!(
                serde_json::from_str::<DeadEndOutcome>(json).unwrap(),
                outcome
            );
        }
        for bad in ["\"lost\"", "\"reverted by \"", "\"Failed\""] {
            let err = serde_json::from_str::<DeadEndOutcome>(bad).unwrap_err();
            assert!(err.to_string().contains("dead end outcome"), "{bad}: {err}");
        }
        for (source, json) in [
            (FigureSource::Measured, "\"measured\""),
            (FigureSource::Modeled, "\"modeled\""),
        ] {
            assert_eq!(serde_json::to_string(&source).unwrap(), json);
            assert_eq!(serde_json::from_str::<FigureSource>(json).unwrap(), source);
        }
    }

    #[test]
    fn values_serialize_as_plain_json() {
        let v = Value::IntList(vec![8, 4]);
        assert_eq!(serde_json::to_string(&v).unwrap(), "[8,4]");
        let back: Value = serde_json::from_str("2048").unwrap();
        assert_eq!(back, Value::Int(2048));
    }

    #[test]
    fn operations_are_read_once_and_unknown_ones_refused() {
        let step =
            r#"{"id":"p1-s1","op":"select-tiling","params":{},"guarded_by":[],"provenance":[]}"#;
        let read: Step = serde_json::from_str(step).unwrap();
        assert_eq!(read.op, OpKind::SelectTiling);
        assert_eq!(serde_json::to_string(&read).unwrap(), step);
        let unknown = step.replace("select-tiling", "launch-rockets");
        let err = serde_json::from_str::<Step>(&unknown).unwrap_err();
        assert!(
            err.to_string()
                .contains("`launch-rockets` is not an operation of the runtime"),
            "{err}"
        );
    }

    fn committed() -> Bundle {
        let path = format!(
            "{}/../generated-skills/llama1b/bundle.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(path).expect("the committed bundle");
        serde_json::from_str(&text).expect("it parses")
    }

    #[test]
    fn a_read_bundle_holds_every_step_once_as_its_typed_operation() {
        let bundle = committed();
        let steps = bundle.read().expect("the committed bundle runs");
        for phase in DeployPhase::ALL {
            let recorded = &bundle.phases[usize::from(phase.index())].steps;
            let read = steps.of(phase);
            assert_eq!(read.len(), recorded.len(), "phase {phase}");
            for (r, s) in read.iter().zip(recorded) {
                assert!(std::ptr::eq(r.step, s));
                assert_eq!(r.op.kind(), s.op);
            }
        }
        assert_eq!(
            steps.all().count(),
            bundle.phases.iter().map(|p| p.steps.len()).sum::<usize>()
        );
    }

    #[test]
    fn hand_edited_values_out_of_range_are_named() {
        let bundle = committed();
        assert_eq!(bundle.parameter_problems(), Vec::new());
        assert!(bundle.check().is_ok());
        let mut edited = bundle.clone();
        let mut set = |op: OpKind, key: &str, value: Value| {
            let step = edited
                .phases
                .iter_mut()
                .flat_map(|p| p.steps.iter_mut())
                .find(|s| s.op == op)
                .expect("the bundle has the operation");
            step.params.insert(key.into(), value);
            step.id.clone()
        };
        let parts = set(OpKind::PartitionLmHead, "parts", Value::Int(0));
        let tile = set(
            OpKind::SelectTiling,
            "tile",
            Value::IntList(vec![0, 0, 0, 0]),
        );
        let rtol = set(OpKind::ValidateKernel, "rtol", Value::Float(-1.0));
        let lesson = edited.lessons.values_mut().next().expect("a lesson");
        lesson.fix = Remedy {
            op: OpKind::CascadeFfn,
            set: BTreeMap::from([("rows".into(), Expr::Lit(Value::Int(0)))]),
        };
        let lesson_id = lesson.id.clone();
        let problems: Vec<String> = edited
            .parameter_problems()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            problems,
            vec![
                format!("step {tile}: `select-tiling` parameter `tile` = 0: must be above 0"),
                format!("step {rtol}: `validate-kernel` parameter `rtol` = -1.0: must be above 0"),
                format!("step {parts}: `partition-lm-head` parameter `parts` = 0: must be above 0"),
                format!("lesson {lesson_id}: `cascade-ffn` rows=0: must be above 0"),
            ]
        );
        let refused = edited.check().expect_err("the executor refuses it");
        assert_eq!(refused.to_string(), problems.join("; "));

        let mut edited = bundle.clone();
        let lesson = edited.lessons.values_mut().next().expect("a lesson");
        lesson.condition = Some(Condition::Flag("qk_norms".into()));
        let id = lesson.id.clone();
        assert_eq!(
            edited.check().expect_err("an unknown feature").to_string(),
            format!("lesson {id}: its condition reads `qk_norms`, which is not a model feature")
        );
    }
}
