//! The 4-bit weight path in a deployment: phase 0 keeps a 4-bit model's
//! weights as stored (or rounds them to bf16 on `--weights bf16`), phase 1
//! takes the packing decision (`xdna2::packing`) into the design before any
//! kernel is enumerated, so every later plan, gate and `plan.json` carries it,
//! and phase 6 models the production design's decode on both weight paths.
//! A model without 4-bit weights passes through untouched.

use std::collections::BTreeMap;

use crate::exec::artifacts::record::{ContextDecode, PhaseRecord};
use crate::exec::artifacts::weight_path::{BufferWeights, PathDecode, WeightPathRecord};
use crate::exec::design::{Design, SEQ_LEN};
use crate::exec::fault::Fault;
use crate::exec::run::Run;
use crate::exec::DeployError;
use crate::model::source::ModelSource;
use crate::model::{Model, WeightOrigin};
use crate::xdna2::cost::time_plan;
use crate::xdna2::interpreter::weights::TensorIndex;
use crate::xdna2::kernels::PackedFormat;
use crate::xdna2::packing::{pack_decode_gemvs, stored_format, stores_four_bit, WeightPath};
use crate::xdna2::plan::{Launch, Phase, Plan, Step};

/// Phase 0: the model the NPU path and the gates' oracle run on. On the
/// packed path a 4-bit model keeps its blocks (the oracle reads their exact
/// values); otherwise packed weights are rounded to bf16 once, on both sides.
pub(crate) fn model_for(path: WeightPath, model: Model) -> Result<Model, DeployError> {
    let four_bit = stores_four_bit(&model.weights);
    match path {
        WeightPath::Packed if !four_bit => Err(DeployError::Usage(format!(
            "--weights packed: the model stores no Q4_0 or Q4_1 weights ({}); use --weights bf16 or auto",
            stored_summary(&model)
        ))),
        WeightPath::Auto | WeightPath::Packed if four_bit => Ok(model),
        _ => Ok(model.for_bf16_path()),
    }
}

fn stored_summary(model: &Model) -> String {
    match &model.origin {
        WeightOrigin::Gguf { formats, .. } => formats
            .iter()
            .map(|(f, n)| format!("{n} {f}"))
            .collect::<Vec<_>>()
            .join(", "),
        WeightOrigin::Checkpoint { .. } => "a safetensors checkpoint".into(),
        WeightOrigin::Random { .. } => "seeded random bf16 weights".into(),
    }
}

/// Phase 1: decides the decode GEMVs' weights on the current design and keeps
/// the packed buffers in it; records the decision for the report; plants the
/// packed kernel's fault when asked.
pub(crate) fn decide(run: &mut Run<'_>, rec: &mut PhaseRecord) -> Result<(), DeployError> {
    decide_buffers(run, rec)?;
    plant_nibble_fault(run, rec);
    Ok(())
}

fn decide_buffers(run: &mut Run<'_>, rec: &mut PhaseRecord) -> Result<(), DeployError> {
    let asked = run.options.weights;
    let reopened;
    let stored = if stores_four_bit(&run.loaded.model.weights) {
        &run.loaded.model
    } else if asked == WeightPath::Bf16 && gguf_with_four_bit(&run.loaded.model) {
        // Rounded in phase 0: the stored blocks, mapped again, say what the
        // packed path would have read.
        reopened = ModelSource::locate(&run.options.model_dir)
            .map_err(crate::model::ModelError::from)
            .and_then(|s| s.load(run.loaded.model.arch.clone(), None))?;
        &reopened
    } else {
        return Ok(());
    };
    let mut decode = run.plans()?.decode;
    let choices = pack_decode_gemvs(&mut decode, &stored.weights, &run.device);
    let index = TensorIndex::new(&stored.weights);
    let packable: BTreeMap<String, PackedFormat> = choices
        .iter()
        .filter_map(|c| c.packed.map(|f| (c.buffer.clone(), f)))
        .collect();
    let buffers = choices
        .into_iter()
        .map(|c| BufferWeights {
            stored: stored_format(&decode, &c.buffer, &index)
                .map_or_else(|| "?".into(), |f| f.name().to_string()),
            packed: c.packed.filter(|_| asked != WeightPath::Bf16),
            reason: match (asked, c.packed) {
                (WeightPath::Bf16, Some(f)) => format!("--weights bf16 (packable as {f})"),
                _ => c.reason,
            },
            buffer: c.buffer,
            shape: c.shape,
            bytes_per_token: 0.0,
        })
        .collect::<Vec<_>>();
    if asked != WeightPath::Bf16 {
        run.design.packed = packable.clone();
    }
    let reads: Vec<String> = buffers
        .iter()
        .map(|b| {
            let path = b.packed.map_or_else(|| "bf16".into(), |f| f.to_string());
            format!("{} {path}", b.buffer)
        })
        .collect();
    rec.notes.push(format!(
        "weight path (--weights {asked}): decode GEMVs read {}",
        reads.join(", ")
    ));
    run.packable = packable;
    run.report.weight_path = Some(WeightPathRecord {
        asked,
        buffers,
        decode: Vec::new(),
        calibration: String::new(),
        recorded_on: Vec::new(),
    });
    Ok(())
}

/// Planted fault `packed-nibble-order`, on a design with packed GEMVs.
fn plant_nibble_fault(run: &mut Run<'_>, rec: &mut PhaseRecord) {
    let fault = Fault::PackedNibbleOrder;
    if !run.options.faults.contains(&fault) {
        return;
    }
    if run.design.packed.is_empty() {
        rec.notes.push(format!(
            "planted fault {fault} does not apply: no decode GEMV reads packed weights"
        ));
        return;
    }
    run.design.path.defects.packed_nibble_order = true;
    rec.notes
        .push(format!("planted fault {fault}: {}", fault.description()));
}

fn gguf_with_four_bit(model: &Model) -> bool {
    matches!(&model.origin, WeightOrigin::Gguf { formats, .. }
        if formats.keys().any(|f| f == "Q4_0" || f == "Q4_1"))
}

/// Phase 6: bytes per decode token of each buffer on the production plan, and
/// the production design's decode modeled on both weight paths.
pub(crate) fn model_both_paths(run: &mut Run<'_>, calibration: &str) -> Result<(), DeployError> {
    if run.report.weight_path.is_none() {
        return Ok(());
    }
    let contexts = [
        SEQ_LEN,
        crate::xdna2::calibration::DataSet::committed().decode_context,
    ];
    let packed = Design {
        packed: run.packable.clone(),
        ..run.design.clone()
    };
    let bf16 = Design {
        packed: BTreeMap::new(),
        ..run.design.clone()
    };
    let production = run.plans()?.decode;
    let mut decode = Vec::new();
    for (name, design) in [("packed", &packed), ("bf16", &bf16)] {
        for &context in &contexts {
            let loaded = &run.loaded;
            let plan = design.plan(
                &loaded.name,
                &loaded.model.arch,
                &run.device,
                Phase::Decode,
                context,
            )?;
            let seconds = time_plan(&plan, &run.device, &run.params).total_s;
            decode.push(PathDecode {
                path: name.into(),
                decode: ContextDecode {
                    context,
                    ms_per_token: seconds * 1e3,
                    tok_s: if seconds > 0.0 { 1.0 / seconds } else { 0.0 },
                },
                gemv_bytes_per_token: gemv_bytes(&plan).values().sum(),
            });
        }
    }
    let bytes = gemv_bytes(&production);
    let Some(record) = run.report.weight_path.as_mut() else {
        return Ok(());
    };
    for b in &mut record.buffers {
        b.bytes_per_token = bytes.get(&b.buffer).copied().unwrap_or(0.0);
    }
    record.decode = decode;
    record.calibration = format!(
        "{calibration}. **Uncalibrated** for the packed GEMV: it is timed with its packed bytes and no unpacking cost, and no published 4-bit deployment has been fitted."
    );
    Ok(())
}

/// Weight bytes one decode token streams per GEMV buffer (layer steps count
/// once per layer).
fn gemv_bytes(plan: &Plan) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let sections = [
        (&plan.prologue, 1),
        (&plan.layer, plan.num_layers),
        (&plan.epilogue, 1),
    ];
    for (steps, times) in sections {
        for step in steps {
            let Step::Call(call) = step else { continue };
            for launch in &call.launches {
                if let Launch::Gemv { w, spec, .. } = launch {
                    *out.entry(w.clone()).or_insert(0.0) += spec.weight_bytes() * times as f64;
                }
            }
        }
    }
    out
}
