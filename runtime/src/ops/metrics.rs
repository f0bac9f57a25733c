//! Observation metrics, what they measure, and the units the language accepts.

use std::fmt;

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
    metric(
        "blockers",
        Count,
        Lower,
        "",
        "model features outside the kernels' scope",
    ),
    metric(
        "errors",
        Count,
        Lower,
        "",
        "artifacts missing, or not reloading as written",
    ),
    metric(
        "unvalidated_kernels",
        Count,
        Lower,
        "",
        "kernel configurations without a passing validation",
    ),
    metric(
        "unverified",
        Count,
        Lower,
        "",
        "production plans whose numerics were never verified",
    ),
    metric("exit_code", Count, Lower, "", "a process's exit status"),
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

/// A metric of the language, named by its row of [`METRICS`]: what the skill IR
/// holds instead of the name, which is read once at the edge ([`Metric::named`]) and
/// printed back ([`Metric::name`]). Ordered by name, as the names were, so that
/// anything sorted by metric keeps its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    Cosine,
    PositionCosineMin,
    MaxAbs,
    MaxRel,
    MeanRelL1,
    Mismatches,
    TopKAgree,
    NanCount,
    TtftS,
    PrefillS,
    MsPerToken,
    TokS,
    KernelMs,
    Gflops,
    Gbps,
    CallsPerLayer,
    CompileS,
    Blockers,
    Errors,
    UnvalidatedKernels,
    Unverified,
    ExitCode,
}

impl Metric {
    /// Every metric, in table order.
    pub const ALL: [Metric; 22] = [
        Metric::Cosine,
        Metric::PositionCosineMin,
        Metric::MaxAbs,
        Metric::MaxRel,
        Metric::MeanRelL1,
        Metric::Mismatches,
        Metric::TopKAgree,
        Metric::NanCount,
        Metric::TtftS,
        Metric::PrefillS,
        Metric::MsPerToken,
        Metric::TokS,
        Metric::KernelMs,
        Metric::Gflops,
        Metric::Gbps,
        Metric::CallsPerLayer,
        Metric::CompileS,
        Metric::Blockers,
        Metric::Errors,
        Metric::UnvalidatedKernels,
        Metric::Unverified,
        Metric::ExitCode,
    ];

    /// The metric's row of [`METRICS`].
    pub fn spec(self) -> &'static MetricSpec {
        &METRICS[self as usize]
    }

    /// The language's name, e.g. `ttft_s`.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The metric called `name`, if the language has one.
    pub fn named(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The unit its values are normalised to; `None` for a ratio or a count.
    pub fn canonical_unit(self) -> Option<Unit> {
        Unit::named(self.spec().canonical_unit)
    }
}

impl PartialOrd for Metric {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Metric {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A unit the language accepts, named by its row of [`UNITS`]; read once at the
/// edge ([`Unit::named`]) and printed back ([`Unit::symbol`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    S,
    Ms,
    Us,
    Ns,
    Min,
    TokPerS,
    GflopPerS,
    TflopPerS,
    MbPerS,
    GbPerS,
    Percent,
    Times,
}

impl Unit {
    /// Every unit, in table order.
    pub const ALL: [Unit; 12] = [
        Unit::S,
        Unit::Ms,
        Unit::Us,
        Unit::Ns,
        Unit::Min,
        Unit::TokPerS,
        Unit::GflopPerS,
        Unit::TflopPerS,
        Unit::MbPerS,
        Unit::GbPerS,
        Unit::Percent,
        Unit::Times,
    ];

    /// The unit's row of [`UNITS`].
    pub fn spec(self) -> &'static UnitSpec {
        &UNITS[self as usize]
    }

    /// How the language writes it, e.g. `ms`.
    pub fn symbol(self) -> &'static str {
        self.spec().symbol
    }

    /// The unit written `symbol`, if the language has one.
    pub fn named(symbol: &str) -> Option<Unit> {
        Unit::ALL.into_iter().find(|u| u.symbol() == symbol)
    }
}

/// How the language writes a unit that may be absent: nothing for none.
pub fn unit_symbol(unit: Option<Unit>) -> &'static str {
    unit.map_or("", Unit::symbol)
}

impl Metric {
    /// The values a measurement of the metric can take, in its canonical unit:
    /// a threshold outside them (a cosine of −1e308) makes a gate that cannot
    /// fail, or cannot pass.
    pub fn range(self) -> (f64, f64) {
        match self {
            Metric::Cosine | Metric::PositionCosineMin => (-1.0, 1.0),
            Metric::ExitCode => (0.0, 255.0),
            Metric::MaxAbs
            | Metric::MaxRel
            | Metric::MeanRelL1
            | Metric::Mismatches
            | Metric::TopKAgree
            | Metric::NanCount
            | Metric::TtftS
            | Metric::PrefillS
            | Metric::MsPerToken
            | Metric::TokS
            | Metric::KernelMs
            | Metric::Gflops
            | Metric::Gbps
            | Metric::CallsPerLayer
            | Metric::CompileS
            | Metric::Blockers
            | Metric::Errors
            | Metric::UnvalidatedKernels
            | Metric::Unverified => (0.0, f64::MAX),
        }
    }
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
    fn the_typed_metrics_and_units_are_the_tables_rows_in_order() {
        assert_eq!(Metric::ALL.len(), METRICS.len());
        for (i, m) in Metric::ALL.into_iter().enumerate() {
            assert_eq!(m.spec().name, METRICS[i].name);
            assert_eq!(Metric::named(m.name()), Some(m));
        }
        assert_eq!(Unit::ALL.len(), UNITS.len());
        for (i, u) in Unit::ALL.into_iter().enumerate() {
            assert_eq!(u.spec().symbol, UNITS[i].symbol);
            assert_eq!(Unit::named(u.symbol()), Some(u));
        }
        assert_eq!(Metric::named("no_such_metric"), None);
        assert_eq!(Metric::TtftS.canonical_unit(), Some(Unit::S));
        assert_eq!(Metric::Cosine.canonical_unit(), None);
        assert!(Metric::TtftS > Metric::Gbps, "ordered by name");
    }

    #[test]
    fn metric_names_are_unique() {
        let metrics: BTreeSet<_> = METRICS.iter().map(|m| m.name).collect();
        assert_eq!(metrics.len(), METRICS.len());
    }
}
