//! Phase 6, finalize: greedy-decodes every prompt free-running on the final plan
//! (the deployed model's own text, `text`), writes the production plan, the kernel
//! registry, the modeled trace and the report so far, then gates on what the
//! evaluator will rely on: the plan file reloads to the same numerics fingerprint,
//! that fingerprint passed verification, every production kernel configuration has
//! a passing registry row, and the final plan's own text leaves the oracle's only
//! at or after the oracle's first near-tie.

use std::collections::BTreeMap;

use super::DeployPhase;
use crate::bundle::Value;
use crate::exec::artifacts::perf::{roofline, trace};
use crate::exec::artifacts::production::{ModelRef, ProductionPlan, WeightsRef, PLAN_SCHEMA};
use crate::exec::artifacts::record::{ModeledTimes, Performance, PhaseRecord, StepOutcome};
use crate::exec::artifacts::trajectory::ActionLinks;
use crate::exec::design::{fingerprint, modeled};
use crate::exec::gates::gate::GateCheck;
use crate::exec::gates::topk::{GATE_K, GATE_N_TOKENS};
use crate::exec::run::{write, write_report, PhaseEnd, Run};
use crate::exec::{files, DeployError};
use crate::model::WeightOrigin;
use crate::ops::{Metric, OpKind};

/// Bytes of the GGUF file `name`: the model path itself, or inside it.
fn gguf_size(model: &std::path::Path, name: &str) -> u64 {
    let path = if model.is_file() {
        model.to_path_buf()
    } else {
        model.join(name)
    };
    std::fs::metadata(path).map_or(0, |m| m.len())
}

pub(crate) fn run(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    baseline: &ModeledTimes,
) -> Result<PhaseEnd, DeployError> {
    let plans = run.plans()?;
    run.progress
        .step("free-running greedy decode of every prompt on the final plan");
    let free = super::text::free_running(run, &plans)?;
    rec.notes.extend(free.iter().map(|f| f.note()));
    run.report.texts = super::text::prompt_texts(run, &free);
    run.report.free_running = free;
    let fp = fingerprint(&plans, &run.design.path);
    let times = modeled(&plans, &run.device, &run.params);
    let calibration = run.calibration_note();
    let (loaded, model) = (&run.loaded, &run.loaded.model);
    let weights = match &model.origin {
        WeightOrigin::Random { seed, quantized } => WeightsRef::Random {
            seed: *seed,
            quantized: quantized.map(|f| f.name().to_string()),
        },
        WeightOrigin::Gguf { file, .. } => WeightsRef::Checkpoint {
            files: vec![(file.clone(), gguf_size(&run.options.model_dir, file))],
        },
        WeightOrigin::Checkpoint { files } => WeightsRef::Checkpoint {
            files: files
                .iter()
                .map(|f| {
                    let size =
                        std::fs::metadata(run.options.model_dir.join(f)).map_or(0, |m| m.len());
                    (f.clone(), size)
                })
                .collect(),
        },
    };
    let production = ProductionPlan {
        schema_version: PLAN_SCHEMA.to_string(),
        model: ModelRef {
            name: loaded.name.clone(),
            class_name: model.arch.class_name.clone(),
            config_sha256: loaded.config_sha256.clone(),
            weights,
        },
        prompts: run.report.prompts.clone(),
        tokens: GATE_N_TOKENS,
        top_k: GATE_K,
        design: run.design.clone(),
        fingerprint: fp.clone(),
        modeled: times.clone(),
        calibration: calibration.clone(),
        plans: plans.clone(),
    };
    let out = run.options.out_dir.clone();
    let action = run.traj.action(
        OpKind::WriteArtifacts,
        &BTreeMap::new(),
        &ActionLinks::default(),
    );
    run.record_bundle_steps(
        rec,
        DeployPhase::Finalize,
        OpKind::WriteArtifacts,
        StepOutcome::AsRecorded,
    );
    let plan_path = out.join(files::PLAN);
    let text =
        serde_json::to_string_pretty(&production).map_err(|source| DeployError::Serialize {
            path: plan_path.clone(),
            source,
        })? + "\n";
    write(&plan_path, &text)?;
    run.write_registry()?;
    let trace_json = trace(&plans, &run.device, &run.params, &calibration);
    write(
        &out.join(files::TRACE),
        &(serde_json::to_string(&trace_json).unwrap_or_default() + "\n"),
    )?;
    let calibration_error = crate::xdna2::fit::FittedFile::committed().fit.median_error;
    let published_context = crate::xdna2::calibration::DataSet::committed().decode_context;
    run.report.performance = Some(Performance {
        baseline: baseline.clone(),
        production: times,
        published_context_decode: run.decode_at(published_context).ok(),
        roofline: roofline(&plans, &run.device, &run.params, &run.calibration_note()),
        calibration,
        calibration_error,
    });
    run.report.verified = run.verified.clone();
    super::weight_path::model_both_paths(run, &run.calibration_note())?;

    let reloaded: Option<ProductionPlan> = std::fs::read_to_string(&plan_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let round_trip = reloaded
        .as_ref()
        .is_some_and(|p| p == &production && fingerprint(&p.plans, &p.design.path) == fp);
    let unvalidated = crate::exec::design::sites(&plans)
        .iter()
        .filter(|(key, (_, launch))| !run.registry.validated(key, launch))
        .count();
    let verified = run.verified.contains_key(&fp);
    let gates = vec![
        GateCheck::named("plan.json reloads to the verified fingerprint", OpKind::WriteArtifacts)
            .measures(Metric::Errors, f64::from(u8::from(!round_trip)))
            .when(BTreeMap::from([("fingerprint".to_string(), Value::Text(fp[..16].to_string()))]))
            .must_be_zero("the written plan parses back equal and hashes to the fingerprint the run verified"),
        GateCheck::named("production numerics verified", OpKind::WriteArtifacts)
            .measures(Metric::Unverified, f64::from(u8::from(!verified)))
            .must_be_zero("the production fingerprint passed the greedy verification or is bit-identical to one that did"),
        GateCheck::named("production kernels in the registry", OpKind::WriteArtifacts)
            .measures(Metric::UnvalidatedKernels, unvalidated as f64)
            .must_be_zero("every kernel configuration of the production plans has a passing registry row"),
        super::text::free_running_gate(&run.report.free_running),
    ];
    let refs: Vec<&GateCheck> = gates.iter().collect();
    run.traj
        .observe(Some("artifacts written and reloaded"), &refs, Some(&action));
    let failed = run.record_gates(rec, gates);
    let lessons: Vec<String> = run
        .report
        .phases
        .iter()
        .flat_map(|p| &p.attempts)
        .filter(|a| a.fixed)
        .map(|a| match a.deployments.as_slice() {
            [] => format!("{} ({})", a.lesson, a.title),
            from => format!("{} ({}; learnt on {})", a.lesson, a.title, from.join(", ")),
        })
        .collect();
    let a = run.traj.action(
        OpKind::RecordLessons,
        &BTreeMap::new(),
        &ActionLinks::default(),
    );
    run.record_bundle_steps(
        rec,
        DeployPhase::Finalize,
        OpKind::RecordLessons,
        StepOutcome::AsRecorded,
    );
    run.traj.verdict(
        &if lessons.is_empty() {
            "no bundle lesson was needed on this model".to_string()
        } else {
            format!("lessons applied with new evidence: {}", lessons.join(", "))
        },
        true,
        Some(&a),
    );
    write_report(run)?;
    if let Some(gate) = failed {
        let failure = crate::exec::gates::remedy::Failure {
            phase: DeployPhase::Finalize,
            op: OpKind::WriteArtifacts,
            params: BTreeMap::new(),
            gate,
        };
        let reason = match failure.gate.name == super::text::FREE_RUNNING_GATE {
            true => {
                "the final plan's own greedy text leaves the oracle's before its first near-tie"
            }
            false => "the artifacts do not hold what the run verified",
        };
        return Ok(PhaseEnd::Failed(run.stop(rec, &failure, reason)));
    }
    Ok(PhaseEnd::Passed)
}
