//! What the deployed model says (phase 6): every prompt greedy-decoded on the
//! final plan, after phases 4 and 5 changed it, free-running on the emulated NPU
//! (`gates::free_run`), beside the oracle's greedy decode from phase 0; the texts
//! when the model has a tokenizer, and the gate that the final plan's own text
//! leaves the oracle's only at or after the oracle's first near-tie.

use std::collections::BTreeMap;

use crate::bundle::Value;
use crate::exec::artifacts::record::PromptText;
use crate::exec::design::Plans;
use crate::exec::gates::free_run::{free_run, Candidate, FreeRun};
use crate::exec::gates::gate::GateCheck;
use crate::exec::gates::topk::GATE_N_TOKENS;
use crate::exec::run::Run;
use crate::exec::DeployError;
use crate::ops::{Metric, OpKind};
use crate::xdna2::interpreter::Interpreter;

/// The model's end-of-sequence tokens.
fn eos(run: &Run<'_>) -> Vec<u32> {
    let ids = &run.loaded.model.arch.eos_token_ids;
    ids.iter().filter_map(|&t| u32::try_from(t).ok()).collect()
}

/// Every prompt's free-running greedy decode on `plans` (the final plans),
/// against the oracle's runs at the teacher-forced logits limit.
pub(crate) fn free_running(run: &Run<'_>, plans: &Plans) -> Result<Vec<FreeRun>, DeployError> {
    let model = &run.loaded.model;
    let limit = run.loaded.decode_limits.logits.limit;
    let eos = eos(run);
    let mut npu = Interpreter::new(&run.device, &model.arch, &model.weights, run.design.path);
    let mut runs = Vec::with_capacity(run.report.prompts.len());
    for (i, (prompt, reference)) in run
        .report
        .prompts
        .iter()
        .zip(&run.loaded.reference_runs)
        .enumerate()
    {
        runs.push(free_run(
            &mut npu,
            plans,
            (i + 1, prompt),
            reference,
            &eos,
            limit,
        )?);
    }
    Ok(runs)
}

/// The name of the free-running gate.
pub(crate) const FREE_RUNNING_GATE: &str = "free-running text on the final plan";

/// The gate on `runs`: no prompt's text leaves the oracle's before the
/// oracle's first near-tie.
pub(crate) fn free_running_gate(runs: &[FreeRun]) -> GateCheck {
    let early = runs.iter().filter(|r| r.diverged_before_near_tie()).count();
    GateCheck::named(FREE_RUNNING_GATE, OpKind::WriteArtifacts)
        .measures(Metric::Mismatches, early as f64)
        .when(BTreeMap::from([
            ("tokens".to_string(), Value::Int(GATE_N_TOKENS as i64)),
            ("prompts".to_string(), Value::Int(runs.len() as i64)),
        ]))
        .must_be_zero("no prompt's free-running greedy text on the final plan leaves the oracle's before the oracle's first near-tie (top-1/top-2 gap within 2 x the teacher-forced logits limit x the step's largest |logit|)")
}

/// The prompts and both sides' generations as text, when the model has a
/// tokenizer (tokenizer.json beside it, or a GGUF vocabulary).
pub(crate) fn prompt_texts(run: &Run<'_>, runs: &[FreeRun]) -> Vec<PromptText> {
    use crate::model::prompt::ModelText;
    use crate::model::source::ModelSource;
    let Ok(source) = ModelSource::locate(&run.options.model_dir) else {
        return Vec::new();
    };
    let text = ModelText::for_model(&run.options.model_dir, source.gguf());
    if text.tokenizer().is_none() {
        return Vec::new();
    }
    let eos = eos(run);
    let until_eos = |tokens: &[u32]| -> Vec<u32> {
        match tokens.iter().position(|t| eos.contains(t)) {
            Some(end) => tokens[..=end].to_vec(),
            None => tokens.to_vec(),
        }
    };
    let named = |c: &[Candidate]| -> Vec<Candidate> {
        c.iter()
            .map(|c| Candidate {
                text: text.decode(&[c.token]).unwrap_or_default(),
                ..c.clone()
            })
            .collect()
    };
    runs.iter()
        .zip(&run.report.prompts)
        .zip(&run.loaded.reference_runs)
        .map(|((free, prompt), reference)| {
            let oracle: Vec<u32> = reference.steps.iter().map(|s| s.token).collect();
            let (oracle, npu) = (until_eos(&oracle), until_eos(&free.tokens));
            PromptText {
                prompt: free.prompt,
                prompt_text: text.decode_with_special(prompt).unwrap_or_default(),
                oracle_text: text.decode(&oracle).unwrap_or_default(),
                npu_text: text.decode(&npu).unwrap_or_default(),
                oracle_tokens: oracle,
                npu_tokens: npu,
                first_difference: free.first_difference.as_ref().map(|d| {
                    let mut d = d.clone();
                    d.oracle = named(&d.oracle);
                    d.npu = named(&d.npu);
                    d
                }),
            }
        })
        .collect()
}
