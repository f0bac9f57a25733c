//! Verification of the NPU path of a deployment against the reference's greedy
//! runs of the same prompts (phases 3, 5 and 7, and replay's `verify-model`): per
//! prompt, the teacher-forced comparison of logits and KV cache (`decode`) and the
//! greedy top-k set check over every step (`topk`), judged by [`verify_gates`];
//! for the first prompt, optionally, every layer's prefill output beside the
//! reference's (the diagnosis table, not a gate).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::block::BlockComparison;
use super::decode::{reference_run, teacher_forced, DecodeErrors, ReferenceRun, Worst};
use super::floor::{DecodeLimits, DerivedLimit};
use super::gate::{GateCheck, ThresholdSource};
use super::topk::{top_k_set_check, TopKGate};
use crate::bundle::{Comparison, Value};
use crate::exec::artifacts::record::PromptVerdict;
use crate::exec::design::Plans;
use crate::model::oracle::PrefillOutput;
use crate::model::oracle::ReferenceError;
use crate::model::Model;
use crate::ops::{Metric, OpKind, RuntimeMetric};
use crate::xdna2::device::Device;
use crate::xdna2::interpreter::{Counters, ExecError, Interpreter, NpuPath};

/// One layer of the diagnosis table (not a gate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerDiagnosis {
    pub layer: usize,
    pub cosine: f64,
    pub position_cosine_min: f64,
}

/// The NPU side of verification against the reference's cached runs.
#[derive(Debug, Clone)]
pub struct NpuVerification {
    pub prompts: Vec<PromptVerdict>,
    pub non_finite: usize,
    pub counters: Counters,
    /// Per-layer cosines of the first prompt's prefill, when asked for.
    pub diagnosis: Vec<LayerDiagnosis>,
}

impl NpuVerification {
    /// Prompts whose greedy top-k set check passed.
    pub fn passed_prompts(&self) -> usize {
        self.prompts.iter().filter(|p| p.check.passed).count()
    }

    /// The worst teacher-forced errors over every prompt.
    pub fn worst(&self) -> DecodeErrors {
        DecodeErrors::worst(self.prompts.iter().map(|p| &p.decode))
    }
}

/// Runs every prompt on the NPU path of `plans` over the model's weights, fed the
/// reference's tokens, and checks it against the reference's run; `diagnose` adds
/// the per-layer table of the first prompt.
pub fn verify_npu(
    device: &Device,
    model: &Model,
    plans: &Plans,
    path: NpuPath,
    prompts: &[Vec<u32>],
    reference_runs: &[ReferenceRun],
    diagnose: Option<&PrefillOutput>,
) -> Result<NpuVerification, ExecError> {
    let mut npu = Interpreter::new(device, &model.arch, &model.weights, path);
    let diagnose = diagnose.map(|reference| (reference, model.arch.hidden_size));
    verify_on(&mut npu, plans, prompts, reference_runs, diagnose)
}

/// [`verify_npu`] on an interpreter the caller made (replay runs the NPU side on
/// weights that reproduce a deployment state); `diagnose` holds the reference's
/// prefill and the hidden size.
pub fn verify_on(
    npu: &mut Interpreter<'_>,
    plans: &Plans,
    prompts: &[Vec<u32>],
    reference_runs: &[ReferenceRun],
    diagnose: Option<(&PrefillOutput, usize)>,
) -> Result<NpuVerification, ExecError> {
    let mut verdicts = Vec::new();
    let mut non_finite = 0;
    let mut diagnosis = Vec::new();
    for (i, (prompt, reference)) in prompts.iter().zip(reference_runs).enumerate() {
        npu.capture_layers(i == 0 && diagnose.is_some());
        let run = teacher_forced(npu, plans, prompt, reference)?;
        non_finite += run.non_finite;
        if let (0, Some((reference_prefill, width))) = (i, diagnose) {
            let ours = npu.take_layer_outputs();
            let theirs: Vec<&[f32]> = reference_prefill
                .layer_outputs
                .iter()
                .map(|l| l.data.as_slice())
                .collect();
            diagnosis = diagnose_layers(&ours, &theirs, width);
        }
        verdicts.push(PromptVerdict {
            prompt: i + 1,
            tokens: run.steps.len(),
            check: top_k_set_check(&reference.steps, &run.steps),
            npu_tokens: run.steps.iter().map(|s| s.token).collect(),
            decode: run.errors,
        });
    }
    Ok(NpuVerification {
        prompts: verdicts,
        non_finite,
        counters: npu.counters(),
        diagnosis,
    })
}

/// Every layer's output (`ours`) against the reference's, rows of `width`.
pub fn diagnose_layers(
    ours: &[Vec<f32>],
    reference: &[&[f32]],
    width: usize,
) -> Vec<LayerDiagnosis> {
    ours.iter()
        .zip(reference)
        .enumerate()
        .map(|(layer, (o, r))| {
            let block = BlockComparison::of(o, r, width);
            LayerDiagnosis {
                layer,
                cosine: block.cosine,
                position_cosine_min: block.position_cosine_min,
            }
        })
        .collect()
}

/// The reference side: greedy runs of every prompt at the size of `gate` (one
/// parallel task each, collected in prompt order), with the non-finite logits met.
pub fn reference_runs(
    model: &Model,
    prompts: &[Vec<u32>],
    gate: TopKGate,
) -> Result<(Vec<ReferenceRun>, usize), ReferenceError> {
    use rayon::prelude::*;
    let runs = prompts
        .par_iter()
        .map(|p| reference_run(model, p, gate))
        .collect::<Result<Vec<_>, _>>()?;
    let non_finite = runs.iter().map(|r| r.non_finite).sum();
    Ok((runs, non_finite))
}

/// One teacher-forced error gate: the worst value of `metric` (where it fell, beside
/// `conditions`) within its limit derived from the bf16-storage floor.
pub fn error_gate(
    name: &str,
    metric: RuntimeMetric,
    worst: &Worst,
    limit: &DerivedLimit,
    conditions: &BTreeMap<String, Value>,
) -> GateCheck {
    let mut at = conditions.clone();
    at.insert("worst".into(), Value::Text(worst.at.clone()));
    GateCheck::named(name, OpKind::VerifyModel)
        .measures(metric, worst.value)
        .when(at)
        .against(
            Comparison::Le,
            limit.limit,
            ThresholdSource::Measured(limit.clone()),
        )
}

/// The verification gates of `v` over `prompts` prompts decoded at the size of
/// `gate`: the three teacher-forced errors within their `limits`, the greedy top-k
/// set check on every prompt (its threshold from `top_k_source`), and no NaN in the
/// NPU logits.
pub fn verify_gates(
    v: &NpuVerification,
    limits: &DecodeLimits,
    gate: TopKGate,
    prompts: usize,
    top_k_source: ThresholdSource,
) -> Vec<GateCheck> {
    let conditions = BTreeMap::from([
        ("tokens".to_string(), Value::Int(gate.tokens as i64)),
        ("top_k".to_string(), Value::Int(gate.k as i64)),
        ("prompts".to_string(), Value::Int(prompts as i64)),
    ]);
    let worst = v.worst();
    let error_gate = |name: &str, metric: RuntimeMetric, worst: &Worst, limit: &DerivedLimit| {
        error_gate(name, metric, worst, limit, &conditions)
    };
    vec![
        error_gate(
            "verify: teacher-forced logits",
            RuntimeMetric::LogitsMaxRel,
            &worst.logits,
            &limits.logits,
        ),
        error_gate(
            "verify: KV cache after prefill",
            RuntimeMetric::KvPrefillMaxRel,
            &worst.kv_prefill,
            &limits.kv_prefill,
        ),
        error_gate(
            "verify: KV cache after decode",
            RuntimeMetric::KvDecodeMaxRel,
            &worst.kv_decode,
            &limits.kv_decode,
        ),
        GateCheck::named("verify: top-k set check", OpKind::VerifyModel)
            .measures(Metric::TopKAgree, v.passed_prompts() as f64)
            .when(conditions.clone())
            .against(Comparison::Ge, prompts as f64, top_k_source),
        GateCheck::named("verify: NaN in NPU logits", OpKind::VerifyModel)
            .measures(Metric::NanCount, v.non_finite as f64)
            .when(conditions)
            .must_be_zero("no NaN or infinite logit"),
    ]
}
