//! Observation metrics, what they measure, and the units the language accepts.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

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
    /// The unit values are normalised to; `None` for a ratio or a count.
    #[serde(with = "optional_unit")]
    pub canonical_unit: Option<Unit>,
    pub doc: &'static str,
}

const fn metric(
    name: &'static str,
    dimension: Dimension,
    better: Better,
    canonical_unit: Option<Unit>,
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
        None,
        "whole-tensor cosine similarity",
    ),
    metric(
        "position_cosine_min",
        Ratio,
        Higher,
        None,
        "minimum per-position cosine",
    ),
    metric("max_abs", Ratio, Lower, None, "maximum absolute error"),
    metric("max_rel", Ratio, Lower, None, "maximum relative error"),
    metric(
        "mean_rel_l1",
        Ratio,
        Lower,
        None,
        "mean|out-ref| / mean|ref|",
    ),
    metric(
        "mismatches",
        Count,
        Lower,
        None,
        "elements outside atol + rtol*|ref|",
    ),
    metric(
        "top_k_agree",
        Count,
        Higher,
        None,
        "prompts whose top-k set check passed",
    ),
    metric("nan_count", Count, Lower, None, "NaN or infinite values"),
    metric("ttft_s", Time, Lower, Some(Unit::S), "time to first token"),
    metric("prefill_s", Time, Lower, Some(Unit::S), "prefill time"),
    metric(
        "ms_per_token",
        Time,
        Lower,
        Some(Unit::Ms),
        "decode time per token",
    ),
    metric(
        "tok_s",
        TokenRate,
        Higher,
        Some(Unit::TokPerS),
        "decode tokens per second",
    ),
    metric(
        "kernel_ms",
        Time,
        Lower,
        Some(Unit::Ms),
        "kernel or call time",
    ),
    metric(
        "gflops",
        FlopRate,
        Higher,
        Some(Unit::GflopPerS),
        "achieved compute rate",
    ),
    metric(
        "gbps",
        ByteRate,
        Higher,
        Some(Unit::GbPerS),
        "achieved bandwidth",
    ),
    metric(
        "calls_per_layer",
        Count,
        Lower,
        None,
        "NPU calls per decoder layer",
    ),
    metric("compile_s", Time, Lower, Some(Unit::S), "compile time"),
    metric(
        "blockers",
        Count,
        Lower,
        None,
        "model features outside the kernels' scope",
    ),
    metric(
        "errors",
        Count,
        Lower,
        None,
        "artifacts missing, or not reloading as written",
    ),
    metric(
        "unvalidated_kernels",
        Count,
        Lower,
        None,
        "kernel configurations without a passing validation",
    ),
    metric(
        "unverified",
        Count,
        Lower,
        None,
        "production plans whose numerics were never verified",
    ),
    metric("exit_code", Count, Lower, None, "a process's exit status"),
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

/// Converts `value` from the unit written `from` to the one written `to`; `None`
/// when either is no unit or the dimensions differ.
pub fn convert(value: f64, from: &str, to: &str) -> Option<f64> {
    Unit::named(from)?.convert(value, Unit::named(to)?)
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
        self.spec().canonical_unit
    }

    /// `value`, written in `unit` (none: already canonical), in the metric's
    /// canonical unit; `None` when the unit does not fit the metric. A unit on a
    /// unitless metric (`%`, `x`) scales to its plain number.
    pub fn to_canonical(self, value: f64, unit: Option<Unit>) -> Option<f64> {
        match (unit, self.canonical_unit()) {
            (None, _) => Some(value),
            (Some(unit), None) => Some(value * unit.spec().to_canonical),
            (Some(unit), Some(canonical)) => unit.convert(value, canonical),
        }
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

/// A name that is no metric of the language (or of the runtime's gates).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a metric of the runtime")]
pub struct UnknownMetric(pub String);

impl std::str::FromStr for Metric {
    type Err = UnknownMetric;

    fn from_str(name: &str) -> Result<Metric, UnknownMetric> {
        Metric::named(name).ok_or_else(|| UnknownMetric(name.to_string()))
    }
}

/// Written as its name in every file (`bundle.json`, `report.json`).
impl Serialize for Metric {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Metric {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Metric, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
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

    /// `value` in this unit, in unit `to`; `None` when the dimensions differ.
    pub fn convert(self, value: f64, to: Unit) -> Option<f64> {
        let (f, t) = (self.spec(), to.spec());
        (f.dimension == t.dimension).then(|| value * f.to_canonical / t.to_canonical)
    }
}

/// How the language writes a unit that may be absent: nothing for none.
pub fn unit_symbol(unit: Option<Unit>) -> &'static str {
    unit.map_or("", Unit::symbol)
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.symbol())
    }
}

/// Written as its symbol in every file.
impl Serialize for Unit {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.symbol())
    }
}

impl<'de> Deserialize<'de> for Unit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Unit, D::Error> {
        let symbol = String::deserialize(deserializer)?;
        Unit::named(&symbol).ok_or_else(|| {
            serde::de::Error::custom(format!("`{symbol}` is not a unit of the runtime"))
        })
    }
}

/// A unit that may be absent, as the files write it: its symbol, or `""` for
/// none (`#[serde(with = "crate::metrics::optional_unit")]`).
pub mod optional_unit {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Unit;

    pub fn serialize<S: Serializer>(unit: &Option<Unit>, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(super::unit_symbol(*unit))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Unit>, D::Error> {
        let symbol = String::deserialize(deserializer)?;
        if symbol.is_empty() {
            return Ok(None);
        }
        Unit::named(&symbol).map(Some).ok_or_else(|| {
            serde::de::Error::custom(format!("`{symbol}` is not a unit of the runtime"))
        })
    }
}

/// What a gate of a run (or the stop record of a run) measures: a metric of the
/// language, or one the runtime measures that no trajectory records (a run's
/// trajectory keeps those as text). Written as its name in `report.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GateMetric {
    Language(Metric),
    Runtime(RuntimeMetric),
}

/// The runtime's own measures, outside the language's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuntimeMetric {
    /// Constraints a kernel configuration breaks.
    Violations,
    /// Teacher-forced logits error, `max|npu - ref| / max|ref|`, worst step.
    LogitsMaxRel,
    /// The same of the KV cache after prefill, worst layer.
    KvPrefillMaxRel,
    /// The same of the KV cache after the last decode step, worst layer.
    KvDecodeMaxRel,
    /// The last phase a run was asked to reach (`--stop-after`).
    Phase,
    /// Fix rounds a phase used up.
    Rounds,
}

impl RuntimeMetric {
    pub const ALL: [RuntimeMetric; 6] = [
        RuntimeMetric::Violations,
        RuntimeMetric::LogitsMaxRel,
        RuntimeMetric::KvPrefillMaxRel,
        RuntimeMetric::KvDecodeMaxRel,
        RuntimeMetric::Phase,
        RuntimeMetric::Rounds,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RuntimeMetric::Violations => "violations",
            RuntimeMetric::LogitsMaxRel => "logits_max_rel",
            RuntimeMetric::KvPrefillMaxRel => "kv_prefill_max_rel",
            RuntimeMetric::KvDecodeMaxRel => "kv_decode_max_rel",
            RuntimeMetric::Phase => "phase",
            RuntimeMetric::Rounds => "rounds",
        }
    }
}

impl GateMetric {
    /// Every gate metric: the language's, then the runtime's own.
    pub fn all() -> impl Iterator<Item = GateMetric> {
        Metric::ALL
            .into_iter()
            .map(GateMetric::Language)
            .chain(RuntimeMetric::ALL.into_iter().map(GateMetric::Runtime))
    }

    pub fn name(self) -> &'static str {
        match self {
            GateMetric::Language(m) => m.name(),
            GateMetric::Runtime(m) => m.name(),
        }
    }

    /// The gate metric called `name`.
    pub fn named(name: &str) -> Option<GateMetric> {
        GateMetric::all().find(|m| m.name() == name)
    }

    /// The language's metric, when it is one (what a trajectory can record).
    pub fn language(self) -> Option<Metric> {
        match self {
            GateMetric::Language(m) => Some(m),
            GateMetric::Runtime(_) => None,
        }
    }

    /// The unit of its values; `None` for ratios, counts and the runtime's own.
    pub fn canonical_unit(self) -> Option<Unit> {
        self.language().and_then(Metric::canonical_unit)
    }
}

impl From<Metric> for GateMetric {
    fn from(metric: Metric) -> GateMetric {
        GateMetric::Language(metric)
    }
}

impl From<RuntimeMetric> for GateMetric {
    fn from(metric: RuntimeMetric) -> GateMetric {
        GateMetric::Runtime(metric)
    }
}

impl PartialEq<Metric> for GateMetric {
    fn eq(&self, other: &Metric) -> bool {
        *self == GateMetric::Language(*other)
    }
}

impl fmt::Display for GateMetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for GateMetric {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for GateMetric {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<GateMetric, D::Error> {
        let name = String::deserialize(deserializer)?;
        GateMetric::named(&name).ok_or_else(|| serde::de::Error::custom(UnknownMetric(name)))
    }
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
    fn metric_canonical_units_fit_their_dimension() {
        for m in METRICS {
            if let Some(u) = m.canonical_unit {
                assert_eq!(u.spec().dimension, m.dimension, "{}", m.name);
            }
        }
    }

    #[test]
    fn metrics_and_units_are_their_names_in_json_and_nothing_else_reads() {
        for m in Metric::ALL {
            let json = format!("\"{}\"", m.name());
            assert_eq!(serde_json::to_string(&m).unwrap(), json);
            assert_eq!(serde_json::from_str::<Metric>(&json).unwrap(), m);
        }
        for m in GateMetric::all() {
            let json = format!("\"{}\"", m.name());
            assert_eq!(serde_json::to_string(&m).unwrap(), json);
            assert_eq!(serde_json::from_str::<GateMetric>(&json).unwrap(), m);
        }
        for u in Unit::ALL {
            let json = format!("\"{}\"", u.symbol());
            assert_eq!(serde_json::to_string(&u).unwrap(), json);
            assert_eq!(serde_json::from_str::<Unit>(&json).unwrap(), u);
        }
        let err = serde_json::from_str::<Metric>("\"tok_per_s\"").unwrap_err();
        assert!(
            err.to_string().contains("`tok_per_s` is not a metric"),
            "{err}"
        );
        assert!(serde_json::from_str::<Unit>("\"furlong\"").is_err());
        let names: BTreeSet<&str> = GateMetric::all().map(GateMetric::name).collect();
        assert_eq!(names.len(), Metric::ALL.len() + RuntimeMetric::ALL.len());
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
