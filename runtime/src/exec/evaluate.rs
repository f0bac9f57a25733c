//! Phase 7's independent evaluator, run as a fresh process (`skillc evaluate OUT
//! --model DIR`): it reloads only the written artifacts (plan.json, the kernel
//! registry, report.json) and the model directory, audits that the gates really ran
//! on the production kernels with real verdicts, re-runs the verification from
//! scratch (a new CPU reference and a new NPU path built from plan.json), and turns
//! the result into PASS, PASS-with-warnings or FAIL with a real exit code.
//!
//! Audit, adapted from the reference system's anti-reward-hacking checklist: the
//! model is the one the plan names (config hash, weights); the plans in plan.json
//! are what the plan builder makes of the recorded design and hash to the recorded
//! fingerprint; they place on the device; every production kernel configuration has
//! a passing registry row; the fingerprint was verified during the run; every gate
//! in the report has the verdict its value and threshold give, the verification
//! gate used 32 tokens, top-5 and every prompt; and the fresh verification executed
//! exactly the launches the plans contain for every token it generated.

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::artifacts::production::{ProductionPlan, WeightsRef, PLAN_SCHEMA};
use super::artifacts::record::{
    DeployReport, EvaluatorVerdict, PhaseStatus, PromptVerdict, Reversion, StepOutcome,
};
use super::artifacts::registry::Registry;
use super::artifacts::sha256_file;
use super::design::{self, fingerprint, Plans};
use super::gates::floor::DecodeLimits;
use super::gates::topk::{TopKGate, GATE_K, GATE_N_TOKENS};
use super::gates::verify::{reference_runs, verify_npu};
use super::{files, DeployError};
use crate::model::source::ModelSource;
use crate::ops::{Metric, OpKind};
use crate::phase::DeployPhase;
use crate::xdna2::device::Device;
use crate::xdna2::plan::{Plan, Step};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditItem {
    pub check: String,
    pub ok: bool,
    pub detail: String,
}

/// `evaluation.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub verdict: EvaluatorVerdict,
    pub exit_code: i32,
    pub audit: Vec<AuditItem>,
    pub verification: Vec<PromptVerdict>,
    pub prompts_passed: usize,
    pub launches_executed: u64,
    pub launches_expected: u64,
    pub warnings: Vec<String>,
    pub wall_s: f64,
    /// The threads the evaluator ran on (the deploy's, passed down).
    #[serde(default)]
    pub threads: usize,
}

/// Runs the evaluation and writes evaluation.json and evaluation.md into `out`.
pub fn evaluate(out: &Path, model_dir: &Path) -> Result<Evaluation, DeployError> {
    let started = Instant::now();
    let plan: ProductionPlan = read_json(&out.join(files::PLAN))?;
    let registry = Registry::load(&out.join(files::REGISTRY))?;
    let report: DeployReport = read_json(&out.join(files::REPORT_JSON))?;
    let device = Device::npu2();
    let mut audit = Vec::new();
    let mut push = |check: &str, ok: bool, detail: String| {
        audit.push(AuditItem {
            check: check.to_string(),
            ok,
            detail,
        })
    };
    push(
        "plan.json schema",
        plan.schema_version == PLAN_SCHEMA,
        plan.schema_version.clone(),
    );
    let source = ModelSource::locate(model_dir).map_err(|e| DeployError::EvaluatedModel {
        doing: "read",
        source: Box::new(e.into()),
    })?;
    let config = source.identity();
    let config_hash = sha256_file(&config)?;
    let identity = config
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    push(
        "the model is the one the plan names",
        config_hash == plan.model.config_sha256,
        format!("{identity} sha256 {}", &config_hash[..16]),
    );
    let arch = source.architecture().map_err(|source| DeployError::Model {
        path: config.clone(),
        source: Box::new(source),
    })?;
    let quantized = match &plan.model.weights {
        WeightsRef::Random {
            quantized: Some(name),
            ..
        } => crate::model::quant::WeightFormat::ALL
            .into_iter()
            .find(|f| f.name() == name),
        _ => None,
    };
    let seed = match &plan.model.weights {
        WeightsRef::Random { seed, .. } => Some(*seed),
        WeightsRef::Checkpoint { files } => {
            let present = files.iter().all(|(f, size)| {
                std::fs::metadata(source.companion_dir().join(f)).is_ok_and(|m| m.len() == *size)
            });
            push(
                "checkpoint files as recorded",
                present,
                format!("{} file(s)", files.len()),
            );
            None
        }
    };
    let model = source
        .load(arch.clone(), seed)
        .and_then(|m| match quantized {
            Some(format) => m.with_seeded_quant(format),
            None => Ok(m),
        })
        .map(|m| match plan.design.packed.is_empty() {
            // The weights the deployment ran on: rounded to bf16, or the
            // stored 4-bit blocks its packed GEMVs read.
            true => m.for_bf16_path(),
            false => m,
        })
        .map_err(|source| DeployError::EvaluatedModel {
            doing: "loaded",
            source: Box::new(source),
        })?;
    let rebuilt = plan.design.plans(&plan.model.name, &arch, &device);
    push(
        "plans are what the builder makes of the recorded design",
        rebuilt.as_ref().is_ok_and(|p| p == &plan.plans),
        match &rebuilt {
            Ok(p) if p == &plan.plans => "identical".into(),
            Ok(_) => "plan.json differs from the rebuilt plans".into(),
            Err(e) => e.to_string(),
        },
    );
    let fp = fingerprint(&plan.plans, &plan.design.path);
    push(
        "numerics fingerprint",
        fp == plan.fingerprint,
        fp[..16].to_string(),
    );
    for p in [&plan.plans.prefill, &plan.plans.decode] {
        let placed = p.check(&device);
        push(
            &format!("{:?} plan places on the device", p.phase),
            placed.is_ok(),
            match placed {
                Ok(()) => "no constraint violation".into(),
                Err(v) => v
                    .iter()
                    .take(3)
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join("; "),
            },
        );
    }
    let sites = design::sites(&plan.plans);
    let missing: Vec<&String> = sites
        .iter()
        .filter(|(key, (_, launch))| !registry.validated(key, launch))
        .map(|(k, _)| k)
        .collect();
    push(
        "every production kernel configuration passed validation",
        missing.is_empty(),
        if missing.is_empty() {
            format!(
                "{} configurations, all with a passing registry row",
                sites.len()
            )
        } else {
            format!("no passing row for {missing:?}")
        },
    );
    push(
        "the production numerics were verified during the run",
        report.verified.contains_key(&plan.fingerprint),
        report
            .verified
            .get(&plan.fingerprint)
            .cloned()
            .unwrap_or_else(|| "fingerprint absent from report.json".into()),
    );
    let (consistent, details) = gates_consistent(&report, plan.prompts.len());
    push(
        "every gate's verdict follows from its value and threshold",
        consistent,
        details,
    );
    push(
        "verification parameters",
        plan.tokens == GATE_N_TOKENS && plan.top_k == GATE_K && !plan.prompts.is_empty(),
        format!(
            "{} tokens, top-{}, {} prompts",
            plan.tokens,
            plan.top_k,
            plan.prompts.len()
        ),
    );

    let (runs, ref_nan) = reference_runs(&model, &plan.prompts, TopKGate::DEFAULT)?;
    let limits = DecodeLimits::measure(&model, &plan.prompts, &runs)?;
    let v = verify_npu(
        &device,
        &model,
        &plan.plans,
        plan.design.path,
        &plan.prompts,
        &runs,
        None,
    )?;
    let expected = expected_launches(&plan.plans, &v.prompts);
    push(
        "fresh verification executed every launch of the plans",
        v.counters.launches == expected && expected > 0,
        format!(
            "{} launches executed, {expected} expected",
            v.counters.launches
        ),
    );
    let passed = v.passed_prompts();
    push(
        "fresh verification: top-k set check on every prompt",
        passed == plan.prompts.len() && v.non_finite == 0 && ref_nan == 0,
        format!(
            "{passed}/{} prompts pass; {} non-finite NPU logits",
            plan.prompts.len(),
            v.non_finite
        ),
    );
    let worst = v.worst();
    push(
        "fresh verification: teacher-forced logits and KV cache",
        worst.within(&limits),
        worst.summary(&limits),
    );
    let warnings = warnings(&report);
    let verdict = EvaluatorVerdict::of(audit.iter().all(|a| a.ok), !warnings.is_empty());
    let evaluation = Evaluation {
        verdict,
        exit_code: verdict.exit_code(),
        audit,
        verification: v.prompts,
        prompts_passed: passed,
        launches_executed: v.counters.launches,
        launches_expected: expected,
        warnings,
        wall_s: started.elapsed().as_secs_f64(),
        threads: crate::threads::current(),
    };
    let json = serde_json::to_string_pretty(&evaluation).unwrap_or_default() + "\n";
    super::run::write(&out.join(files::EVALUATION_JSON), &json)?;
    super::run::write(&out.join(files::EVALUATION_MD), &render(&evaluation))?;
    Ok(evaluation)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, DeployError> {
    let text = std::fs::read_to_string(path).map_err(|e| DeployError::io(path, e))?;
    serde_json::from_str(&text).map_err(|source| DeployError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// Launches in one pass of a plan.
fn launches_per_pass(plan: &Plan) -> u64 {
    plan.sections()
        .into_iter()
        .map(|(section, steps)| {
            let per: u64 = steps
                .iter()
                .map(|s| match s {
                    Step::Call(c) => c.launches.len() as u64,
                    Step::Host(_) => 0,
                })
                .sum();
            let repeats = if section == crate::xdna2::plan::Section::Layer {
                plan.num_layers as u64
            } else {
                1
            };
            per * repeats
        })
        .sum()
}

/// One prefill and `tokens − 1` decode steps per prompt.
fn expected_launches(plans: &Plans, prompts: &[PromptVerdict]) -> u64 {
    let (p, d) = (
        launches_per_pass(&plans.prefill),
        launches_per_pass(&plans.decode),
    );
    prompts
        .iter()
        .map(|v| p + d * (v.tokens.saturating_sub(1)) as u64)
        .sum()
}

/// Recomputes every gate's verdict; checks the verification gates' thresholds.
fn gates_consistent(report: &DeployReport, prompts: usize) -> (bool, String) {
    let mut problems = Vec::new();
    for (phase, g) in report.gates() {
        let holds = !g.value.is_nan() && g.comparison.holds(g.value, g.threshold);
        if holds != g.passed {
            problems.push(format!(
                "phase {phase} `{}` says {} but {}",
                g.name,
                g.passed,
                g.summary()
            ));
        }
        if g.metric == Metric::TopKAgree
            && g.op == OpKind::VerifyModel
            && g.threshold < prompts as f64
        {
            problems.push(format!(
                "phase {phase} `{}` accepts fewer than all {prompts} prompts",
                g.name
            ));
        }
    }
    let ran: Vec<DeployPhase> = report
        .phases
        .iter()
        .filter(|p| p.status == PhaseStatus::Passed)
        .map(|p| p.index)
        .collect();
    let before_finalize = DeployPhase::ALL
        .into_iter()
        .take_while(|p| *p < DeployPhase::Finalize);
    if !before_finalize.into_iter().all(|p| ran.contains(&p)) {
        let numbers: Vec<u8> = ran.iter().map(|p| p.index()).collect();
        problems.push(format!("phases passed before finalize: {numbers:?}"));
    }
    if problems.is_empty() {
        (true, format!("{} gates checked", report.gates().count()))
    } else {
        (false, problems.join("; "))
    }
}

fn warnings(report: &DeployReport) -> Vec<String> {
    let mut w = Vec::new();
    // The feature proofs' gates name their fixture; the model's own comparison does not.
    let gated = report.gates().any(|(p, g)| {
        p == DeployPhase::Reference
            && g.op == OpKind::CompareReference
            && !g.conditions.contains_key("fixture")
    });
    if !gated && report.feature_proofs.is_empty() {
        w.push("phase 0 was not gated against transformers outputs (no reference.safetensors, no fixtures to prove the model's code paths); the CPU reference is trusted from its own tests".into());
    }
    if !gated {
        for p in report
            .feature_proofs
            .iter()
            .filter(|p| p.fixtures.is_empty())
        {
            w.push(format!(
                "phase 0: the model uses {}, which no transformers fixture takes; the CPU reference's code for it is trusted from its own tests",
                p.feature
            ));
        }
    }
    for (phase, step) in report
        .phases
        .iter()
        .flat_map(|p| p.steps.iter().map(move |s| (p.index, s)))
    {
        if let StepOutcome::Reverted { why } = &step.outcome {
            if matches!(why, Reversion::NumericsFailed { .. }) {
                w.push(format!(
                    "phase {phase}: `{}` broke the NPU numerics and was reverted ({why}); the deployment runs without it, but the kernel path it enables is wrong",
                    step.op
                ));
            }
        }
    }
    let low = report.diagnosis.iter().filter(|d| d.cosine < 0.85).count();
    if low > 0 {
        w.push(format!(
            "{low} layer(s) below cosine 0.85 in the phase-3 diagnosis (not a gate)"
        ));
    }
    w
}

fn render(e: &Evaluation) -> String {
    use std::fmt::Write as _;
    let mut out = format!(
        "# Independent evaluation\n\nVerdict: **{}** (exit code {})\n\n## Audit\n\n",
        e.verdict, e.exit_code
    );
    for a in &e.audit {
        let _ = writeln!(
            out,
            "- {} {}: {}",
            if a.ok { "ok" } else { "FAILED" },
            a.check,
            a.detail
        );
    }
    let _ = writeln!(out, "\n## Fresh verification\n");
    for p in &e.verification {
        let _ = writeln!(
            out,
            "- {}: {}",
            super::phases::full_model::prompt_note(p),
            if p.check.passed { "pass" } else { "FAIL" }
        );
    }
    let _ = writeln!(
        out,
        "\n{} of {} launches executed as the plans require; {:.1} s.\n",
        e.launches_executed, e.launches_expected, e.wall_s
    );
    if !e.warnings.is_empty() {
        let _ = writeln!(out, "## Warnings\n");
        for w in &e.warnings {
            let _ = writeln!(out, "- {w}");
        }
    }
    out
}
