//! One block's output against the reference's: the whole-tensor cosine, the
//! per-position minimum (which a NaN row poisons) and the non-finite values. It is
//! phase 2's gate and each row of phase 3's diagnosis table, and replay's
//! `validate-block` and `diagnose-layers` recompute them through it.

use std::collections::BTreeMap;

use super::gate::{min_or_nan, non_finite, row_cosines, GateCheck, ThresholdSource};
use crate::bundle::{Comparison, Value};
use crate::ops::{Metric, OpKind};
use crate::xdna2::numerics::cosine;

/// Phase 2's per-position cosine floor, scaled by head_dim because bf16 noise grows
/// with sqrt(head_dim·K) (reference system: 0.99 up to 64, 0.98 at 128, 0.97 from
/// 256; `mlir-air:.claude/skills/phase-2-single-block-validation/SKILL.md`).
pub fn position_cosine_floor(head_dim: usize) -> f64 {
    match head_dim {
        0..=64 => 0.99,
        65..=128 => 0.98,
        _ => 0.97,
    }
}

/// Whole-tensor cosine floor of phase 2 (same source).
pub const BLOCK_COSINE_MIN: f64 = 0.99;

/// Where the reference system's phase-2 thresholds come from.
pub const BLOCK_RULE: &str = "reference system phase 2: whole-tensor cosine >= 0.99; per-position minimum >= 0.99 (head_dim <= 64), 0.98 (128), 0.97 (>= 256)";

/// A threshold and where it comes from.
pub type Threshold = (f64, ThresholdSource);

/// The two cosine thresholds of a block gate.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockThresholds {
    pub cosine: Threshold,
    pub position: Threshold,
}

impl BlockThresholds {
    /// The reference system's thresholds for a model of this head_dim, or the
    /// ones an action recorded.
    pub fn recorded(cosine: Option<f64>, position: Option<f64>, head_dim: usize) -> Self {
        let rule = || ThresholdSource::Runtime {
            rule: BLOCK_RULE.into(),
        };
        BlockThresholds {
            cosine: (cosine.unwrap_or(BLOCK_COSINE_MIN), rule()),
            position: (
                position.unwrap_or_else(|| position_cosine_floor(head_dim)),
                rule(),
            ),
        }
    }
}

/// A block's output against the reference's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockComparison {
    pub cosine: f64,
    /// The worst `width`-wide row; NaN when any row is.
    pub position_cosine_min: f64,
    pub non_finite: usize,
}

impl BlockComparison {
    /// `ours` against `theirs`, rows of `width` (the hidden size).
    pub fn of(ours: &[f32], theirs: &[f32], width: usize) -> Self {
        BlockComparison {
            cosine: cosine(ours, theirs),
            position_cosine_min: min_or_nan(&row_cosines(ours, theirs, width)),
            non_finite: non_finite(ours),
        }
    }

    /// The block gates: whole-tensor cosine, per-position minimum, no NaN.
    pub fn gates(
        &self,
        thresholds: &BlockThresholds,
        conditions: BTreeMap<String, Value>,
    ) -> Vec<GateCheck> {
        let (cos_min, pos_min) = (&thresholds.cosine, &thresholds.position);
        vec![
            GateCheck::named("block cosine", OpKind::ValidateBlock)
                .measures(Metric::Cosine, self.cosine)
                .when(conditions.clone())
                .against(Comparison::Ge, cos_min.0, cos_min.1.clone()),
            GateCheck::named("block per-position cosine", OpKind::ValidateBlock)
                .measures(Metric::PositionCosineMin, self.position_cosine_min)
                .when(conditions.clone())
                .against(Comparison::Ge, pos_min.0, pos_min.1.clone()),
            GateCheck::named("block NaN", OpKind::ValidateBlock)
                .measures(Metric::NanCount, self.non_finite as f64)
                .when(conditions)
                .must_be_zero("no NaN or infinite value in the block's output"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_follow_head_dim() {
        assert_eq!(position_cosine_floor(32), 0.99);
        assert_eq!(position_cosine_floor(64), 0.99);
        assert_eq!(position_cosine_floor(128), 0.98);
        assert_eq!(position_cosine_floor(256), 0.97);
    }

    /// A NaN row poisons the per-position minimum, so the gate fails; a minimum
    /// folded from +inf with `f64::min` would skip it and pass.
    #[test]
    fn a_nan_row_fails_the_per_position_gate() {
        let theirs = [1.0, 0.0, 0.0, 1.0];
        let ours = [1.0, 0.0, f32::NAN, 1.0];
        let block = BlockComparison::of(&ours, &theirs, 2);
        assert!(block.position_cosine_min.is_nan());
        assert_eq!(block.non_finite, 1);
        let thresholds = BlockThresholds::recorded(None, None, 64);
        let passed: Vec<bool> = block
            .gates(&thresholds, BTreeMap::new())
            .iter()
            .map(|g| g.passed)
            .collect();
        assert_eq!(passed, [false, false, false]);
        let clean = BlockComparison::of(&theirs, &theirs, 2);
        assert_eq!(clean.position_cosine_min, 1.0);
        assert!(clean
            .gates(&thresholds, BTreeMap::new())
            .iter()
            .all(|g| g.passed));
    }
}
