//! The 4-bit calibration: the published 4-bit deployments' decode figures
//! (`data/xdna2/calibration_q4.json`, calibration §6–§7), each predicted from
//! the fused decode plan the builder makes for the model laid out as the
//! published one is (one dispatch per token, projections on 4×4 tiles fed on
//! both shim channels of their columns, attention on the NPU, the KV cache
//! appended on the device; every projection and the LM head packed:
//! [`fused_plan`]), timed by the cost model; the fit of the 4-bit parameters on
//! the fit points with every bf16 parameter held at its committed value, the
//! committed result (`data/xdna2/fitted_q4.json`), and leave-one-family-out.
//! Kept apart from the bf16 data set so that no bf16 parameter, point or hash
//! moves with it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::summary::Summary;
use super::{load_model, read, CalibrationError, Measured};
use crate::metrics::Unit;
use crate::model::arch::Architecture;
use crate::xdna2::builder::plan_for;
use crate::xdna2::cost::{time_plan, Params};
use crate::xdna2::device::Device;
use crate::xdna2::fit::{hooke_jeeves, Side};
use crate::xdna2::kernels::PackedFormat;
use crate::xdna2::packed_cost::{pack_every_gemv, PackedParams};
use crate::xdna2::plan::{FusedKv, FusedOptions, Phase, Plan, PlanOptions};

/// The committed 4-bit data set and fit, compiled in.
pub const CALIBRATION_Q4_JSON: &str = include_str!("../../../data/xdna2/calibration_q4.json");
pub const FITTED_Q4_JSON: &str = include_str!("../../../data/xdna2/fitted_q4.json");

const METHOD: &str = "Hooke-Jeeves pattern search in log-parameter space over the 4-bit parameters only (every bf16 parameter at its committed fitted.json value), minimizing the sum of squared log errors over the fit points; initial step x2, halved until 1e-4";

/// Which set a 4-bit point is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FourBitSet {
    Fit,
    HeldOut,
    /// Measured on another part or under other conditions: shown, never scored.
    OtherPart,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FourBitPoint {
    pub id: String,
    pub set: FourBitSet,
    pub tag: String,
    pub source: String,
    pub section: String,
    /// One of the models in `shared/models`.
    pub model: String,
    /// The block format the deployment streams (Q4NX is timed as Q4_1).
    pub format: PackedFormat,
    /// Context positions attended at the measured token.
    pub context: usize,
    pub measured: Measured,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FourBitData {
    pub description: String,
    /// Which points are fitted, and why those.
    pub fit_choice: String,
    pub points: Vec<FourBitPoint>,
}

/// One point compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FourBitResult {
    pub id: String,
    pub set: FourBitSet,
    /// The model's family (what leave-one-family-out leaves out together).
    pub family: String,
    pub measured_s: f64,
    pub modeled_s: f64,
    /// modeled / measured − 1.
    pub error: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FourBitReport {
    pub results: Vec<FourBitResult>,
    pub fit: Summary,
    pub held_out: Summary,
}

/// The 4-bit data set resolved against the device and the models.
#[derive(Debug, Clone)]
pub struct PreparedFourBit {
    pub data: FourBitData,
    /// Measured seconds, the plan and the family of each point.
    points: Vec<(f64, Plan, String)>,
    pub dataset_sha256: String,
}

impl PreparedFourBit {
    /// Reads `calibration_q4.json` of `data_dir`; `fitted_bf16` is the text
    /// of the bf16 fit the 4-bit parameters are fitted on top of (hashed with
    /// the data).
    pub fn load(
        device: &Device,
        data_dir: &Path,
        models_dir: &Path,
        fitted_bf16: &str,
    ) -> Result<PreparedFourBit, CalibrationError> {
        let text = read(&data_dir.join("calibration_q4.json"))?;
        let data: FourBitData =
            serde_json::from_str(&text).map_err(|e| CalibrationError::Syntax {
                path: "calibration_q4.json".to_string(),
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            })?;
        let mut hashed: BTreeMap<String, String> = BTreeMap::new();
        hashed.insert("calibration_q4.json".into(), text);
        hashed.insert("fitted.json".into(), fitted_bf16.to_string());
        let mut points = Vec::new();
        for point in &data.points {
            let config = read(&models_dir.join(&point.model).join("config.json"))?;
            hashed.insert(format!("models/{}/config.json", point.model), config);
            let arch = load_model(models_dir, &point.model)?;
            let plan = fused_plan(&point.model, &arch, device, point.format, point.context)
                .map_err(|e| match e {
                    FusedPlanError::Plan(e) => CalibrationError::Point {
                        id: point.id.clone(),
                        message: e.to_string(),
                    },
                    FusedPlanError::Refused(violations) => CalibrationError::Refused {
                        id: point.id.clone(),
                        violations,
                    },
                })?;
            let family = serde_json::to_value(arch.family)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            points.push((point.seconds_per_token()?, plan, family));
        }
        let mut hasher = Sha256::new();
        for (name, content) in &hashed {
            hasher.update(name.as_bytes());
            hasher.update([0]);
            hasher.update(content.as_bytes());
        }
        Ok(PreparedFourBit {
            data,
            points,
            dataset_sha256: format!("{:x}", hasher.finalize()),
        })
    }

    /// Modeled seconds of every point under `params`.
    pub fn evaluate(&self, device: &Device, params: &Params) -> Vec<f64> {
        self.points
            .iter()
            .map(|(_, plan, _)| time_plan(plan, device, params).total_s)
            .collect()
    }

    /// Compares the model under `params` with every point.
    pub fn report(&self, device: &Device, params: &Params) -> FourBitReport {
        let results: Vec<FourBitResult> = self
            .data
            .points
            .iter()
            .zip(&self.points)
            .zip(self.evaluate(device, params))
            .map(|((p, (measured_s, _, family)), modeled_s)| FourBitResult {
                id: p.id.clone(),
                set: p.set,
                family: family.clone(),
                measured_s: *measured_s,
                modeled_s,
                error: modeled_s / measured_s - 1.0,
            })
            .collect();
        let summary = |set: FourBitSet| {
            let errors: Vec<(&str, f64)> = results
                .iter()
                .filter(|r| r.set == set)
                .map(|r| (r.id.as_str(), r.error))
                .collect();
            Summary::of_errors(&errors)
        };
        FourBitReport {
            fit: summary(FourBitSet::Fit),
            held_out: summary(FourBitSet::HeldOut),
            results,
        }
    }

    /// The plan of the point `id` (for the trace and the tests).
    pub fn plan(&self, id: &str) -> Option<&Plan> {
        self.data
            .points
            .iter()
            .zip(&self.points)
            .find(|(p, _)| p.id == id)
            .map(|(_, (_, plan, _))| plan)
    }
}

/// Why a model has no fused plan of the published layout.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FusedPlanError {
    #[error(transparent)]
    Plan(#[from] crate::xdna2::builder::PlanError),
    #[error("the fused plan does not place: {}", .0.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("; "))]
    Refused(Vec<crate::xdna2::constraints::ConstraintViolation>),
}

/// The options of the published fused decode: the reference deployment's
/// plan with the decode as one dispatch per token, the KV cache appended on
/// the device and each projection column fed on both of its shim channels
/// (mlir-air:programming_examples/fused_decode/README.md:155-159).
pub fn published_fused_options() -> PlanOptions {
    PlanOptions {
        fused_decode: Some(FusedOptions {
            kv: FusedKv::Append,
            weight_channels: 2,
        }),
        ..PlanOptions::reference()
    }
}

/// The published 4-bit deployment of `model` as the builder lays it out: the
/// fused decode at `context` cached positions with every GEMV, the LM head's
/// too, packed in `format`, checked against the hardware. The published weight
/// buffer holds the LM head in blocks too: it is 386662400 bf16 elements for
/// Llama-3.2-1B (mlir-air:programming_examples/llms/bench/decode_geometry.py:39),
/// which is 5120-byte blocks of 8192 weights for the 16 layers' projections
/// and the 128256-row head (our arithmetic).
pub fn fused_plan(
    model: &str,
    arch: &Architecture,
    device: &Device,
    format: PackedFormat,
    context: usize,
) -> Result<Plan, FusedPlanError> {
    let options = published_fused_options();
    let mut plan = plan_for(model, arch, device, Phase::Decode, context, &options)?;
    pack_every_gemv(&mut plan, format);
    plan.check(device).map_err(FusedPlanError::Refused)?;
    Ok(plan)
}

impl FourBitPoint {
    /// The point's measurement as seconds per decoded token.
    pub fn seconds_per_token(&self) -> Result<f64, CalibrationError> {
        let v = self.measured.value;
        Ok(match self.measured.unit {
            Unit::Ms => v * 1e-3,
            Unit::S => v,
            Unit::TokPerS => 1.0 / v,
            other => {
                return Err(CalibrationError::Point {
                    id: self.id.clone(),
                    message: format!("unit {other} is no decode time or rate"),
                })
            }
        })
    }
}

/// A fitted 4-bit parameter and the range its measurements allow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FourBitParam {
    pub param: String,
    pub value: f64,
    pub lower: f64,
    pub upper: f64,
    pub range: String,
    /// The bound the fit left it at, if any (within 0.1 %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_bound: Option<Side>,
}

/// `fitted_q4.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FittedFourBit {
    pub dataset_sha256: String,
    pub method: String,
    pub fit_choice: String,
    pub objective: f64,
    pub evaluations: usize,
    pub params: Vec<FourBitParam>,
    pub fit: Summary,
    pub held_out: Summary,
    /// Signed error of every point, the other-part points included.
    pub errors: BTreeMap<String, f64>,
}

impl FittedFourBit {
    pub fn parse(text: &str) -> Result<FittedFourBit, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The committed fit; it is compiled in and covered by a test.
    pub fn committed() -> FittedFourBit {
        Self::parse(FITTED_Q4_JSON).expect("committed fitted_q4.json parses")
    }

    pub fn to_json(&self) -> String {
        crate::xdna2::plan::json_file(self)
    }

    /// The parameters, in `PackedParams::SPECS` order (a missing one at its
    /// initial value is refused by the caller's hash check long before).
    pub fn packed_params(&self) -> PackedParams {
        let values: Vec<f64> = PackedParams::SPECS
            .iter()
            .map(|s| {
                self.params
                    .iter()
                    .find(|p| p.param == s.name)
                    .map_or(s.initial, |p| p.value)
            })
            .collect();
        PackedParams::from_values(&values)
    }

    /// The note beside a figure of a fused decode plan.
    pub fn fused_note(&self) -> String {
        format!(
            "dispatch structure and attention calibrated on the published 4-bit sweeps, fit on Llama-3.2-1B's {} points: held-out median {:.1}% (bias {:+.1}%), worst {:.1}% ({}) over {} points",
            self.fit.points,
            100.0 * self.held_out.median_error,
            100.0 * self.held_out.median_signed_error,
            100.0 * self.held_out.worst_error,
            self.held_out.worst_id,
            self.held_out.points
        )
    }

    /// The note beside every packed figure.
    pub fn note(&self) -> String {
        format!(
            "packed GEMV rate calibrated on the published 4-bit fused decode: median {:.1}% over {} fitted points, held-out median {:.1}% (bias {:+.1}%), worst {:.1}% ({}) over {} points",
            100.0 * self.fit.median_error,
            self.fit.points,
            100.0 * self.held_out.median_error,
            100.0 * self.held_out.median_signed_error,
            100.0 * self.held_out.worst_error,
            self.held_out.worst_id,
            self.held_out.points
        )
    }
}

/// Fits the 4-bit parameters on the fit points with `bf16`'s bf16 values
/// fixed, and returns the file to commit.
pub fn fit_four_bit(prepared: &PreparedFourBit, device: &Device, bf16: &Params) -> FittedFourBit {
    let fit_points: Vec<usize> = (0..prepared.data.points.len())
        .filter(|&i| prepared.data.points[i].set == FourBitSet::Fit)
        .collect();
    let (params, value, evaluations) = fit_on(prepared, device, bf16, &fit_points);
    let report = prepared.report(device, &params);
    FittedFourBit {
        dataset_sha256: prepared.dataset_sha256.clone(),
        method: METHOD.to_string(),
        fit_choice: prepared.data.fit_choice.clone(),
        objective: value,
        evaluations,
        params: param_rows(&params.packed),
        fit: report.fit.clone(),
        held_out: report.held_out.clone(),
        errors: report
            .results
            .iter()
            .map(|r| (r.id.clone(), r.error))
            .collect(),
    }
}

/// The 4-bit parameters fitted on the points `indices` with `bf16`'s bf16
/// values fixed: the parameters, the objective and its evaluations.
fn fit_on(
    prepared: &PreparedFourBit,
    device: &Device,
    bf16: &Params,
    indices: &[usize],
) -> (Params, f64, usize) {
    let with = |log_values: &[f64]| Params {
        packed: PackedParams::from_values(&log_values.iter().map(|v| v.exp()).collect::<Vec<_>>()),
        ..bf16.clone()
    };
    let mut evaluations = 0;
    let mut objective = |x: &[f64]| {
        evaluations += 1;
        let params = with(x);
        indices
            .iter()
            .map(|&i| {
                let (measured, plan, _) = &prepared.points[i];
                let ratio = time_plan(plan, device, &params).total_s / measured;
                if ratio.is_finite() && ratio > 0.0 {
                    ratio.ln().powi(2)
                } else {
                    1e6
                }
            })
            .sum::<f64>()
    };
    let bounds: Vec<(f64, f64)> = PackedParams::SPECS
        .iter()
        .map(|s| (s.lower.ln(), s.upper.ln()))
        .collect();
    let start: Vec<f64> = PackedParams::SPECS.iter().map(|s| s.initial.ln()).collect();
    let (best, value) = hooke_jeeves(&mut objective, start, &bounds, 2f64.ln(), 1e-4);
    (with(&best), value, evaluations)
}

/// One family predicted by a 4-bit fit that has not seen it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FourBitFamilyOut {
    pub family: String,
    /// The scored points the fit took: every other family's.
    pub fitted_on: Vec<String>,
    pub params: BTreeMap<String, f64>,
    /// Signed error of the family's scored points.
    pub errors: BTreeMap<String, f64>,
}

/// Leave one family out over the 4-bit points: each family's scored points
/// (fit and held-out) predicted by the 4-bit parameters fitted on the scored
/// points of every other family. It is a cross-validation of the fused
/// model's transfer between families, never a fit to commit: the committed
/// parameters are fitted on the fit points alone. A family with no other
/// family's points to fit on is left out of it (and named).
pub fn leave_one_family_out(
    prepared: &PreparedFourBit,
    device: &Device,
    bf16: &Params,
) -> (Vec<FourBitFamilyOut>, Summary) {
    let scored: Vec<usize> = (0..prepared.data.points.len())
        .filter(|&i| prepared.data.points[i].set != FourBitSet::OtherPart)
        .collect();
    let families: std::collections::BTreeSet<&str> = scored
        .iter()
        .map(|&i| prepared.points[i].2.as_str())
        .collect();
    let mut out = Vec::new();
    for family in families {
        let (inside, others): (Vec<usize>, Vec<usize>) = scored
            .iter()
            .partition(|&&i| prepared.points[i].2 == family);
        if others.is_empty() {
            continue;
        }
        let (params, _, _) = fit_on(prepared, device, bf16, &others);
        let errors = inside
            .iter()
            .map(|&i| {
                let (measured, plan, _) = &prepared.points[i];
                let modeled = time_plan(plan, device, &params).total_s;
                (prepared.data.points[i].id.clone(), modeled / measured - 1.0)
            })
            .collect();
        out.push(FourBitFamilyOut {
            family: family.to_string(),
            fitted_on: others
                .iter()
                .map(|&i| prepared.data.points[i].id.clone())
                .collect(),
            params: params.packed.by_name(),
            errors,
        });
    }
    let all: Vec<(&str, f64)> = out
        .iter()
        .flat_map(|f| f.errors.iter().map(|(id, e)| (id.as_str(), *e)))
        .collect();
    let summary = Summary::of_errors(&all);
    (out, summary)
}

fn param_rows(packed: &PackedParams) -> Vec<FourBitParam> {
    PackedParams::SPECS
        .iter()
        .zip(packed.values())
        .map(|(s, value)| FourBitParam {
            param: s.name.to_string(),
            value,
            lower: s.lower,
            upper: s.upper,
            range: s.range.to_string(),
            at_bound: if (value / s.lower).ln().abs() < 1e-3 {
                Some(Side::Lower)
            } else if (value / s.upper).ln().abs() < 1e-3 {
                Some(Side::Upper)
            } else {
                None
            },
        })
        .collect()
}
