//! Fits the cost model's parameters to the calibration points and stores the
//! result (`data/xdna2/fitted.json`) with the data set's hash, the per-point
//! errors and the summary every modeled figure elsewhere quotes.
//!
//! The optimizer is a Hooke–Jeeves pattern search in log-parameter space on
//! the sum of squared log errors of the fit points only; held-out points are
//! evaluated after the fit and never influence it. It is deterministic: same
//! data, same result.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::calibration::{PointSet, Prepared, Report, Summary};
use super::cost::Params;
use super::device::Device;
use super::lofo::{leave_one_family_out, LeaveOneFamilyOut};

/// The committed fit.
pub const FITTED_JSON: &str = include_str!("../../data/xdna2/fitted.json");

const METHOD: &str = "Hooke-Jeeves pattern search in log-parameter space, minimizing the sum of squared log errors over the fit points; initial step x2, halved until 1e-4; restarted from the optimum until a restart gains nothing (at most 8 restarts)";

const RESTARTS: usize = 8;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FittedFile {
    pub dataset_sha256: String,
    pub method: String,
    /// Sum of squared log errors at the optimum.
    pub objective: f64,
    pub evaluations: usize,
    pub params: BTreeMap<String, f64>,
    pub fit: Summary,
    pub held_out: Summary,
    /// Signed error (modeled / measured − 1) of every point.
    pub errors: BTreeMap<String, f64>,
    /// Every parameter the fit left at a bound, and whether it binds.
    pub bounds: Vec<BoundCheck>,
    pub leave_one_family_out: LeaveOneFamilyOut,
}

/// Which end of its range a parameter sits at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Lower,
    Upper,
}

/// A fitted parameter at a bound of the range its measurements allow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundCheck {
    pub param: String,
    pub value: f64,
    pub side: Side,
    pub lower: f64,
    pub upper: f64,
    /// What the range comes from.
    pub range: String,
    /// How much the fit objective drops for a 1 % step past the bound: the
    /// bound binds when this is positive.
    pub gain: f64,
    /// The fit points whose error shrinks most past the bound (why it binds).
    pub pulled_by: Vec<Pull>,
}

/// A fit point's signed error at the bound and 1 % past it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pull {
    pub id: String,
    pub error: f64,
    pub past: f64,
}

impl BoundCheck {
    pub fn binds(&self) -> bool {
        self.gain > 0.0
    }
}

/// Squared log error of a modeled vs measured time (a penalty for nonsense).
fn log_error_squared(modeled: f64, measured: f64) -> f64 {
    let ratio = modeled / measured;
    if ratio.is_finite() && ratio > 0.0 {
        ratio.ln().powi(2)
    } else {
        1e6
    }
}

/// The parameters `params` leaves within 0.1 % of a bound, each with the
/// objective's change one 1 % step past it and the points that pull it there.
pub fn bound_checks(prepared: &Prepared, device: &Device, params: &Params) -> Vec<BoundCheck> {
    let fit_points = fit_point_indices(prepared);
    let at = prepared.evaluate(device, params);
    let values = params.values();
    let mut checks = Vec::new();
    for (i, spec) in Params::SPECS.iter().enumerate() {
        let side = if (values[i] / spec.lower).ln().abs() < 1e-3 {
            Side::Lower
        } else if (values[i] / spec.upper).ln().abs() < 1e-3 {
            Side::Upper
        } else {
            continue;
        };
        let mut moved = values.clone();
        moved[i] *= match side {
            Side::Lower => 0.99,
            Side::Upper => 1.01,
        };
        let past = prepared.evaluate(device, &Params::from_values(&moved));
        let mut gain = 0.0;
        let mut pulls = Vec::new();
        for &p in &fit_points {
            let measured = prepared.points[p].measured_s;
            let drop = log_error_squared(at[p], measured) - log_error_squared(past[p], measured);
            gain += drop;
            if drop > 0.0 {
                pulls.push((drop, p));
            }
        }
        pulls.sort_by(|a, b| b.0.total_cmp(&a.0));
        checks.push(BoundCheck {
            param: spec.name.to_string(),
            value: values[i],
            side,
            lower: spec.lower,
            upper: spec.upper,
            range: spec.range.to_string(),
            gain,
            pulled_by: pulls
                .iter()
                .take(if gain > 0.0 { 3 } else { 0 })
                .map(|&(_, p)| {
                    let measured = prepared.points[p].measured_s;
                    Pull {
                        id: prepared.points[p].point.id.clone(),
                        error: at[p] / measured - 1.0,
                        past: past[p] / measured - 1.0,
                    }
                })
                .collect(),
        });
    }
    checks
}

#[derive(Debug, thiserror::Error)]
pub enum FitFileError {
    #[error("fitted parameters: {0}")]
    Syntax(#[from] serde_json::Error),
    #[error("fitted parameters: {0} is missing")]
    Missing(String),
}

impl FittedFile {
    pub fn parse(text: &str) -> Result<FittedFile, FitFileError> {
        Ok(serde_json::from_str(text)?)
    }

    /// The committed fit; it is compiled in and covered by a test.
    pub fn committed() -> FittedFile {
        Self::parse(FITTED_JSON).expect("committed fitted.json parses")
    }

    pub fn to_json(&self) -> String {
        super::plan::json_file(self)
    }

    pub fn params(&self) -> Result<Params, FitFileError> {
        let values = Params::SPECS
            .iter()
            .map(|spec| {
                self.params
                    .get(spec.name)
                    .copied()
                    .ok_or_else(|| FitFileError::Missing(spec.name.to_string()))
            })
            .collect::<Result<Vec<f64>, _>>()?;
        Ok(Params::from_values(&values))
    }

    /// The calibration note printed beside every modeled figure.
    pub fn note(&self) -> String {
        format!(
            "modeled; cost model calibration: median {:.1}%, worst {:.1}% over {} fitted points, held-out median {:.1}% (bias {:+.1}%), worst {:.1}% over {} points",
            100.0 * self.fit.median_error,
            100.0 * self.fit.worst_error,
            self.fit.points,
            100.0 * self.held_out.median_error,
            100.0 * self.held_out.median_signed_error,
            100.0 * self.held_out.worst_error,
            self.held_out.points
        )
    }
}

/// The committed parameters: the bf16 fit and, beside it, the 4-bit fit.
pub fn committed_params() -> Params {
    let bf16 = FittedFile::committed()
        .params()
        .expect("committed fitted.json has every parameter");
    Params {
        packed: super::calibration::FittedFourBit::committed().packed_params(),
        ..bf16
    }
}

/// Result of a fit.
#[derive(Debug, Clone)]
pub struct FitOutcome {
    pub params: Params,
    pub objective: f64,
    pub evaluations: usize,
}

struct Objective<'a> {
    prepared: &'a Prepared,
    device: &'a Device,
    fit_points: Vec<usize>,
    evaluations: usize,
}

impl Objective<'_> {
    fn value(&mut self, log_values: &[f64]) -> f64 {
        self.evaluations += 1;
        let values: Vec<f64> = log_values.iter().map(|v| v.exp()).collect();
        let modeled = self
            .prepared
            .evaluate(self.device, &Params::from_values(&values));
        self.fit_points
            .iter()
            .map(|&i| log_error_squared(modeled[i], self.prepared.points[i].measured_s))
            .sum()
    }
}

/// Indices of the fit points of `prepared`.
pub fn fit_point_indices(prepared: &Prepared) -> Vec<usize> {
    prepared
        .points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.point.set == PointSet::Fit)
        .map(|(i, _)| i)
        .collect()
}

/// Fits the parameters to the fit points of `prepared`.
pub fn fit(prepared: &Prepared, device: &Device) -> FitOutcome {
    fit_on(prepared, device, fit_point_indices(prepared))
}

/// Fits the parameters to the points `fit_points` (indices into `prepared`).
pub fn fit_on(prepared: &Prepared, device: &Device, fit_points: Vec<usize>) -> FitOutcome {
    let mut objective = Objective {
        prepared,
        device,
        fit_points,
        evaluations: 0,
    };
    let bounds: Vec<(f64, f64)> = Params::SPECS
        .iter()
        .map(|s| (s.lower.ln(), s.upper.ln()))
        .collect();
    let start: Vec<f64> = Params::SPECS.iter().map(|s| s.initial.ln()).collect();
    // Restarts with a fresh step until one no longer improves: a pattern
    // search can stall where a `max(compute, data)` makes some axes flat.
    let (mut best, mut value) =
        hooke_jeeves(&mut |x| objective.value(x), start, &bounds, 2f64.ln(), 1e-4);
    for _ in 0..RESTARTS {
        let (x, v) = hooke_jeeves(
            &mut |x| objective.value(x),
            best.clone(),
            &bounds,
            2f64.ln(),
            1e-4,
        );
        if v >= value - 1e-9 {
            break;
        }
        (best, value) = (x, v);
    }
    FitOutcome {
        params: Params::from_values(&best.iter().map(|v| v.exp()).collect::<Vec<_>>()),
        objective: value,
        evaluations: objective.evaluations,
    }
}

/// Pattern search: exploratory moves along each axis, then a pattern move
/// along the improvement; the step halves when nothing improves.
pub(crate) fn hooke_jeeves(
    f: &mut dyn FnMut(&[f64]) -> f64,
    start: Vec<f64>,
    bounds: &[(f64, f64)],
    initial_step: f64,
    min_step: f64,
) -> (Vec<f64>, f64) {
    let clamp = |x: &mut Vec<f64>| {
        for (v, (lo, hi)) in x.iter_mut().zip(bounds) {
            *v = v.clamp(*lo, *hi);
        }
    };
    let mut base = start;
    clamp(&mut base);
    let mut f_base = f(&base);
    let mut step = initial_step;
    while step >= min_step {
        let (mut x, mut fx) = explore(f, &base, f_base, step, bounds);
        if fx < f_base {
            loop {
                let mut pattern: Vec<f64> = x.iter().zip(&base).map(|(a, b)| 2.0 * a - b).collect();
                clamp(&mut pattern);
                base = x.clone();
                f_base = fx;
                let f_pattern = f(&pattern);
                let (y, fy) = explore(f, &pattern, f_pattern, step, bounds);
                if fy < f_base {
                    (x, fx) = (y, fy);
                } else {
                    break;
                }
            }
        } else {
            step /= 2.0;
        }
    }
    (base, f_base)
}

fn explore(
    f: &mut dyn FnMut(&[f64]) -> f64,
    from: &[f64],
    f_from: f64,
    step: f64,
    bounds: &[(f64, f64)],
) -> (Vec<f64>, f64) {
    let mut x = from.to_vec();
    let mut fx = f_from;
    for i in 0..x.len() {
        for delta in [step, -step] {
            let old = x[i];
            let candidate = (old + delta).clamp(bounds[i].0, bounds[i].1);
            if candidate == old {
                continue;
            }
            x[i] = candidate;
            let value = f(&x);
            if value < fx {
                fx = value;
                break;
            }
            x[i] = old;
        }
    }
    (x, fx)
}

/// The file a fit writes: the fit, its bounds, and the leave-one-family-out
/// refits.
pub fn fitted_file(
    prepared: &Prepared,
    device: &Device,
    outcome: &FitOutcome,
    report: &Report,
) -> FittedFile {
    let names = Params::SPECS.iter().map(|s| s.name.to_string());
    FittedFile {
        bounds: bound_checks(prepared, device, &outcome.params),
        leave_one_family_out: leave_one_family_out(prepared, device),
        dataset_sha256: prepared.dataset_sha256.clone(),
        method: METHOD.to_string(),
        objective: outcome.objective,
        evaluations: outcome.evaluations,
        params: names.zip(outcome.params.values()).collect(),
        fit: report.fit.clone(),
        held_out: report.held_out.clone(),
        errors: report
            .results
            .iter()
            .map(|r| (r.id.clone(), r.error))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_search_finds_a_quadratic_minimum() {
        let mut f = |x: &[f64]| (x[0] - 1.5).powi(2) + 3.0 * (x[1] + 0.25).powi(2);
        let (x, v) = hooke_jeeves(
            &mut f,
            vec![0.0, 0.0],
            &[(-5.0, 5.0), (-5.0, 5.0)],
            1.0,
            1e-6,
        );
        assert!(
            (x[0] - 1.5).abs() < 1e-5 && (x[1] + 0.25).abs() < 1e-5,
            "{x:?}"
        );
        assert!(v < 1e-9);
    }

    #[test]
    fn bounds_hold() {
        let mut f = |x: &[f64]| (x[0] - 10.0).powi(2);
        let (x, _) = hooke_jeeves(&mut f, vec![0.0], &[(-1.0, 2.0)], 1.0, 1e-6);
        assert_eq!(x[0], 2.0);
    }
}
