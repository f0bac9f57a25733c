//! The 4-bit kernels' part of the cost model: how fast a compute tile unpacks
//! and multiplies packed weights in a GEMV, and the attention of the
//! single-dispatch fused decode (timed with the rest of a fused plan by
//! `cost::time_plan`).
//! These parameters are fitted apart from the bf16 ones
//! (`data/xdna2/fitted_q4.json`, by `calibration::four_bit`, with every bf16
//! parameter held at its committed value), so no bf16 figure depends on them:
//! only launches whose weights are packed read them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cost::ParamSpec;
use super::kernels::{GemvSpec, PackedFormat};
use super::plan::{Launch, Plan, Step};

/// Inner-loop cost of Q4_0 over the unsigned affine form: the published Q4_0
/// decode kernel's body is 140 bundles with its sign fix and 121 without it
/// (mlir-air:programming_examples/fused_decode/README.md, "The Q4_0 branch
/// splits again"); the affine `w = q·scale + min` of Q4NX/Q4_1 loads unsigned
/// nibbles and needs no fix, so it is taken at the 121 (its extra add shares
/// the multiply's bundles: an assumption, not a measurement).
pub const Q4_0_BODY_RATIO: f64 = 140.0 / 121.0;

/// The 4-bit parameters, by name (all positive, SI units).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackedParams {
    /// Weights one compute tile unpacks and multiplies per second in a packed
    /// GEMV (Q4_1 / Q4NX; Q4_0 at `1 / Q4_0_BODY_RATIO` of it).
    pub q4_tile_weights_per_s: f64,
    /// Fused-decode attention on the NPU: seconds per (layer × query head ×
    /// head_dim × context position).
    pub fused_attention_s_per_element: f64,
}

impl PackedParams {
    pub const SPECS: &'static [ParamSpec] = &[
        ParamSpec {
            name: "q4_tile_weights_per_s",
            initial: 2.1e9,
            lower: 1e8,
            upper: 4e10,
            doc: "weights one compute tile unpacks and multiplies per second in a packed 4-bit GEMV; starts at the bf16 GEMV's fitted tile rate in weights (4.2 GB/s of 2-byte weights)",
            range: "no measurement of a single tile; at most what its two input channels deliver, 2 x 8 B/cycle at 1.56 GHz of 20-byte blocks of 32 weights = 40 G weights/s (npu2.json); the herd is further capped by its shim channels and the fitted DRAM rate",
        },
        ParamSpec {
            name: "fused_attention_s_per_element",
            initial: 4e-11,
            lower: 1e-12,
            upper: 1e-9,
            doc: "attention inside the published fused decode, per (layer x query head x head_dim x context position); the published slope tracks query heads (calibration §7)",
            range: "no measurement of its own: the fit points' slope in context sets it",
        },
    ];

    pub fn initial() -> Self {
        Self::from_values(&Self::SPECS.iter().map(|s| s.initial).collect::<Vec<_>>())
    }

    /// Values in `SPECS` order.
    pub fn values(&self) -> Vec<f64> {
        vec![
            self.q4_tile_weights_per_s,
            self.fused_attention_s_per_element,
        ]
    }

    /// Parameters from values in `SPECS` order.
    pub fn from_values(values: &[f64]) -> Self {
        let at = |i: usize| values.get(i).copied().unwrap_or(Self::SPECS[i].initial);
        PackedParams {
            q4_tile_weights_per_s: at(0),
            fused_attention_s_per_element: at(1),
        }
    }

    /// The values by name (for `fitted_q4.json`).
    pub fn by_name(&self) -> BTreeMap<String, f64> {
        Self::SPECS
            .iter()
            .map(|s| s.name.to_string())
            .zip(self.values())
            .collect()
    }
}

impl Default for PackedParams {
    fn default() -> Self {
        Self::initial()
    }
}

/// Weights per second one tile of a packed GEMV in `format` unpacks.
fn tile_rate(format: PackedFormat, p: &PackedParams) -> f64 {
    match format {
        PackedFormat::Q4_1 => p.q4_tile_weights_per_s,
        PackedFormat::Q4_0 => p.q4_tile_weights_per_s / Q4_0_BODY_RATIO,
    }
}

/// Unpack-and-multiply time of a packed GEMV's `matrices` weight matrices
/// over `cascade_rows` effective rows of the herd (the vector unit is the
/// bound, not the stream of packed bytes, which the caller caps separately).
pub fn packed_stream_s(
    spec: &GemvSpec,
    format: PackedFormat,
    matrices: usize,
    cascade_rows: f64,
    p: &PackedParams,
) -> f64 {
    let weights = matrices as f64 * spec.m as f64 * spec.k as f64;
    weights / (spec.herd.cols() as f64 * cascade_rows * tile_rate(format, p))
}

/// Every GEMV of `plan` (projections, fused gate/up, LM-head partitions)
/// reading its weights packed in `format`, double-buffered: the published
/// 4-bit decode keeps every projection and the LM head in blocks, and its
/// README names single-buffering only for the attention's block loop.
pub fn pack_every_gemv(plan: &mut Plan, format: PackedFormat) {
    for step in plan
        .prologue
        .iter_mut()
        .chain(plan.layer.iter_mut())
        .chain(plan.epilogue.iter_mut())
    {
        let Step::Call(call) = step else { continue };
        for launch in &mut call.launches {
            match launch {
                Launch::Gemv { spec, .. } | Launch::GemvSwiglu { spec, .. } => {
                    spec.packed = Some(format);
                    spec.omit_pingpong = false;
                }
                Launch::LmHeadGemv { spec, .. } => {
                    spec.part.packed = Some(format);
                    spec.part.omit_pingpong = false;
                }
                _ => {}
            }
        }
    }
}
