//! The decode gates' limits, derived from measured bf16 error. The fixed
//! limits of `decode` (0.05) are twice the worst error measured on the four
//! tiny fixtures, whose random weights make no massive activations; a trained
//! model can need more, because the bf16 storage every NPU pipeline keeps
//! between kernels costs more on it (SmolLM2-135M's plain prompt: README,
//! real-model section). So each deployment measures its own floor: the f32
//! oracle storing the residual stream, the queries and keys after RoPE and
//! o_proj's output in bf16 ([`Bf16Storage::decode_floor`]), fed the same
//! teacher-forced tokens as the NPU path and measured against the plain oracle
//! with the same errors (`decode`), worst prompt. Each gate's limit is
//! `max(fixed, FLOOR_FACTOR × floor)`: never below the fixed limit, and
//! measured before any NPU result is seen, in every deployment.

use serde::{Deserialize, Serialize};

use super::decode::{
    forced_run, DecodeErrors, ReferenceRun, Worst, KV_MAX_REL, KV_RULE, LOGITS_MAX_REL, LOGITS_RULE,
};
use super::gate::format_value;
use crate::model::oracle::storage::Bf16Storage;
use crate::model::oracle::{Reference, ReferenceError};
use crate::model::Model;

/// How far above the bf16-storage floor the NPU path may be: the floor's
/// variant stores fewer tensors in bf16 than the NPU does, and the fixed
/// limits are twice the fixtures' error in the same way.
pub const FLOOR_FACTOR: f64 = 2.0;

/// One gate's limit and where it comes from (report.md and report.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DerivedLimit {
    /// The fixed limit and its rule.
    pub fixed: f64,
    pub fixed_rule: String,
    /// The bf16-storage oracle's error on this model and these tokens, worst
    /// prompt, and where it is (`prompt 1, step 13`).
    pub floor: f64,
    pub floor_at: String,
    /// What the floor's oracle stores in bf16.
    pub floor_oracle: String,
    pub factor: f64,
    /// `max(fixed, factor × floor)`; a floor that is not finite widens nothing.
    pub limit: f64,
}

impl DerivedLimit {
    pub fn new(fixed: f64, fixed_rule: &str, floor: &Worst, storage: &Bf16Storage) -> Self {
        let widened = if floor.value.is_finite() {
            FLOOR_FACTOR * floor.value
        } else {
            0.0
        };
        Self {
            fixed,
            fixed_rule: fixed_rule.to_string(),
            floor: floor.value,
            floor_at: floor.at.clone(),
            floor_oracle: storage.to_string(),
            factor: FLOOR_FACTOR,
            limit: fixed.max(widened),
        }
    }

    /// True when the floor, not the fixed limit, sets the limit.
    pub fn widened(&self) -> bool {
        self.limit > self.fixed
    }

    /// `max(0.05, 2 x floor 0.04151 at prompt 1, step 13) = 0.08302`.
    pub fn formula(&self) -> String {
        format!(
            "max({}, {} x floor {} at {}) = {}",
            format_value(self.fixed),
            format_value(self.factor),
            format_value(self.floor),
            self.floor_at,
            format_value(self.limit)
        )
    }
}

/// The limits of the three teacher-forced errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecodeLimits {
    pub logits: DerivedLimit,
    pub kv_prefill: DerivedLimit,
    pub kv_decode: DerivedLimit,
}

impl DecodeLimits {
    /// The limits that `floor`, measured with `storage`, gives.
    pub fn from_floor(floor: &DecodeErrors, storage: &Bf16Storage) -> Self {
        Self {
            logits: DerivedLimit::new(LOGITS_MAX_REL, LOGITS_RULE, &floor.logits, storage),
            kv_prefill: DerivedLimit::new(KV_MAX_REL, KV_RULE, &floor.kv_prefill, storage),
            kv_decode: DerivedLimit::new(KV_MAX_REL, KV_RULE, &floor.kv_decode, storage),
        }
    }

    /// Measures the floor of `model` on `prompts`, fed the tokens of their
    /// reference runs (`runs`, one per prompt), and derives the limits.
    pub fn measure(
        model: &Model,
        prompts: &[Vec<u32>],
        runs: &[ReferenceRun],
    ) -> Result<Self, ReferenceError> {
        let storage = Bf16Storage::decode_floor();
        let floor = storage_errors(model, &storage, prompts, runs)?;
        Ok(Self::from_floor(&floor, &storage))
    }

    /// One sentence of the three limits, for a phase note.
    pub fn note(&self) -> String {
        format!(
            "decode-gate limits from the bf16-storage floor (the f32 oracle storing {} in bf16, fed the same teacher-forced tokens, against the plain oracle): logits {}; KV after prefill {}; KV after decode {}",
            self.logits.floor_oracle,
            self.logits.formula(),
            self.kv_prefill.formula(),
            self.kv_decode.formula()
        )
    }
}

/// The teacher-forced errors of the oracle storing `storage`'s tensors in
/// bf16 against the plain oracle's runs, worst prompt; each `at` names its
/// prompt (1-based).
pub fn storage_errors(
    model: &Model,
    storage: &Bf16Storage,
    prompts: &[Vec<u32>],
    runs: &[ReferenceRun],
) -> Result<DecodeErrors, ReferenceError> {
    use rayon::prelude::*;
    // One parallel task per prompt, collected in prompt order.
    let per_prompt = prompts
        .par_iter()
        .zip(runs)
        .enumerate()
        .map(|(i, (prompt, run))| {
            let mut variant = Reference::new(model)?.with_storage(storage.clone());
            let mut errors = forced_run(&mut variant, prompt, run)?.errors;
            for w in [
                &mut errors.logits,
                &mut errors.kv_prefill,
                &mut errors.kv_decode,
            ] {
                w.at = format!("prompt {}, {}", i + 1, w.at);
            }
            Ok(errors)
        })
        .collect::<Result<Vec<_>, ReferenceError>>()?;
    Ok(DecodeErrors::worst(&per_prompt))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worst(value: f64) -> Worst {
        Worst {
            value,
            at: "prompt 1, step 3".into(),
        }
    }

    #[test]
    fn the_limit_is_twice_the_floor_never_below_the_fixed_limit() {
        let storage = Bf16Storage::decode_floor();
        let low = DerivedLimit::new(0.05, "fixed", &worst(0.02), &storage);
        assert_eq!((low.limit, low.widened()), (0.05, false));
        let high = DerivedLimit::new(0.05, "fixed", &worst(0.083), &storage);
        assert_eq!((high.limit, high.widened()), (0.166, true));
        assert_eq!(
            high.formula(),
            "max(0.05, 2 x floor 0.083 at prompt 1, step 3) = 0.166"
        );
        for bad in [f64::NAN, f64::INFINITY] {
            assert_eq!(
                DerivedLimit::new(0.05, "fixed", &worst(bad), &storage).limit,
                0.05
            );
        }
    }
}
