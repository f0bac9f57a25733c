//! Observation metrics, what they measure, and the units the language accepts.

use serde::Serialize;

/// What a metric measures; units are checked against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dimension {
    /// Unitless ratio or similarity.
    Ratio,
    Count,
    Time,
    TokenRate,
    FlopRate,
    ByteRate,
}

/// Which direction of a metric is better; gates compare in that direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Better {
    Higher,
    Lower,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct MetricSpec {
    pub name: &'static str,
    pub dimension: Dimension,
    pub better: Better,
    /// The unit values are normalised to.
    pub canonical_unit: &'static str,
    pub doc: &'static str,
}

const fn metric(
    name: &'static str,
    dimension: Dimension,
    better: Better,
    canonical_unit: &'static str,
    doc: &'static str,
) -> MetricSpec {
    MetricSpec {
        name,
        dimension,
        better,
        canonical_unit,
        doc,
    }
}

use Better::{Higher, Lower};
use Dimension::{ByteRate, Count, FlopRate, Ratio, Time, TokenRate};

pub const METRICS: &[MetricSpec] = &[
    metric(
        "cosine",
        Ratio,
        Higher,
        "",
        "whole-tensor cosine similarity",
    ),
    metric(
        "position_cosine_min",
        Ratio,
        Higher,
        "",
        "minimum per-position cosine",
    ),
    metric("max_abs", Ratio, Lower, "", "maximum absolute error"),
    metric("max_rel", Ratio, Lower, "", "maximum relative error"),
    metric("mean_rel_l1", Ratio, Lower, "", "mean|out-ref| / mean|ref|"),
    metric(
        "mismatches",
        Count,
        Lower,
        "",
        "elements outside atol + rtol*|ref|",
    ),
    metric(
        "top_k_agree",
        Count,
        Higher,
        "",
        "prompts whose top-k set check passed",
    ),
    metric("nan_count", Count, Lower, "", "NaN or infinite values"),
    metric("ttft_s", Time, Lower, "s", "time to first token"),
    metric("prefill_s", Time, Lower, "s", "prefill time"),
    metric("ms_per_token", Time, Lower, "ms", "decode time per token"),
    metric(
        "tok_s",
        TokenRate,
        Higher,
        "tok/s",
        "decode tokens per second",
    ),
    metric("kernel_ms", Time, Lower, "ms", "kernel or call time"),
    metric(
        "gflops",
        FlopRate,
        Higher,
        "GFLOP/s",
        "achieved compute rate",
    ),
    metric("gbps", ByteRate, Higher, "GB/s", "achieved bandwidth"),
    metric(
        "calls_per_layer",
        Count,
        Lower,
        "",
        "NPU calls per decoder layer",
    ),
    metric("compile_s", Time, Lower, "s", "compile time"),
];

pub fn metric_spec(name: &str) -> Option<&'static MetricSpec> {
    METRICS.iter().find(|m| m.name == name)
}

/// A unit the language accepts, with its dimension and the factor to the
/// dimension's canonical unit.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct UnitSpec {
    pub symbol: &'static str,
    pub dimension: Dimension,
    pub to_canonical: f64,
}

const fn unit(symbol: &'static str, dimension: Dimension, to_canonical: f64) -> UnitSpec {
    UnitSpec {
        symbol,
        dimension,
        to_canonical,
    }
}

/// Canonical units: s for time except where a metric says ms (callers convert with
/// [`convert`]), tok/s, GFLOP/s, GB/s.
pub const UNITS: &[UnitSpec] = &[
    unit("s", Time, 1.0),
    unit("ms", Time, 1e-3),
    unit("us", Time, 1e-6),
    unit("ns", Time, 1e-9),
    unit("min", Time, 60.0),
    unit("tok/s", TokenRate, 1.0),
    unit("GFLOP/s", FlopRate, 1.0),
    unit("TFLOP/s", FlopRate, 1e3),
    unit("MB/s", ByteRate, 1e-3),
    unit("GB/s", ByteRate, 1.0),
    unit("%", Ratio, 1e-2),
    unit("x", Ratio, 1.0),
];

pub fn unit_spec(symbol: &str) -> Option<&'static UnitSpec> {
    UNITS.iter().find(|u| u.symbol == symbol)
}

/// Converts `value` from unit `from` to unit `to`; `None` when the dimensions differ.
pub fn convert(value: f64, from: &str, to: &str) -> Option<f64> {
    let (f, t) = (unit_spec(from)?, unit_spec(to)?);
    (f.dimension == t.dimension).then(|| value * f.to_canonical / t.to_canonical)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn units_convert_within_a_dimension_only() {
        assert_eq!(convert(1500.0, "ms", "s"), Some(1.5));
        assert_eq!(convert(2.0, "TFLOP/s", "GFLOP/s"), Some(2000.0));
        assert_eq!(convert(1.0, "ms", "GB/s"), None);
    }

    #[test]
    fn metric_canonical_units_exist() {
        for m in METRICS {
            if !m.canonical_unit.is_empty() {
                let u = unit_spec(m.canonical_unit).expect("canonical unit is known");
                assert_eq!(u.dimension, m.dimension, "{}", m.name);
            }
        }
    }

    #[test]
    fn metric_names_are_unique() {
        let metrics: BTreeSet<_> = METRICS.iter().map(|m| m.name).collect();
        assert_eq!(metrics.len(), METRICS.len());
    }
}
