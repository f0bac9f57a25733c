//! Phase 0, the CPU reference: the scope check (out-of-scope architectures refused
//! with the reason), the weights (checkpoint, or seeded random ones for a config
//! alone), the reference's sanity gate (no NaN; the last position's top-1 the same
//! whether the prompt runs in one prefill or ends with a cached decode step), the
//! reference's greedy generations that later phases verify against, and, when the
//! directory holds a transformers `reference.safetensors`, the match against it.

use std::collections::{BTreeMap, BTreeSet};

use super::prompts::{check_prompts, default_prompts};
use super::DeployPhase;
use crate::bundle::{Comparison, Value};
use crate::exec::artifacts::record::DecodeLimitsRecord;
use crate::exec::artifacts::record::{ModelInfo, PhaseRecord, StepOrigin, StepOutcome, Stop};
use crate::exec::artifacts::trajectory::ActionLinks;
use crate::exec::gates::decode::ReferenceRun;
use crate::exec::gates::features::{fixture_matches, proofs, FixtureMatch};
use crate::exec::gates::floor::DecodeLimits;
use crate::exec::gates::gate::{non_finite, GateCheck, ThresholdSource};
use crate::exec::gates::topk::{TopKGate, GATE_N_TOKENS};
use crate::exec::gates::verify::reference_runs;
use crate::exec::run::{Loaded, PhaseEnd, Run, Unloaded};
use crate::exec::DeployError;
use crate::model::arch::Architecture;
use crate::model::config::ConfigError;
use crate::model::features::{features, Feature};
use crate::model::oracle::blocks::argmax;
use crate::model::oracle::compare::{
    check_all, Agreement, ReferenceTensors, DEFAULT_TOLERANCE, REFERENCE_FILE,
};
use crate::model::oracle::storage::Bf16Storage;
use crate::model::oracle::{LogitRows, Reference, ReferenceError};
use crate::model::scope::check_scope;
use crate::model::source::ModelSource;
use crate::model::{Model, ModelError, WeightOrigin};
use crate::ops::{self, Metric, Op, OpKind};
use crate::xdna2::builder::unsupported_features;

/// Phase 0 on a run without a model: the model it loaded and checked, which
/// phases 1 to 6 run on, or how the phase ended.
pub(crate) fn run(
    run: &mut Run<'_, Unloaded>,
    rec: &mut PhaseRecord,
) -> Result<Result<Loaded, PhaseEnd>, DeployError> {
    let (arch, config_sha256) = match scope(run, rec)? {
        Ok(found) => found,
        Err(end) => return Ok(Err(end)),
    };
    let model = match weights(run, rec, arch)? {
        Ok(model) => model,
        Err(end) => return Ok(Err(end)),
    };
    let (fixture, reference_runs) = match reference(run, rec, &model)? {
        Ok(found) => found,
        Err(end) => return Ok(Err(end)),
    };
    let decode_limits = decode_limits(run, &model, &reference_runs)?;
    let loaded = Loaded {
        name: crate::exec::run::model_name(&run.options.model_dir),
        config_sha256,
        model,
        fixture,
        reference_runs,
        decode_limits,
        reference_prefill: Default::default(),
        long: Default::default(),
        long_state: Default::default(),
    };
    Ok(match compare(run, rec, &loaded)? {
        PhaseEnd::Passed => Ok(loaded),
        end => Err(end),
    })
}

/// What a part of phase 0 gives the next one, or how the phase ended.
type Part<T> = Result<Result<T, PhaseEnd>, DeployError>;

/// Where phase 0's `op` step comes from, with the parameters the bundle
/// recorded for it, and its operation as the bundle recorded it.
fn origin<'a>(
    run: &Run<'a, Unloaded>,
    op: OpKind,
) -> (StepOrigin, Option<BTreeMap<String, Value>>, Option<&'a Op>) {
    match run.bundle_step(DeployPhase::Reference, op) {
        Some(read) => (
            StepOrigin::Bundle {
                step: read.step.id.clone(),
                provenance: read.step.provenance.clone(),
            },
            Some(read.step.params.clone()),
            Some(&read.op),
        ),
        None => (
            StepOrigin::Derived {
                why: format!("the bundle has no `{op}` step; phase 0 always runs it"),
            },
            None,
            None,
        ),
    }
}

fn refuse(
    run: &mut Run<'_, Unloaded>,
    rec: &mut PhaseRecord,
    blockers: usize,
    reason: String,
    action: &str,
) -> PhaseEnd {
    let gate = GateCheck::named("scope check", OpKind::CheckScope)
        .measures(Metric::Blockers, blockers as f64)
        .must_be_zero(
            "MoE, MLA, encoder-decoder and architectures the reference cannot execute are refused",
        );
    run.traj
        .verdict(&format!("scope check: {reason}"), false, Some(action));
    let stop = Stop::at(DeployPhase::Reference, &gate, &reason, Vec::new());
    run.gate(rec, gate);
    PhaseEnd::Refused(stop)
}

/// The architecture, if the runtime can run it, with the config's SHA-256.
fn scope(run: &mut Run<'_, Unloaded>, rec: &mut PhaseRecord) -> Part<(Architecture, String)> {
    run.progress.step(OpKind::CheckScope.name());
    let source = ModelSource::locate(&run.options.model_dir);
    let path = source
        .as_ref()
        .map_or_else(|_| run.options.model_dir.clone(), ModelSource::identity);
    // `exists`: a config that is not a regular file is refused by the reader, not reported missing.
    if source.is_ok() && !path.exists() {
        return Err(DeployError::NoModel {
            dir: run.options.model_dir.clone(),
        });
    }
    let (origin, recorded, _) = origin(run, OpKind::CheckScope);
    let action = run.traj.action(
        OpKind::CheckScope,
        &BTreeMap::new(),
        &ActionLinks::default(),
    );
    let step = |outcome| crate::exec::artifacts::record::StepRecord {
        op: OpKind::CheckScope.to_string(),
        params: BTreeMap::new(),
        origin: origin.clone(),
        outcome,
        recorded: recorded.clone().filter(|r| !r.is_empty()),
    };
    let arch = match source
        .map_err(ModelError::from)
        .and_then(|s| s.architecture())
    {
        Ok(arch) => arch,
        Err(ModelError::Config(ConfigError::Io { source, .. })) => {
            return Err(DeployError::Input { path, source })
        }
        Err(e) => {
            let (blockers, reason) = match &e {
                ModelError::Config(e @ ConfigError::Blocked { blockers }) => {
                    (blockers.len(), e.to_string())
                }
                ModelError::Config(other) => (
                    1,
                    format!("config.json cannot be read as a decoder-only model: {other}"),
                ),
                other => (
                    1,
                    format!("the model cannot be read as a decoder-only model: {other}"),
                ),
            };
            rec.steps.push(step(StepOutcome::Failed {
                why: reason.clone(),
            }));
            return Ok(Err(refuse(run, rec, blockers, reason, &action)));
        }
    };
    let scope = check_scope(&arch);
    let npu = unsupported_features(&arch);
    if !npu.is_empty() {
        let reasons: Vec<String> = npu
            .iter()
            .map(|f| format!("{} on the NPU ({}); lifted by {}", f.name, f.reason, f.lift))
            .collect();
        let reason = format!(
            "{} is outside the runtime's scope: {}",
            arch.class_name,
            reasons.join("; ")
        );
        rec.steps.push(step(StepOutcome::Failed {
            why: reason.clone(),
        }));
        return Ok(Err(refuse(run, rec, reasons.len(), reason, &action)));
    }
    rec.steps.push(step(StepOutcome::AsRecorded));
    let gate = GateCheck::named("scope check", OpKind::CheckScope)
        .measures(Metric::Blockers, 0.0)
        .must_be_zero(
            "MoE, MLA, encoder-decoder and architectures the reference cannot execute are refused",
        );
    run.traj.verdict(
        &format!("scope check: {}", scope.notes.join("; ")),
        true,
        Some(&action),
    );
    run.gate(rec, gate);
    let config_sha256 = crate::exec::artifacts::sha256_file(&path)?;
    run.report.model = Some(ModelInfo {
        name: crate::exec::run::model_name(&run.options.model_dir),
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
        config_sha256: config_sha256.clone(),
        features: scope.notes,
    });
    Ok(Ok((arch, config_sha256)))
}

fn weights(run: &mut Run<'_, Unloaded>, rec: &mut PhaseRecord, arch: Architecture) -> Part<Model> {
    run.progress.step(OpKind::LoadWeights.name());
    let (origin, recorded, recorded_op) = origin(run, OpKind::LoadWeights);
    let seed = run.options.seed;
    // Packed (GGUF) weights run on the bf16 path as their bf16 rounding, and so
    // does the oracle of every later gate (the same weights on both sides); on
    // the 4-bit path they stay as stored (`weight_path::model_for`). Phase 0's
    // transformers match reads the exact values (`compare`).
    let result = ModelSource::locate(&run.options.model_dir)
        .map_err(ModelError::from)
        .and_then(|s| s.load(arch, Some(seed)))
        .and_then(|m| match run.options.seeded_quant {
            Some(format) => m.with_seeded_quant(format),
            None => Ok(m),
        });
    let result = match result {
        Ok(model) => Ok(super::weight_path::model_for(run.options.weights, model)?),
        Err(e) => Err(e),
    };
    let (source, params) = match &result {
        Ok(m) => {
            let (source, seed) = match m.origin {
                WeightOrigin::Checkpoint { .. } | WeightOrigin::Gguf { .. } => {
                    (ops::WeightOrigin::Checkpoint, None)
                }
                WeightOrigin::Random { seed, .. } => (ops::WeightOrigin::Random, Some(seed)),
            };
            let op = Op::LoadWeights {
                source: Some(source),
                seed,
            };
            (Some(source), op.params())
        }
        Err(_) => (None, BTreeMap::new()),
    };
    let action = run
        .traj
        .action(OpKind::LoadWeights, &params, &ActionLinks::default());
    let model = match result {
        Ok(model) => model,
        Err(e) => {
            let reason = format!("the weights cannot be loaded: {e}");
            let non_finite = matches!(
                e,
                crate::model::ModelError::Weights(
                    crate::model::checkpoint::WeightsError::NonFinite { .. }
                )
            );
            rec.steps.push(crate::exec::artifacts::record::StepRecord {
                op: OpKind::LoadWeights.to_string(),
                params,
                origin,
                outcome: StepOutcome::Failed {
                    why: reason.clone(),
                },
                recorded,
            });
            run.traj.verdict(&reason, false, Some(&action));
            // A non-finite value fails the weights' nan_count gate (at least one).
            let metric = if non_finite {
                Metric::NanCount
            } else {
                Metric::Errors
            };
            let gate = OpKind::LoadWeights.name();
            let stop = Stop::failed_step(DeployPhase::Reference, gate, metric, &reason);
            return Ok(Err(PhaseEnd::Failed(stop)));
        }
    };
    let recorded_source = match recorded_op {
        Some(Op::LoadWeights { source, .. }) => *source,
        _ => None,
    };
    let outcome = match recorded_source {
        Some(r) if Some(r) != source => StepOutcome::Rederived {
            why: match source {
                Some(ops::WeightOrigin::Random) => format!(
                    "the bundle loaded a {r} but this directory has no *.safetensors: seeded random weights (seed {seed})"
                ),
                _ => format!("the bundle used {r} weights; this directory has a checkpoint"),
            },
        },
        _ => StepOutcome::AsRecorded,
    };
    rec.steps.push(crate::exec::artifacts::record::StepRecord {
        op: OpKind::LoadWeights.to_string(),
        params,
        origin,
        outcome,
        recorded,
    });
    // The loader scans every value and refuses a non-finite one, so a loaded
    // model has none; a refused one stopped above.
    let finite = GateCheck::named("weights: non-finite values", OpKind::LoadWeights)
        .measures(Metric::NanCount, 0.0)
        .when(BTreeMap::from([(
            "source".to_string(),
            Value::Text(source.map_or("", ops::WeightOrigin::word).into()),
        )]))
        .must_be_zero("every weight value finite (the loader scans them all)");
    let label = format!(
        "{} weight tensors loaded, {} bf16 bytes",
        model.weights.tensors().len(),
        model.weights.bytes()
    );
    run.traj.observe(Some(&label), &[&finite], Some(&action));
    run.gate(rec, finite);
    if let Some(info) = &mut run.report.model {
        info.weights = match model.origin {
            WeightOrigin::Checkpoint { .. } => "checkpoint".into(),
            WeightOrigin::Gguf {
                ref file,
                ref formats,
            } => gguf_summary(file, formats),
            WeightOrigin::Random {
                seed,
                quantized: None,
            } => format!("random (seed {seed})"),
            WeightOrigin::Random {
                seed,
                quantized: Some(f),
            } => format!(
                "random (seed {seed}), projections quantized to {}",
                f.name()
            ),
        };
    }
    Ok(Ok(model))
}

/// `model.gguf (GGUF: 210 Q4_1, 61 F32, 1 Q8_0)`.
fn gguf_summary(file: &str, formats: &BTreeMap<String, usize>) -> String {
    let counts: Vec<String> = formats.iter().map(|(f, n)| format!("{n} {f}")).collect();
    format!("{file} (GGUF: {})", counts.join(", "))
}

/// The fixture's transformers outputs when the directory has them, and the
/// reference's greedy runs of the prompts.
fn reference(
    run: &mut Run<'_, Unloaded>,
    rec: &mut PhaseRecord,
    model: &Model,
) -> Part<(Option<ReferenceTensors>, Vec<ReferenceRun>)> {
    run.progress.step(OpKind::BuildReference.name());
    let arch = &model.arch;
    let fixture_path = crate::model::companion_dir(&run.options.model_dir).join(REFERENCE_FILE);
    // `exists`: a reference that is not a regular file is refused, not skipped.
    let fixture = if fixture_path.exists() {
        match ReferenceTensors::read(&fixture_path) {
            Ok(t) => Some(t),
            Err(source) => {
                return Err(DeployError::Fixture {
                    path: fixture_path,
                    source,
                })
            }
        }
    } else {
        None
    };
    let reference_prompts = match &fixture {
        Some(f) => f
            .prompts()
            .iter()
            .map(|p| f.token_ids(&ReferenceTensors::key(p, "input_ids")))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| DeployError::Fixture {
                path: fixture_path.clone(),
                source,
            })?,
        None => Vec::new(),
    };
    let prompts = match &run.options.prompts {
        Some(p) => p.clone(),
        None => default_prompts(arch, run.options.seed, reference_prompts),
    };
    check_prompts(&prompts, arch.vocab_size)?;
    run.report.prompts = prompts.clone();
    let (origin, recorded, _) = origin(run, OpKind::BuildReference);
    let action = run.traj.action(
        OpKind::BuildReference,
        &BTreeMap::new(),
        &ActionLinks::default(),
    );
    rec.steps.push(crate::exec::artifacts::record::StepRecord {
        op: OpKind::BuildReference.to_string(),
        params: BTreeMap::new(),
        origin,
        outcome: StepOutcome::AsRecorded,
        recorded: recorded.filter(|r| !r.is_empty()),
    });
    let stable = stable_top1(model, &prompts[0])?;
    run.progress.step(&format!(
        "reference: greedy {GATE_N_TOKENS} tokens, {} prompt(s)",
        prompts.len()
    ));
    let (generations, greedy_non_finite) = reference_runs(model, &prompts, TopKGate::DEFAULT)?;
    let non_finite = stable.non_finite + greedy_non_finite;
    let nan = GateCheck::named("reference sanity: no NaN", OpKind::BuildReference)
        .measures(Metric::NanCount, non_finite as f64)
        .when(BTreeMap::from([(
            "tokens".into(),
            Value::Int(GATE_N_TOKENS as i64),
        )]))
        .must_be_zero("no NaN or infinite logit in the reference's greedy runs");
    let top1 = GateCheck::named("reference sanity: stable top-1", OpKind::BuildReference)
        .measures(Metric::TopKAgree, f64::from(u8::from(stable.agree)))
        .when(
            BTreeMap::from([
                ("top_k".into(), Value::Int(1)),
                ("prompt".into(), Value::Int(1)),
            ]),
        )
        .against(
            Comparison::Ge,
            1.0,
            ThresholdSource::rule("the last position's top-1 is the same after one prefill and after a prefill ending in a cached decode step"),
        );
    run.traj
        .observe(Some("reference sanity"), &[&nan, &top1], Some(&action));
    let Some(failed) = run.record_gates(rec, [nan, top1]) else {
        return Ok(Ok((fixture, generations)));
    };
    Ok(Err(PhaseEnd::Failed(Stop::at(
        DeployPhase::Reference,
        &failed,
        "the CPU reference itself is not sane; no later gate could be trusted",
        Vec::new(),
    ))))
}

/// The decode gates' limits, from the bf16-storage floor of the model on the
/// prompts' teacher-forced tokens (`gates::floor`), measured in every
/// deployment before any NPU result exists.
fn decode_limits(
    run: &mut Run<'_, Unloaded>,
    model: &Model,
    reference_runs: &[ReferenceRun],
) -> Result<DecodeLimits, DeployError> {
    run.progress.step(&format!(
        "decode-gate floor: the oracle storing {} in bf16, {} prompts",
        Bf16Storage::decode_floor(),
        run.report.prompts.len()
    ));
    let started = std::time::Instant::now();
    let limits = DecodeLimits::measure(model, &run.report.prompts, reference_runs)?;
    run.report.decode_limits = Some(DecodeLimitsRecord {
        limits: limits.clone(),
        wall_s: started.elapsed().as_secs_f64(),
    });
    Ok(limits)
}

struct Stability {
    agree: bool,
    non_finite: usize,
}

/// Top-1 of the prompt's last position after one prefill vs after a prefill of all
/// but the last token and one cached decode step (exercises the KV cache).
fn stable_top1(model: &Model, prompt: &[u32]) -> Result<Stability, ReferenceError> {
    let mut whole = Reference::new(model)?;
    let a = whole.prefill(prompt, LogitRows::Last)?.logits.data;
    if prompt.len() < 2 {
        return Ok(Stability {
            agree: true,
            non_finite: non_finite(&a),
        });
    }
    let (head, last) = prompt.split_at(prompt.len() - 1);
    let mut split = Reference::new(model)?;
    split.prefill(head, LogitRows::Last)?;
    let b = split.decode_step(last[0])?;
    Ok(Stability {
        agree: argmax(&a) == argmax(&b),
        non_finite: non_finite(&a) + non_finite(&b),
    })
}

fn compare(
    run: &mut Run<'_, Unloaded>,
    rec: &mut PhaseRecord,
    loaded: &Loaded,
) -> Result<PhaseEnd, DeployError> {
    let model = &loaded.model;
    let (origin, recorded, recorded_op) = origin(run, OpKind::CompareReference);
    let bundle_tol = match recorded_op {
        Some(Op::CompareReference { tol, .. }) => *tol,
        _ => None,
    };
    let Some(fixture) = loaded.fixture.as_ref() else {
        if recorded.is_some() {
            rec.steps.push(crate::exec::artifacts::record::StepRecord {
                op: OpKind::CompareReference.to_string(),
                params: recorded.clone().unwrap_or_default(),
                origin,
                outcome: StepOutcome::NotApplicable {
                    why: "no reference.safetensors in the model directory (nothing from transformers to compare with)".into(),
                },
                recorded: None,
            });
        }
        rec.notes.push(
            "the model directory holds no reference.safetensors: each code path the model takes is proven by a transformers fixture that takes it".into(),
        );
        return prove_features(
            run,
            rec,
            &model.arch,
            bundle_tol.map_or(DEFAULT_TOLERANCE, |t| t.min(DEFAULT_TOLERANCE)),
        );
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
        .action(OpKind::CompareReference, &params, &ActionLinks::default());
    rec.steps.push(crate::exec::artifacts::record::StepRecord {
        op: OpKind::CompareReference.to_string(),
        params,
        origin,
        outcome,
        recorded,
    });
    // transformers ran on the exact dequantized weights: compare those, not
    // the bf16 rounding the NPU path runs on.
    let exact = match &model.origin {
        WeightOrigin::Gguf { .. } => Some(
            ModelSource::locate(&run.options.model_dir)
                .map_err(ModelError::from)
                .and_then(|s| s.load(model.arch.clone(), None))?,
        ),
        _ => None,
    };
    let checks = check_all(exact.as_ref().unwrap_or(model), fixture, tol)?;
    let agreement = Agreement::of(&checks);
    let (worst, mismatched) = (agreement.worst, agreement.mismatched_tokens);
    let conditions = BTreeMap::from([
        ("against".to_string(), Value::Text("transformers".into())),
        ("tensors".to_string(), Value::Int(agreement.tensors as i64)),
        ("prompts".to_string(), Value::Int(agreement.prompts as i64)),
    ]);
    let error = tensor_error_gate(
        "transformers match: worst tensor error".into(),
        worst,
        conditions.clone(),
        tol,
        "every reference tensor",
    );
    let tokens = GateCheck::named(
        "transformers match: greedy tokens",
        OpKind::CompareReference,
    )
    .measures(Metric::Mismatches, mismatched as f64)
    .when(conditions.clone())
    .must_be_zero("the reference's greedy tokens equal transformers' exactly");
    let nan = GateCheck::named(
        "transformers match: non-finite values",
        OpKind::CompareReference,
    )
    .measures(Metric::NanCount, agreement.non_finite as f64)
    .when(conditions)
    .must_be_zero("no NaN or infinite value in any tensor the reference computed");
    run.traj.observe(
        Some("CPU reference vs transformers"),
        &[&error, &tokens, &nan],
        Some(&action),
    );
    // Non-finite values explain any other failure, so the stop names them first.
    let non_finite = (!nan.passed).then(|| nan.clone());
    let Some(first) = run.record_gates(rec, [error, tokens, nan]) else {
        return Ok(PhaseEnd::Passed);
    };
    Ok(PhaseEnd::Failed(Stop::at(
        DeployPhase::Reference,
        &non_finite.unwrap_or(first),
        "the CPU reference disagrees with transformers",
        Vec::new(),
    )))
}

/// A model without transformers outputs of its own: every code path it takes
/// (`model::features`) is matched with the fixtures of `--fixtures` that take it,
/// and each such fixture is gated against its transformers outputs. A fixture that
/// fails stops phase 0 (the reference is wrong on a path this model uses); a path
/// no fixture takes is noted, and the evaluator warns about it.
fn prove_features(
    run: &mut Run<'_, Unloaded>,
    rec: &mut PhaseRecord,
    arch: &Architecture,
    tol: f64,
) -> Result<PhaseEnd, DeployError> {
    let used = features(arch);
    run.progress
        .step("compare-reference against the transformers fixtures");
    let matches: Vec<FixtureMatch> = run
        .options
        .fixtures
        .iter()
        .flat_map(|dir| fixture_matches(dir, tol).as_ref().clone())
        .collect();
    let params = BTreeMap::from([
        ("against".to_string(), Value::Text("fixtures".into())),
        ("tol".to_string(), Value::Float(tol)),
    ]);
    let action = run
        .traj
        .action(OpKind::CompareReference, &params, &ActionLinks::default());
    let mut gates = Vec::new();
    for m in matches.iter().filter(|m| !m.features.is_disjoint(&used)) {
        let pair = fixture_gates(m, &used, tol);
        // One observation per fixture: an observation measures a metric once.
        run.traj.observe(
            Some(&format!(
                "CPU reference vs transformers on fixture {}",
                m.fixture
            )),
            &[&pair[0], &pair[1]],
            Some(&action),
        );
        gates.extend(pair);
    }
    let failed = run.record_gates(rec, gates);
    let proofs = proofs(&used, &matches, tol);
    for p in &proofs {
        rec.notes.push(match p.fixtures.as_slice() {
            [] => format!("{}: no transformers fixture takes this path; the reference's code for it is trusted from its own tests", p.feature),
            names => format!("{}: proven by {}", p.feature, names.join(", ")),
        });
    }
    run.report.feature_proofs = proofs;
    let Some(gate) = failed else {
        return Ok(PhaseEnd::Passed);
    };
    Ok(PhaseEnd::Failed(Stop::at(
        DeployPhase::Reference,
        &gate,
        "the CPU reference disagrees with transformers on a fixture that takes code paths this model uses",
        Vec::new(),
    )))
}

/// The worst relative error of the reference's tensors against transformers'
/// `over` the tensors named, within `tol`.
fn tensor_error_gate(
    name: String,
    worst: f64,
    conditions: BTreeMap<String, Value>,
    tol: f64,
    over: &str,
) -> GateCheck {
    GateCheck::named(name, OpKind::CompareReference)
        .measures(Metric::MaxRel, worst)
        .when(conditions)
        .against(
            Comparison::Le,
            tol,
            ThresholdSource::rule(format!(
                "max |ours - transformers| / max |transformers| over {over}"
            )),
        )
}

/// The error and token gates of one fixture, naming the paths it proves here.
fn fixture_gates(m: &FixtureMatch, used: &BTreeSet<Feature>, tol: f64) -> [GateCheck; 2] {
    let paths: Vec<&str> = m
        .features
        .intersection(used)
        .map(|f| f.describe())
        .collect();
    let conditions = BTreeMap::from([
        ("fixture".to_string(), Value::Text(m.fixture.clone())),
        ("paths".to_string(), Value::Text(paths.join("; "))),
    ]);
    let (worst, wrong) = match &m.agreement {
        Ok(a) => (a.worst, (a.mismatched_tokens + a.non_finite) as f64),
        Err(_) => (f64::NAN, f64::NAN),
    };
    [
        tensor_error_gate(
            format!("feature proof: {} worst tensor error", m.fixture),
            worst,
            conditions.clone(),
            tol,
            "every reference tensor of the fixture",
        ),
        GateCheck::named(
            format!("feature proof: {} greedy tokens", m.fixture),
            OpKind::CompareReference,
        )
        .measures(Metric::Mismatches, wrong)
        .when(conditions)
        .must_be_zero("the fixture's greedy tokens equal transformers' and nothing is non-finite"),
    ]
}
