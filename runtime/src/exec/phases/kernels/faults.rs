//! The planted faults phase 1 must catch (`--fault`): a RoPE table without its llama3
//! scaling, SiLU where the model uses GELU, GEMM tilings that leave columns of N
//! unwritten or overflow L1, and plan parameters the config does not have (epsilon,
//! RoPE base, softmax scale, gate/up wiring), each planted where it applies or noted
//! where it cannot be.

use std::collections::BTreeMap;

use crate::exec::artifacts::record::PhaseRecord;
use crate::exec::design::Tiling;
use crate::exec::fault::Fault;
use crate::exec::run::Run;
use crate::model::arch::RopeScaling;
use crate::xdna2::interpreter::{has_scaling, RopeTable};
use crate::xdna2::kernels::{GemmSpec, GemmTile};
use crate::xdna2::plan::Launch;

use super::tilings::gemm_tiling;

pub(super) fn plant_rope_fault(run: &mut Run<'_>, rec: &mut PhaseRecord) {
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

/// Plants the plan-parameter faults (`Fault::PARAM`): each sets its number or
/// wiring wrong in the plans (`design::plant_param_defects`) or, for the RoPE
/// base, in the tables the NPU path builds.
pub(super) fn plant_param_faults(run: &mut Run<'_>, rec: &mut PhaseRecord) {
    for fault in Fault::PARAM {
        if !run.options.faults.contains(&fault) {
            continue;
        }
        let defects = &mut run.design.path.defects;
        let switch = match fault {
            Fault::ParamEps => &mut defects.param_eps,
            Fault::ParamRopeBase => &mut defects.param_rope_base,
            Fault::ParamScale => &mut defects.param_scale,
            _ => &mut defects.param_gate_up_swap,
        };
        *switch = true;
        rec.notes
            .push(format!("planted fault {fault}: {}", fault.description()));
    }
}

pub(super) fn plant_gelu_fault(run: &mut Run<'_>, rec: &mut PhaseRecord) {
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

/// Plants the tiling faults on the first GEMM site where they can be planted.
pub(super) fn plant_tiling_faults(
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
