//! The deployed model's own text (phase 6): every prompt greedy-decoded on the
//! final plan, free-running (the NPU path's own token fed back at each step, its
//! KV cache appended), set beside the oracle's greedy decode of the same prompt
//! (the reference run of phase 0, whose logits are kept per step).
//!
//! The teacher-forced gates of phases 3 to 7 stay the verdict on the numerics;
//! this gate asks one thing more of the plan that ships: its own text may leave
//! the oracle's only at or after the oracle's first near-tie. A step is a near-tie
//! when the oracle's top-1/top-2 logit gap is at most the tie margin,
//! `2 × L × max|oracle logit|` of that step, where `L` is the teacher-forced
//! logits limit phase 0 derived from the model's bf16-storage floor
//! (`floor::DecodeLimits`: `max(0.05, 2 × floor)`). An NPU path inside that limit
//! moves each logit by at most `L × max|logit|`, so two logits further apart than
//! the margin cannot swap: a divergence before the first near-tie means the final
//! plan computes something the teacher-forced gates did not accept.

use serde::{Deserialize, Serialize};

use super::decode::ReferenceRun;
use super::topk::GATE_K;
use crate::exec::design::Plans;
use crate::model::oracle::blocks;
use crate::xdna2::interpreter::{ExecError, Interpreter};

/// One of a step's best tokens with its logit (`text` filled in where the
/// model has a tokenizer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub token: u32,
    pub logit: f32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
}

/// The first step where the free-running NPU text and the oracle's differ:
/// both sides' top-`GATE_K` there (the same context on both sides: every
/// earlier token agreed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FirstDifference {
    pub step: usize,
    pub oracle: Vec<Candidate>,
    pub npu: Vec<Candidate>,
    /// The oracle's top-1/top-2 logit gap at this step and the tie margin.
    pub oracle_gap: f64,
    pub tie_margin: f64,
}

/// One prompt's free-running greedy decode on the final plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FreeRun {
    pub prompt: usize,
    /// The NPU path's own tokens, up to the reference run's length or its
    /// first end-of-sequence token (included).
    pub tokens: Vec<u32>,
    /// The oracle's first near-tie step, if any.
    pub first_near_tie: Option<usize>,
    pub first_difference: Option<FirstDifference>,
}

impl FreeRun {
    /// True when the text left the oracle's before the oracle's first near-tie
    /// (the gate's failure).
    pub fn diverged_before_near_tie(&self) -> bool {
        match (&self.first_difference, self.first_near_tie) {
            (None, _) => false,
            (Some(d), Some(tie)) => d.step < tie,
            (Some(_), None) => true,
        }
    }

    /// One sentence for a phase note.
    pub fn note(&self) -> String {
        let tie = self.first_near_tie.map_or_else(
            || "no near-tie".to_string(),
            |t| format!("first near-tie at step {t}"),
        );
        match &self.first_difference {
            None => format!(
                "prompt {}: free-running greedy decode on the final plan equals the oracle's over {} tokens ({tie})",
                self.prompt,
                self.tokens.len()
            ),
            Some(d) => format!(
                "prompt {}: free-running greedy decode on the final plan leaves the oracle's at step {} (NPU token {}, oracle token {}; oracle top-1/top-2 gap {:.4}, tie margin {:.4}; {tie}){}",
                self.prompt,
                d.step,
                d.npu.first().map_or(0, |c| c.token),
                d.oracle.first().map_or(0, |c| c.token),
                d.oracle_gap,
                d.tie_margin,
                if self.diverged_before_near_tie() { ": before the first near-tie" } else { "" }
            ),
        }
    }
}

/// `2 × limit × max|logit|` of one step's oracle logits (module documentation).
pub fn tie_margin(limit: f64, logits: &[f32]) -> f64 {
    let scale = logits
        .iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, &v| m.max(f64::from(v).abs()));
    2.0 * limit * scale
}

/// The top-1/top-2 gap of one step's logits.
fn top_gap(logits: &[f32]) -> f64 {
    match blocks::top_k(logits, 2).as_slice() {
        [(_, a), (_, b)] => f64::from(*a) - f64::from(*b),
        _ => f64::INFINITY,
    }
}

/// The oracle's first step whose top-1/top-2 gap is within the tie margin.
pub fn first_near_tie(reference: &ReferenceRun, limit: f64) -> Option<usize> {
    reference
        .logits
        .iter()
        .position(|l| top_gap(l) <= tie_margin(limit, l))
}

fn candidates(logits: &[f32]) -> Vec<Candidate> {
    blocks::top_k(logits, GATE_K)
        .into_iter()
        .map(|(token, logit)| Candidate {
            token: token as u32,
            logit,
            text: String::new(),
        })
        .collect()
}

/// Greedy-decodes `prompt` on the NPU path of `plans`, free-running, for as many
/// steps as the oracle's `reference` run (stopping after an end-of-sequence token
/// in `eos`), and compares it with that run at the logits limit `limit`.
pub fn free_run(
    npu: &mut Interpreter<'_>,
    plans: &Plans,
    (index, prompt): (usize, &[u32]),
    reference: &ReferenceRun,
    eos: &[u32],
    limit: f64,
) -> Result<FreeRun, ExecError> {
    let mut run = FreeRun {
        prompt: index,
        tokens: Vec::with_capacity(reference.steps.len()),
        first_near_tie: first_near_tie(reference, limit),
        first_difference: None,
    };
    let mut logits = npu.prefill(&plans.prefill, prompt)?;
    for (step, (expected, oracle_logits)) in
        reference.steps.iter().zip(&reference.logits).enumerate()
    {
        let token = blocks::argmax(&logits) as u32;
        run.tokens.push(token);
        if token != expected.token && run.first_difference.is_none() {
            run.first_difference = Some(FirstDifference {
                step,
                oracle: candidates(oracle_logits),
                npu: candidates(&logits),
                oracle_gap: top_gap(oracle_logits),
                tie_margin: tie_margin(limit, oracle_logits),
            });
        }
        if eos.contains(&token) || step + 1 == reference.steps.len() {
            break;
        }
        logits = npu.decode(&plans.decode, token)?;
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(first_difference: Option<usize>, first_near_tie: Option<usize>) -> FreeRun {
        FreeRun {
            prompt: 1,
            tokens: vec![1, 2, 3],
            first_near_tie,
            first_difference: first_difference.map(|step| FirstDifference {
                step,
                oracle: Vec::new(),
                npu: Vec::new(),
                oracle_gap: 0.0,
                tie_margin: 0.0,
            }),
        }
    }

    #[test]
    fn a_divergence_fails_only_before_the_first_near_tie() {
        assert!(!run(None, None).diverged_before_near_tie());
        assert!(!run(None, Some(0)).diverged_before_near_tie());
        assert!(run(Some(3), None).diverged_before_near_tie());
        assert!(run(Some(3), Some(4)).diverged_before_near_tie());
        assert!(!run(Some(4), Some(4)).diverged_before_near_tie());
        assert!(!run(Some(9), Some(4)).diverged_before_near_tie());
    }

    /// On a transformers fixture the right plan's own text keeps to the
    /// oracle's until a near-tie, and a plan whose decode stores a stale K/V
    /// row is reported at its first difference with both top-5. On this
    /// prompt the oracle's first step is already inside the tie margin, so
    /// the divergence (step 1) is shown, not failed: the gate's verdict is
    /// `a_divergence_fails_only_before_the_first_near_tie`'s.
    #[test]
    fn a_plan_that_computes_something_else_is_reported_at_its_first_difference() {
        use crate::exec::design::Design;
        use crate::exec::gates::floor::DecodeLimits;
        use crate::exec::gates::topk::TopKGate;
        use crate::exec::gates::verify::reference_runs;
        use crate::model::Model;
        use crate::xdna2::device::Device;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/fixtures/qwen25-tiny");
        let model = Model::load(&dir, None).expect("fixture weights");
        let device = Device::npu2();
        let prompt: Vec<u32> = vec![3, 17, 29, 41, 5, 11, 7, 23];
        let prompts = std::slice::from_ref(&prompt);
        let (runs, _) = reference_runs(&model, prompts, TopKGate::DEFAULT).expect("reference");
        let limits = DecodeLimits::measure(&model, prompts, &runs).expect("floor");
        let free = |design: &Design| {
            let plans = design
                .plans("qwen25-tiny", &model.arch, &device)
                .expect("plans");
            let mut npu = Interpreter::new(&device, &model.arch, &model.weights, design.path);
            free_run(
                &mut npu,
                &plans,
                (1, &prompt),
                &runs[0],
                &[],
                limits.logits.limit,
            )
            .expect("free run")
        };
        let right = free(&Design::baseline());
        assert!(!right.diverged_before_near_tie(), "{}", right.note());
        assert_eq!(right.tokens.len(), runs[0].steps.len());
        let mut stale = Design::baseline();
        stale.path.defects.stale_kv = true;
        let wrong = free(&stale);
        let d = wrong.first_difference.as_ref().expect("a difference");
        assert_eq!((d.oracle.len(), d.npu.len()), (GATE_K, GATE_K));
        assert_eq!(d.npu[0].token, wrong.tokens[d.step]);
        assert_ne!(d.oracle[0].token, d.npu[0].token);
        assert_eq!(
            (wrong.first_near_tie, d.step),
            (Some(0), 1),
            "{}",
            wrong.note()
        );
        assert!(!wrong.diverged_before_near_tie());
    }

    #[test]
    fn the_tie_margin_is_twice_the_limit_of_the_largest_logit() {
        assert_eq!(tie_margin(0.05, &[1.0, -20.0, 3.0]), 2.0);
        assert_eq!(tie_margin(0.1, &[f32::NAN, 5.0]), 1.0);
        assert_eq!(top_gap(&[1.0, 4.0, 3.5]), 0.5);
    }
}
