//! What a run did, as plain data: per phase the steps executed (from the bundle or
//! derived for this model), every gate with its value and threshold, every remedy
//! attempt, and the wall time; per model the modeled performance. `report.json` is
//! this record serialized; `report.md` and the run's trajectory are rendered from it.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::bundle::{Comparison, Provenance, Value};
use crate::exec::fault::Fault;
use crate::exec::gates::decode::DecodeErrors;
use crate::exec::gates::floor::DecodeLimits;
use crate::exec::gates::gate::{format_value, GateCheck};
use crate::exec::gates::topk::TopKCheck;
use crate::ops::{GateMetric, Metric, RuntimeMetric};
use crate::phase::DeployPhase;
use crate::xdna2::plan::Phase;

pub const REPORT_SCHEMA: &str = "skillc.deploy-report/1";

/// The verdict of the whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every phase passed and the independent evaluator said PASS.
    Pass,
    /// Every phase passed; the evaluator passed with warnings.
    PassWithWarnings,
    /// A gate failed and no lesson fixed it, or the evaluator said FAIL.
    Fail,
    /// Phase 0 refused the model (out of scope).
    Refused,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::PassWithWarnings => "PASS-with-warnings",
            Verdict::Fail => "FAIL",
            Verdict::Refused => "REFUSED",
        }
    }
}

/// The independent evaluator's verdict (`evaluation.json`, phase 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EvaluatorVerdict {
    #[serde(rename = "PASS")]
    Pass,
    #[serde(rename = "PASS-with-warnings")]
    PassWithWarnings,
    #[serde(rename = "FAIL")]
    Fail,
}

impl EvaluatorVerdict {
    /// What an audit with or without failures and warnings comes to.
    pub fn of(audit_ok: bool, warned: bool) -> EvaluatorVerdict {
        match (audit_ok, warned) {
            (false, _) => EvaluatorVerdict::Fail,
            (true, false) => EvaluatorVerdict::Pass,
            (true, true) => EvaluatorVerdict::PassWithWarnings,
        }
    }

    /// The run's verdict when this one is the last word.
    pub fn run_verdict(self) -> Verdict {
        match self {
            EvaluatorVerdict::Pass => Verdict::Pass,
            EvaluatorVerdict::PassWithWarnings => Verdict::PassWithWarnings,
            EvaluatorVerdict::Fail => Verdict::Fail,
        }
    }

    /// The process's exit code: 0 unless it failed.
    pub fn exit_code(self) -> i32 {
        match self {
            EvaluatorVerdict::Fail => 1,
            EvaluatorVerdict::Pass | EvaluatorVerdict::PassWithWarnings => 0,
        }
    }
}

impl fmt::Display for EvaluatorVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.run_verdict().label())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PhaseStatus {
    Passed,
    Failed,
    NotRun,
}

/// Where a step came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum StepOrigin {
    /// A bundle step, by id.
    Bundle {
        step: String,
        provenance: Vec<Provenance>,
    },
    /// Added by the runtime because this model needs it.
    Derived { why: String },
    /// A lesson's fix.
    Remedy { lesson: String },
}

/// What became of a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum StepOutcome {
    /// Executed with the recorded parameters.
    AsRecorded,
    /// Executed with parameters re-derived for this model.
    Rederived { why: String },
    /// Not executed: it does not apply to this model or run.
    NotApplicable { why: String },
    /// An optimization kept (verification passed, modeled time dropped).
    Kept { why: String },
    /// Already in effect (an earlier step or the runtime's baseline did it).
    Covered { why: String },
    /// An optimization tried and reverted.
    Reverted { why: Reversion },
    /// Executed and failed its gate.
    Failed { why: String },
}

/// Why an optimization was reverted. `report.json` writes the sentence
/// ([`fmt::Display`]); reading it back recognises each variant by its words
/// ([`Reversion::read`]), the one place the text is read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum Reversion {
    /// The plan builder refused the changed design.
    Unbuildable { why: String },
    /// A plan of the changed design does not place on the device.
    Unplaced { plan: Phase, violations: String },
    /// The changed plans compute other numbers: the checks that failed.
    NumericsFailed { failed: String },
    /// A prefill change re-tried after phase 5 would slow decode down.
    DecodeSlower { change: String },
    /// The modeled figure did not drop: `before -> after unit`.
    NoSpeedup { metric: Metric, change: String },
    /// A new kernel configuration of the change fails validation.
    SiteFails { site: String },
    /// One of alternatives that replace the same part of the plan, tried from
    /// the same plan: `kept` (`op id`) was kept, modeled faster or, at the same
    /// figure, listed first in the bundle; `figures` is `this vs kept unit`.
    OtherAlternative { kept: String, figures: String },
    /// A sentence none of the above writes (a report of another version).
    Other(String),
}

impl Reversion {
    /// The numbers of a modeled change, `before -> after unit`.
    pub fn change(before: f64, after: f64, unit: &str) -> String {
        format!("{} -> {} {unit}", format_value(before), format_value(after))
    }

    /// The reversion a sentence of `report.json` says.
    pub fn read(text: &str) -> Reversion {
        let between = |prefix: &str, suffix: &str| {
            text.strip_prefix(prefix)
                .and_then(|t| t.strip_suffix(suffix))
                .map(str::to_string)
        };
        if let Some(why) = between("the plan builder refuses it: ", "") {
            return Reversion::Unbuildable { why };
        }
        if let Some(failed) =
            between(NUMERICS_FAILED, "").and_then(|t| t.strip_prefix(": ").map(str::to_string))
        {
            return Reversion::NumericsFailed { failed };
        }
        if let Some(change) = between("modeled decode would slow down (", ")") {
            return Reversion::DecodeSlower { change };
        }
        if let Some(site) = between("its new configuration ", " fails validation") {
            return Reversion::SiteFails { site };
        }
        let alternative = between(OTHER_ALTERNATIVE, ")").and_then(|t| {
            let (kept, figures) = t.split_once(" was kept (modeled ")?;
            Some(Reversion::OtherAlternative {
                kept: kept.to_string(),
                figures: figures.to_string(),
            })
        });
        if let Some(alternative) = alternative {
            return alternative;
        }
        let unplaced = text
            .strip_prefix("the ")
            .and_then(|t| t.split_once(" plan does not place: "));
        if let Some((plan, violations)) = unplaced {
            let plan = match plan {
                "Prefill" => Some(Phase::Prefill),
                "Decode" => Some(Phase::Decode),
                _ => None,
            };
            if let Some(plan) = plan {
                return Reversion::Unplaced {
                    plan,
                    violations: violations.to_string(),
                };
            }
        }
        let no_speedup = between("modeled ", ")").and_then(|t| {
            let (metric, change) = t.split_once(" did not drop (")?;
            Some(Reversion::NoSpeedup {
                metric: Metric::named(metric)?,
                change: change.to_string(),
            })
        });
        no_speedup.unwrap_or_else(|| Reversion::Other(text.to_string()))
    }
}

/// How a reversion for broken numerics begins (`report.json` and the trajectory).
pub const NUMERICS_FAILED: &str = "verification fails after it";

/// How the reversion of an alternative not kept begins.
const OTHER_ALTERNATIVE: &str = "an alternative replacing the same part of the plan, ";

impl fmt::Display for Reversion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reversion::Unbuildable { why } => write!(f, "the plan builder refuses it: {why}"),
            Reversion::Unplaced { plan, violations } => {
                write!(f, "the {plan:?} plan does not place: {violations}")
            }
            Reversion::NumericsFailed { failed } => write!(f, "{NUMERICS_FAILED}: {failed}"),
            Reversion::DecodeSlower { change } => {
                write!(f, "modeled decode would slow down ({change})")
            }
            Reversion::NoSpeedup { metric, change } => {
                write!(f, "modeled {metric} did not drop ({change})")
            }
            Reversion::SiteFails { site } => {
                write!(f, "its new configuration {site} fails validation")
            }
            Reversion::OtherAlternative { kept, figures } => {
                write!(f, "{OTHER_ALTERNATIVE}{kept} was kept (modeled {figures})")
            }
            Reversion::Other(text) => f.write_str(text),
        }
    }
}

impl From<Reversion> for String {
    fn from(reversion: Reversion) -> String {
        reversion.to_string()
    }
}

impl From<String> for Reversion {
    fn from(text: String) -> Reversion {
        Reversion::read(&text)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub op: String,
    pub params: BTreeMap<String, Value>,
    pub origin: StepOrigin,
    pub outcome: StepOutcome,
    /// The parameters the bundle recorded, when they were changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<BTreeMap<String, Value>>,
}

impl StepRecord {
    /// A bundle step as this run executed it (or not), with the recorded parameters.
    pub fn from_bundle(step: &crate::bundle::Step, outcome: StepOutcome) -> StepRecord {
        StepRecord {
            op: step.op.to_string(),
            params: step.params.clone(),
            origin: StepOrigin::Bundle {
                step: step.id.clone(),
                provenance: step.provenance.clone(),
            },
            outcome,
            recorded: None,
        }
    }
}

/// One lesson tried on one failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemedyAttempt {
    /// The failing gate's name.
    pub gate: String,
    pub lesson: String,
    pub title: String,
    /// The fix as the trajectory language writes it.
    pub fix: String,
    /// The parameters after the fix, when it could be evaluated.
    pub params: Option<BTreeMap<String, Value>>,
    pub before: f64,
    /// The gate's value after the fix (absent when the fix could not be applied).
    pub after: Option<f64>,
    pub fixed: bool,
    pub note: String,
    /// The deployments (bundle trajectories) that taught the lesson.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deployments: Vec<String>,
}

/// A lesson whose symptom matched a failure but whose condition is false on this
/// model: not applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkippedLesson {
    /// The failing gate's name.
    pub gate: String,
    pub lesson: String,
    pub title: String,
    /// The lesson's condition as the language writes it after `if`.
    pub condition: String,
    /// The model's values of the features the condition reads (`qk_norm = false`).
    pub values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseRecord {
    /// Serialized as its number.
    pub index: DeployPhase,
    pub name: String,
    pub title: String,
    pub status: PhaseStatus,
    /// Wall time of the phase on this machine (not modeled).
    pub wall_s: f64,
    pub steps: Vec<StepRecord>,
    pub gates: Vec<GateCheck>,
    pub attempts: Vec<RemedyAttempt>,
    /// Lessons matched by a failure but not applied: their condition is false here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedLesson>,
    /// Facts worth a reader's attention (what was re-verified and how, …).
    pub notes: Vec<String>,
}

impl PhaseRecord {
    pub fn new(index: DeployPhase, name: &str, title: &str) -> Self {
        Self {
            index,
            name: name.to_string(),
            title: title.to_string(),
            status: PhaseStatus::NotRun,
            wall_s: 0.0,
            steps: Vec::new(),
            gates: Vec::new(),
            attempts: Vec::new(),
            skipped: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// Where the run stopped, for a failed or refused run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stop {
    /// Serialized as its number.
    pub phase: DeployPhase,
    pub gate: String,
    pub metric: GateMetric,
    pub value: f64,
    pub comparison: Comparison,
    pub threshold: f64,
    pub reason: String,
    /// Lessons tried, in order.
    pub tried: Vec<String>,
}

impl Stop {
    /// The run stopped in `phase` at `gate`, which failed, after the lessons `tried`.
    pub fn at(phase: DeployPhase, gate: &GateCheck, reason: &str, tried: Vec<String>) -> Stop {
        Stop {
            phase,
            gate: gate.name.clone(),
            metric: gate.metric,
            value: gate.value,
            comparison: gate.comparison,
            threshold: gate.threshold,
            reason: reason.to_string(),
            tried,
        }
    }

    /// The run stopped in `phase` at a step that failed without a gate of its own
    /// (`gate` names it): one of `metric`, where none may be.
    pub fn failed_step(
        phase: DeployPhase,
        gate: &str,
        metric: impl Into<GateMetric>,
        reason: &str,
    ) -> Stop {
        Stop {
            phase,
            gate: gate.to_string(),
            metric: metric.into(),
            value: 1.0,
            comparison: Comparison::Eq,
            threshold: 0.0,
            reason: reason.to_string(),
            tried: Vec::new(),
        }
    }

    /// The run stopped in `phase` at `gate` after `rounds` rounds of fixes, the
    /// most it may take, the lessons `tried` in order.
    pub fn out_of_rounds(
        phase: DeployPhase,
        gate: &str,
        rounds: usize,
        reason: &str,
        tried: Vec<String>,
    ) -> Stop {
        Stop {
            phase,
            gate: gate.to_string(),
            metric: RuntimeMetric::Rounds.into(),
            value: rounds as f64,
            comparison: Comparison::Lt,
            threshold: rounds as f64,
            reason: reason.to_string(),
            tried,
        }
    }

    /// A run asked to stop after phase `last` (`--stop-after`), at gate `gate`.
    pub fn stopped_after(last: DeployPhase, gate: &str) -> Stop {
        let index = f64::from(last.index());
        Stop {
            phase: last,
            gate: gate.to_string(),
            metric: RuntimeMetric::Phase.into(),
            value: index,
            comparison: Comparison::Le,
            threshold: index,
            reason: format!("the run was asked to stop after phase {last} (--stop-after)"),
            tried: Vec::new(),
        }
    }
}

/// The model as deployed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// The model directory's name.
    pub name: String,
    pub class_name: String,
    pub parameters: u64,
    pub layers: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub vocab_size: usize,
    /// `checkpoint` or `random (seed N)`.
    pub weights: String,
    /// sha256 of config.json.
    pub config_sha256: String,
    /// The scope check's notes on structure.
    pub features: Vec<String>,
}

/// One prompt's verification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptVerdict {
    pub prompt: usize,
    pub tokens: usize,
    /// The greedy top-k set check over every step.
    pub check: TopKCheck,
    /// The teacher-forced errors against the reference.
    pub decode: DecodeErrors,
    /// The NPU path's greedy choice at every step, fed the reference's tokens:
    /// its free-running greedy decode up to the first divergence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub npu_tokens: Vec<u32>,
}

/// A prompt and what the oracle and the deployed model generated from it, as
/// text (the model's tokenizer), each cut after its first end-of-sequence token:
/// the oracle's greedy decode and the final plan's free-running greedy decode on
/// the NPU path (`gates::free_run`), with the first step where they differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptText {
    pub prompt: usize,
    pub prompt_text: String,
    pub oracle_tokens: Vec<u32>,
    pub oracle_text: String,
    pub npu_tokens: Vec<u32>,
    pub npu_text: String,
    /// Where the two texts first differ, both sides' top-5 with their text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_difference: Option<crate::exec::gates::free_run::FirstDifference>,
}

/// Modeled figures of one plan (from the emulator's cost model).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeledTimes {
    pub seq_len: usize,
    pub ttft_s: f64,
    pub ms_per_token: f64,
    pub tok_s: f64,
    pub calls_per_layer_prefill: usize,
    pub calls_per_layer_decode: usize,
}

/// Modeled decode speed at one cached-context length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextDecode {
    pub context: usize,
    pub ms_per_token: f64,
    pub tok_s: f64,
}

/// One row of the roofline table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RooflineRow {
    pub phase: String,
    pub name: String,
    pub ms: f64,
    /// Achieved fraction of the bound that limits it (compute or bandwidth).
    pub fraction: f64,
    pub bound: String,
}

/// The model's performance as modeled, with the cost model's error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Performance {
    /// After phase 3 (the unoptimized plan that passed verification).
    pub baseline: ModeledTimes,
    /// The production plan.
    pub production: ModeledTimes,
    /// The production plan's decode at the context the published decode figures
    /// were measured at (the calibration data set's), for comparison with them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_context_decode: Option<ContextDecode>,
    pub roofline: Vec<RooflineRow>,
    /// The cost model's calibration error against published measurements.
    pub calibration: String,
    /// Median absolute relative error of the calibration, as a fraction.
    pub calibration_error: f64,
}

/// The decode gates' limits as measured in phase 0, with the floor run's wall
/// time (what the floor adds to a deployment).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecodeLimitsRecord {
    pub limits: DecodeLimits,
    pub wall_s: f64,
}

/// The record of one run: `report.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeployReport {
    pub schema_version: String,
    pub bundle: String,
    /// The trajectories the bundle was built from.
    pub bundle_sources: Vec<String>,
    /// What was wrong with the bundle when this run started (see
    /// `DeployOptions::bundle_notes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bundle_notes: Vec<String>,
    /// The model directory's name (known even when the config cannot be read).
    #[serde(default)]
    pub model_dir: String,
    pub model: Option<ModelInfo>,
    /// The model's size, the memory the run needs and its estimated time,
    /// stated before the run started (absent when the config cannot be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<crate::exec::estimate::RunEstimate>,
    /// The zero padding phase 1 gave the model's dimensions, with why each
    /// padded one needed it (`xdna2::padding`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub padding: Option<crate::xdna2::padding::PaddingChoice>,
    pub seed: u64,
    pub faults: Vec<Fault>,
    pub prompts: Vec<Vec<u32>>,
    pub phases: Vec<PhaseRecord>,
    pub verification: Vec<PromptVerdict>,
    /// Prompts and generated text side by side, when the model has a tokenizer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub texts: Vec<PromptText>,
    /// The final plan's free-running greedy decode of every prompt against the
    /// oracle's (phase 6).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub free_running: Vec<crate::exec::gates::free_run::FreeRun>,
    /// Per-layer cosines of the first prompt (phase 3 diagnosis, not a gate).
    pub diagnosis: Vec<crate::exec::gates::verify::LayerDiagnosis>,
    /// For a model without transformers outputs: each code path it takes and the
    /// fixtures that prove it (phase 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feature_proofs: Vec<crate::exec::gates::features::FeatureProof>,
    /// Which weights the decode GEMVs read, for a model with 4-bit weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_path: Option<super::weight_path::WeightPathRecord>,
    /// Numerics fingerprints that passed verification, with how each was verified.
    pub verified: BTreeMap<String, String>,
    /// The teacher-forced gates' limits and the bf16-storage floor they come
    /// from (phase 0; absent when phase 0 did not get that far).
    #[serde(default)]
    pub decode_limits: Option<DecodeLimitsRecord>,
    pub performance: Option<Performance>,
    pub verdict: Verdict,
    pub stop: Option<Stop>,
    /// The evaluator's verdict and findings (phase 7).
    pub evaluation: Option<EvaluationSummary>,
    /// Wall time of the whole run on this machine.
    pub wall_s: f64,
}

/// What the independent evaluator reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvaluationSummary {
    pub verdict: EvaluatorVerdict,
    pub exit_code: i32,
    pub findings: Vec<String>,
    pub warnings: Vec<String>,
    pub wall_s: f64,
}

impl DeployReport {
    /// Every gate of every phase, in order.
    pub fn gates(&self) -> impl Iterator<Item = (DeployPhase, &GateCheck)> {
        self.phases
            .iter()
            .flat_map(|p| p.gates.iter().map(move |g| (p.index, g)))
    }

    /// Bundle steps the run executed with other parameters than recorded, or did
    /// not execute, with the reason.
    pub fn rederived_steps(&self) -> Vec<(DeployPhase, &StepRecord)> {
        self.phases
            .iter()
            .flat_map(|p| p.steps.iter().map(move |s| (p.index, s)))
            .filter(|(_, s)| {
                matches!(s.origin, StepOrigin::Bundle { .. })
                    && !matches!(
                        s.outcome,
                        StepOutcome::AsRecorded | StepOutcome::Kept { .. }
                    )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reversion reads back from the sentence `report.json` holds as the
    /// same variant, so the evaluator and phase 5 act on the kind, never the words.
    #[test]
    fn reversions_read_back_as_what_they_are() {
        let reversions = [
            Reversion::Unbuildable {
                why: "the model has no layer 3".into(),
            },
            Reversion::Unplaced {
                plan: Phase::Decode,
                violations: "L1 capacity: 70 KiB > 64 KiB".into(),
            },
            Reversion::NumericsFailed {
                failed: "logits_max_rel = 1.57 <= 0.05".into(),
            },
            Reversion::DecodeSlower {
                change: Reversion::change(2.9, 3.125, "ms"),
            },
            Reversion::NoSpeedup {
                metric: Metric::TtftS,
                change: Reversion::change(0.0312, 0.0312, "s"),
            },
            Reversion::SiteFails {
                site: "gemm 16x128x384".into(),
            },
            Reversion::OtherAlternative {
                kept: "cascade-ffn p5-p5.cascade".into(),
                figures: "12.5 vs 11.9 ms".into(),
            },
            Reversion::Other("reverted by hand".into()),
        ];
        for reversion in reversions {
            let json = serde_json::to_string(&StepOutcome::Reverted {
                why: reversion.clone(),
            })
            .unwrap();
            let back: StepOutcome = serde_json::from_str(&json).unwrap();
            assert_eq!(back, StepOutcome::Reverted { why: reversion }, "{json}");
        }
        assert_eq!(
            Reversion::NoSpeedup {
                metric: Metric::MsPerToken,
                change: Reversion::change(2.9, 3.0, "ms"),
            }
            .to_string(),
            "modeled ms_per_token did not drop (2.9 -> 3 ms)"
        );
    }

    #[test]
    fn evaluator_verdicts_are_their_labels_in_json() {
        for (verdict, json) in [
            (EvaluatorVerdict::Pass, "\"PASS\""),
            (EvaluatorVerdict::PassWithWarnings, "\"PASS-with-warnings\""),
            (EvaluatorVerdict::Fail, "\"FAIL\""),
        ] {
            assert_eq!(serde_json::to_string(&verdict).unwrap(), json);
            assert_eq!(
                serde_json::from_str::<EvaluatorVerdict>(json).unwrap(),
                verdict
            );
            assert_eq!(format!("\"{verdict}\""), json);
        }
    }
}
