//! Phase 0, the CPU reference: the scope check (out-of-scope architectures refused
//! with the reason), the weights (checkpoint, or seeded random ones for a config
//! alone), the reference's sanity gate (no NaN; the last position's top-1 the same
//! whether the prompt runs in one prefill or ends with a cached decode step), the
//! reference's greedy generations that later phases verify against, and, when the
//! directory holds a transformers `reference.safetensors`, the match against it.

use std::collections::BTreeMap;

use super::gate::{non_finite, GateCheck, ThresholdSource};
use super::prompts::{check_prompts, default_prompts};
use super::record::{ModelInfo, PhaseRecord, StepOrigin, StepOutcome, Stop};
use super::run::{PhaseEnd, Run};
use super::topk::{GATE_K, GATE_N_TOKENS};
use super::trajectory::ActionLinks;
use super::verify::{generate, ReferenceDecoder};
use super::DeployError;
use crate::bundle::{Comparison, Value};
use crate::model::config::{load_config, ConfigError};
use crate::model::oracle::blocks::argmax;
use crate::model::oracle::compare::{
    check_reference, ReferenceTensors, DEFAULT_TOLERANCE, REFERENCE_FILE,
};
use crate::model::oracle::{LogitRows, Reference};
use crate::model::scope::check_scope;
use crate::model::{Model, WeightOrigin};
use crate::xdna2::builder::unsupported_features;

pub(crate) fn run(run: &mut Run<'_>, rec: &mut PhaseRecord) -> Result<PhaseEnd, DeployError> {
    if let Some(end) = scope(run, rec)? {
        return Ok(end);
    }
    if let Some(end) = weights(run, rec)? {
        return Ok(end);
    }
    if let Some(end) = reference(run, rec)? {
        return Ok(end);
    }
    compare(run, rec)
}

fn origin(run: &Run<'_>, op: &str) -> (StepOrigin, Option<BTreeMap<String, Value>>) {
    match run.bundle_step(0, op) {
        Some(step) => (
            StepOrigin::Bundle {
                step: step.id.clone(),
                provenance: step.provenance.clone(),
            },
            Some(step.params.clone()),
        ),
        None => (
            StepOrigin::Derived {
                why: format!("the bundle has no `{op}` step; phase 0 always runs it"),
            },
            None,
        ),
    }
}

fn refuse(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    blockers: usize,
    reason: String,
    action: &str,
) -> PhaseEnd {
    let gate = GateCheck::new(
        "scope check",
        "check-scope",
        "blockers",
        blockers as f64,
        Comparison::Eq,
        0.0,
        BTreeMap::new(),
        ThresholdSource::Runtime {
            rule: "MoE, MLA, encoder-decoder and architectures the reference cannot execute are refused".into(),
        },
    );
    run.traj
        .verdict(&format!("scope check: {reason}"), false, Some(action));
    run.gate(rec, gate);
    PhaseEnd::Refused(Stop {
        phase: 0,
        gate: "scope check".into(),
        metric: "blockers".into(),
        value: blockers as f64,
        comparison: "==".into(),
        threshold: 0.0,
        reason,
        tried: Vec::new(),
    })
}

fn scope(run: &mut Run<'_>, rec: &mut PhaseRecord) -> Result<Option<PhaseEnd>, DeployError> {
    run.progress.step("check-scope");
    let path = run.options.model_dir.join("config.json");
    if !path.is_file() {
        return Err(DeployError::Usage(format!(
            "{}: no config.json (a model directory holds config.json and, optionally, *.safetensors)",
            run.options.model_dir.display()
        )));
    }
    let (origin, recorded) = origin(run, "check-scope");
    let action = run
        .traj
        .action("check-scope", &BTreeMap::new(), &ActionLinks::default());
    let step = |outcome| super::record::StepRecord {
        op: "check-scope".into(),
        params: BTreeMap::new(),
        origin: origin.clone(),
        outcome,
        recorded: recorded.clone().filter(|r| !r.is_empty()),
    };
    let arch = match load_config(&path) {
        Ok(arch) => arch,
        Err(ConfigError::Io { message, .. }) => return Err(DeployError::io(&path, message)),
        Err(e) => {
            let reason = match &e {
                ConfigError::OutOfScope { .. } => e.to_string(),
                other => format!("config.json cannot be read as a decoder-only model: {other}"),
            };
            rec.steps.push(step(StepOutcome::Failed {
                why: reason.clone(),
            }));
            return Ok(Some(refuse(run, rec, 1, reason, &action)));
        }
    };
    let scope = check_scope(&arch);
    let npu = unsupported_features(&arch);
    if !npu.is_empty() {
        let reasons: Vec<String> = npu
            .iter()
            .map(|f| format!("{} on the NPU ({})", f.name, f.reason))
            .collect();
        let reason = format!(
            "{} is outside the runtime's scope: {}",
            arch.class_name,
            reasons.join("; ")
        );
        rec.steps.push(step(StepOutcome::Failed {
            why: reason.clone(),
        }));
        return Ok(Some(refuse(run, rec, reasons.len(), reason, &action)));
    }
    rec.steps.push(step(StepOutcome::AsRecorded));
    let gate = GateCheck::new(
        "scope check",
        "check-scope",
        "blockers",
        0.0,
        Comparison::Eq,
        0.0,
        BTreeMap::new(),
        ThresholdSource::Runtime {
            rule: "MoE, MLA, encoder-decoder and architectures the reference cannot execute are refused".into(),
        },
    );
    run.traj.verdict(
        &format!("scope check: {}", scope.notes.join("; ")),
        true,
        Some(&action),
    );
    run.gate(rec, gate);
    let config_sha256 = super::artifacts::sha256_file(&path)?;
    run.report.model = Some(ModelInfo {
        name: super::run::model_name(&run.options.model_dir),
        class_name: arch.class_name.clone(),
        parameters: arch.parameter_count(),
        layers: arch.num_layers,
        hidden_size: arch.hidden_size,
        intermediate_size: arch.intermediate_size,
        heads: arch.num_heads,
        kv_heads: arch.num_kv_heads,
        head_dim: arch.head_dim,
        vocab_size: arch.vocab_size,
        weights: String::new(),
        config_sha256,
        features: scope.notes,
    });
    run.arch = Some(arch);
    Ok(None)
}

fn weights(run: &mut Run<'_>, rec: &mut PhaseRecord) -> Result<Option<PhaseEnd>, DeployError> {
    run.progress.step("load-weights");
    let Some(arch) = run.arch.clone() else {
        return Ok(None);
    };
    let (origin, recorded) = origin(run, "load-weights");
    let seed = run.options.seed;
    let result = Model::load_with_arch(arch, &run.options.model_dir, Some(seed));
    let (source, params) = match &result {
        Ok(m) => match &m.origin {
            WeightOrigin::Checkpoint { .. } => (
                "checkpoint",
                BTreeMap::from([("source".to_string(), Value::Text("checkpoint".into()))]),
            ),
            WeightOrigin::Random { seed } => (
                "random",
                BTreeMap::from([
                    ("source".to_string(), Value::Text("random".into())),
                    ("seed".to_string(), Value::Int(*seed as i64)),
                ]),
            ),
        },
        Err(_) => ("", BTreeMap::new()),
    };
    let action = run
        .traj
        .action("load-weights", &params, &ActionLinks::default());
    let model = match result {
        Ok(model) => model,
        Err(e) => {
            let reason = format!("the weights cannot be loaded: {e}");
            rec.steps.push(super::record::StepRecord {
                op: "load-weights".into(),
                params,
                origin,
                outcome: StepOutcome::Failed {
                    why: reason.clone(),
                },
                recorded,
            });
            run.traj.verdict(&reason, false, Some(&action));
            return Ok(Some(PhaseEnd::Failed(Stop {
                phase: 0,
                gate: "load-weights".into(),
                metric: "errors".into(),
                value: 1.0,
                comparison: "==".into(),
                threshold: 0.0,
                reason,
                tried: Vec::new(),
            })));
        }
    };
    let recorded_source = recorded
        .as_ref()
        .and_then(|r| r.get("source"))
        .and_then(|v| match v {
            Value::Text(t) => Some(t.as_str()),
            _ => None,
        });
    let outcome = match recorded_source {
        Some(r) if r != source => StepOutcome::Rederived {
            why: match source {
                "random" => format!(
                    "the bundle loaded a {r} but this directory has no *.safetensors: seeded random weights (seed {seed})"
                ),
                _ => format!("the bundle used {r} weights; this directory has a checkpoint"),
            },
        },
        _ => StepOutcome::AsRecorded,
    };
    rec.steps.push(super::record::StepRecord {
        op: "load-weights".into(),
        params,
        origin,
        outcome,
        recorded,
    });
    run.traj.verdict(
        &format!(
            "{} weight tensors loaded, {} bf16 bytes, all finite",
            model.weights.tensors().len(),
            model.weights.bytes()
        ),
        true,
        Some(&action),
    );
    if let Some(info) = &mut run.report.model {
        info.weights = match model.origin {
            WeightOrigin::Checkpoint { .. } => "checkpoint".into(),
            WeightOrigin::Random { seed } => format!("random (seed {seed})"),
        };
    }
    run.model = Some(model);
    Ok(None)
}

fn reference(run: &mut Run<'_>, rec: &mut PhaseRecord) -> Result<Option<PhaseEnd>, DeployError> {
    run.progress.step("build-reference");
    let (Some(arch), true) = (run.arch.clone(), run.model.is_some()) else {
        return Ok(None);
    };
    let fixture_path = run.options.model_dir.join(REFERENCE_FILE);
    if fixture_path.is_file() {
        match ReferenceTensors::read(&fixture_path) {
            Ok(t) => run.fixture = Some(t),
            Err(e) => return Err(DeployError::io(&fixture_path, e)),
        }
    }
    let fixture_prompt = match &run.fixture {
        Some(f) => Some(
            f.token_ids("input_ids")
                .map_err(|e| DeployError::io(&fixture_path, e))?,
        ),
        None => None,
    };
    let prompts = match &run.options.prompts {
        Some(p) => p.clone(),
        None => default_prompts(&arch, run.options.seed, fixture_prompt),
    };
    check_prompts(&prompts, arch.vocab_size).map_err(DeployError::Usage)?;
    run.report.prompts = prompts.clone();
    let (origin, recorded) = origin(run, "build-reference");
    let action = run
        .traj
        .action("build-reference", &BTreeMap::new(), &ActionLinks::default());
    rec.steps.push(super::record::StepRecord {
        op: "build-reference".into(),
        params: BTreeMap::new(),
        origin,
        outcome: StepOutcome::AsRecorded,
        recorded: recorded.filter(|r| !r.is_empty()),
    });
    let Some(model) = run.model.as_ref() else {
        return Ok(None);
    };
    let stable = stable_top1(model, &prompts[0]).map_err(DeployError::Usage)?;
    let mut generations = Vec::with_capacity(prompts.len());
    let mut non_finite = stable.non_finite;
    for (i, prompt) in prompts.iter().enumerate() {
        run.progress.step(&format!(
            "reference: greedy {GATE_N_TOKENS} tokens, prompt {}/{}",
            i + 1,
            prompts.len()
        ));
        let reference = Reference::new(model).map_err(|e| DeployError::Usage(e.to_string()))?;
        let mut decoder = ReferenceDecoder::new(reference);
        let steps =
            generate(&mut decoder, prompt, GATE_N_TOKENS, GATE_K).map_err(DeployError::Usage)?;
        non_finite += decoder.non_finite;
        generations.push(steps);
    }
    run.reference_runs = generations;
    let rule = |r: &str| ThresholdSource::Runtime {
        rule: r.to_string(),
    };
    let nan = GateCheck::new(
        "reference sanity: no NaN",
        "build-reference",
        "nan_count",
        non_finite as f64,
        Comparison::Eq,
        0.0,
        BTreeMap::from([("tokens".into(), Value::Int(GATE_N_TOKENS as i64))]),
        rule("no NaN or infinite logit in the reference's greedy runs"),
    );
    let top1 = GateCheck::new(
        "reference sanity: stable top-1",
        "build-reference",
        "top_k_agree",
        f64::from(u8::from(stable.agree)),
        Comparison::Ge,
        1.0,
        BTreeMap::from([
            ("top_k".into(), Value::Int(1)),
            ("prompt".into(), Value::Int(1)),
        ]),
        rule("the last position's top-1 is the same after one prefill and after a prefill ending in a cached decode step"),
    );
    let obs = run
        .traj
        .observe(Some("reference sanity"), &[&nan, &top1], Some(&action));
    let passed = run.gate(rec, nan.clone()) & run.gate(rec, top1.clone());
    if passed {
        return Ok(None);
    }
    let failed = if nan.passed { top1 } else { nan };
    let _ = obs;
    Ok(Some(PhaseEnd::Failed(Stop {
        phase: 0,
        gate: failed.name.clone(),
        metric: failed.metric.clone(),
        value: failed.value,
        comparison: failed.comparison.symbol().into(),
        threshold: failed.threshold,
        reason: "the CPU reference itself is not sane; no later gate could be trusted".into(),
        tried: Vec::new(),
    })))
}

struct Stability {
    agree: bool,
    non_finite: usize,
}

/// Top-1 of the prompt's last position after one prefill vs after a prefill of all
/// but the last token and one cached decode step (exercises the KV cache).
fn stable_top1(model: &Model, prompt: &[u32]) -> Result<Stability, String> {
    let mut whole = Reference::new(model).map_err(|e| e.to_string())?;
    let a = whole
        .prefill(prompt, LogitRows::Last)
        .map_err(|e| e.to_string())?
        .logits
        .data;
    if prompt.len() < 2 {
        return Ok(Stability {
            agree: true,
            non_finite: non_finite(&a),
        });
    }
    let (head, last) = prompt.split_at(prompt.len() - 1);
    let mut split = Reference::new(model).map_err(|e| e.to_string())?;
    split
        .prefill(head, LogitRows::Last)
        .map_err(|e| e.to_string())?;
    let b = split.decode_step(last[0]).map_err(|e| e.to_string())?;
    Ok(Stability {
        agree: argmax(&a) == argmax(&b),
        non_finite: non_finite(&a) + non_finite(&b),
    })
}

fn compare(run: &mut Run<'_>, rec: &mut PhaseRecord) -> Result<PhaseEnd, DeployError> {
    let (origin, recorded) = origin(run, "compare-reference");
    let bundle_tol = recorded
        .as_ref()
        .and_then(|r| r.get("tol"))
        .and_then(|v| match v {
            Value::Float(f) => Some(*f),
            Value::Int(i) => Some(*i as f64),
            _ => None,
        });
    let (Some(fixture), Some(model)) = (run.fixture.as_ref(), run.model.as_ref()) else {
        if recorded.is_some() {
            rec.steps.push(super::record::StepRecord {
                op: "compare-reference".into(),
                params: recorded.clone().unwrap_or_default(),
                origin,
                outcome: StepOutcome::NotApplicable {
                    why: "no reference.safetensors in the model directory (nothing from transformers to compare with)".into(),
                },
                recorded: None,
            });
        }
        rec.notes.push(
            "phase 0 is not gated against transformers: the model directory holds no reference.safetensors".into(),
        );
        return Ok(PhaseEnd::Passed);
    };
    run.progress.step("compare-reference against transformers");
    // The reference computes in f32 like the fixture's transformers run, so the f32
    // bound applies; a bundle tolerance recorded against a bf16 run is looser.
    let tol = bundle_tol.map_or(DEFAULT_TOLERANCE, |t| t.min(DEFAULT_TOLERANCE));
    let params = BTreeMap::from([
        ("against".to_string(), Value::Text("transformers".into())),
        ("tol".to_string(), Value::Float(tol)),
    ]);
    let outcome = match bundle_tol {
        Some(t) if t != tol => StepOutcome::Rederived {
            why: format!(
                "tolerance {t} was recorded against a bf16 baseline; the fixture is float32 like the reference, so the float32 bound {tol} applies"
            ),
        },
        _ => StepOutcome::AsRecorded,
    };
    let action = run
        .traj
        .action("compare-reference", &params, &ActionLinks::default());
    rec.steps.push(super::record::StepRecord {
        op: "compare-reference".into(),
        params,
        origin,
        outcome,
        recorded,
    });
    let check =
        check_reference(model, fixture, tol).map_err(|e| DeployError::Usage(e.to_string()))?;
    let conditions = BTreeMap::from([
        ("against".to_string(), Value::Text("transformers".into())),
        ("tensors".to_string(), Value::Int(check.rows.len() as i64)),
    ]);
    let rule = |r: &str| ThresholdSource::Runtime {
        rule: r.to_string(),
    };
    let error = GateCheck::new(
        "transformers match: worst tensor error",
        "compare-reference",
        "max_rel",
        check.worst_ratio(),
        Comparison::Le,
        tol,
        conditions.clone(),
        rule("max |ours - transformers| / max |transformers| over every reference tensor"),
    );
    let mismatched = check
        .tokens
        .iter()
        .zip(&check.expected_tokens)
        .filter(|(a, b)| a != b)
        .count()
        + check.tokens.len().abs_diff(check.expected_tokens.len());
    let tokens = GateCheck::new(
        "transformers match: greedy tokens",
        "compare-reference",
        "mismatches",
        mismatched as f64,
        Comparison::Eq,
        0.0,
        conditions,
        rule("the reference's greedy tokens equal transformers' exactly"),
    );
    run.traj.observe(
        Some("CPU reference vs transformers"),
        &[&error, &tokens],
        Some(&action),
    );
    let passed = run.gate(rec, error.clone()) & run.gate(rec, tokens.clone());
    if passed {
        return Ok(PhaseEnd::Passed);
    }
    let failed = if error.passed { tokens } else { error };
    Ok(PhaseEnd::Failed(Stop {
        phase: 0,
        gate: failed.name.clone(),
        metric: failed.metric.clone(),
        value: failed.value,
        comparison: failed.comparison.symbol().into(),
        threshold: failed.threshold,
        reason: "the CPU reference disagrees with transformers".into(),
        tried: Vec::new(),
    }))
}
