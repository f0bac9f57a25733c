//! Phase 1's kernel check: one kernel configuration of the plan run through the
//! kernel harness ([`crate::xdna2::harness`]) at its validation shape, on the
//! model's layer-0 weights (with the plan's setup transforms) and the RoPE table the
//! NPU path uses, at the kernel's registry tolerance; the result as the kernel
//! registry records it. A packed 4-bit GEMV runs on layer 0's stored blocks
//! against the oracle's product on their exact dequantized values
//! (`harness_packed`).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::model::arch::Architecture;
use crate::xdna2::constraints::ConstraintViolation;
use crate::xdna2::device::Device;
use crate::xdna2::harness::{
    tolerance_of, Harness, HarnessError, KernelRun, RunOutcome, Scale, WeightOperands, WeightRole,
};
use crate::xdna2::interpreter::weights::{resolve, resolve_packed, TensorIndex};
use crate::xdna2::kernels::gemv_packed::NibbleOrder;
use crate::xdna2::plan::{Launch, Plan};

/// What phase 1 needs to run one launch.
pub struct ValidationContext<'a, 'm> {
    pub device: &'a Device,
    pub plan: &'a Plan,
    pub index: &'a TensorIndex<'m>,
    pub arch: &'a Architecture,
    /// The RoPE table the NPU path uses.
    pub lut: &'a [u16],
    pub seed: u64,
    /// How the packed GEMV reads a block's nibbles (a planted fault swaps them).
    pub nibbles: NibbleOrder,
}

/// The result of one kernel validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelCheck {
    pub kernel: String,
    /// The production shape (the plan's label).
    pub shape: String,
    /// The shape that ran.
    pub validated_shape: String,
    pub rtol: f64,
    pub atol: f64,
    pub outcome: CheckOutcome,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CheckOutcome {
    Compared {
        elements: usize,
        mismatches: usize,
        mean_rel_l1: f64,
        max_abs: f64,
        non_finite: usize,
    },
    /// The device refused the configuration.
    Refused {
        violations: Vec<String>,
        constraints: Vec<String>,
    },
}

impl KernelCheck {
    pub fn passed(&self) -> bool {
        matches!(self.outcome, CheckOutcome::Compared { mismatches: 0, .. })
    }
}

/// Validates `launch`; `Err` only when the harness itself cannot run it (a weight
/// the plan names is missing).
pub fn validate(
    ctx: &ValidationContext<'_, '_>,
    launch: &Launch,
) -> Result<KernelCheck, HarnessError> {
    let weights = PlanWeights {
        plan: ctx.plan,
        index: ctx.index,
    };
    let harness = Harness {
        device: ctx.device,
        arch: ctx.arch,
        weights: &weights,
        rope_table: Some(ctx.lut),
        seed: ctx.seed,
    };
    let run = match launch {
        Launch::Gemv { w, spec, .. } if spec.packed.is_some() => {
            let rows =
                resolve_packed(ctx.plan, w, 0, ctx.index).map_err(|e| HarnessError::Weight {
                    buffer: w.clone(),
                    message: e.to_string(),
                })?;
            harness.check_packed_gemv_ordered(spec, rows, ctx.nibbles)?
        }
        _ => harness.check(launch, tolerance_of(launch), Scale::Validation)?,
    };
    Ok(registry_check(run))
}

fn registry_check(run: KernelRun) -> KernelCheck {
    let outcome = match &run.outcome {
        RunOutcome::Compared { comparison: c, .. } => CheckOutcome::Compared {
            elements: c.elements,
            mismatches: c.mismatches,
            mean_rel_l1: c.mean_rel_l1,
            max_abs: c.max_abs,
            non_finite: c.non_finite,
        },
        RunOutcome::Refused(v) => CheckOutcome::Refused {
            violations: v.iter().map(|v| v.to_string()).collect(),
            constraints: v.iter().map(constraint_key).collect(),
        },
    };
    KernelCheck {
        kernel: run.kernel.name().to_string(),
        shape: run.shape,
        validated_shape: run.ran_shape,
        rtol: run.tolerance.rtol,
        atol: run.tolerance.atol,
        outcome,
    }
}

/// `L1 capacity` → `l1-capacity`, the form lesson conditions use.
pub fn constraint_key(v: &ConstraintViolation) -> String {
    v.constraint.label().to_lowercase().replace([' ', '/'], "-")
}

/// A plan's weight buffers filled from the model's layer 0.
struct PlanWeights<'a, 'm> {
    plan: &'a Plan,
    index: &'a TensorIndex<'m>,
}

impl WeightOperands for PlanWeights<'_, '_> {
    fn weight(
        &self,
        buffer: &str,
        _role: WeightRole,
        _rows: usize,
        _cols: usize,
    ) -> Result<Cow<'_, [u16]>, HarnessError> {
        resolve(self.plan, buffer, 0, self.index)
            .map(|w| w.bits)
            .map_err(|e| HarnessError::Weight {
                buffer: buffer.to_string(),
                message: e.to_string(),
            })
    }
}
