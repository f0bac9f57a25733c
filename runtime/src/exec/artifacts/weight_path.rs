//! The report's weight-path section: which weights each decode GEMV buffer
//! reads (the 4-bit blocks as stored, or bf16, and why), the LM head's (its
//! stored format and why it reads bf16), the bytes a decode token streams
//! through each, prefill's plan decision (host-dequantized bf16 GEMMs, with
//! what the bf16 copy costs), the modeled decode of the packed plan beside
//! the bf16 plan of the same design, both timed in the same run, and the bundle
//! steps and lessons recorded on other weights than the GEMVs they changed
//! read, with what the executor did with each. Present only for a model that
//! stores 4-bit weights; a bf16 model's report has none.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::record::ContextDecode;
use crate::ops::OpKind;
use crate::xdna2::kernels::PackedFormat;
use crate::xdna2::packing::WeightPath;

/// The weight path of a run on a model with 4-bit weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WeightPathRecord {
    /// What `--weights` asked for.
    pub asked: WeightPath,
    /// One row per decode GEMV weight buffer, by name, then the LM head.
    pub buffers: Vec<BufferWeights>,
    /// Prefill's GEMM weights: dequantized on the host to a bf16 copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill: Option<PrefillWeights>,
    /// The production design's modeled decode on both paths (phase 6).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decode: Vec<PathDecode>,
    /// The cost model's calibration note, and what it does not cover.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub calibration: String,
    /// Bundle steps and lessons recorded on another weight format than the
    /// packed GEMVs they would change, in the order the run met them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recorded_on: Vec<OtherFormat>,
}

/// A step or lesson recorded on other weights than the kernel it changes reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OtherFormat {
    /// `step p5-…` or `lesson p1.lesson.…`.
    pub item: String,
    pub op: OpKind,
    /// The format it was recorded on (`bf16`).
    pub recorded: String,
    /// The format of the weights it met (`q4_1`).
    pub deployed: String,
    pub action: FormatAction,
    /// What was re-derived or re-validated, and the outcome.
    pub detail: String,
}

/// What the executor did with an item recorded on other weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FormatAction {
    /// Its values were computed again for the weights in front of the run.
    Rederived,
    /// Applied, then checked on those weights before it was kept.
    Revalidated,
    /// Not applied, with the reason.
    Skipped,
}

impl FormatAction {
    fn words(self) -> &'static str {
        match self {
            FormatAction::Rederived => "re-derived",
            FormatAction::Revalidated => "re-validated",
            FormatAction::Skipped => "skipped",
        }
    }
}

/// One decode GEMV weight buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BufferWeights {
    pub buffer: String,
    /// `576x576`.
    pub shape: String,
    /// The format layer 0's tensor is stored in (`Q4_1`, `Q8_0`, ...).
    pub stored: String,
    /// The packed format the GEMV reads, or `None` for bf16.
    pub packed: Option<PackedFormat>,
    /// Why bf16 when not packed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Weight bytes one decode token streams through this buffer, all layers,
    /// on the production plan (phase 6).
    #[serde(default)]
    pub bytes_per_token: f64,
}

/// Prefill's GEMM weights on a 4-bit model: the plan decision (the published
/// design's) is to dequantize them once on the host and run bf16 GEMMs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefillWeights {
    /// GEMM weight tensors, all layers.
    pub tensors: usize,
    /// Their bytes as the model file stores them.
    pub stored_bytes: f64,
    /// The bf16 copy the GEMMs read (padding included).
    pub bf16_bytes: f64,
    /// Modeled one-time write of the prefill plan's static weight buffers
    /// (outside TTFT; phase 6).
    #[serde(default)]
    pub setup_ms: f64,
}

/// Why prefill reads bf16 (the report's reason column).
pub const PREFILL_REASON: &str = "plan decision, the published design: mlir-air's 4-bit models run prefill as bf16 GEMMs on host-dequantized weights (calibration §6); 2048-row GEMMs are compute-bound (§3: Gemma's Up and Down within 5 % at 1.9x different DRAM traffic), so packed bytes would not shorten them, and the published int4 GEMM backend ran 698 ms/layer against bf16's 84 (§6)";

/// Modeled decode of one weight path at one context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathDecode {
    /// `packed` or `bf16`.
    pub path: String,
    pub decode: ContextDecode,
    /// Weight bytes of every GEMV of one decode token.
    pub gemv_bytes_per_token: f64,
}

/// The section's Markdown.
pub fn render(record: &WeightPathRecord) -> String {
    let mut md = String::new();
    let packed = record.buffers.iter().filter(|b| b.packed.is_some()).count();
    let total = record.buffers.len();
    let rest = if packed < total {
        ", the others a bf16 copy"
    } else {
        ""
    };
    let oracle = if packed > 0 {
        "the exact dequantized weights (`w = d·q + m` from the same bytes)"
    } else {
        "the same bf16 rounding of the weights"
    };
    let _ = writeln!(
        md,
        "## Weight path\n\n`--weights {}`: {packed} of {total} decode GEMV weight buffers read their stored 4-bit blocks (unpacked to bf16 inside the GEMV){rest}. Prefill's GEMMs and the norms read the bf16 rounding of their weights. The gates compare against the CPU oracle on {oracle}.\n",
        record.asked,
    );
    md.push_str("| buffer | shape | stored | GEMV reads | why | bytes per decode token |\n|---|---|---|---|---|---|\n");
    for b in &record.buffers {
        let reads = b
            .packed
            .map_or_else(|| "bf16".to_string(), |f| format!("packed {f}"));
        let why = match (&b.packed, b.reason.as_str()) {
            (Some(_), _) => "every layer stores it in one 4-bit format, as stored".to_string(),
            (None, r) => r.replace('|', "\\|"),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {reads} | {why} | {} |",
            b.buffer,
            b.shape,
            b.stored,
            byte_size(b.bytes_per_token)
        );
    }
    if let Some(p) = &record.prefill {
        let _ = writeln!(
            md,
            "| prefill GEMMs | {} tensors | {} as stored | bf16 (host dequantized once; modeled setup write {:.1} ms, outside TTFT) | {} | {} bf16 copy per model (none per token) |",
            p.tensors,
            byte_size(p.stored_bytes),
            p.setup_ms,
            PREFILL_REASON,
            byte_size(p.bf16_bytes)
        );
    }
    if !record.decode.is_empty() {
        md.push_str("\nModeled decode of the production design on both weight paths (one run, the same plans but for the GEMVs' weights):\n\n| weight path | context | GEMV weight bytes per token | modeled ms/token | modeled tok/s |\n|---|---|---|---|---|\n");
        for d in &record.decode {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.2} | {:.1} |",
                d.path,
                d.decode.context,
                byte_size(d.gemv_bytes_per_token),
                d.decode.ms_per_token,
                d.decode.tok_s
            );
        }
        let _ = writeln!(md, "\n{}", record.calibration);
    }
    render_recorded_on(&record.recorded_on, &mut md);
    md
}

/// The items recorded on other weights, one row each.
fn render_recorded_on(items: &[OtherFormat], md: &mut String) {
    if items.is_empty() {
        return;
    }
    md.push_str("\nBundle steps and lessons recorded on other weights than the kernels they changed read: none was applied as recorded.\n\n| item | operation | recorded on | met | done | how |\n|---|---|---|---|---|---|\n");
    for i in items {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            i.item,
            i.op,
            i.recorded,
            i.deployed,
            i.action.words(),
            i.detail.replace('|', "\\|")
        );
    }
}

/// `1.23 MiB`, or KiB below one MiB (a test model's buffers are a few KiB).
fn byte_size(bytes: f64) -> String {
    match bytes / 1024.0 {
        kib if kib < 1024.0 => format!("{kib:.1} KiB"),
        kib => format!("{:.2} MiB", kib / 1024.0),
    }
}
