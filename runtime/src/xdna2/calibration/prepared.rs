//! The data set resolved once against the device, the committed plan files and the
//! model configs (each point's probe and its measured seconds, a hash of every file
//! read), then evaluated under any cost parameters and compared point by point.

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::metrics::Unit;
use crate::xdna2::cost::{host_attention_time, time_plan, time_standalone, Params, Timing};
use crate::xdna2::device::Device;
use crate::xdna2::plan::{Launch, Phase, Plan};
use crate::xdna2::published::published_plan;

use super::summary::{PointResult, Report, Summary};
use super::{
    load_model, read, CalibrationError, DataSet, Direction, Point, PointSet, Scope, Subject,
    PUBLISHED_SUFFIX,
};

/// How a prepared point is evaluated.
#[derive(Debug, Clone)]
enum Probe {
    Launch(Box<Launch>),
    Call {
        plan: usize,
        call: String,
    },
    Group {
        plan: usize,
        group: String,
    },
    Plan {
        plan: usize,
        scope: Scope,
    },
    Traffic {
        plan: usize,
        call: Option<String>,
        direction: Direction,
    },
    HostAttention {
        heads: usize,
        head_dim: usize,
        context: usize,
    },
}

#[derive(Debug, Clone)]
pub struct PreparedPoint {
    pub point: Point,
    pub measured_s: f64,
    probe: Probe,
}

impl PreparedPoint {
    /// The standalone launch a kernel point times.
    pub fn launch(&self) -> Option<&Launch> {
        match &self.probe {
            Probe::Launch(launch) => Some(launch),
            _ => None,
        }
    }

    /// The model a whole-model point predicts.
    pub fn model(&self) -> Option<&str> {
        match &self.point.subject {
            Subject::Ttft { model } | Subject::Decode { model } => Some(model),
            _ => None,
        }
    }
}

/// The data set resolved against the device, the plan files and the model
/// configs, ready to be evaluated many times.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub data: DataSet,
    pub points: Vec<PreparedPoint>,
    pub plans: Vec<(String, Plan)>,
    /// sha256 over every file the data set reads.
    pub dataset_sha256: String,
}

impl Prepared {
    pub fn load(
        device: &Device,
        data_dir: &Path,
        models_dir: &Path,
    ) -> Result<Prepared, CalibrationError> {
        let (data, text) = DataSet::load(data_dir)?;
        // Hash inputs by their repository-relative names, never absolute paths.
        let mut hashed: BTreeMap<String, String> = BTreeMap::new();
        hashed.insert("calibration.json".into(), text);
        hashed.insert("npu2.json".into(), read(&data_dir.join("npu2.json"))?);
        let mut plans: Vec<(String, Plan)> = Vec::new();
        let mut points = Vec::new();
        for point in &data.points {
            let probe = Self::probe(
                point,
                device,
                data_dir,
                models_dir,
                &data,
                &mut plans,
                &mut hashed,
            )?;
            let measured_s = measured_seconds(point, &probe)?;
            points.push(PreparedPoint {
                point: point.clone(),
                measured_s,
                probe,
            });
        }
        let mut hasher = Sha256::new();
        for (name, content) in &hashed {
            hasher.update(name.as_bytes());
            hasher.update([0]);
            hasher.update(content.as_bytes());
        }
        let dataset_sha256 = format!("{:x}", hasher.finalize());
        Ok(Prepared {
            data,
            points,
            plans,
            dataset_sha256,
        })
    }

    fn probe(
        point: &Point,
        device: &Device,
        data_dir: &Path,
        models_dir: &Path,
        data: &DataSet,
        plans: &mut Vec<(String, Plan)>,
        hashed: &mut BTreeMap<String, String>,
    ) -> Result<Probe, CalibrationError> {
        let mut plan_file = |name: &str| -> Result<usize, CalibrationError> {
            if let Some(i) = plans.iter().position(|(n, _)| n == name) {
                return Ok(i);
            }
            let text = read(&data_dir.join(name))?;
            let plan = Plan::from_json(name, &text)?;
            hashed.insert(name.to_string(), text);
            plans.push((name.to_string(), plan));
            Ok(plans.len() - 1)
        };
        Ok(match &point.subject {
            Subject::Kernel(k) => Probe::Launch(Box::new(k.launch(&point.id, device)?)),
            Subject::Call { plan, call } => Probe::Call {
                plan: plan_file(plan)?,
                call: call.clone(),
            },
            Subject::Group { plan, group } => Probe::Group {
                plan: plan_file(plan)?,
                group: group.clone(),
            },
            Subject::Plan { plan, scope } => Probe::Plan {
                plan: plan_file(plan)?,
                scope: *scope,
            },
            Subject::Traffic {
                plan,
                call,
                direction,
            } => Probe::Traffic {
                plan: plan_file(plan)?,
                call: call.clone(),
                direction: *direction,
            },
            Subject::Ttft { model } | Subject::Decode { model } => {
                let key = format!("models/{model}/config.json");
                hashed.insert(key, read(&models_dir.join(model).join("config.json"))?);
                let arch = load_model(models_dir, model)?;
                let (phase, seq) = match point.subject {
                    Subject::Ttft { .. } => (Phase::Prefill, data.prefill_seq_len),
                    _ => (Phase::Decode, data.decode_context),
                };
                let published =
                    data.published_plans
                        .get(model)
                        .ok_or_else(|| CalibrationError::Point {
                            id: point.id.clone(),
                            message: format!("no published plan structure for {model}"),
                        })?;
                let plan = published_plan(model, &arch, device, phase, seq, published)?;
                plans.push((format!("{model} {phase:?}{PUBLISHED_SUFFIX}"), plan));
                Probe::Plan {
                    plan: plans.len() - 1,
                    scope: Scope::Total,
                }
            }
            Subject::HostAttention {
                heads,
                head_dim,
                context,
                ..
            } => Probe::HostAttention {
                heads: *heads,
                head_dim: *head_dim,
                context: *context,
            },
        })
    }

    /// The published plans (prefill and decode) of `model` that whole-model
    /// points predict.
    pub fn published_plans_of<'a>(&'a self, model: &'a str) -> impl Iterator<Item = &'a Plan> {
        self.plans
            .iter()
            .filter(move |(name, plan)| plan.model == model && name.ends_with(PUBLISHED_SUFFIX))
            .map(|(_, plan)| plan)
    }

    /// Modeled seconds of every point under `params`.
    pub fn evaluate(&self, device: &Device, params: &Params) -> Vec<f64> {
        let timings: Vec<Timing> = self
            .plans
            .iter()
            .map(|(_, p)| time_plan(p, device, params))
            .collect();
        self.points
            .iter()
            .map(|p| match &p.probe {
                Probe::Launch(launch) => time_standalone(launch, device, params),
                Probe::Call { plan, call } => {
                    timings[*plan].call(call).map_or(f64::NAN, |c| c.total_s)
                }
                Probe::Group { plan, group } => timings[*plan].group_s(group),
                Probe::Plan {
                    plan,
                    scope: Scope::Layers,
                } => timings[*plan].layers_s(),
                Probe::Plan {
                    plan,
                    scope: Scope::Total,
                } => timings[*plan].total_s,
                Probe::Traffic {
                    plan,
                    call,
                    direction,
                } => traffic(&timings[*plan], call.as_deref(), *direction),
                Probe::HostAttention {
                    heads,
                    head_dim,
                    context,
                } => host_attention_time(params, *heads, *head_dim, *context),
            })
            .collect()
    }

    /// Compares the model under `params` with every point.
    pub fn report(&self, device: &Device, params: &Params) -> Report {
        let modeled = self.evaluate(device, params);
        let results: Vec<PointResult> = self
            .points
            .iter()
            .zip(modeled)
            .map(|(p, m)| PointResult {
                id: p.point.id.clone(),
                set: p.point.set,
                section: p.point.section.clone(),
                measured_s: p.measured_s,
                modeled_s: m,
                error: m / p.measured_s - 1.0,
            })
            .collect();
        let fit = Summary::of(&results, PointSet::Fit);
        let held_out = Summary::of(&results, PointSet::HeldOut);
        Report {
            results,
            fit,
            held_out,
        }
    }
}

/// Host write or read time of one call (once) or of every call of a run.
fn traffic(timing: &Timing, call: Option<&str>, direction: Direction) -> f64 {
    let of = |c: &crate::xdna2::cost::CallTiming| match direction {
        Direction::Write => c.write_s,
        Direction::Read => c.read_s,
    };
    match call {
        Some(name) => timing.call(name).map_or(f64::NAN, of),
        None => timing.calls().map(|c| of(c) * c.repeats as f64).sum(),
    }
}

fn measured_seconds(point: &Point, probe: &Probe) -> Result<f64, CalibrationError> {
    let v = point.measured.value;
    let bad = |message: String| CalibrationError::Point {
        id: point.id.clone(),
        message,
    };
    Ok(match point.measured.unit {
        Unit::Us => v * 1e-6,
        Unit::Ms => v * 1e-3,
        Unit::S => v,
        Unit::TokPerS => 1.0 / v,
        Unit::GflopPerS => match probe {
            Probe::Launch(launch) => match launch.as_ref() {
                Launch::Gemm { spec, .. } => spec.flops() / (v * 1e9),
                _ => return Err(bad("GFLOP/s is converted only for GEMM (2·M·K·N)".into())),
            },
            _ => return Err(bad("GFLOP/s needs a kernel subject".into())),
        },
        other => {
            return Err(bad(format!(
                "unit {other} is no time, rate or GEMM throughput"
            )))
        }
    })
}
