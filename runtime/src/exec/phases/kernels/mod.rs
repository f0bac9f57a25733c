//! Phase 1, kernel validation: derive every kernel × shape the model needs from its
//! plans, choose GEMM tilings (a registry from an earlier run first, then the
//! bundle's known-good configurations — as recorded when the shape matches,
//! transferred from the nearest recorded shape otherwise — and a search of the
//! constraint-feasible space when a transfer does not place), validate each
//! configuration on the emulator against the f32 reference, and record them in the
//! kernel registry. A failed validation goes to the bundle's debugging lessons.

mod faults;
mod params;
mod placement;
mod tilings;
mod validation;

use faults::{plant_gelu_fault, plant_param_faults, plant_rope_fault, plant_tiling_faults};
use placement::place_dimensions;
use tilings::choose_gemm_tilings;
use validation::validate_site;
pub(crate) use validation::{check_site, kernel_gate};

use std::collections::BTreeMap;

use crate::bundle::Value;
use crate::exec::artifacts::record::{PhaseRecord, StepOutcome};
use crate::exec::artifacts::trajectory::ActionLinks;
use crate::exec::design::{self, Plans};
use crate::exec::phases::DeployPhase;
use crate::exec::run::{PhaseEnd, Run};
use crate::exec::DeployError;
use crate::ops::OpKind;

pub(crate) fn run(run: &mut Run<'_>, rec: &mut PhaseRecord) -> Result<PhaseEnd, DeployError> {
    run.progress.step(OpKind::EnumerateKernels.name());
    plant_rope_fault(run, rec);
    plant_gelu_fault(run, rec);
    plant_param_faults(run, rec);
    if let Some(end) = place_dimensions(run, rec)? {
        return Ok(end);
    }
    super::weight_path::decide(run, rec)?;
    let plans = match plans_or_fail(run, rec, OpKind::EnumerateKernels) {
        Ok(plans) => plans,
        Err(end) => return Ok(*end),
    };
    let sites = design::sites(&plans);
    for (_, launch) in sites.values() {
        let shape = design::shape_of(launch).iter().map(|&v| v as i64).collect();
        run.model_shapes
            .entry(launch.kernel().name().to_string())
            .or_default()
            .insert(shape);
    }
    let action = run.traj.action(
        OpKind::EnumerateKernels,
        &BTreeMap::new(),
        &ActionLinks::default(),
    );
    run.record_bundle_steps(
        rec,
        DeployPhase::Kernels,
        OpKind::EnumerateKernels,
        StepOutcome::AsRecorded,
    );
    let summary: Vec<String> = sites.keys().cloned().collect();
    run.traj.verdict(
        &format!(
            "{} kernel x shape configurations: {}",
            sites.len(),
            summary.join(", ")
        ),
        true,
        Some(&action),
    );
    choose_gemm_tilings(run, rec, &sites);
    plant_tiling_faults(run, rec, &sites);
    let plans = match plans_or_fail(run, rec, OpKind::SelectTiling) {
        Ok(plans) => plans,
        Err(end) => return Ok(*end),
    };
    for key in design::sites(&plans).into_keys() {
        run.progress.step(&format!("validate-kernel {key}"));
        if let Some(end) = validate_site(run, rec, &key)? {
            return Ok(end);
        }
    }
    if let Some(end) = check_parameters(run, rec)? {
        return Ok(end);
    }
    let registered = run.registry.rows.len();
    run.record_bundle_steps(
        rec,
        DeployPhase::Kernels,
        OpKind::RegisterKernel,
        StepOutcome::AsRecorded,
    );
    let a = run.traj.action(
        OpKind::RegisterKernel,
        &BTreeMap::from([("kernel".to_string(), Value::Text("gemm".into()))]),
        &ActionLinks::default(),
    );
    run.traj.verdict(
        &format!("{registered} configurations in the kernel registry"),
        true,
        Some(&a),
    );
    run.write_registry()?;
    Ok(PhaseEnd::Passed)
}

/// The plans' parameters against the config (`params`), after the kernels
/// passed (a wrong RoPE table kind is the RoPE kernel check's, with its lesson):
/// a mismatch ends the phase, naming the parameter, the plan's value and the
/// config's.
fn check_parameters(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
) -> Result<Option<PhaseEnd>, DeployError> {
    let plans = run.plans()?;
    let gates = params::parameter_gates(run, &plans);
    let action = run.traj.action(
        OpKind::EnumerateKernels,
        &BTreeMap::new(),
        &ActionLinks::default(),
    );
    // One observation per gate: the trajectory language measures a metric once
    // per observation.
    for gate in &gates {
        run.traj.observe(Some(&gate.name), &[gate], Some(&action));
    }
    let Some(gate) = run.record_gates(rec, gates) else {
        return Ok(None);
    };
    let failure = crate::exec::gates::remedy::Failure {
        phase: DeployPhase::Kernels,
        op: gate.op,
        params: BTreeMap::new(),
        gate,
    };
    let reason = params::mismatch(&failure.gate);
    let stop = run.stop(rec, &failure, &reason);
    Ok(Some(PhaseEnd::Failed(stop)))
}

/// The design's plans, or the failed `op` step that ends the phase when the
/// plan builder refuses the design.
fn plans_or_fail(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    op: OpKind,
) -> Result<Plans, Box<PhaseEnd>> {
    run.plans().map_err(|reason| {
        Box::new(run.fail_step(rec, DeployPhase::Kernels, op, &reason.to_string()))
    })
}
