//! The 4-bit weight path in a deployment: phase 0 keeps a 4-bit model's
//! weights as stored (or rounds them to bf16 on `--weights bf16`), phase 1
//! takes the packing decision (`xdna2::packing`) into the design before any
//! kernel is enumerated, so every later plan, gate and `plan.json` carries it,
//! and phase 6 models the production design's decode on both weight paths.
//! A model without 4-bit weights passes through untouched.

use std::collections::BTreeMap;

use crate::exec::artifacts::record::{ContextDecode, PhaseRecord};
use crate::exec::artifacts::weight_path::{
    BufferWeights, PathDecode, PrefillWeights, WeightPathRecord,
};
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
        WeightPath::Packed if !four_bit => Err(DeployError::NotFourBit {
            stored: stored_summary(&model),
        }),
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
        WeightOrigin::Random {
            quantized: Some(f), ..
        } => format!(
            "seeded random weights, the decoder projections quantized to {} in memory (--seeded-weights)",
            f.name()
        ),
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
    let mut buffers = choices
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
    buffers.push(lm_head_row(stored, &index));
    let prefill = prefill_weights(&run.plans()?.prefill, &index);
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
        prefill: Some(prefill),
        decode: Vec::new(),
        calibration: String::new(),
        recorded_on: Vec::new(),
    });
    Ok(())
}

/// The LM head's row: its weights as stored (the tied embedding when the
/// model has no output projection) and why its GEMV reads bf16. The packed
/// GEMV reads Q4_0 and Q4_1 blocks only, and the LM-head GEMV's partitions
/// cut the stored rows (a setup transform), so the head reads a bf16 copy.
/// Its partitions and bytes per token come from the production plan (phase 6).
fn lm_head_row(model: &Model, index: &TensorIndex<'_>) -> BufferWeights {
    let arch = &model.arch;
    let tensor = if arch.tie_word_embeddings {
        "model.embed_tokens.weight"
    } else {
        "lm_head.weight"
    };
    let stored = index.get(tensor).map(|t| t.format());
    let name = stored.map_or("?", |f| f.name());
    let reason = match stored.and_then(PackedFormat::of) {
        Some(f) => format!(
            "`{tensor}` is stored {f}, but the LM-head GEMV's partitions cut its rows at setup: no packed LM head yet"
        ),
        None => format!(
            "`{tensor}` is stored {name}: the packed GEMV reads Q4_0 and Q4_1 blocks only (no {name} kernel), so the LM head reads a bf16 copy"
        ),
    };
    BufferWeights {
        buffer: LM_HEAD.into(),
        shape: format!("{}x{}", arch.vocab_size, arch.hidden_size),
        stored: name.to_string(),
        packed: None,
        reason,
        bytes_per_token: 0.0,
    }
}

/// The LM head's row name in the table and in [`gemv_bytes`].
const LM_HEAD: &str = "lm_head";

/// The production plan's LM head: its partitions, or that it runs on the
/// CPU, with the bytes the CPU matvec reads per token (an NPU head's bytes
/// are counted with the GEMVs, [`gemv_bytes`]).
fn lm_head_layout(decode: &Plan) -> (String, f64) {
    let steps = decode.calls().flat_map(|(_, call)| &call.launches);
    for launch in steps {
        if let Launch::LmHeadGemv { spec, .. } = launch {
            let layout = format!(" ({} NPU GEMV parts of {} rows)", spec.parts, spec.part.m);
            return (layout, 0.0);
        }
    }
    let host = decode.epilogue.iter().find_map(|s| match s {
        Step::Host(crate::xdna2::plan::HostOp::Matvec { m, k, .. }) => Some((m * k * 2) as f64),
        _ => None,
    });
    (
        " (a CPU matvec of its bf16 copy on the production plan)".into(),
        host.unwrap_or(0.0),
    )
}

/// Prefill's per-layer GEMM weights: the stored blocks and the bf16 copy the
/// GEMMs read. The decision is the published design's: mlir-air's 4-bit models run
/// prefill as bf16 GEMMs on weights dequantized on the host (calibration §6),
/// because prefill GEMMs are compute-bound (§3–§4: the 2048-row GEMMs run at
/// 4–9 TFLOP/s, and Gemma's Up and Down run within 5 % of each other at 1.9x
/// different DRAM traffic), so packed bytes would not shorten them, and the
/// one int4 GEMM backend published ran 698 ms per layer against the bf16
/// backend's 84 ms (llama32_1b_int4, §6).
fn prefill_weights(prefill: &Plan, index: &TensorIndex<'_>) -> PrefillWeights {
    let mut seen = std::collections::BTreeSet::new();
    let (mut tensors, mut stored, mut bf16) = (0, 0.0, 0.0);
    for (_, call) in prefill.calls() {
        for launch in &call.launches {
            let Launch::Gemm { b, .. } = launch else {
                continue;
            };
            // The LM head's GEMM (a naive plan's) has its own row.
            let Some(buffer) = prefill.buffers.get(b).filter(|b| b.per_layer) else {
                continue;
            };
            let Some(crate::xdna2::plan::WeightSource::Tensor { name, .. }) = &buffer.source else {
                continue;
            };
            if !seen.insert(b.clone()) {
                continue;
            }
            for layer in 0..prefill.num_layers {
                let tensor = index.get(&name.replace("{layer}", &layer.to_string()));
                tensors += 1;
                stored += tensor.map_or(0.0, |t| t.stored_bytes() as f64);
                bf16 += buffer.bytes();
            }
        }
    }
    PrefillWeights {
        tensors,
        stored_bytes: stored,
        bf16_bytes: bf16,
        setup_ms: 0.0,
    }
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
    let setup_s = time_plan(&run.plans()?.prefill, &run.device, &run.params).setup_s;
    let Some(record) = run.report.weight_path.as_mut() else {
        return Ok(());
    };
    if let Some(prefill) = record.prefill.as_mut() {
        prefill.setup_ms = setup_s * 1e3;
    }
    let (layout, host_bytes) = lm_head_layout(&production);
    for b in &mut record.buffers {
        b.bytes_per_token = bytes.get(&b.buffer).copied().unwrap_or(0.0);
        if b.buffer == LM_HEAD {
            b.shape.push_str(&layout);
            b.bytes_per_token += host_bytes;
        }
    }
    record.decode = decode;
    let fitted = crate::xdna2::calibration::FittedFourBit::committed();
    record.calibration = if run.design.options.fused_decode.is_some() {
        format!(
            "{calibration}. The packed GEMV's unpacking rate: {}. The bf16 rows run the same single-dispatch structure on the bf16 GEMV bodies, a combination no published deployment measured (**uncalibrated**).",
            fitted.note()
        )
    } else {
        format!(
            "{calibration}. The packed GEMV's unpacking rate: {}. The plan structure these packed figures run, a dispatch per call with CPU decode attention and a bf16 LM head, is **uncalibrated** for 4-bit weights: every published 4-bit deployment fuses each token into one dispatch (calibration §6).",
            fitted.note()
        )
    };
    Ok(())
}

/// Weight bytes one decode token streams per GEMV buffer, the LM head's
/// partitions as one (layer steps count once per layer).
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
                let (buffer, bytes) = match launch {
                    Launch::Gemv { w, spec, .. } => (w.clone(), spec.weight_bytes()),
                    // Every partition counts under the head's one row.
                    Launch::LmHeadGemv { spec, .. } => (LM_HEAD.into(), spec.part.weight_bytes()),
                    _ => continue,
                };
                *out.entry(buffer).or_insert(0.0) += bytes * times as f64;
            }
        }
    }
    out
}
