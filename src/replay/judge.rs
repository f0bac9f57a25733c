//! Decides whether a recorded measurement and its replayed counterpart agree.
//!
//! - Gate metrics of functional runs (mismatches, cosine, top-k agreement, …) agree
//!   when the recorded threshold gives the same verdict on the replayed value; their
//!   values differ by nature (seeded weights, not the checkpoint).
//! - Structural counts (`calls_per_layer`) must be equal.
//! - Times and rates agree when the replayed modeled figure lies within the row's
//!   band `e` of the recorded one, in ratio: `1/(1+e) ≤ replayed/recorded ≤ 1+e`
//!   (the band is the calibration point's own error when the recorded figure is
//!   one, else a stated ±15 %, [`super::kind`]). A threshold written beside them
//!   must also give the same verdict on the replayed value.
//! - A measurement the replay could not produce is never an agreement: it is
//!   `NotRun` (the functional scope left it out) or `Outside` (it depends on
//!   something the emulator does not model), with the reason.

use serde::Serialize;
use skillc_runtime::ops::{Dimension, Metric, Unit};

use crate::syntax::CmpOp;

/// What the replay concluded about one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Agree,
    Disagree,
    /// The observation depends on something the emulator does not model.
    Outside,
    /// Left out by the functional scope (`--functional`).
    NotRun,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Agree => "agree",
            Outcome::Disagree => "DISAGREE",
            Outcome::Outside => "outside",
            Outcome::NotRun => "not run",
        }
    }
}

/// A recorded measurement in the metric's canonical unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recorded {
    pub value: f64,
    pub threshold: Option<(CmpOp, f64)>,
}

/// What the replay produced for one measurement.
#[derive(Debug, Clone, PartialEq)]
pub enum Replayed {
    /// A value in the metric's canonical unit.
    Value(f64),
    /// The configuration was refused by the emulator's constraint checks.
    Refused(String),
    NotRun(String),
    Outside(String),
    /// The trajectory asked for something replay cannot compute here.
    Problem(String),
}

/// The verdict of one comparison and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub outcome: Outcome,
    pub reason: String,
}

impl Judgement {
    fn new(outcome: Outcome, reason: impl Into<String>) -> Self {
        Self {
            outcome,
            reason: reason.into(),
        }
    }
}

/// How a metric is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Pass/fail against the recorded threshold.
    Gate,
    /// Exact equality.
    Count,
    /// Within the row's band.
    Timing,
    /// Not produced by the emulator at all.
    Unmodeled,
}

pub fn kind_of(metric: Metric) -> Kind {
    match (metric, metric.spec().dimension) {
        (Metric::CompileS, _) => Kind::Unmodeled,
        (Metric::CallsPerLayer, _) => Kind::Count,
        (_, Dimension::Time | Dimension::TokenRate | Dimension::FlopRate | Dimension::ByteRate) => {
            Kind::Timing
        }
        _ => Kind::Gate,
    }
}

/// Judges one measurement; `band` is the row's relative band.
pub fn judge(metric: Metric, recorded: Recorded, replayed: &Replayed, band: f64) -> Judgement {
    let value = match replayed {
        Replayed::Value(v) => *v,
        Replayed::Refused(why) => return refused(metric, recorded, why),
        Replayed::NotRun(why) => return Judgement::new(Outcome::NotRun, why.clone()),
        Replayed::Outside(why) => return Judgement::new(Outcome::Outside, why.clone()),
        Replayed::Problem(why) => return Judgement::new(Outcome::Disagree, why.clone()),
    };
    match kind_of(metric) {
        Kind::Unmodeled => {
            Judgement::new(Outcome::Outside, format!("the cost model has no {metric}"))
        }
        Kind::Gate => gate(recorded, value),
        Kind::Count => count(recorded, value),
        Kind::Timing => timing(recorded, value, band),
    }
}

/// A refused configuration fails every gate; it has no value to compare.
fn refused(metric: Metric, recorded: Recorded, why: &str) -> Judgement {
    match (kind_of(metric), recorded.threshold) {
        (Kind::Gate, Some((op, limit))) if !op.holds(recorded.value, limit) => {
            Judgement::new(Outcome::Agree, format!("refused as recorded: {why}"))
        }
        _ => Judgement::new(Outcome::Disagree, format!("refused: {why}")),
    }
}

fn gate(recorded: Recorded, value: f64) -> Judgement {
    let Some((op, limit)) = recorded.threshold else {
        return Judgement::new(
            Outcome::Disagree,
            "a functional value without a threshold cannot be compared across weights",
        );
    };
    let (was, now) = match verdicts(op, limit, recorded.value, value) {
        Ok(agreed) => return agreed,
        Err(differ) => differ,
    };
    Judgement::new(
        Outcome::Disagree,
        format!(
            "recorded {} but replayed {} against {} {}",
            verdict(was),
            verdict(now),
            op.symbol(),
            number(limit)
        ),
    )
}

fn count(recorded: Recorded, value: f64) -> Judgement {
    if value != recorded.value {
        return Judgement::new(
            Outcome::Disagree,
            format!(
                "{} recorded, {} replayed",
                number(recorded.value),
                number(value)
            ),
        );
    }
    threshold_agrees(recorded, value).unwrap_or_else(|| Judgement::new(Outcome::Agree, "equal"))
}

fn timing(recorded: Recorded, value: f64, band: f64) -> Judgement {
    if !(value.is_finite() && value > 0.0 && recorded.value > 0.0) {
        return Judgement::new(Outcome::Disagree, "no positive modeled value");
    }
    let ratio = value / recorded.value;
    let within = ratio <= 1.0 + band && ratio >= 1.0 / (1.0 + band);
    let off = format!("{:+.1}% vs ±{:.1}%", (ratio - 1.0) * 100.0, band * 100.0);
    if !within {
        return Judgement::new(Outcome::Disagree, format!("outside its band: {off}"));
    }
    match threshold_agrees(recorded, value) {
        Some(j) if j.outcome == Outcome::Disagree => j,
        _ => Judgement::new(Outcome::Agree, off),
    }
}

/// `Some` when a threshold was written: agreement of its verdicts.
fn threshold_agrees(recorded: Recorded, value: f64) -> Option<Judgement> {
    let (op, limit) = recorded.threshold?;
    Some(
        verdicts(op, limit, recorded.value, value).unwrap_or_else(|(was, now)| {
            Judgement::new(
                Outcome::Disagree,
                format!(
                    "threshold {} {}: recorded {}, replayed {}",
                    op.symbol(),
                    number(limit),
                    verdict(was),
                    verdict(now)
                ),
            )
        }),
    )
}

/// The threshold's verdicts on the recorded and the replayed value: their
/// agreement when they are the same, else both (recorded first).
fn verdicts(op: CmpOp, limit: f64, recorded: f64, value: f64) -> Result<Judgement, (bool, bool)> {
    let (was, now) = (op.holds(recorded, limit), op.holds(value, limit));
    if was != now {
        return Err((was, now));
    }
    let agreed = format!("{} {} {}", verdict(now), op.symbol(), number(limit));
    Ok(Judgement::new(Outcome::Agree, agreed))
}

/// The verdict of a whole observation: the written one against the replayed one.
pub fn verdict_row(recorded_pass: bool, replayed: Result<bool, Replayed>) -> Judgement {
    match replayed {
        Ok(now) if now == recorded_pass => Judgement::new(Outcome::Agree, verdict(now)),
        Ok(now) => Judgement::new(
            Outcome::Disagree,
            format!(
                "recorded {}, replayed {}",
                verdict(recorded_pass),
                verdict(now)
            ),
        ),
        Err(Replayed::NotRun(why)) => Judgement::new(Outcome::NotRun, why),
        Err(Replayed::Outside(why)) => Judgement::new(Outcome::Outside, why),
        Err(Replayed::Refused(why)) if !recorded_pass => {
            Judgement::new(Outcome::Agree, format!("refused as recorded: {why}"))
        }
        Err(Replayed::Refused(why)) => Judgement::new(Outcome::Disagree, format!("refused: {why}")),
        Err(Replayed::Problem(why)) => Judgement::new(Outcome::Disagree, why),
        Err(Replayed::Value(_)) => Judgement::new(Outcome::Disagree, "no verdict replayed"),
    }
}

fn verdict(pass: bool) -> &'static str {
    if pass {
        "pass"
    } else {
        "fail"
    }
}

/// A number as a table shows it: up to four significant digits.
pub fn number(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let magnitude = v.abs().log10().floor() as i32;
    if !(-3..6).contains(&magnitude) {
        return format!("{v:.3e}");
    }
    let decimals = (3 - magnitude).clamp(0, 6) as usize;
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A value with its metric's canonical unit.
pub fn with_unit(metric: Metric, v: f64) -> String {
    match metric.canonical_unit() {
        None => number(v),
        Some(unit) => format!("{} {unit}", number(v)),
    }
}

/// Converts a recorded quantity to the metric's canonical unit; `None` when the
/// unit does not fit (the checker reports that as an error first).
pub fn canonical(metric: Metric, value: f64, unit: Option<Unit>) -> Option<f64> {
    metric.to_canonical(value, unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded `value`, judged against `threshold` when it has one.
    fn recorded(value: f64, threshold: Option<(CmpOp, f64)>) -> Recorded {
        Recorded { value, threshold }
    }

    /// The outcome of replaying `value` against `rec` within `band`.
    fn outcome(m: Metric, rec: Recorded, value: f64, band: f64) -> Outcome {
        judge(m, rec, &Replayed::Value(value), band).outcome
    }

    #[test]
    fn times_agree_inside_the_band_only() {
        let (rec, m) = (recorded(100.0, None), Metric::KernelMs);
        assert_eq!(outcome(m, rec, 109.0, 0.1), Outcome::Agree);
        assert_eq!(outcome(m, rec, 91.0, 0.1), Outcome::Agree);
        assert_eq!(outcome(m, rec, 89.0, 0.1), Outcome::Disagree);
        assert_eq!(outcome(m, rec, 300.0, 0.1), Outcome::Disagree);
    }

    #[test]
    fn a_time_inside_the_band_still_needs_its_threshold_verdict() {
        let rec = recorded(92.0, Some((CmpOp::Lt, 93.0)));
        let j = judge(Metric::MsPerToken, rec, &Replayed::Value(95.0), 0.1);
        assert_eq!(j.outcome, Outcome::Disagree, "{}", j.reason);
    }

    #[test]
    fn gates_compare_verdicts_not_values() {
        let (rec, m) = (recorded(0.0, Some((CmpOp::Eq, 0.0))), Metric::Mismatches);
        assert_eq!(outcome(m, rec, 0.0, 0.1), Outcome::Agree);
        assert_eq!(outcome(m, rec, 3.0, 0.1), Outcome::Disagree);
        let failed = recorded(917504.0, Some((CmpOp::Eq, 0.0)));
        assert_eq!(outcome(m, failed, 12.0, 0.1), Outcome::Agree);
    }

    #[test]
    fn a_refusal_agrees_only_with_a_recorded_failure() {
        let m = Metric::Mismatches;
        let failed = recorded(1.0, Some((CmpOp::Eq, 0.0)));
        let passed = recorded(0.0, Some((CmpOp::Eq, 0.0)));
        let r = Replayed::Refused("L1".into());
        assert_eq!(judge(m, failed, &r, 0.1).outcome, Outcome::Agree);
        assert_eq!(judge(m, passed, &r, 0.1).outcome, Outcome::Disagree);
        assert_eq!(verdict_row(false, Err(r.clone())).outcome, Outcome::Agree);
        assert_eq!(verdict_row(true, Err(r)).outcome, Outcome::Disagree);
    }

    #[test]
    fn counts_must_be_equal() {
        let (rec, m) = (recorded(15.0, None), Metric::CallsPerLayer);
        assert_eq!(outcome(m, rec, 15.0, 0.5), Outcome::Agree);
        assert_eq!(outcome(m, rec, 14.0, 0.5), Outcome::Disagree);
    }

    #[test]
    fn numbers_print_short() {
        assert_eq!(number(18.67), "18.67");
        assert_eq!(number(0.000123), "1.230e-4");
        assert_eq!(number(6215.0), "6215");
        assert_eq!(number(1.2345678), "1.235");
    }
}
