//! Phase 1's GEMM tilings: per site, a passing row of an earlier kernel registry,
//! else the bundle's recorded configuration (as recorded when the shape matches,
//! transferred from the nearest recorded shape otherwise), else a search of the
//! constraint-feasible space for the modeled-fastest tiling; each recorded step's
//! outcome says which sites it served.

use std::collections::BTreeMap;

use crate::bundle::Step;
use crate::exec::artifacts::record::{PhaseRecord, StepOrigin, StepOutcome, StepRecord};
use crate::exec::design::{self, tiling_of, tiling_params, Tiling};
use crate::exec::phases::DeployPhase;
use crate::exec::run::Run;
use crate::ops::{KernelSettings, Op, OpKind};
use crate::xdna2::cost::time_standalone;
use crate::xdna2::kernels::{GemmSpec, Herd, Kernel};
use crate::xdna2::plan::Launch;
use crate::xdna2::tiling;

/// A recorded GEMM configuration of the bundle.
struct Recorded<'b> {
    step: &'b Step,
    shape: [usize; 3],
    settings: KernelSettings,
}

fn recorded_gemm_tilings<'b>(run: &Run<'b>) -> Vec<Recorded<'b>> {
    let mut out = Vec::new();
    for phase in [DeployPhase::Kernels, DeployPhase::Prefill] {
        for read in run.bundle_steps(phase, OpKind::SelectTiling) {
            let Op::SelectTiling(choice) = &read.op else {
                continue;
            };
            if let (Kernel::Gemm, &[m, k, n]) = (choice.kernel, &choice.shape[..]) {
                out.push(Recorded {
                    step: read.step,
                    shape: [m, k, n],
                    settings: choice.settings(),
                });
            }
        }
    }
    out
}

/// What became of a recorded tiling at one GEMM site of this model.
enum SiteUse {
    AsRecorded {
        site: String,
    },
    Transferred {
        site: String,
        from: [usize; 3],
    },
    /// It does not place at the site (the first constraint it breaks); a
    /// search chose the site's tiling.
    Searched {
        site: String,
        refused: &'static str,
    },
}

impl std::fmt::Display for SiteUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SiteUse::AsRecorded { site } => write!(f, "{site} (as recorded)"),
            SiteUse::Transferred { site, from } => write!(f, "{site} (transferred from {from:?})"),
            SiteUse::Searched { site, refused } => {
                write!(
                    f,
                    "{site} (does not place there: {refused}; searched instead)"
                )
            }
        }
    }
}

pub(super) fn choose_gemm_tilings(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    sites: &BTreeMap<String, (crate::xdna2::plan::Phase, Launch)>,
) {
    let recorded = recorded_gemm_tilings(run);
    let mut used: BTreeMap<String, Vec<SiteUse>> = BTreeMap::new();
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
                    .push(SiteUse::AsRecorded { site: key.clone() });
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
                        .push(SiteUse::Transferred {
                            site: key.clone(),
                            from: r.shape,
                        });
                    continue;
                }
                let why: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
                used.entry(r.step.id.clone())
                    .or_default()
                    .push(SiteUse::Searched {
                        site: key.clone(),
                        refused: violations.first().map_or("", |v| v.constraint.label()),
                    });
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
            Some(sites) if sites.iter().all(|s| matches!(s, SiteUse::AsRecorded { .. })) => {
                StepOutcome::AsRecorded
            }
            Some(sites) => {
                let sites: Vec<String> = sites.iter().map(ToString::to_string).collect();
                StepOutcome::Rederived {
                    why: format!(
                        "recorded on {:?}; this model's shapes differ: {}",
                        r.shape,
                        sites.join(", ")
                    ),
                }
            }
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

pub(super) fn gemm_tiling(s: &GemmSpec) -> Tiling {
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
