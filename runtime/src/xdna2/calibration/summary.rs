//! The comparison of modeled and measured seconds: one result per point and the error
//! statistics (median, bias, worst) of the fitted and the held-out sets.

use serde::{Deserialize, Serialize};

use super::PointSet;

/// One point compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointResult {
    pub id: String,
    pub set: PointSet,
    pub section: String,
    pub measured_s: f64,
    pub modeled_s: f64,
    /// modeled / measured − 1.
    pub error: f64,
}

/// Error statistics of one set of points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    pub points: usize,
    /// Median of |error|, as a fraction.
    pub median_error: f64,
    /// Median of the signed error (modeled / measured − 1): the model's bias.
    pub median_signed_error: f64,
    /// Points the model predicts faster than measured.
    pub negative: usize,
    pub worst_error: f64,
    pub worst_id: String,
}

impl Summary {
    pub(super) fn of(results: &[PointResult], set: PointSet) -> Summary {
        let selected: Vec<(&str, f64)> = results
            .iter()
            .filter(|r| r.set == set)
            .map(|r| (r.id.as_str(), r.error))
            .collect();
        Summary::of_errors(&selected)
    }

    /// The statistics of signed errors by point id (a non-finite error counts
    /// as the worst).
    pub fn of_errors(errors: &[(&str, f64)]) -> Summary {
        let finite = |e: f64| if e.is_finite() { e } else { f64::INFINITY };
        let mut absolute: Vec<(f64, &str)> = errors
            .iter()
            .map(|(id, e)| (finite(*e).abs(), *id))
            .collect();
        absolute.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut signed: Vec<f64> = errors.iter().map(|(_, e)| finite(*e)).collect();
        signed.sort_by(f64::total_cmp);
        let (worst_error, worst_id) = absolute.last().map_or((0.0, ""), |(e, id)| (*e, id));
        Summary {
            points: errors.len(),
            median_error: median(&absolute.iter().map(|a| a.0).collect::<Vec<_>>()),
            median_signed_error: median(&signed),
            negative: signed.iter().filter(|e| **e < 0.0).count(),
            worst_error,
            worst_id: worst_id.to_string(),
        }
    }
}

/// Median of sorted values (0 for none).
fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Every point compared, with the fitted and held-out summaries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub results: Vec<PointResult>,
    pub fit: Summary,
    pub held_out: Summary,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_reports_the_bias_beside_the_error() {
        let errors = [
            ("a", -0.2),
            ("b", -0.1),
            ("c", 0.05),
            ("d", -0.3),
            ("e", 0.4),
        ];
        let s = Summary::of_errors(&errors);
        assert_eq!((s.points, s.negative, s.worst_id.as_str()), (5, 3, "e"));
        assert!((s.median_error - 0.2).abs() < 1e-12, "{s:?}");
        assert!((s.median_signed_error + 0.1).abs() < 1e-12, "{s:?}");
        let even = Summary::of_errors(&errors[..4]);
        assert!((even.median_signed_error + 0.15).abs() < 1e-12, "{even:?}");
        assert!((even.median_error - 0.15).abs() < 1e-12, "{even:?}");
    }

    #[test]
    fn a_non_finite_error_is_the_worst() {
        let s = Summary::of_errors(&[("a", 0.1), ("b", f64::NAN)]);
        assert_eq!(s.worst_id, "b");
        assert!(s.worst_error.is_infinite());
    }
}
