//! Phase 1, kernel validation: derive every kernel × shape the model needs from its
//! plans, choose GEMM tilings (a registry from an earlier run first, then the
//! bundle's known-good configurations — as recorded when the shape matches,
//! transferred from the nearest recorded shape otherwise — and a search of the
//! constraint-feasible space when a transfer does not place), validate each
//! configuration on the emulator against the f32 reference, and record them in the
//! kernel registry. A failed validation goes to the bundle's debugging lessons.

use std::collections::BTreeMap;

use super::DeployPhase;
use crate::bundle::{Comparison, Step, Value};
use crate::exec::artifacts::record::{PhaseRecord, StepOrigin, StepOutcome, StepRecord};
use crate::exec::artifacts::registry::RegistryRow;
use crate::exec::artifacts::trajectory::ActionLinks;
use crate::exec::checks::gate::{GateCheck, ThresholdSource};
use crate::exec::checks::remedy::Failure;
use crate::exec::checks::validate::{validate, CheckOutcome, KernelCheck, ValidationContext};
use crate::exec::design::{self, site_key, tiling_of, tiling_params, Plans, Tiling};
use crate::exec::fault::Fault;
use crate::exec::run::{Attempt, Change, PhaseEnd, Run};
use crate::exec::DeployError;
use crate::model::arch::RopeScaling;
use crate::ops::{KernelSettings, Op, OpKind};
use crate::xdna2::builder::unpadded_shape;
use crate::xdna2::cost::time_standalone;
use crate::xdna2::device::Device;
use crate::xdna2::interpreter::weights::TensorIndex;
use crate::xdna2::interpreter::{has_scaling, table_frequencies, RopeTable};
use crate::xdna2::kernels::{self, GemmSpec, GemmTile, GemvSpec, Herd, Kernel};
use crate::xdna2::plan::{HostOp, Launch, Step as PlanStep};
use crate::xdna2::{padding, tiling};

pub(crate) fn run(run: &mut Run<'_>, rec: &mut PhaseRecord) -> Result<PhaseEnd, DeployError> {
    run.progress.step(OpKind::EnumerateKernels.name());
    plant_rope_fault(run, rec);
    plant_gelu_fault(run, rec);
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
    let gate = GateCheck::new(
        "placement of the model's dimensions",
        OpKind::SelectTiling,
        "violations",
        refused.len() as f64,
        Comparison::Eq,
        0.0,
        conditions,
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
fn place_dimensions(
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

fn plant_rope_fault(run: &mut Run<'_>, rec: &mut PhaseRecord) {
    if !run.options.faults.contains(&Fault::NoLlama3Rope) {
        return;
    }
    let arch = &run.loaded.model.arch;
    if matches!(arch.rope_scaling, RopeScaling::Llama3 { .. }) && has_scaling(arch) {
        run.design.path.rope = RopeTable::Unscaled;
        rec.notes.push(
            "planted fault no-llama3-rope: the RoPE table is built from unscaled frequencies"
                .into(),
        );
    } else {
        rec.notes.push(
            "planted fault no-llama3-rope does not apply: the model has no llama3 RoPE scaling"
                .into(),
        );
    }
}

fn plant_gelu_fault(run: &mut Run<'_>, rec: &mut PhaseRecord) {
    if !run.options.faults.contains(&Fault::SiluForGelu) {
        return;
    }
    match Fault::SiluForGelu.inert_on(&run.loaded.model.arch) {
        None => {
            run.design.path.defects.silu_for_gelu = true;
            rec.notes.push(format!(
                "planted fault silu-for-gelu: {}",
                Fault::SiluForGelu.description()
            ));
        }
        Some(why) => rec
            .notes
            .push(format!("planted fault silu-for-gelu does not apply: {why}")),
    }
}

/// A recorded GEMM configuration of the bundle.
struct Recorded<'b> {
    step: &'b Step,
    shape: [usize; 3],
    settings: KernelSettings,
}

fn recorded_gemm_tilings<'b>(run: &Run<'b>) -> Vec<Recorded<'b>> {
    let mut out = Vec::new();
    for phase in [DeployPhase::Kernels, DeployPhase::Prefill] {
        for step in run.bundle_steps(phase, OpKind::SelectTiling) {
            let Ok(Op::SelectTiling(choice)) = Op::read(step.op, &step.params) else {
                continue;
            };
            if let (Kernel::Gemm, &[m, k, n]) = (choice.kernel, &choice.shape[..]) {
                out.push(Recorded {
                    step,
                    shape: [m, k, n],
                    settings: choice.settings(),
                });
            }
        }
    }
    out
}

fn choose_gemm_tilings(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    sites: &BTreeMap<String, (crate::xdna2::plan::Phase, Launch)>,
) {
    let recorded = recorded_gemm_tilings(run);
    let mut used: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (key, (_, launch)) in sites {
        let Launch::Gemm { spec, .. } = launch else {
            continue;
        };
        run.progress.step(&format!("select-tiling {key}"));
        if let Some(row) = run.input_registry.as_ref().and_then(|r| r.passing(key)) {
            if let Some(t) = tiling_of(&row.launch) {
                run.design.tilings.insert(key.clone(), t);
                run.tiling_sources
                    .insert(key.clone(), format!("kernel registry ({})", row.source));
                continue;
            }
        }
        let shape = [spec.m, spec.k, spec.n];
        if let Some(exact) = recorded.iter().find(|r| r.shape == shape) {
            if let Ok(s) = design::gemm_with(spec, &exact.settings) {
                run.design.tilings.insert(key.clone(), gemm_tiling(&s));
                run.tiling_sources.insert(
                    key.clone(),
                    format!("bundle step {} as recorded", exact.step.id),
                );
                used.entry(exact.step.id.clone())
                    .or_default()
                    .push(format!("{key} (as recorded)"));
                continue;
            }
        }
        let nearest = recorded.iter().min_by(|a, b| {
            distance(a.shape, shape)
                .total_cmp(&distance(b.shape, shape))
                .then(a.step.id.cmp(&b.step.id))
        });
        if let Some(r) = nearest {
            if let Ok(s) = design::gemm_with(spec, &r.settings) {
                let violations = s.check(&run.device);
                if violations.is_empty() {
                    run.design.tilings.insert(key.clone(), gemm_tiling(&s));
                    run.tiling_sources.insert(
                        key.clone(),
                        format!("bundle step {} transferred from {:?}", r.step.id, r.shape),
                    );
                    used.entry(r.step.id.clone())
                        .or_default()
                        .push(format!("{key} (transferred from {:?})", r.shape));
                    continue;
                }
                let why: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
                used.entry(r.step.id.clone()).or_default().push(format!(
                    "{key} (does not place there: {}; searched instead)",
                    violations
                        .first()
                        .map_or(String::new(), |v| v.constraint.label().to_string())
                ));
                rec.notes.push(format!(
                    "{key}: the tiling of bundle step {} (recorded at {:?}) does not place here ({}); searched instead",
                    r.step.id,
                    r.shape,
                    why.join("; ")
                ));
            }
        }
        match search_gemm(run, spec) {
            Some((s, candidates)) => {
                run.design.tilings.insert(key.clone(), gemm_tiling(&s));
                let note = format!(
                    "searched {candidates} constraint-feasible tilings covering N; fastest modeled: tile {:?}",
                    [s.tile.tile_m, s.tile.tile_k_l2, s.tile.tile_k_l1, s.tile.tile_n]
                );
                run.tiling_sources.insert(key.clone(), note.clone());
                rec.steps.push(StepRecord {
                    op: OpKind::SelectTiling.to_string(),
                    params: tiling_params(&with_spec(launch, s)),
                    origin: StepOrigin::Derived {
                        why: format!("no recorded configuration places at {key}: {note}"),
                    },
                    outcome: StepOutcome::AsRecorded,
                    recorded: None,
                });
            }
            None => rec.notes.push(format!(
                "{key}: no constraint-feasible tiling found; the emulator's default configuration is kept"
            )),
        }
    }
    for r in &recorded {
        let outcome = match used.get(&r.step.id) {
            Some(sites) if sites.iter().all(|s| s.ends_with("(as recorded)")) => StepOutcome::AsRecorded,
            Some(sites) => StepOutcome::Rederived {
                why: format!(
                    "recorded on {:?}; this model's shapes differ: {}",
                    r.shape,
                    sites.join(", ")
                ),
            },
            None => StepOutcome::NotApplicable {
                why: format!(
                    "recorded on {:?}; no GEMM of this model has that shape and another recorded tiling was nearer for every shape",
                    r.shape
                ),
            },
        };
        rec.steps.push(StepRecord::from_bundle(r.step, outcome));
    }
}

fn gemm_tiling(s: &GemmSpec) -> Tiling {
    Tiling::Gemm {
        herd: s.herd,
        tile: s.tile,
        precision: s.precision,
    }
}

fn with_spec(launch: &Launch, s: GemmSpec) -> Launch {
    let mut l = launch.clone();
    if let Launch::Gemm { spec, .. } = &mut l {
        *spec = s;
    }
    l
}

/// log-distance between two shapes (K and N dominate the tiling).
fn distance(a: [usize; 3], b: [usize; 3]) -> f64 {
    a.iter()
        .zip(&b)
        .map(|(&x, &y)| ((x.max(1) as f64).ln() - (y.max(1) as f64).ln()).abs())
        .sum()
}

/// The modeled-fastest tiling that places and covers every column of N, on
/// the full array, from the tile search over the device constraints.
fn search_gemm(run: &Run<'_>, spec: &GemmSpec) -> Option<(GemmSpec, usize)> {
    let full = GemmSpec {
        herd: Herd([run.device.columns, run.device.compute_rows]),
        ..*spec
    };
    tiling::cheapest_gemm(&run.device, &full, |s| {
        let launch = Launch::Gemm {
            a: String::new(),
            b: String::new(),
            out: String::new(),
            spec: *s,
        };
        time_standalone(&launch, &run.device, &run.params)
    })
}

/// Plants the tiling faults on the first GEMM site where they can be planted.
fn plant_tiling_faults(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    sites: &BTreeMap<String, (crate::xdna2::plan::Phase, Launch)>,
) {
    let gemms: Vec<(String, GemmSpec)> = sites
        .iter()
        .filter_map(|(k, (_, l))| match l {
            Launch::Gemm { spec, .. } => {
                let mut s = *spec;
                if let Some(&Tiling::Gemm {
                    herd,
                    tile,
                    precision,
                }) = run.design.tilings.get(k)
                {
                    (s.herd, s.tile, s.precision) = (herd, tile, precision);
                }
                Some((k.clone(), s))
            }
            _ => None,
        })
        .collect();
    if run.options.faults.contains(&Fault::GemmNNotMultiple) {
        let planted = gemms.iter().find_map(|(k, s)| {
            (8..s.tile.tile_n)
                .rev()
                .filter(|t| t % 8 == 0)
                .find_map(|tile_n| {
                    let bad = GemmSpec {
                        tile: GemmTile { tile_n, ..s.tile },
                        ..*s
                    };
                    (bad.unwritten_columns() != 0 && bad.check(&run.device).is_empty())
                        .then(|| (k.clone(), bad))
                })
        });
        match planted {
            Some((k, bad)) => {
                rec.notes.push(format!(
                    "planted fault gemm-n-not-multiple at {k}: tile_n {} with herd_n {} leaves {} of N = {} columns unwritten",
                    bad.tile.tile_n,
                    bad.herd.rows(),
                    bad.unwritten_columns(),
                    bad.n
                ));
                run.design.tilings.insert(k, gemm_tiling(&bad));
            }
            None => rec
                .notes
                .push("planted fault gemm-n-not-multiple: no GEMM where it can be planted".into()),
        }
    }
    if run.options.faults.contains(&Fault::L1Overflow) {
        let l1 = crate::xdna2::constraints::Constraint::L1Capacity;
        let planted = gemms.iter().find_map(|(k, s)| {
            [128, 256, 512].into_iter().find_map(|tile_m| {
                let bad = GemmSpec {
                    tile: GemmTile { tile_m, ..s.tile },
                    ..*s
                };
                let v = bad.check(&run.device);
                (!v.is_empty() && v.iter().all(|v| v.constraint == l1)).then(|| (k.clone(), bad))
            })
        });
        match planted {
            Some((k, bad)) => {
                rec.notes.push(format!(
                    "planted fault l1-overflow at {k}: tile_m {}",
                    bad.tile.tile_m
                ));
                run.design.tilings.insert(k, gemm_tiling(&bad));
            }
            None => rec
                .notes
                .push("planted fault l1-overflow: no GEMM where it can be planted".into()),
        }
    }
}

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
        nibbles: kernels::gemv_q4::NibbleOrder::of(run.design.path.defects.packed_nibble_order),
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
            GateCheck::new(
                format!("kernel {key}"),
                OpKind::ValidateKernel,
                "mismatches",
                *mismatches as f64,
                Comparison::Eq,
                0.0,
                conditions,
                ThresholdSource::Runtime {
                    rule: format!(
                        "element-wise |out - ref| <= atol + rtol*|ref| against the f32 reference on {} (registry tolerance)",
                        check.validated_shape
                    ),
                },
            )
        }
        CheckOutcome::Refused {
            violations,
            constraints,
        } => {
            if let Some(c) = constraints.first() {
                conditions.insert("constraint".into(), Value::Text(c.clone()));
            }
            GateCheck::new(
                format!("placement {key}"),
                OpKind::SelectTiling,
                "violations",
                violations.len() as f64,
                Comparison::Eq,
                0.0,
                conditions,
                ThresholdSource::Runtime {
                    rule: format!("the device refuses: {}", violations.join("; ")),
                },
            )
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

fn validate_site(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    key: &str,
) -> Result<Option<PhaseEnd>, DeployError> {
    let mut failure = None;
    for _ in 0..MAX_ROUNDS {
        let plans = run.plans()?;
        let Some((_, launch)) = design::sites(&plans).remove(key) else {
            return Err(DeployError::Usage(format!(
                "{key} disappeared from the plans"
            )));
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
