//! Verification of the NPU path of a deployment against the reference's greedy
//! runs of the same prompts (phases 3, 5 and 7): per prompt, the teacher-forced
//! comparison of logits and KV cache (`decode`) and the greedy top-k set check
//! over every step (`topk`); for the first prompt, optionally, every layer's
//! prefill output beside the reference's (the diagnosis table, not a gate).

use serde::{Deserialize, Serialize};

use super::decode::{reference_run, teacher_forced, DecodeErrors, ReferenceRun};
use super::topk::top_k_set_check;
use crate::exec::artifacts::record::PromptVerdict;
use crate::exec::design::Plans;
use crate::model::oracle::PrefillOutput;
use crate::model::oracle::ReferenceError;
use crate::model::Model;
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

/// Runs every prompt on the NPU path of `plans`, fed the reference's tokens, and
/// checks it against the reference's run; `diagnose` adds the per-layer table of
/// the first prompt.
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
    let mut verdicts = Vec::new();
    let mut non_finite = 0;
    let mut diagnosis = Vec::new();
    for (i, (prompt, reference)) in prompts.iter().zip(reference_runs).enumerate() {
        npu.capture_layers(i == 0 && diagnose.is_some());
        let run = teacher_forced(&mut npu, plans, prompt, reference)?;
        non_finite += run.non_finite;
        if let (0, Some(reference_prefill)) = (i, diagnose) {
            let ours = npu.take_layer_outputs();
            diagnosis = diagnose_layers(&ours, reference_prefill, model.arch.hidden_size);
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

fn diagnose_layers(
    ours: &[Vec<f32>],
    reference: &PrefillOutput,
    width: usize,
) -> Vec<LayerDiagnosis> {
    ours.iter()
        .zip(&reference.layer_outputs)
        .enumerate()
        .map(|(layer, (o, r))| LayerDiagnosis {
            layer,
            cosine: crate::xdna2::numerics::cosine(o, &r.data),
            position_cosine_min: super::gate::min_or_nan(&super::gate::row_cosines(
                o, &r.data, width,
            )),
        })
        .collect()
}

/// The reference side: greedy runs of every prompt (one parallel task each,
/// collected in prompt order), with the non-finite logits met.
pub fn reference_runs(
    model: &Model,
    prompts: &[Vec<u32>],
) -> Result<(Vec<ReferenceRun>, usize), ReferenceError> {
    use rayon::prelude::*;
    let runs = prompts
        .par_iter()
        .map(|p| reference_run(model, p))
        .collect::<Result<Vec<_>, _>>()?;
    let non_finite = runs.iter().map(|r| r.non_finite).sum();
    Ok((runs, non_finite))
}
