//! Observations: each measurement's metric known, its unit of the metric's
//! dimension, its threshold comparable, and the recorded verdict consistent with
//! the thresholds.

use skillc_runtime::ops::{self, Dimension, Metric, Unit};

use super::{number_text, Checker};
use crate::diag::{Code, Diagnostic};
use crate::syntax::{ClauseKind, Entry, Measurement, Name, Quantity};

impl Checker {
    /// Checks the measurements and returns whether all thresholds hold (`None` without
    /// thresholds or when a unit problem makes it undecidable).
    pub(super) fn observation(
        &mut self,
        measurements: &[Measurement],
        verdict: Option<crate::syntax::Verdict>,
        entry: &Entry,
    ) -> Option<bool> {
        if measurements.is_empty() && verdict.is_none() {
            self.push(
                Diagnostic::new(
                    Code::EmptyObservation,
                    entry.id.span,
                    format!("observation `{}` records nothing", entry.id.text),
                )
                .with_hint("add a measurement `metric = value` or a verdict `-> pass`/`-> fail`"),
            );
        }
        let mut all_met = true;
        let mut any_threshold = false;
        let mut undecidable = false;
        for (i, measurement) in measurements.iter().enumerate() {
            if let Some(first) = super::earlier(measurements, i, |m| &m.metric) {
                let metric = &measurement.metric;
                let message = format!("metric `{}` measured twice", metric.text);
                self.push(
                    Diagnostic::new(Code::DuplicateParameter, metric.span, message)
                        .with_related(first.span, "first measured here")
                        .with_hint("record a second measurement in its own observation"),
                );
            }
            let Some(metric) = self.metric(&measurement.metric) else {
                undecidable |= measurement.threshold.is_some();
                continue;
            };
            let value_unit = self.unit_fits(metric, &measurement.value, true);
            if let Some(threshold) = &measurement.threshold {
                any_threshold = true;
                let threshold_unit = self.unit_fits(metric, &threshold.value, false);
                if let (Some(value), Some(limit)) = (
                    canonical(&measurement.value, value_unit, metric),
                    canonical(&threshold.value, threshold_unit.or(value_unit), metric),
                ) {
                    all_met &= threshold.op.holds(value, limit);
                } else {
                    undecidable = true;
                }
            }
        }
        if !any_threshold || undecidable {
            return None;
        }
        {
            if let Some(verdict) = verdict {
                let implied = if all_met {
                    crate::syntax::Verdict::Pass
                } else {
                    crate::syntax::Verdict::Fail
                };
                if verdict != implied {
                    let span = entry
                        .clauses
                        .iter()
                        .find(|c| matches!(c.kind, ClauseKind::Verdict(_)))
                        .map_or(entry.id.span, |c| c.span);
                    self.push(
                        Diagnostic::new(
                            Code::VerdictContradictsThreshold,
                            span,
                            format!(
                                "verdict says {} but the thresholds {}",
                                verdict_word(verdict),
                                if all_met {
                                    "all hold"
                                } else {
                                    "do not all hold"
                                }
                            ),
                        )
                        .with_hint(describe_thresholds(measurements)),
                    );
                }
            }
        }
        Some(all_met)
    }

    pub(super) fn metric(&mut self, name: &Name) -> Option<Metric> {
        let metric = Metric::named(&name.text);
        if metric.is_none() {
            let names: Vec<&str> = ops::METRICS.iter().map(|m| m.name).collect();
            let is_condition = ops::OPERATIONS
                .iter()
                .any(|op| op.resolve_param(&name.text).is_some())
                || matches!(name.text.as_str(), "shape" | "model" | "prompt" | "layer");
            let hint = if is_condition {
                format!(
                    "`{}` looks like a condition: conditions go after `when`",
                    name.text
                )
            } else if let Some(close) =
                crate::graph::suggest::closest(&name.text, names.iter().copied())
            {
                format!("did you mean `{close}`?")
            } else {
                format!("metrics: {}", names.join(", "))
            };
            self.push(
                Diagnostic::new(
                    Code::UnknownMetric,
                    name.span,
                    format!("unknown metric `{}`", name.text),
                )
                .with_hint(hint),
            );
        }
        metric
    }

    /// Checks a quantity's unit against a metric and returns the unit it is in (the
    /// written one, or the canonical one when none was written). `warn_missing`
    /// reports a missing unit on a dimensioned metric.
    pub(super) fn unit_fits(
        &mut self,
        metric: Metric,
        quantity: &Quantity,
        warn_missing: bool,
    ) -> Option<Unit> {
        let spec = metric.spec();
        match &quantity.unit {
            Some(unit) => {
                let Some(written) = Unit::named(&unit.text) else {
                    let symbols: Vec<&str> = ops::UNITS.iter().map(|u| u.symbol).collect();
                    self.push(
                        Diagnostic::new(
                            Code::UnknownUnit,
                            unit.span,
                            format!("unknown unit `{}`", unit.text),
                        )
                        .with_hint(format!("units: {}", symbols.join(", "))),
                    );
                    return None;
                };
                if written.spec().dimension != spec.dimension {
                    let fitting: Vec<&str> = ops::UNITS
                        .iter()
                        .filter(|u| u.dimension == spec.dimension)
                        .map(|u| u.symbol)
                        .collect();
                    let hint = if fitting.is_empty() {
                        format!("`{metric}` is a plain number; drop the unit")
                    } else {
                        format!("`{metric}` takes {}", fitting.join(", "))
                    };
                    self.push(
                        Diagnostic::new(
                            Code::UnitMismatch,
                            unit.span,
                            format!(
                                "`{}` is a {} unit but `{}` is a {}",
                                unit.text,
                                dimension_word(written.spec().dimension),
                                metric,
                                dimension_word(spec.dimension)
                            ),
                        )
                        .with_hint(hint),
                    );
                    return None;
                }
                Some(written)
            }
            None => {
                let canonical = metric.canonical_unit()?;
                if warn_missing {
                    self.push(
                        Diagnostic::new(
                            Code::MissingUnit,
                            quantity.span,
                            format!(
                                "`{}` written without a unit; reading it in {}",
                                metric, canonical
                            ),
                        )
                        .with_hint(format!(
                            "write the unit: `{} = {} {}`",
                            metric,
                            number_text(quantity.number),
                            canonical
                        )),
                    );
                }
                Some(canonical)
            }
        }
    }
}

/// The value in the metric's canonical unit (units already checked).
fn canonical(quantity: &Quantity, unit: Option<Unit>, metric: Metric) -> Option<f64> {
    match unit {
        None if quantity.unit.is_some() => None,
        unit => metric.to_canonical(quantity.number.as_f64(), unit),
    }
}

fn describe_thresholds(measurements: &[Measurement]) -> String {
    let parts: Vec<String> = measurements
        .iter()
        .filter_map(|m| {
            let threshold = m.threshold.as_ref()?;
            let unit = |q: &Quantity| {
                q.unit
                    .as_ref()
                    .map_or(String::new(), |u| format!(" {}", u.text))
            };
            Some(format!(
                "{} = {}{} {} {}{}",
                m.metric.text,
                number_text(m.value.number),
                unit(&m.value),
                threshold.op.symbol(),
                number_text(threshold.value.number),
                unit(&threshold.value)
            ))
        })
        .collect();
    format!("checked: {}", parts.join("; "))
}

fn dimension_word(dimension: Dimension) -> &'static str {
    match dimension {
        Dimension::Ratio => "ratio",
        Dimension::Count => "count",
        Dimension::Time => "time",
        Dimension::TokenRate => "token-rate",
        Dimension::FlopRate => "flop-rate",
        Dimension::ByteRate => "byte-rate",
    }
}

fn verdict_word(verdict: crate::syntax::Verdict) -> &'static str {
    match verdict {
        crate::syntax::Verdict::Pass => "pass",
        crate::syntax::Verdict::Fail => "fail",
    }
}
