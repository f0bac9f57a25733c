//! skillc's plan against its anchor: the plan structure the same model was
//! published with (mlir-air, [`super::published`]). Both are timed by the
//! cost model with the same parameters in one run, so what the ratio shows is
//! the plans' difference as modeled, not the model's bias against the
//! published measurement. A ratio is a plan win only where it exceeds the
//! cost model's held-out error: the error the model makes on whole-model
//! figures it was not fitted on, the one that can hide or invent a plan
//! difference.

use serde::Serialize;

use super::calibration::{DataSet, PointSet, Prepared, Report, Subject};
use super::cost::{time_plan, Params};
use super::device::Device;
use super::plan::Phase;
use super::published::{published_plan, PublishedError};
use crate::model::arch::Architecture;

/// Which whole-model figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    /// Time to first token at the data set's prefill length.
    Ttft,
    /// One decode step at the data set's decode context.
    Decode,
}

/// What a ratio says about the plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanVerdict {
    /// skillc's plan is modeled faster by more than the band.
    Win,
    /// The difference is inside the band: no claim either way.
    WithinBand,
    /// skillc's plan is modeled slower by more than the band.
    Slower,
}

impl PlanVerdict {
    pub fn label(self) -> &'static str {
        match self {
            PlanVerdict::Win => "plan win",
            PlanVerdict::WithinBand => "within the band",
            PlanVerdict::Slower => "slower",
        }
    }
}

/// One figure of skillc's plan against the published plan, both modeled.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Versus {
    pub figure: Figure,
    /// Modeled seconds of skillc's plan.
    pub skillc_s: f64,
    /// Modeled seconds of the published plan structure.
    pub published_s: f64,
    /// published / skillc: above 1 when skillc's plan is modeled faster.
    pub speedup: f64,
    /// The relative error a modeled figure of this model may carry (see
    /// [`band`]).
    pub band: f64,
    pub verdict: PlanVerdict,
}

impl Versus {
    pub fn new(figure: Figure, skillc_s: f64, published_s: f64, band: f64) -> Self {
        let speedup = published_s / skillc_s;
        Versus {
            figure,
            skillc_s,
            published_s,
            speedup,
            band,
            verdict: verdict(speedup, band),
        }
    }
}

/// A win when the speed-up exceeds `1 + band`, slower when it falls below
/// `1 / (1 + band)` (the same margin the other way), otherwise no claim.
pub fn verdict(speedup: f64, band: f64) -> PlanVerdict {
    if !speedup.is_finite() {
        PlanVerdict::WithinBand
    } else if speedup > 1.0 + band {
        PlanVerdict::Win
    } else if speedup * (1.0 + band) < 1.0 {
        PlanVerdict::Slower
    } else {
        PlanVerdict::WithinBand
    }
}

/// The error band of `figure` for `model`: the held-out median error, or
/// this model's own error on that figure (the published measurement against
/// the modeled published plan) where it is larger.
pub fn band(prepared: &Prepared, report: &Report, model: &str, figure: Figure) -> f64 {
    let own = prepared
        .points
        .iter()
        .zip(&report.results)
        .filter(|(p, _)| match (&p.point.subject, figure) {
            (Subject::Ttft { model: m }, Figure::Ttft) => m == model,
            (Subject::Decode { model: m }, Figure::Decode) => m == model,
            _ => false,
        })
        .map(|(_, r)| r.error.abs())
        .fold(0.0, f64::max);
    own.max(report.held_out.median_error)
}

/// Modeled seconds of `model`'s published plan structure built for `arch`:
/// TTFT at the data set's prefill length, one decode step at its decode
/// context. `None` when no structure was published for the model.
pub fn published_times(
    data: &DataSet,
    model: &str,
    arch: &Architecture,
    device: &Device,
    params: &Params,
) -> Result<Option<(f64, f64)>, PublishedError> {
    let Some(published) = data.published_plans.get(model) else {
        return Ok(None);
    };
    let time = |phase, seq| -> Result<f64, PublishedError> {
        let plan = published_plan(model, arch, device, phase, seq, published)?;
        Ok(time_plan(&plan, device, params).total_s)
    };
    Ok(Some((
        time(Phase::Prefill, data.prefill_seq_len)?,
        time(Phase::Decode, data.decode_context)?,
    )))
}

/// Whether `model` has whole-model points held out of the fit.
pub fn held_out(prepared: &Prepared, model: &str) -> bool {
    prepared
        .points
        .iter()
        .any(|p| p.point.set == PointSet::HeldOut && p.model() == Some(model))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_win_is_claimed_only_past_the_band_and_a_loss_likewise() {
        let band = 0.10;
        assert_eq!(verdict(1.11, band), PlanVerdict::Win);
        assert_eq!(verdict(1.09, band), PlanVerdict::WithinBand);
        assert_eq!(verdict(1.0, band), PlanVerdict::WithinBand);
        assert_eq!(verdict(1.0 / 1.09, band), PlanVerdict::WithinBand);
        assert_eq!(verdict(1.0 / 1.11, band), PlanVerdict::Slower);
        assert_eq!(verdict(f64::NAN, band), PlanVerdict::WithinBand);
        let v = Versus::new(Figure::Decode, 0.080, 0.100, 0.24);
        assert!((v.speedup - 1.25).abs() < 1e-12);
        assert_eq!(v.verdict, PlanVerdict::Win);
        assert_eq!(
            Versus::new(Figure::Decode, 0.080, 0.100, 0.26).verdict,
            PlanVerdict::WithinBand
        );
    }

    /// The anchor of a model is the plan its held-out points are predicted with:
    /// the same modeled seconds `calibrate` prints, and the band is that point's
    /// own error where it exceeds the held-out median.
    #[test]
    fn the_published_plan_of_a_model_is_timed_with_its_own_structure() {
        let device = Device::npu2();
        let params = super::super::fit::committed_params();
        let data = DataSet::committed();
        let models = super::super::calibration::default_models_dir();
        let arch = super::super::calibration::load_model(&models, "qwen2.5-0.5b").unwrap();
        let (ttft, decode) = published_times(&data, "qwen2.5-0.5b", &arch, &device, &params)
            .unwrap()
            .expect("a published structure");
        let prepared = Prepared::load(&device, &super::super::calibration::data_dir(), &models)
            .expect("the committed data set");
        let report = prepared.report(&device, &params);
        let modeled = |id: &str| {
            report
                .results
                .iter()
                .find(|r| r.id == id)
                .map(|r| r.modeled_s)
                .unwrap()
        };
        assert_eq!(ttft, modeled("qwen2.5-0.5b-ttft"));
        assert_eq!(decode, modeled("qwen2.5-0.5b-decode"));
        assert!(held_out(&prepared, "qwen2.5-0.5b"));
        let b = band(&prepared, &report, "qwen2.5-0.5b", Figure::Decode);
        let own = report
            .results
            .iter()
            .find(|r| r.id == "qwen2.5-0.5b-decode")
            .unwrap()
            .error
            .abs();
        assert_eq!(b, own.max(report.held_out.median_error));
        assert!(
            published_times(&data, "gemma-3-1b", &arch, &device, &params)
                .unwrap()
                .is_none()
        );
    }
}
