//! The 4-bit calibration: the published 4-bit deployments' decode figures
//! (`data/xdna2/calibration_q4.json`, calibration §6–§7), each predicted from
//! the published structure of those deployments (one fused dispatch per
//! token, packed projections and LM head, attention on the NPU:
//! `packed_cost::fused_decode_time`), the fit of the 4-bit parameters on the
//! fit points with every bf16 parameter held at its committed value, and the
//! committed result (`data/xdna2/fitted_q4.json`). Kept apart from the bf16
//! data set so that no bf16 parameter, point or hash moves with it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::summary::Summary;
use super::{load_model, read, CalibrationError, DataSet, Measured};
use crate::metrics::Unit;
use crate::xdna2::cost::Params;
use crate::xdna2::device::Device;
use crate::xdna2::fit::{hooke_jeeves, Side};
use crate::xdna2::kernels::PackedFormat;
use crate::xdna2::packed_cost::{fused_decode_time, pack_every_gemv, PackedParams};
use crate::xdna2::plan::{Phase, Plan};
use crate::xdna2::published::{checking_device, published_plan};

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
    /// One of the models in `shared/models`, with a published bf16 plan
    /// structure in `calibration.json`.
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

/// The 4-bit data set resolved against the device, the models and the
/// published plan structures.
#[derive(Debug, Clone)]
pub struct PreparedFourBit {
    pub data: FourBitData,
    /// Measured seconds and the plan (index into `plans`) of each point.
    points: Vec<(f64, usize)>,
    /// One packed decode plan per (model, format).
    plans: Vec<((String, PackedFormat), Plan)>,
    pub dataset_sha256: String,
}

impl PreparedFourBit {
    /// Reads `calibration_q4.json` of `data_dir`; `bf16` is the bf16 data set
    /// (its published plan structures) and `fitted_bf16` the text of the bf16
    /// fit the 4-bit parameters are fitted on top of (hashed with the data).
    pub fn load(
        device: &Device,
        data_dir: &Path,
        models_dir: &Path,
        bf16: &DataSet,
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
        let mut plans: Vec<((String, PackedFormat), Plan)> = Vec::new();
        let mut points = Vec::new();
        for point in &data.points {
            let key = (point.model.clone(), point.format);
            let index = match plans.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    let config = read(&models_dir.join(&point.model).join("config.json"))?;
                    hashed.insert(format!("models/{}/config.json", point.model), config);
                    plans.push((key, fused_plan(point, device, models_dir, bf16)?));
                    plans.len() - 1
                }
            };
            points.push((measured_seconds(point)?, index));
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
            plans,
            dataset_sha256: format!("{:x}", hasher.finalize()),
        })
    }

    /// Modeled seconds of every point under `params`.
    pub fn evaluate(&self, device: &Device, params: &Params) -> Vec<f64> {
        self.data
            .points
            .iter()
            .zip(&self.points)
            .map(|(p, &(_, plan))| {
                fused_decode_time(&self.plans[plan].1, device, params, p.context).total_s
            })
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
            .map(|((p, &(measured_s, _)), modeled_s)| FourBitResult {
                id: p.id.clone(),
                set: p.set,
                measured_s,
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

    /// The fused decode plan of `model` packed in `format` (for the trace
    /// and the tests).
    pub fn plan(&self, model: &str, format: PackedFormat) -> Option<&Plan> {
        self.plans
            .iter()
            .find(|((m, f), _)| m == model && *f == format)
            .map(|(_, p)| p)
    }
}

/// The model's published bf16 decode plan with every GEMV packed in the
/// point's format, checked against the hardware (block alignment included).
fn fused_plan(
    point: &FourBitPoint,
    device: &Device,
    models_dir: &Path,
    bf16: &DataSet,
) -> Result<Plan, CalibrationError> {
    let arch = load_model(models_dir, &point.model)?;
    let published =
        bf16.published_plans
            .get(&point.model)
            .ok_or_else(|| CalibrationError::Point {
                id: point.id.clone(),
                message: format!("no published plan structure for {}", point.model),
            })?;
    let mut plan = published_plan(
        &point.model,
        &arch,
        device,
        Phase::Decode,
        bf16.decode_context,
        published,
    )?;
    pack_every_gemv(&mut plan, point.format);
    plan.check(&checking_device(device, &plan))
        .map_err(|violations| CalibrationError::Refused {
            id: point.id.clone(),
            violations,
        })?;
    Ok(plan)
}

fn measured_seconds(point: &FourBitPoint) -> Result<f64, CalibrationError> {
    let v = point.measured.value;
    Ok(match point.measured.unit {
        Unit::Ms => v * 1e-3,
        Unit::S => v,
        Unit::TokPerS => 1.0 / v,
        other => {
            return Err(CalibrationError::Point {
                id: point.id.clone(),
                message: format!("unit {other} is no decode time or rate"),
            })
        }
    })
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
    let with = |log_values: &[f64]| Params {
        packed: PackedParams::from_values(&log_values.iter().map(|v| v.exp()).collect::<Vec<_>>()),
        ..bf16.clone()
    };
    let mut evaluations = 0;
    let mut objective = |x: &[f64]| {
        evaluations += 1;
        let modeled = prepared.evaluate(device, &with(x));
        fit_points
            .iter()
            .map(|&i| {
                let ratio = modeled[i] / prepared.points[i].0;
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
    let params = with(&best);
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
