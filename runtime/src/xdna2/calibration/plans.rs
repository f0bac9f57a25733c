//! The committed plan files of the reference model (the ablation cells A to D, the
//! reference decode plan and the IRON-like baseline): how each is built, which are
//! stale, writing them, and the published speed-ups modeled from them.

use std::path::Path;

use serde::Serialize;

use crate::model::arch::Architecture;
use crate::xdna2::builder::{plan_for, PlanError};
use crate::xdna2::cost::{time_plan, Params};
use crate::xdna2::device::Device;
use crate::xdna2::plan::{Phase, Plan, PlanOptions};

use super::{CalibrationError, DataSet, Scope};

/// A committed plan file and how it is built.
#[derive(Debug, Clone)]
pub struct PlanFile {
    /// Path under the data directory.
    pub path: &'static str,
    pub phase: Phase,
    pub seq_len: usize,
    pub options: PlanOptions,
    /// What the plan stands for.
    pub doc: &'static str,
}

/// The ablation cell's options: A naive, B + weight buffers, C + shared
/// intermediate buffers, D + merged launches (calibration §8). The decode
/// cascade is off in every cell (the ablation's o_gemv_ffn has 8 launches);
/// omit_pingpong and the seq-first layout are on in every cell, as they were
/// before the ablation (its cells are bit-identical).
pub fn ablation_options(cell: char) -> PlanOptions {
    let reference = PlanOptions::reference();
    let mut o = PlanOptions {
        cascade_ffn: false,
        omit_pingpong: true,
        layout: reference.layout,
        ..PlanOptions::naive()
    };
    if cell >= 'b' {
        o.static_weights = reference.static_weights;
    }
    if cell >= 'c' {
        o.shared_intermediates = true;
        o.mark_intermediates = true;
    }
    if cell >= 'd' {
        o.merge_launches = true;
    }
    o
}

/// The IRON-like baseline: one call per launch, static weight buffers but
/// no skipped writes or shared buffers, the full-sequence LM-head GEMM in
/// prefill, the LM head on the CPU in decode. Reconstructed from the
/// trajectory's changes (calibration §8 P1, P3, P5, D1, D2) that the AIR
/// deployment made over it.
pub fn iron_baseline_options() -> PlanOptions {
    PlanOptions {
        merge_launches: false,
        static_weights: true,
        mark_intermediates: false,
        shared_intermediates: false,
        last_token_lm_head: false,
        npu_lm_head: false,
        cascade_ffn: false,
        omit_pingpong: false,
        ..PlanOptions::reference()
    }
}

/// Every committed plan file (Llama-3.2-1B).
pub fn reference_plans(decode_context: usize, prefill_seq_len: usize) -> Vec<PlanFile> {
    let mut files = Vec::new();
    let cells = [
        ('a', "A naive"),
        ('b', "B + weight buffers"),
        ('c', "C + shared intermediate buffers"),
        ('d', "D + merged launches"),
    ];
    let prefill_paths = [
        "plans/llama32_1b-prefill-a.json",
        "plans/llama32_1b-prefill-b.json",
        "plans/llama32_1b-prefill-c.json",
        "plans/llama32_1b-prefill-d.json",
    ];
    let decode_paths = [
        "plans/llama32_1b-decode-a.json",
        "plans/llama32_1b-decode-b.json",
        "plans/llama32_1b-decode-c.json",
        "plans/llama32_1b-decode-d.json",
    ];
    for (((cell, doc), prefill), decode) in cells.into_iter().zip(prefill_paths).zip(decode_paths) {
        files.push(PlanFile {
            path: prefill,
            phase: Phase::Prefill,
            seq_len: prefill_seq_len,
            options: ablation_options(cell),
            doc,
        });
        files.push(PlanFile {
            path: decode,
            phase: Phase::Decode,
            seq_len: decode_context,
            options: ablation_options(cell),
            doc,
        });
    }
    files.push(PlanFile {
        path: "plans/llama32_1b-decode-reference.json",
        phase: Phase::Decode,
        seq_len: decode_context,
        options: PlanOptions::reference(),
        doc: "reference decode (cell D + O/FFN cascade)",
    });
    files.push(PlanFile {
        path: "plans/llama32_1b-prefill-iron.json",
        phase: Phase::Prefill,
        seq_len: prefill_seq_len,
        options: iron_baseline_options(),
        doc: "IRON-like baseline",
    });
    files.push(PlanFile {
        path: "plans/llama32_1b-decode-iron.json",
        phase: Phase::Decode,
        seq_len: decode_context,
        options: iron_baseline_options(),
        doc: "IRON-like baseline",
    });
    files
}

/// The model every committed plan file is for.
pub const REFERENCE_MODEL: &str = "llama-3.2-1b";

/// Builds a committed plan file's plan.
pub fn build_plan_file(
    file: &PlanFile,
    arch: &Architecture,
    device: &Device,
) -> Result<Plan, PlanError> {
    plan_for(
        REFERENCE_MODEL,
        arch,
        device,
        file.phase,
        file.seq_len,
        &file.options,
    )
}

/// The committed plan files whose content differs from what the builder
/// produces now (empty when none is stale).
pub fn stale_plan_files(
    data: &DataSet,
    data_dir: &Path,
    arch: &Architecture,
    device: &Device,
) -> Result<Vec<String>, CalibrationError> {
    let mut stale = Vec::new();
    for file in reference_plans(data.decode_context, data.prefill_seq_len) {
        let expected = build_plan_file(&file, arch, device)?.to_json();
        let found = std::fs::read_to_string(data_dir.join(file.path)).unwrap_or_default();
        if found != expected {
            stale.push(file.path.to_string());
        }
    }
    Ok(stale)
}

/// Writes every plan file from the builder.
pub fn write_plan_files(
    data: &DataSet,
    data_dir: &Path,
    arch: &Architecture,
    device: &Device,
) -> Result<Vec<String>, CalibrationError> {
    let mut written = Vec::new();
    for file in reference_plans(data.decode_context, data.prefill_seq_len) {
        let path = data_dir.join(file.path);
        let text = build_plan_file(&file, arch, device)?.to_json();
        std::fs::write(&path, text).map_err(|e| CalibrationError::Io {
            path: file.path.to_string(),
            message: e.to_string(),
        })?;
        written.push(file.path.to_string());
    }
    Ok(written)
}

/// A published speed-up and the cost model's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RatioCheck {
    pub name: String,
    pub modeled: f64,
    pub published: f64,
    pub source: String,
}

impl RatioCheck {
    /// modeled / published − 1.
    pub fn error(&self) -> f64 {
        self.modeled / self.published - 1.0
    }
}

/// Ablation A→D and IRON-baseline → reference speed-ups, modeled from the
/// committed plan files.
pub fn ratio_checks(
    data_dir: &Path,
    device: &Device,
    params: &Params,
) -> Result<Vec<RatioCheck>, CalibrationError> {
    let time = |name: &str, scope: Scope| -> Result<f64, CalibrationError> {
        let plan = Plan::load(&data_dir.join(name))?;
        let t = time_plan(&plan, device, params);
        Ok(match scope {
            Scope::Layers => t.layers_s(),
            Scope::Total => t.total_s,
        })
    };
    let ablation = "mlir-air:programming_examples/llama32_1b/ablation/README.md@refs/pull/1635/head (calibration §8)";
    let iron = "mlir-air:programming_examples/llms/llama32_1b/docs/profile.md (calibration §6): IRON 2.744 s / 370 ms vs AIR 1.27 s / 92 ms";
    Ok(vec![
        RatioCheck {
            name: "ablation prefill A/D".into(),
            modeled: time("plans/llama32_1b-prefill-a.json", Scope::Layers)?
                / time("plans/llama32_1b-prefill-d.json", Scope::Layers)?,
            published: 1.56,
            source: ablation.into(),
        },
        RatioCheck {
            name: "ablation decode A/D".into(),
            modeled: time("plans/llama32_1b-decode-a.json", Scope::Total)?
                / time("plans/llama32_1b-decode-d.json", Scope::Total)?,
            published: 2.83,
            source: ablation.into(),
        },
        RatioCheck {
            name: "IRON-like baseline / reference, prefill".into(),
            modeled: time("plans/llama32_1b-prefill-iron.json", Scope::Total)?
                / time("plans/llama32_1b-prefill-d.json", Scope::Total)?,
            published: 2.744 / 1.27,
            source: iron.into(),
        },
        RatioCheck {
            name: "IRON-like baseline / reference, decode".into(),
            modeled: time("plans/llama32_1b-decode-iron.json", Scope::Total)?
                / time("plans/llama32_1b-decode-d.json", Scope::Total)?,
            published: 370.0 / 92.0,
            source: iron.into(),
        },
    ])
}
