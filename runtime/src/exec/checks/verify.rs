//! Greedy generation with the top-k record the verification gate needs, over any
//! decoder: the CPU f32 reference or the emulated NPU. Each side starts from an
//! empty cache per prompt, prefills it, then feeds back its own greedy choices.

use serde::{Deserialize, Serialize};

use super::topk::{top_k_set_check, GreedyStep, GATE_K, GATE_N_TOKENS};
use crate::exec::artifacts::record::PromptVerdict;
use crate::exec::design::Plans;
use crate::exec::npu::{Counters, NpuModel, NpuPath};
use crate::model::oracle::{LogitRows, PrefillOutput, Reference};
use crate::model::Model;
use crate::xdna2::device::Device;

/// Something that produces next-token logits.
pub trait Decoder {
    /// Empties the cache and runs `prompt`; returns the last position's logits.
    fn prefill(&mut self, prompt: &[u32]) -> Result<Vec<f32>, String>;
    /// Feeds one token at the next position; returns its logits.
    fn decode(&mut self, token: u32) -> Result<Vec<f32>, String>;
}

/// `n` greedy steps from `prompt`, recording the top-`k` ids of each.
pub fn generate(
    decoder: &mut dyn Decoder,
    prompt: &[u32],
    n: usize,
    k: usize,
) -> Result<Vec<GreedyStep>, String> {
    let mut steps = Vec::with_capacity(n);
    if n == 0 {
        return Ok(steps);
    }
    let mut logits = decoder.prefill(prompt)?;
    loop {
        let step = GreedyStep::from_logits(&logits, k);
        let token = step.token;
        steps.push(step);
        if steps.len() == n {
            return Ok(steps);
        }
        logits = decoder.decode(token)?;
    }
}

/// The CPU reference as a [`Decoder`], counting non-finite logits on the way.
pub struct ReferenceDecoder<'m> {
    pub reference: Reference<'m>,
    pub non_finite: usize,
}

impl<'m> ReferenceDecoder<'m> {
    pub fn new(reference: Reference<'m>) -> Self {
        Self {
            reference,
            non_finite: 0,
        }
    }

    fn count(&mut self, logits: Vec<f32>) -> Vec<f32> {
        self.non_finite += super::gate::non_finite(&logits);
        logits
    }
}

impl Decoder for ReferenceDecoder<'_> {
    fn prefill(&mut self, prompt: &[u32]) -> Result<Vec<f32>, String> {
        self.reference.reset();
        let logits = self
            .reference
            .prefill(prompt, LogitRows::Last)
            .map(|out| out.logits.data)
            .map_err(|e| e.to_string())?;
        Ok(self.count(logits))
    }

    fn decode(&mut self, token: u32) -> Result<Vec<f32>, String> {
        let logits = self
            .reference
            .decode_step(token)
            .map_err(|e| e.to_string())?;
        Ok(self.count(logits))
    }
}

/// Counts non-finite logits of another decoder.
struct Counting<'d, 'm> {
    inner: &'d mut NpuModel<'m>,
    non_finite: usize,
}

impl Decoder for Counting<'_, '_> {
    fn prefill(&mut self, prompt: &[u32]) -> Result<Vec<f32>, String> {
        let l = self.inner.prefill(prompt)?;
        self.non_finite += super::gate::non_finite(&l);
        Ok(l)
    }

    fn decode(&mut self, token: u32) -> Result<Vec<f32>, String> {
        let l = self.inner.decode(token)?;
        self.non_finite += super::gate::non_finite(&l);
        Ok(l)
    }
}

/// One layer of the diagnosis table (not a gate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerDiagnosis {
    pub layer: usize,
    pub cosine: f64,
    pub position_cosine_min: f64,
}

/// The NPU side of verification against the reference's cached greedy runs.
#[derive(Debug, Clone)]
pub struct NpuVerification {
    pub prompts: Vec<PromptVerdict>,
    pub non_finite: usize,
    pub counters: Counters,
    /// Per-layer cosines of the first prompt's prefill, when asked for.
    pub diagnosis: Vec<LayerDiagnosis>,
}

impl NpuVerification {
    pub fn passed_prompts(&self) -> usize {
        self.prompts.iter().filter(|p| p.check.passed).count()
    }
}

/// Greedy-decodes every prompt on the NPU path of `plans` and checks each against
/// the reference's run; `diagnose` adds the per-layer table of the first prompt.
pub fn verify_npu(
    device: &Device,
    model: &Model,
    plans: &Plans,
    path: NpuPath,
    prompts: &[Vec<u32>],
    reference_runs: &[Vec<GreedyStep>],
    diagnose: Option<&PrefillOutput>,
) -> Result<NpuVerification, String> {
    let mut npu = NpuModel::new(device, model, &plans.prefill, &plans.decode, path);
    let mut verdicts = Vec::new();
    let mut non_finite = 0;
    let mut diagnosis = Vec::new();
    for (i, (prompt, reference)) in prompts.iter().zip(reference_runs).enumerate() {
        if i == 0 && diagnose.is_some() {
            npu.record_layers();
        }
        let mut counting = Counting {
            inner: &mut npu,
            non_finite: 0,
        };
        let steps = generate(&mut counting, prompt, GATE_N_TOKENS, GATE_K)?;
        non_finite += counting.non_finite;
        if let (0, Some(reference_prefill)) = (i, diagnose) {
            let ours = npu.layer_outputs.take().unwrap_or_default();
            let width = model.arch.hidden_size;
            for (layer, (o, r)) in ours
                .iter()
                .zip(&reference_prefill.layer_outputs)
                .enumerate()
            {
                diagnosis.push(LayerDiagnosis {
                    layer,
                    cosine: crate::xdna2::numerics::cosine(o, &r.data),
                    position_cosine_min: super::gate::min_or_nan(&super::gate::row_cosines(
                        o, &r.data, width,
                    )),
                });
            }
        }
        verdicts.push(PromptVerdict {
            prompt: i + 1,
            tokens: steps.len(),
            check: top_k_set_check(reference, &steps),
            npu_tokens: steps.iter().map(|s| s.token).collect(),
        });
    }
    Ok(NpuVerification {
        prompts: verdicts,
        non_finite,
        counters: npu.counters,
        diagnosis,
    })
}

/// The reference side: greedy runs of every prompt.
pub fn reference_runs(
    model: &Model,
    prompts: &[Vec<u32>],
) -> Result<(Vec<Vec<GreedyStep>>, usize), String> {
    let mut runs = Vec::with_capacity(prompts.len());
    let mut non_finite = 0;
    for prompt in prompts {
        let reference = Reference::new(model).map_err(|e| e.to_string())?;
        let mut decoder = ReferenceDecoder::new(reference);
        runs.push(generate(&mut decoder, prompt, GATE_N_TOKENS, GATE_K)?);
        non_finite += decoder.non_finite;
    }
    Ok((runs, non_finite))
}
