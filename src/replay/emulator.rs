//! The fixed side of a replay: the model's architecture, the npu2 device, the
//! committed cost-model parameters with their calibration points and errors, and a cache of
//! the plans and timings built so far (the same plan is timed by many entries).

use std::collections::BTreeMap;
use std::path::Path;

use skillc_runtime::model::arch::Architecture;
use skillc_runtime::model::config::{load_config, ConfigError};
use skillc_runtime::xdna2::builder::{plan_for, PlanError};
use skillc_runtime::xdna2::calibration::{self, CalibrationError, Prepared};
use skillc_runtime::xdna2::constraints::ConstraintViolation;
use skillc_runtime::xdna2::cost::{self, Params, Timing};
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::fit;
use skillc_runtime::xdna2::plan::{Phase, Plan, PlanOptions};

use super::kind::{CalibrationPoints, STATED_BAND};

/// The calibration figures a replay is judged against: the stated band of
/// timing rows that are no calibration point, and the fit and held-out errors
/// of the committed parameters for the report.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Band {
    /// Band of a timing row that is no calibration point, as a fraction.
    pub stated: f64,
    pub fit_points: usize,
    pub fit_median: f64,
    pub fit_worst: f64,
    pub fit_worst_point: String,
    pub held_out_points: usize,
    pub held_out_median: f64,
    /// Median signed held-out error: the model's bias out of sample.
    pub held_out_signed: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error("model config: {0}")]
    Config(#[from] ConfigError),
    #[error("calibration data: {0}")]
    Calibration(#[from] CalibrationError),
}

/// A built plan, its constraint violations and its modeled timing.
#[derive(Debug, Clone)]
pub struct Built {
    pub plan: Plan,
    pub violations: Vec<ConstraintViolation>,
    pub timing: Timing,
}

pub struct Emulator {
    pub arch: Architecture,
    /// The model directory's name, used as the plans' model name.
    pub model: String,
    pub device: Device,
    pub params: Params,
    pub band: Band,
    /// The calibration points, for the rows whose recorded figure is one.
    pub points: CalibrationPoints,
    /// Context length of decode figures with no `context=` condition.
    pub decode_context: usize,
    plans: BTreeMap<String, Result<Built, PlanError>>,
}

impl Emulator {
    /// Reads `model_dir/config.json` and evaluates the committed cost model
    /// against its calibration points (each row's band comes from them).
    pub fn new(model_dir: &Path) -> Result<Self, EmulatorError> {
        let arch = load_config(&model_dir.join("config.json"))?;
        let device = Device::npu2();
        let params = fit::committed_params();
        let prepared = Prepared::load(
            &device,
            &calibration::data_dir(),
            &calibration::default_models_dir(),
        )?;
        let report = prepared.report(&device, &params);
        let band = Band {
            stated: STATED_BAND,
            fit_points: report.fit.points,
            fit_median: report.fit.median_error,
            fit_worst: report.fit.worst_error,
            fit_worst_point: report.fit.worst_id.clone(),
            held_out_points: report.held_out.points,
            held_out_median: report.held_out.median_error,
            held_out_signed: report.held_out.median_signed_error,
        };
        let points = CalibrationPoints::new(&prepared, &report);
        let model = model_dir
            .file_name()
            .map_or_else(|| "model".to_string(), |n| n.to_string_lossy().into_owned());
        Ok(Emulator {
            arch,
            model,
            device,
            params,
            band,
            points,
            decode_context: prepared.data.decode_context,
            plans: BTreeMap::new(),
        })
    }

    /// The plan of `phase` at `seq_len` under `options`, checked and timed.
    pub fn plan(
        &mut self,
        phase: Phase,
        seq_len: usize,
        options: &PlanOptions,
    ) -> Result<&Built, PlanError> {
        let key = format!(
            "{phase:?}/{seq_len}/{}",
            serde_json::to_string(options).unwrap_or_default()
        );
        if !self.plans.contains_key(&key) {
            let built = plan_for(
                &self.model,
                &self.arch,
                &self.device,
                phase,
                seq_len,
                options,
            )
            .map(|plan| {
                let violations = plan.check(&self.device).err().unwrap_or_default();
                let timing = cost::time_plan(&plan, &self.device, &self.params);
                Built {
                    plan,
                    violations,
                    timing,
                }
            });
            self.plans.insert(key.clone(), built);
        }
        match &self.plans[&key] {
            Ok(built) => Ok(built),
            Err(e) => Err(e.clone()),
        }
    }
}
