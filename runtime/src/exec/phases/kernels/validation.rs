//! Phase 1's kernel validation: each site of the plans checked on the emulator against
//! the f32 reference through the one kernel harness, its gate, up to `MAX_ROUNDS` rounds
//! of the bundle's lessons when it fails, and the passing configuration recorded in the
//! kernel registry. Phases 4 and 5 validate new configurations through `check_site`.

use std::collections::BTreeMap;

use crate::bundle::Value;
use crate::exec::artifacts::record::PhaseRecord;
use crate::exec::artifacts::registry::RegistryRow;
use crate::exec::artifacts::trajectory::ActionLinks;
use crate::exec::design::{self, site_key, tiling_params, Plans};
use crate::exec::gates::gate::GateCheck;
use crate::exec::gates::remedy::Failure;
use crate::exec::gates::validate::{validate, CheckOutcome, KernelCheck, ValidationContext};
use crate::exec::phases::DeployPhase;
use crate::exec::run::{Attempt, Change, PhaseEnd, Run};
use crate::exec::{DeployError, Internal};
use crate::ops::{Metric, OpKind, RuntimeMetric};
use crate::xdna2::interpreter::weights::TensorIndex;
use crate::xdna2::interpreter::{has_scaling, table_frequencies, RopeTable};
use crate::xdna2::kernels;
use crate::xdna2::plan::Launch;

/// The action a failing site's lessons fix: its `select-tiling` for GEMM, else the
/// kernel and shape.
fn site_action(launch: &Launch) -> (OpKind, BTreeMap<String, Value>) {
    match launch {
        Launch::Gemm { .. } | Launch::Gemv { .. } => (OpKind::SelectTiling, tiling_params(launch)),
        _ => {
            let mut p = tiling_params(launch);
            p.retain(|k, _| k == "kernel" || k == "shape");
            (OpKind::ValidateKernel, p)
        }
    }
}

/// Validates one site against the plans `plans` were built from.
pub(crate) fn check_site(
    run: &Run<'_>,
    plans: &Plans,
    launch: &Launch,
    path_rope: RopeTable,
) -> Result<KernelCheck, DeployError> {
    let (model, arch) = (&run.loaded.model, &run.loaded.model.arch);
    let index = TensorIndex::new(&model.weights);
    let lut = kernels::rope_lut(&table_frequencies(arch, path_rope), design::SEQ_LEN);
    let plan = match plans.prefill.buffers.contains_key(launch_weight(launch)) {
        true => &plans.prefill,
        false => &plans.decode,
    };
    let ctx = ValidationContext {
        device: &run.device,
        plan,
        index: &index,
        arch,
        lut: &lut,
        seed: run.options.seed,
        nibbles: kernels::gemv_packed::NibbleOrder::of(run.design.path.defects.packed_nibble_order),
    };
    Ok(validate(&ctx, launch)?)
}

/// The first buffer a launch reads (to find which plan declares it).
fn launch_weight(launch: &Launch) -> &str {
    launch
        .inputs()
        .into_iter()
        .nth(1)
        .or_else(|| launch.inputs().into_iter().next())
        .unwrap_or("")
}

/// The gate of one kernel check.
pub(crate) fn kernel_gate(key: &str, launch: &Launch, check: &KernelCheck) -> GateCheck {
    let mut conditions = BTreeMap::from([
        ("kernel".to_string(), Value::Text(check.kernel.clone())),
        (
            "shape".to_string(),
            Value::IntList(design::shape_of(launch).iter().map(|&v| v as i64).collect()),
        ),
    ]);
    match &check.outcome {
        CheckOutcome::Compared { mismatches, .. } => {
            conditions.insert("rtol".into(), Value::Float(check.rtol));
            conditions.insert("atol".into(), Value::Float(check.atol));
            GateCheck::named(format!("kernel {key}"), OpKind::ValidateKernel)
                .measures(Metric::Mismatches, *mismatches as f64)
                .when(conditions)
                .must_be_zero(format!(
                        "element-wise |out - ref| <= atol + rtol*|ref| against the f32 reference on {} (registry tolerance)",
                        check.validated_shape
                    ))
        }
        CheckOutcome::Refused {
            violations,
            constraints,
        } => {
            if let Some(c) = constraints.first() {
                conditions.insert("constraint".into(), Value::Text(c.clone()));
            }
            GateCheck::named(format!("placement {key}"), OpKind::SelectTiling)
                .measures(RuntimeMetric::Violations, violations.len() as f64)
                .when(conditions)
                .must_be_zero(format!("the device refuses: {}", violations.join("; ")))
        }
    }
}

/// Why a RoPE table is validated over every position: a frequency-scaling error
/// (llama3) only shows at long positions, far beyond phases 2 and 3's prompts.
fn rope_note(run: &Run<'_>) -> String {
    let scaled = has_scaling(&run.loaded.model.arch);
    if scaled {
        "RoPE table check: the model's RoPE scaling only changes frequencies whose wavelength exceeds the original context's, so on prompts of a few dozen positions (phases 2 and 3) a table without it moves the block below bf16 noise; phase 1 compares the table with the reference's scaled frequencies at every one of the 2048 positions, where the error is large".to_string()
    } else {
        "RoPE table check: validated at every one of the 2048 positions against the reference's frequencies".to_string()
    }
}

/// Fix rounds per kernel: a fix may clear one failure and expose the next.
const MAX_ROUNDS: usize = 4;

pub(super) fn validate_site(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    key: &str,
) -> Result<Option<PhaseEnd>, DeployError> {
    let mut failure = None;
    for _ in 0..MAX_ROUNDS {
        let plans = run.plans()?;
        let Some((_, launch)) = design::sites(&plans).remove(key) else {
            return Err(Internal::SiteDisappeared {
                key: key.to_string(),
            }
            .into());
        };
        let (op, params) = site_action(&launch);
        if matches!(launch, Launch::Gemm { .. }) {
            run.traj.action(
                OpKind::SelectTiling,
                &tiling_params(&launch),
                &ActionLinks::default(),
            );
        }
        let tol = crate::xdna2::harness::tolerance_of(&launch);
        let vparams = BTreeMap::from([
            (
                "kernel".to_string(),
                Value::Text(launch.kernel().name().to_string()),
            ),
            (
                "shape".to_string(),
                Value::IntList(
                    design::shape_of(&launch)
                        .iter()
                        .map(|&v| v as i64)
                        .collect(),
                ),
            ),
            ("rtol".to_string(), Value::Float(tol.rtol)),
            ("atol".to_string(), Value::Float(tol.atol)),
        ]);
        let action = run
            .traj
            .action(OpKind::ValidateKernel, &vparams, &ActionLinks::default());
        let check = check_site(run, &plans, &launch, run.design.path.rope)?;
        let gate = kernel_gate(key, &launch, &check);
        let obs = run.traj.observe(None, &[&gate], Some(&action));
        if run.gate(rec, gate.clone()) {
            register(run, key, &launch, check);
            return Ok(None);
        }
        if matches!(launch, Launch::Rope { .. }) {
            rec.notes.push(rope_note(run));
        }
        let failed = Failure {
            phase: DeployPhase::Kernels,
            gate: gate.clone(),
            op: gate.op,
            params: params.clone(),
        };
        let site = launch.clone();
        let mut attempt = |run: &mut Run<'_>, changes: &[Change]| {
            let trial = run
                .with_changes(changes, Some(&site))
                .and_then(|d| Ok((run.plans_of(&d)?, d)));
            let (plans, d) = match trial {
                Ok(t) => t,
                Err(e) => return Attempt::Inapplicable(e.to_string()),
            };
            let Some((_, relaunch)) = design::sites(&plans).remove(&site_key(&site)) else {
                return Attempt::Inapplicable("the fix removed the kernel from the plan".into());
            };
            match check_site(run, &plans, &relaunch, d.path.rope) {
                Ok(check) => Attempt::Checked(kernel_gate(key, &relaunch, &check)),
                Err(e) => Attempt::Inapplicable(e.to_string()),
            }
        };
        match run.try_lessons(rec, &failed, &obs, (op, &params), &mut attempt) {
            Some(fixed) => {
                let _ = run.keep_fix(&fixed.changes, Some(&site));
                run.tiling_sources
                    .insert(key.to_string(), format!("lesson {}", fixed.lesson));
            }
            None => {
                let stop = run.stop(rec, &failed, "no lesson of the bundle fixed this kernel");
                return Ok(Some(PhaseEnd::Failed(stop)));
            }
        }
        failure = Some(failed);
    }
    let Some(failed) = failure else {
        return Ok(None);
    };
    Ok(Some(PhaseEnd::Failed(run.stop(
        rec,
        &failed,
        "fixes kept exposing new failures of this kernel",
    ))))
}

fn register(run: &mut Run<'_>, key: &str, launch: &Launch, check: KernelCheck) {
    let source = run
        .tiling_sources
        .get(key)
        .cloned()
        .unwrap_or_else(|| "the emulator's registry rule for this kernel".to_string());
    let used_by = vec![run.loaded.name.clone()];
    run.registry.record(RegistryRow {
        key: key.to_string(),
        launch: launch.clone(),
        check,
        source,
        used_by,
    });
}
