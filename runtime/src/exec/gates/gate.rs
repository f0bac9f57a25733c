//! Gates: one measured value against one threshold, with where the threshold came
//! from. Every gate the executor evaluates is kept (passed or not) so the report, the
//! run's trajectory and the independent evaluator see the same numbers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bundle::{Comparison, Provenance, Value};
use crate::ops::{GateMetric, OpKind, Unit};
use crate::xdna2::numerics::cosine;

/// Where a gate's threshold comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ThresholdSource {
    /// The bundle's exit gate, as recorded.
    Bundle { provenance: Vec<Provenance> },
    /// The bundle's gate, adapted to this model; `why` says how.
    Rederived {
        why: String,
        provenance: Vec<Provenance>,
    },
    /// A rule of the runtime (the reference system's definition of the gate).
    Runtime { rule: String },
    /// A limit derived from error measured on this deployment: the larger of
    /// a fixed limit and a factor times the bf16-storage floor (`floor`).
    Measured(super::floor::DerivedLimit),
}

/// One evaluated gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateCheck {
    /// Short name, unique within its phase, e.g. `kernel gemm 16x128x384`.
    pub name: String,
    /// The operation whose result the gate reads (`validate-kernel`, …).
    pub op: OpKind,
    pub metric: GateMetric,
    pub value: f64,
    pub comparison: Comparison,
    pub threshold: f64,
    /// Unit of value and threshold (the metric's canonical one); none (`""` in
    /// the file) for unitless metrics.
    #[serde(with = "crate::metrics::optional_unit")]
    pub unit: Option<Unit>,
    pub passed: bool,
    /// Figures from the cost model rather than from emulated numerics.
    pub modeled: bool,
    /// Conditions the value was measured under (kernel, shape, layer, …).
    pub conditions: BTreeMap<String, Value>,
    pub source: ThresholdSource,
    /// An optimization tried: the technique is kept when the gate holds and
    /// reverted when it does not, which is no failure of the deployment.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attempt: bool,
}

impl GateCheck {
    /// Starts a gate: its name (unique within its phase) and the operation whose
    /// result it reads. `.measures(metric, value)`, then optionally
    /// `.when(conditions)`, then `.against(comparison, threshold, source)` make it.
    pub fn named(name: impl Into<String>, op: OpKind) -> Named {
        Named {
            name: name.into(),
            op,
        }
    }

    pub fn modeled(mut self) -> Self {
        self.modeled = true;
        self
    }

    /// Marks the gate as an optimization's try (see [`GateCheck::attempt`]).
    pub fn attempt(mut self) -> Self {
        self.attempt = true;
        self
    }

    /// How a try reads: `tried omit-pingpong p5.x: 57.53 ms vs 57.08 ms kept →
    /// reverted` (the new figure against the one kept so far, then what was
    /// done); `None` for a check.
    pub fn attempt_summary(&self) -> Option<String> {
        if !self.attempt {
            return None;
        }
        let unit = self.unit.map_or(String::new(), |u| format!(" {u}"));
        Some(format!(
            "tried {}: {}{unit} vs {}{unit} kept → {}",
            self.name,
            format_value(self.value),
            format_value(self.threshold),
            if self.passed { "faster" } else { "reverted" }
        ))
    }

    /// `cosine = 0.9987 >= 0.99`.
    pub fn summary(&self) -> String {
        let unit = self.unit.map_or(String::new(), |u| format!(" {u}"));
        format!(
            "{} = {}{unit} {} {}{unit}",
            self.metric,
            format_value(self.value),
            self.comparison.symbol(),
            format_value(self.threshold)
        )
    }
}

/// A gate with its name and operation, before its measurement.
#[must_use = "a gate is made by .measures(..).against(..)"]
pub struct Named {
    name: String,
    op: OpKind,
}

impl Named {
    /// What the gate measures and the value measured.
    pub fn measures(self, metric: impl Into<GateMetric>, value: f64) -> Measured {
        Measured {
            name: self.name,
            op: self.op,
            metric: metric.into(),
            value,
            conditions: BTreeMap::new(),
        }
    }
}

/// A measured value, before the threshold that judges it.
#[must_use = "a gate is made by .against(..)"]
pub struct Measured {
    name: String,
    op: OpKind,
    metric: GateMetric,
    value: f64,
    conditions: BTreeMap<String, Value>,
}

impl Measured {
    /// The conditions the value was measured under (kernel, shape, layer, …).
    pub fn when(mut self, conditions: BTreeMap<String, Value>) -> Self {
        self.conditions = conditions;
        self
    }

    /// The gate: passed when `value comparison threshold` holds (NaN never does),
    /// in the metric's canonical unit, with where the threshold comes from.
    pub fn against(
        self,
        comparison: Comparison,
        threshold: f64,
        source: ThresholdSource,
    ) -> GateCheck {
        GateCheck {
            name: self.name,
            op: self.op,
            metric: self.metric,
            value: self.value,
            comparison,
            threshold,
            unit: self.metric.canonical_unit(),
            passed: !self.value.is_nan() && comparison.holds(self.value, threshold),
            modeled: false,
            conditions: self.conditions,
            source,
            attempt: false,
        }
    }

    /// The gate of a count that must be zero (non-finite values, errors,
    /// refusals), by a rule of the runtime.
    pub fn must_be_zero(self, rule: impl Into<String>) -> GateCheck {
        self.against(Comparison::Eq, 0.0, ThresholdSource::rule(rule))
    }

    /// A modeled figure recorded for later phases rather than judged: it only
    /// has to be positive.
    pub fn recorded(self, rule: impl Into<String>) -> GateCheck {
        self.against(Comparison::Gt, 0.0, ThresholdSource::rule(rule))
            .modeled()
    }
}

impl ThresholdSource {
    /// A rule of the runtime, in words.
    pub fn rule(rule: impl Into<String>) -> Self {
        ThresholdSource::Runtime { rule: rule.into() }
    }
}

/// Numbers as a reader wants them: integers plainly, small values in scientific
/// notation, others with four significant digits.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e6).contains(&a) {
        return format!("{v:.3e}");
    }
    let digits = (4 - a.log10().floor() as i32 - 1).clamp(0, 8) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Cosine of each `width`-wide row.
pub fn row_cosines(a: &[f32], b: &[f32], width: usize) -> Vec<f64> {
    a.chunks_exact(width)
        .zip(b.chunks_exact(width))
        .map(|(x, y)| cosine(x, y))
        .collect()
}

/// Minimum that NaN poisons (a NaN row must fail the gate).
pub fn min_or_nan(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, |m, v| {
        if v.is_nan() || m.is_nan() {
            f64::NAN
        } else {
            m.min(v)
        }
    })
}

/// NaN and infinite values.
pub fn non_finite(values: &[f32]) -> usize {
    values.iter().filter(|v| !v.is_finite()).count()
}

/// `max |a − b|`.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).abs())
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_fails_every_gate() {
        let g = GateCheck::named("x", OpKind::ValidateBlock)
            .measures(crate::ops::Metric::Cosine, f64::NAN)
            .against(Comparison::Ge, 0.99, ThresholdSource::rule("r"));
        assert!(!g.passed);
        assert!(min_or_nan(&[1.0, f64::NAN, 0.5]).is_nan());
        assert!(cosine(&[f32::NAN, 1.0], &[1.0, 1.0]).is_nan());
    }

    #[test]
    fn cosine_of_scaled_vectors_is_one() {
        let a = [1.0, -2.0, 3.0];
        let b = [2.0, -4.0, 6.0];
        assert!((cosine(&a, &b) - 1.0).abs() < 1e-12);
        assert_eq!(row_cosines(&a[..2], &b[..2], 1), vec![1.0, 1.0]);
    }

    #[test]
    fn values_format_for_readers() {
        assert_eq!(format_value(32.0), "32");
        assert_eq!(format_value(0.99871), "0.9987");
        assert_eq!(format_value(3.1e-5), "3.100e-5");
        assert_eq!(format_value(1234.5678), "1235");
    }
}
