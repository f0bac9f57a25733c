//! Phase 1's placement gate: every kernel site of the plans needs a legal tiling (a
//! decode projection the builder moved to the CPU counts as refused); a dimension no
//! tiling divides fails the gate, the bundle's lessons fix it (zero padding), and the
//! report's padding table says what was padded.

use std::collections::BTreeMap;

use crate::bundle::{Comparison, Value};
use crate::exec::artifacts::record::PhaseRecord;
use crate::exec::artifacts::trajectory::ActionLinks;
use crate::exec::design::{self, site_key, tiling_params, Plans};
use crate::exec::gates::gate::{GateCheck, ThresholdSource};
use crate::exec::gates::remedy::Failure;
use crate::exec::phases::DeployPhase;
use crate::exec::run::{Attempt, Change, PhaseEnd, Run};
use crate::exec::DeployError;
use crate::ops::{OpKind, RuntimeMetric};
use crate::xdna2::builder::unpadded_shape;
use crate::xdna2::device::Device;
use crate::xdna2::kernels::{self, GemmSpec, GemvSpec, Herd};
use crate::xdna2::plan::{HostOp, Launch, Step as PlanStep};
use crate::xdna2::{padding, tiling};

/// Whether every NPU kernel site of `plans` has a legal tiling (a GEMM any
/// tiling of the tile search, another kernel its selected configuration): the
/// gate that a dimension no tiling divides fails, with the first such site.
fn placement_gate(run: &Run<'_>, plans: &Plans) -> (GateCheck, Option<Launch>) {
    let device = &run.device;
    let mut refused: Vec<(String, Launch, String)> = Vec::new();
    for (key, (_, launch)) in design::sites(plans) {
        let why = match &launch {
            Launch::Gemm { spec, .. } => {
                let full = GemmSpec {
                    herd: Herd([device.columns, device.compute_rows]),
                    ..*spec
                };
                match tiling::gemm_places(device, &full) {
                    true => None,
                    false => Some(kernels::Kernel::Gemm.name().to_string()),
                }
            }
            other => other
                .check(device)
                .first()
                .map(|v| v.constraint.label().to_string()),
        };
        if let Some(why) = why {
            refused.push((key, launch, why));
        }
    }
    refused.extend(cpu_projections(device, plans));
    let mut conditions = BTreeMap::new();
    let first = refused.first().map(|(_, l, _)| l.clone());
    if let Some((_, launch, _)) = refused.first() {
        conditions.insert(
            "kernel".to_string(),
            Value::Text(launch.kernel().name().to_string()),
        );
        conditions.insert(
            "constraint".to_string(),
            Value::Text(
                crate::xdna2::constraints::Constraint::Alignment
                    .label()
                    .to_string(),
            ),
        );
    }
    let names: Vec<&str> = refused.iter().map(|(k, _, _)| k.as_str()).collect();
    let gate = GateCheck::named("placement of the model's dimensions", OpKind::SelectTiling)
        .measures(RuntimeMetric::Violations, refused.len() as f64)
        .when(conditions)
        .against(
            Comparison::Eq,
            0.0,
            ThresholdSource::Runtime {
                rule: if names.is_empty() {
                    "every kernel site has a legal tiling".to_string()
                } else {
                    format!("no legal tiling divides: {}", names.join(", "))
                },
            },
        );
    (gate, first)
}

/// The decode projections the builder moved to the CPU because no GEMV
/// tiling places them (a K that is not a multiple of the GEMV's granularity):
/// refused sites too, though the plan still runs. The LM head's matvec in the
/// epilogue is a design choice (`last-token-lm-head` and `partition-lm-head`
/// move it), not a refusal.
fn cpu_projections(device: &Device, plans: &Plans) -> Vec<(String, Launch, String)> {
    let mut out: BTreeMap<String, (Launch, String)> = BTreeMap::new();
    for step in &plans.decode.layer {
        let PlanStep::Host(HostOp::Matvec { w, x, out: y, m, k }) = step else {
            continue;
        };
        let launch = Launch::Gemv {
            w: w.clone(),
            x: x.clone(),
            out: y.clone(),
            residual: None,
            spec: GemvSpec::select(device, *m, *k, Herd::ROW),
        };
        let Some(why) = launch.check(device).first().map(|v| v.to_string()) else {
            continue;
        };
        out.entry(format!("{} (on the CPU)", site_key(&launch)))
            .or_insert((launch, why));
    }
    out.into_iter().map(|(k, (l, w))| (k, l, w)).collect()
}

/// Phase 1 starts with every kernel site placeable: a model dimension no
/// legal tiling divides fails the placement gate, and the bundle's lessons say
/// what to do (the reference trajectory's: pad it with zeros, `pad-dims`).
pub(super) fn place_dimensions(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
) -> Result<Option<PhaseEnd>, DeployError> {
    let plans = match run.plans() {
        Ok(p) => p,
        Err(reason) => {
            return Ok(Some(run.fail_step(
                rec,
                DeployPhase::Kernels,
                OpKind::EnumerateKernels,
                &reason.to_string(),
            )))
        }
    };
    let (gate, site) = placement_gate(run, &plans);
    let Some(site) = site else {
        return Ok(None);
    };
    let params = tiling_params(&site);
    let action = run
        .traj
        .action(OpKind::SelectTiling, &params, &ActionLinks::default());
    let obs = run.traj.observe(None, &[&gate], Some(&action));
    run.gate(rec, gate.clone());
    let failed = Failure {
        phase: DeployPhase::Kernels,
        gate: gate.clone(),
        op: gate.op,
        params: params.clone(),
    };
    let mut attempt = |run: &mut Run<'_>, changes: &[Change]| {
        let plans = run
            .with_changes(changes, Some(&site))
            .and_then(|d| run.plans_of(&d));
        match plans {
            Ok(plans) => Attempt::Checked(placement_gate(run, &plans).0),
            Err(e) => Attempt::Inapplicable(e.to_string()),
        }
    };
    let Some(fixed) = run.try_lessons(
        rec,
        &failed,
        &obs,
        (OpKind::SelectTiling, &params),
        &mut attempt,
    ) else {
        let stop = run.stop(
            rec,
            &failed,
            "no lesson of the bundle makes every kernel site placeable",
        );
        return Ok(Some(PhaseEnd::Failed(stop)));
    };
    run.keep_fix(&fixed.changes, None)?;
    report_padding(run, rec, &fixed.lesson);
    Ok(None)
}

/// What the design now pads (the report's padding table), with a note.
fn report_padding(run: &mut Run<'_>, rec: &mut PhaseRecord, lesson: &str) {
    let shape = unpadded_shape(&run.loaded.model.arch, &run.design.options);
    let Ok(choice) = padding::search(&run.device, &shape) else {
        return;
    };
    if !run.design.options.pad_dims || !choice.padding.is_padded() {
        return;
    }
    let padded: Vec<String> = choice
        .padding
        .dims()
        .iter()
        .filter(|(_, p)| p.is_padded())
        .map(|(dim, p)| {
            format!(
                "{dim} {} -> {} (+{:.1}%)",
                p.real,
                p.padded,
                100.0 * p.overhead()
            )
        })
        .collect();
    rec.notes.push(format!(
        "{lesson} padded with zeros: {} (see the padding table)",
        padded.join(", ")
    ));
    run.report.padding = Some(choice);
}
