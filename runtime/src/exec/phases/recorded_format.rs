//! Steps and lessons recorded on other weights than the ones in front of the
//! run. A bundle item whose operation depends on the weight format
//! (`OpSpec::weights`) carries the format it was recorded on; the NPU path
//! reads every launch's weights as bf16 except the decode GEMVs the 4-bit
//! path packs. Where the two differ the item is not applied as recorded: a
//! GEMV tile a fix computed from 2-byte rows is re-derived from the packed
//! footprint, and whatever a bf16-recorded step or fix changes on a packed
//! GEMV is re-validated with phase 1's check of the packed kernel. On the
//! bf16 path every format matches and nothing here acts.

use std::collections::BTreeMap;

use crate::bundle::Value;
use crate::exec::artifacts::weight_path::{FormatAction, OtherFormat};
use crate::exec::design::{self, Plans};
use crate::exec::run::{Change, Run};
use crate::ops::{formats, OpKind, WeightFormat};
use crate::xdna2::device::Device;
use crate::xdna2::kernels::GemvSpec;
use crate::xdna2::plan::Launch;

/// The format the NPU path reads a launch's weights in.
pub(crate) fn launch_format(launch: &Launch) -> WeightFormat {
    match launch {
        Launch::Gemv {
            spec: GemvSpec {
                packed: Some(f), ..
            },
            ..
        } => f.weight_format(),
        _ => WeightFormat::Bf16,
    }
}

/// The format an item was recorded on, when its operation depends on the
/// format and that is not `deployed`.
pub(crate) fn mismatch(
    recorded: Option<WeightFormat>,
    op: OpKind,
    deployed: WeightFormat,
) -> Option<WeightFormat> {
    recorded.filter(|r| op.spec().weights.depends() && *r != deployed)
}

/// The packed GEMV site of `plans` a failing action names (`kernel=gemv` and
/// its `[m, k]` shape), if the site reads packed weights.
pub(crate) fn packed_site(
    plans: &Plans,
    params: &BTreeMap<String, Value>,
) -> Option<(String, GemvSpec)> {
    let shape = match params.get("shape") {
        Some(Value::IntList(s)) => s.iter().map(|&v| v as usize).collect::<Vec<_>>(),
        _ => return None,
    };
    design::sites(plans)
        .into_iter()
        .find_map(|(key, (_, launch))| match launch {
            Launch::Gemv { spec, .. } if spec.packed.is_some() && [spec.m, spec.k] == shape[..] => {
                Some((key, spec))
            }
            _ => None,
        })
}

/// A `select-tiling` change of a packed GEMV with the tile re-derived from
/// the packed footprint; the note says what the recorded fix gave and what
/// replaced it. `None` when no tile places.
fn rederive_tile(device: &Device, spec: &GemvSpec, change: &Change) -> Option<(Change, String)> {
    let (op, params) = change;
    let retiled = spec.retiled(device)?;
    let mut out = params.clone();
    let tile = Value::IntList(vec![retiled.tile.tile_m as i64]);
    let recorded = params.get("tile").cloned();
    out.insert("tile".into(), tile.clone());
    let note = format!(
        "its fix as recorded gives tile={}; re-derived from the {} footprint: tile={}",
        recorded.map_or_else(|| "-".into(), |v| crate::notation::value(&v)),
        formats::word(
            spec.packed
                .map_or(WeightFormat::Bf16, |f| f.weight_format())
        ),
        crate::notation::value(&tile)
    );
    Some(((*op, out), note))
}

/// The changes a lesson recorded on `recorded` makes to the packed GEMV
/// `spec`: tilings re-derived, the rest as evaluated (the caller's re-check is
/// the phase-1 validation of the packed kernel); with the note for the report.
pub(crate) fn for_packed_site(
    device: &Device,
    spec: &GemvSpec,
    recorded: WeightFormat,
    changes: Vec<Change>,
) -> (Vec<Change>, FormatAction, String) {
    let mut notes = Vec::new();
    let mut action = FormatAction::Revalidated;
    let changes = changes
        .into_iter()
        .map(|change| match change.0 {
            OpKind::SelectTiling => match rederive_tile(device, spec, &change) {
                Some((c, note)) => {
                    action = FormatAction::Rederived;
                    notes.push(note);
                    c
                }
                None => change,
            },
            _ => change,
        })
        .collect();
    notes.push(format!(
        "re-validated by phase 1's check of the packed {} kernel",
        design_label(spec)
    ));
    let note = format!(
        "recorded on {} weights, the kernel reads {}: {}",
        formats::word(recorded),
        design_label(spec),
        notes.join("; ")
    );
    (changes, action, note)
}

fn design_label(spec: &GemvSpec) -> String {
    crate::xdna2::kernels::gemv_packed::label(spec)
}

/// Records an item applied to other weights than it was recorded on in the
/// report's weight-path section (a run on 4-bit weights always has one).
pub(crate) fn record(run: &mut Run<'_>, entry: OtherFormat) {
    if let Some(path) = run.report.weight_path.as_mut() {
        path.recorded_on.push(entry);
    }
}

/// The format the design's packed GEMVs read (one per model: the packing
/// decision refuses mixed layers), `None` on the bf16 path.
pub(crate) fn packed_format(run: &Run<'_>) -> Option<WeightFormat> {
    run.design.packed.values().next().map(|f| f.weight_format())
}

/// A debugging lesson's changes for the site its failure names: when the site
/// is a packed GEMV and the lesson was recorded on other weights, the changes
/// for the packed footprint and the report's entry for them.
pub(crate) fn adapt_lesson(
    run: &Run<'_>,
    lesson: &crate::bundle::Lesson,
    failure: &crate::exec::gates::remedy::Failure,
    changes: Vec<Change>,
) -> (Vec<Change>, Option<OtherFormat>) {
    let Some(deployed) = packed_format(run) else {
        return (changes, None);
    };
    let Some(op) = std::iter::once(&lesson.fix)
        .chain(&lesson.then)
        .map(|r| r.op)
        .find(|op| mismatch(lesson.weights, *op, deployed).is_some())
    else {
        return (changes, None);
    };
    let site = run
        .plans()
        .ok()
        .and_then(|plans| packed_site(&plans, &failure.params));
    let (Some((_, spec)), Some(recorded)) = (site, lesson.weights) else {
        return (changes, None);
    };
    let (changes, action, detail) = for_packed_site(&run.device, &spec, recorded, changes);
    let entry = OtherFormat {
        item: format!("lesson {}", lesson.id),
        op,
        recorded: formats::word(recorded).to_string(),
        deployed: formats::word(deployed).to_string(),
        action,
        detail,
    };
    (changes, Some(entry))
}

/// The packed GEMV launches of a decode plan with their weight buffers, by
/// buffer name: what a change recorded on other weights may not alter unchecked.
fn packed_gemvs(plans: &Plans) -> BTreeMap<String, (Launch, Option<crate::xdna2::plan::Buffer>)> {
    let plan = &plans.decode;
    design::launches(plan)
        .filter_map(|launch| match launch {
            Launch::Gemv { w, spec, .. } if spec.packed.is_some() => {
                Some((w.clone(), (launch.clone(), plan.buffers.get(w).cloned())))
            }
            _ => None,
        })
        .collect()
}

/// Whether going from `old` to `new` changes a packed GEMV or its weight buffer.
pub(crate) fn changes_packed(old: &Plans, new: &Plans) -> bool {
    packed_gemvs(old) != packed_gemvs(new)
}

/// The formats of a phase 4/5 technique recorded on other weights than the
/// design's packed GEMVs read: `(recorded, deployed)`.
pub(crate) fn technique_mismatch(
    run: &Run<'_>,
    step: &crate::bundle::Step,
) -> Option<(WeightFormat, WeightFormat)> {
    let deployed = packed_format(run)?;
    mismatch(step.weights, step.op, deployed).map(|r| (r, deployed))
}

/// The report's entry for a technique recorded on `recorded` weights that
/// changed packed GEMVs of `deployed` weights, with its outcome.
pub(crate) fn record_technique(
    run: &mut Run<'_>,
    step: &crate::bundle::Step,
    outcome: &crate::exec::artifacts::record::StepOutcome,
    (recorded, deployed): (WeightFormat, WeightFormat),
) {
    use crate::exec::artifacts::record::StepOutcome as O;
    let (action, what) = match outcome {
        O::Kept { why } => (FormatAction::Revalidated, format!("kept: {why}")),
        O::Reverted { why } => (FormatAction::Revalidated, format!("reverted: {why}")),
        O::Failed { why } => (FormatAction::Revalidated, format!("failed: {why}")),
        O::Rederived { why } => (FormatAction::Rederived, why.clone()),
        O::NotApplicable { why } | O::Covered { why } => (FormatAction::Skipped, why.clone()),
        O::AsRecorded => (FormatAction::Revalidated, "applied".into()),
    };
    let entry = OtherFormat {
        item: format!("step {}", step.id),
        op: step.op,
        recorded: formats::word(recorded).to_string(),
        deployed: formats::word(deployed).to_string(),
        action,
        detail: what,
    };
    record(run, entry);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::Expr;
    use crate::exec::gates::remedy::apply_remedy;
    use crate::xdna2::kernels::{Herd, PackedFormat};

    /// The llama1b lesson p1.lesson.gemv-l2, recorded on bf16: `tile_m =
    /// round_down(524288 / (herd_m * (2 * K + 2)), 2)`, the panel of 2-byte rows.
    fn gemv_l2_fix() -> crate::bundle::Remedy {
        use crate::bundle::BinaryOp::{Add, Div, Mul};
        let bin = |op, lhs: Expr, rhs: Expr| Expr::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        };
        let (int, var) = (
            |i| Expr::Lit(Value::Int(i)),
            |v: &str| Expr::Var(v.to_string()),
        );
        let panel = bin(
            Mul,
            var("herd_m"),
            bin(Add, bin(Mul, int(2), var("K")), int(2)),
        );
        crate::bundle::Remedy {
            op: OpKind::SelectTiling,
            set: BTreeMap::from([(
                "tile_m".to_string(),
                Expr::Call {
                    func: "round_down".into(),
                    args: vec![bin(Div, int(524288), panel), int(2)],
                },
            )]),
        }
    }

    fn action(spec: &GemvSpec) -> BTreeMap<String, Value> {
        BTreeMap::from([
            ("kernel".into(), Value::Text("gemv".into())),
            (
                "shape".into(),
                Value::IntList(vec![spec.m as i64, spec.k as i64]),
            ),
            (
                "herd".into(),
                Value::IntList(vec![spec.herd.cols() as i64, spec.herd.rows() as i64]),
            ),
            ("tile".into(), Value::IntList(vec![spec.tile.tile_m as i64])),
        ])
    }

    #[test]
    fn a_bf16_footprint_fix_is_re_derived_for_packed_blocks_and_kept_for_bf16() {
        let device = Device::npu2();
        let herd = Herd([8, 1]);
        let packed = crate::xdna2::kernels::gemv_packed::select(
            &device,
            2048,
            8192,
            herd,
            PackedFormat::Q4_1,
        );
        let fix = gemv_l2_fix();
        assert!(matches!(fix.set.get("tile_m"), Some(Expr::Call { .. })));
        let as_recorded = apply_remedy(&fix, &action(&packed), &BTreeMap::new())
            .unwrap_or_else(|e| panic!("{e}"));
        // The recorded formula sizes 2-byte rows: 2 at K = 8192.
        assert_eq!(as_recorded["tile"], Value::IntList(vec![2]));
        let (changes, how, note) = for_packed_site(
            &device,
            &packed,
            WeightFormat::Bf16,
            vec![(OpKind::SelectTiling, as_recorded)],
        );
        assert_eq!(how, FormatAction::Rederived, "{note}");
        let Value::IntList(tile) = &changes[0].1["tile"] else {
            panic!("a tile list: {changes:?}")
        };
        // The packed panel is 5/16 of the bf16 one: a larger tile places.
        assert!(tile[0] > 2, "{note}");
        let retiled = GemvSpec {
            tile: crate::xdna2::kernels::GemvTile {
                tile_m: tile[0] as usize,
                ..packed.tile
            },
            ..packed
        };
        assert!(retiled.retiled(&device).is_some());
        assert!(
            note.contains("tile=[2]") && note.contains("q4_1 footprint"),
            "{note}"
        );
        // On bf16 weights the recorded format matches: nothing to re-derive.
        assert_eq!(
            mismatch(
                Some(WeightFormat::Bf16),
                OpKind::SelectTiling,
                WeightFormat::Bf16
            ),
            None
        );
        assert_eq!(
            mismatch(
                Some(WeightFormat::Bf16),
                OpKind::SelectTiling,
                WeightFormat::Q4_1
            ),
            Some(WeightFormat::Bf16)
        );
        assert_eq!(
            mismatch(
                Some(WeightFormat::Bf16),
                OpKind::AlignLayout,
                WeightFormat::Q4_1
            ),
            None
        );
    }
}
