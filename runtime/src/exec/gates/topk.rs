//! The greedy gate of phases 3 to 7, after the reference system's
//! `compute_topk_set_check`, made sound. Both sides decode `GATE_N_TOKENS` tokens
//! per prompt from the same prompt, the NPU fed the reference's greedy tokens
//! (teacher forcing), recording at every step the greedy choice and the top-`GATE_K`
//! ids. Until the first step where the choices differ, that is exactly a
//! free-running greedy decode of the NPU. Where they differ, each side's token must
//! be in the other side's top-k, and decoding goes on from the reference's token,
//! so every later step is still compared on the same context. The reference
//! system's check stops at the first divergence and sees nothing after it; this one
//! checks every step.

use serde::{Deserialize, Serialize};

use crate::model::oracle::blocks;

/// Greedy tokens generated per prompt (the reference system's `make verify`).
pub const GATE_N_TOKENS: usize = 32;
/// Size of the top-k sets checked where the greedy choices differ.
pub const GATE_K: usize = 5;

/// The size of one greedy gate: tokens decoded per prompt and the top-k sets
/// compared. A deployment verifies at [`TopKGate::DEFAULT`]; replay at what
/// each `verify-model` action recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TopKGate {
    pub tokens: usize,
    pub k: usize,
}

impl TopKGate {
    pub const DEFAULT: TopKGate = TopKGate {
        tokens: GATE_N_TOKENS,
        k: GATE_K,
    };

    /// A `verify-model` action's gate: what it records, the defaults for what
    /// it leaves out.
    pub fn recorded(tokens: Option<usize>, top_k: Option<usize>) -> TopKGate {
        TopKGate {
            tokens: tokens.unwrap_or(GATE_N_TOKENS),
            k: top_k.unwrap_or(GATE_K),
        }
    }
}

/// One greedy step: the chosen token and the `k` best ids, best first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GreedyStep {
    pub token: u32,
    pub top: Vec<u32>,
}

impl GreedyStep {
    /// The step a decoder takes from these logits.
    pub fn from_logits(logits: &[f32], k: usize) -> Self {
        let top: Vec<u32> = blocks::top_k(logits, k)
            .into_iter()
            .map(|(i, _)| i as u32)
            .collect();
        Self {
            token: blocks::argmax(logits) as u32,
            top,
        }
    }

    /// 1-based rank of `token` in this step's top-k.
    pub fn rank_of(&self, token: u32) -> Option<usize> {
        self.top.iter().position(|&t| t == token).map(|r| r + 1)
    }
}

/// A step where the two sides chose different tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Divergence {
    pub step: usize,
    pub reference_token: u32,
    pub npu_token: u32,
    /// Rank of the reference's token in the NPU's top-k (`None`: absent).
    pub reference_rank_on_npu: Option<usize>,
    /// Rank of the NPU's token in the reference's top-k.
    pub npu_rank_on_reference: Option<usize>,
}

impl Divergence {
    /// Both tokens are in the other side's top-k.
    pub fn within_top_k(&self) -> bool {
        self.reference_rank_on_npu.is_some() && self.npu_rank_on_reference.is_some()
    }
}

/// "rank 2" or "outside the top-k", for notes and warnings.
pub fn rank_words(rank: Option<usize>) -> String {
    rank.map_or_else(|| "outside the top-k".to_string(), |r| format!("rank {r}"))
}

/// The verdict for one prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopKCheck {
    /// Steps compared (the shorter side's length).
    pub steps: usize,
    /// Steps both sides agreed on before the first divergence (all when none):
    /// the length of the NPU's free-running greedy decode that matched.
    pub agreed: usize,
    /// Every step where the choices differ, in order.
    pub divergences: Vec<Divergence>,
    pub passed: bool,
}

impl TopKCheck {
    /// The first divergence, if any.
    pub fn first(&self) -> Option<&Divergence> {
        self.divergences.first()
    }

    /// The first divergence outside a top-k set (what failed), if any.
    pub fn first_failure(&self) -> Option<&Divergence> {
        self.divergences.iter().find(|d| !d.within_top_k())
    }
}

/// Walks both sequences of steps taken on the same contexts; see the module
/// documentation.
pub fn top_k_set_check(reference: &[GreedyStep], npu: &[GreedyStep]) -> TopKCheck {
    let steps = reference.len().min(npu.len());
    let divergences: Vec<Divergence> = reference
        .iter()
        .zip(npu)
        .enumerate()
        .filter(|(_, (r, n))| r.token != n.token)
        .map(|(i, (r, n))| Divergence {
            step: i,
            reference_token: r.token,
            npu_token: n.token,
            reference_rank_on_npu: n.rank_of(r.token),
            npu_rank_on_reference: r.rank_of(n.token),
        })
        .collect();
    let agreed = divergences.first().map_or(steps, |d| d.step);
    let passed = reference.len() == npu.len()
        && steps > 0
        && divergences.iter().all(Divergence::within_top_k);
    TopKCheck {
        steps,
        agreed,
        divergences,
        passed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(token: u32, top: &[u32]) -> GreedyStep {
        GreedyStep {
            token,
            top: top.to_vec(),
        }
    }

    #[test]
    fn identical_sequences_pass() {
        let a = vec![step(1, &[1, 2]), step(3, &[3, 4])];
        let check = top_k_set_check(&a, &a);
        assert!(check.passed);
        assert_eq!((check.agreed, check.divergences.len()), (2, 0));
    }

    #[test]
    fn divergences_inside_both_top_sets_pass() {
        let r = vec![step(1, &[1, 2]), step(5, &[5, 6]), step(9, &[9, 0])];
        let n = vec![step(1, &[1, 2]), step(6, &[6, 5]), step(0, &[0, 9])];
        let check = top_k_set_check(&r, &n);
        assert!(check.passed, "{check:?}");
        assert_eq!(check.agreed, 1);
        let d = check.first().unwrap();
        assert_eq!(
            (d.step, d.reference_rank_on_npu, d.npu_rank_on_reference),
            (1, Some(2), Some(2))
        );
        assert_eq!(check.divergences.len(), 2);
    }

    /// The reference system's check stops at the first divergence; a bad step
    /// after a harmless near-tie must still fail.
    #[test]
    fn a_bad_step_after_a_near_tie_fails() {
        let r = vec![step(5, &[5, 6]), step(1, &[1, 2]), step(3, &[3, 4])];
        let n = vec![step(6, &[6, 5]), step(1, &[1, 2]), step(7, &[7, 8])];
        let check = top_k_set_check(&r, &n);
        assert!(!check.passed);
        assert_eq!(check.agreed, 0);
        assert_eq!(check.first_failure().map(|d| d.step), Some(2));
    }

    #[test]
    fn a_token_outside_the_other_top_set_fails() {
        let r = vec![step(5, &[5, 6])];
        let n = vec![step(7, &[7, 5])];
        let check = top_k_set_check(&r, &n);
        assert!(!check.passed);
        assert_eq!(check.first().unwrap().npu_rank_on_reference, None);
    }

    #[test]
    fn a_short_side_or_no_steps_fails() {
        let r = vec![step(1, &[1]), step(2, &[2])];
        assert!(!top_k_set_check(&r, &r[..1]).passed);
        assert!(!top_k_set_check(&[], &[]).passed);
    }

    #[test]
    fn steps_come_from_logits() {
        let s = GreedyStep::from_logits(&[0.1, 3.0, 2.0, -1.0], 2);
        assert_eq!(s, step(1, &[1, 2]));
        assert_eq!(s.rank_of(2), Some(2));
    }
}
