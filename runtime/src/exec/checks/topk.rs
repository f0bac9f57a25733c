//! The binding correctness gate of phases 3 to 7, as the reference system defines it
//! (`compute_topk_set_check`): both sides greedy-decode `GATE_N_TOKENS` tokens per
//! prompt, recording the chosen token and the top-`GATE_K` ids at every step; the
//! sequences are walked together, and at the first step where the chosen tokens
//! differ each side's token must be in the other side's top-k. Nothing after the
//! first divergence is checked (a known blind spot, stated in the report).

use serde::{Deserialize, Serialize};

use crate::model::oracle::blocks;

/// Greedy tokens generated per prompt.
pub const GATE_N_TOKENS: usize = 32;
/// Size of the top-k set checked at the first divergence.
pub const GATE_K: usize = 5;

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

/// The first step where the two sides chose different tokens.
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

/// "rank 2" or "outside the top-k", for notes and warnings.
pub fn rank_words(rank: Option<usize>) -> String {
    rank.map_or_else(|| "outside the top-k".to_string(), |r| format!("rank {r}"))
}

/// The verdict for one prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopKCheck {
    /// Steps compared (the shorter side's length).
    pub steps: usize,
    /// Steps both sides agreed on before the first divergence (all when none).
    pub agreed: usize,
    pub divergence: Option<Divergence>,
    pub passed: bool,
}

/// Walks both sequences; see the module documentation.
pub fn top_k_set_check(reference: &[GreedyStep], npu: &[GreedyStep]) -> TopKCheck {
    let steps = reference.len().min(npu.len());
    let same_length = reference.len() == npu.len();
    for (i, (r, n)) in reference.iter().zip(npu).enumerate() {
        if r.token == n.token {
            continue;
        }
        let divergence = Divergence {
            step: i,
            reference_token: r.token,
            npu_token: n.token,
            reference_rank_on_npu: n.rank_of(r.token),
            npu_rank_on_reference: r.rank_of(n.token),
        };
        let passed = same_length
            && divergence.reference_rank_on_npu.is_some()
            && divergence.npu_rank_on_reference.is_some();
        return TopKCheck {
            steps,
            agreed: i,
            divergence: Some(divergence),
            passed,
        };
    }
    TopKCheck {
        steps,
        agreed: steps,
        divergence: None,
        passed: same_length && steps > 0,
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
        assert_eq!((check.agreed, check.divergence), (2, None));
    }

    #[test]
    fn divergence_inside_both_top_sets_passes_and_stops_there() {
        let r = vec![step(1, &[1, 2]), step(5, &[5, 6]), step(9, &[9])];
        let n = vec![step(1, &[1, 2]), step(6, &[6, 5]), step(0, &[0])];
        let check = top_k_set_check(&r, &n);
        assert!(check.passed, "{check:?}");
        let d = check.divergence.unwrap();
        assert_eq!(
            (d.step, d.reference_rank_on_npu, d.npu_rank_on_reference),
            (1, Some(2), Some(2))
        );
    }

    #[test]
    fn a_token_outside_the_other_top_set_fails() {
        let r = vec![step(5, &[5, 6])];
        let n = vec![step(7, &[7, 5])];
        let check = top_k_set_check(&r, &n);
        assert!(!check.passed);
        assert_eq!(check.divergence.unwrap().npu_rank_on_reference, None);
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
