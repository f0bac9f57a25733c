//! Leave one family out: the held-out points of a model family predicted by a
//! fit that has not seen that family's kernel shapes either. The whole-model
//! points of the eight other models are never fitted, but the kernel registry
//! was measured at many of their shapes (Qwen2.5-1.5B's 2048×8960×1536 down
//! projection, Qwen3-4B's 2560×9728 GEMV, …); a deployment engineer would
//! measure those too, yet a held-out figure that leans on them says less about
//! a model nobody measured. For each family, the fit drops every kernel point
//! whose launch only that family's published plans run (not the reference
//! model's, whose deployment is what the skills are learned from), refits, and
//! predicts the family's whole-model points.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::calibration::{PointSet, Prepared, Summary, REFERENCE_MODEL};
use super::cost::Params;
use super::device::Device;
use super::fit::{fit_on, fit_point_indices};
use super::kernels::Kernel;
use super::plan::{Launch, Plan};

/// One family left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FamilyOut {
    pub family: String,
    /// Its held-out models.
    pub models: Vec<String>,
    /// The fit points left out: kernel shapes only this family runs.
    pub dropped: Vec<String>,
    /// The parameters fitted without them.
    pub params: BTreeMap<String, f64>,
    /// Signed error (modeled / measured − 1) of the family's held-out points.
    pub errors: BTreeMap<String, f64>,
}

/// Every family left out in turn, and the statistics of all their points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaveOneFamilyOut {
    pub families: Vec<FamilyOut>,
    pub summary: Summary,
}

/// What a launch computes, for matching a measured kernel with a plan's
/// launches: the kernel and its dimensions (an LM-head partition counts as a
/// GEMV of the published partition's rows).
pub type Signature = (Kernel, Vec<usize>);

fn signature(launch: &Launch, lm_head_rows: usize) -> Signature {
    match launch {
        Launch::Gemm { spec, .. } => (Kernel::Gemm, vec![spec.m, spec.k, spec.n]),
        Launch::Gemv { spec, .. } | Launch::GemvSwiglu { spec, .. } => {
            (Kernel::Gemv, vec![spec.m, spec.k])
        }
        Launch::LmHeadGemv { spec, .. } => (Kernel::Gemv, vec![lm_head_rows, spec.part.k]),
        Launch::FlashAttention { spec, .. } => (
            Kernel::FlashAttention,
            vec![
                spec.lq,
                spec.lk,
                spec.heads,
                spec.kv_heads,
                spec.head_dim,
                usize::from(spec.causal),
                spec.window.unwrap_or(0),
            ],
        ),
        Launch::Rmsnorm { spec, .. } | Launch::QkRmsnorm { spec, .. } => {
            (Kernel::Rmsnorm, vec![spec.rows, spec.cols])
        }
        Launch::Layernorm { spec, .. } => (Kernel::Layernorm, vec![spec.rows, spec.cols]),
        Launch::Softmax { spec, .. } => (Kernel::Softmax, vec![spec.rows, spec.cols]),
        Launch::Rope { spec, .. } => (Kernel::Rope, vec![spec.rows * spec.heads, spec.head_dim]),
        Launch::EltwiseAdd { spec, .. } => (Kernel::EltwiseAdd, vec![spec.n]),
        Launch::SiluMul { spec, .. } => (Kernel::SiluMul, vec![spec.n]),
        Launch::GeluMul { spec, .. } => (Kernel::GeluMul, vec![spec.n]),
        Launch::KvAppend { spec, .. } => (Kernel::KvAppend, vec![spec.kv_width]),
        Launch::DecodeAttention { spec, .. } => (
            Kernel::DecodeAttention,
            vec![spec.heads, spec.kv_heads, spec.head_dim, spec.context],
        ),
    }
}

fn plan_signatures<'a>(plans: impl Iterator<Item = &'a Plan>, rows: usize) -> BTreeSet<Signature> {
    plans
        .flat_map(|plan| plan.calls().flat_map(|(_, c)| c.launches.iter()))
        .map(|l| signature(l, rows))
        .collect()
}

/// Launch signatures of `model`'s published plans.
fn model_signatures(prepared: &Prepared, model: &str) -> BTreeSet<Signature> {
    let rows = prepared
        .data
        .published_plans
        .get(model)
        .map_or(0, |p| p.lm_head_gemv_rows);
    plan_signatures(prepared.published_plans_of(model), rows)
}

/// The held-out models of each family, by family.
pub fn families(prepared: &Prepared) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in prepared
        .points
        .iter()
        .filter(|p| p.point.set == PointSet::HeldOut)
    {
        if let Some(model) = p.model() {
            let family = prepared
                .data
                .published_plans
                .get(model)
                .map_or_else(|| model.to_string(), |pp| pp.family.clone());
            out.entry(family).or_default().insert(model.to_string());
        }
    }
    out
}

/// Indices of the fit points that only `models` (not the reference model)
/// run: kernel points whose launch one of their published plans contains.
pub fn family_points(prepared: &Prepared, models: &BTreeSet<String>) -> Vec<usize> {
    let reference = model_signatures(prepared, REFERENCE_MODEL);
    let family: BTreeSet<Signature> = models
        .iter()
        .flat_map(|m| model_signatures(prepared, m))
        .filter(|s| !reference.contains(s))
        .collect();
    fit_point_indices(prepared)
        .into_iter()
        .filter(|&i| {
            prepared.points[i]
                .launch()
                .is_some_and(|l| family.contains(&signature(l, 0)))
        })
        .collect()
}

/// Signed errors of `models`' held-out points under `params`.
pub fn family_errors(
    prepared: &Prepared,
    device: &Device,
    params: &Params,
    models: &BTreeSet<String>,
) -> BTreeMap<String, f64> {
    let modeled = prepared.evaluate(device, params);
    prepared
        .points
        .iter()
        .zip(modeled)
        .filter(|(p, _)| {
            p.point.set == PointSet::HeldOut && p.model().is_some_and(|m| models.contains(m))
        })
        .map(|(p, m)| (p.point.id.clone(), m / p.measured_s - 1.0))
        .collect()
}

/// Leaves each family out in turn.
pub fn leave_one_family_out(prepared: &Prepared, device: &Device) -> LeaveOneFamilyOut {
    let mut families_out = Vec::new();
    for (family, models) in families(prepared) {
        let dropped = family_points(prepared, &models);
        let kept = fit_point_indices(prepared)
            .into_iter()
            .filter(|i| !dropped.contains(i))
            .collect();
        let outcome = fit_on(prepared, device, kept);
        let names = Params::SPECS.iter().map(|s| s.name.to_string());
        families_out.push(FamilyOut {
            family,
            dropped: dropped
                .iter()
                .map(|&i| prepared.points[i].point.id.clone())
                .collect(),
            params: names.zip(outcome.params.values()).collect(),
            errors: family_errors(prepared, device, &outcome.params, &models),
            models: models.into_iter().collect(),
        });
    }
    let all: Vec<(&str, f64)> = families_out
        .iter()
        .flat_map(|f| f.errors.iter().map(|(id, e)| (id.as_str(), *e)))
        .collect();
    let summary = Summary::of_errors(&all);
    LeaveOneFamilyOut {
        families: families_out,
        summary,
    }
}
