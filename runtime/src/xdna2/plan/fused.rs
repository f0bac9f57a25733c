//! The single-dispatch fused decode as a plan: one NPU dispatch per token runs
//! every layer and the LM head as one persistent design (herds configured once,
//! activations and the KV cache kept on the device), attention on the NPU.
//! Its layout on the array follows the published builder
//! (mlir-air:programming_examples/fused_decode/fused_decode.py): projections on
//! 4 columns × 4 rows of compute tiles (`NCX`, `NCY`, :466-467), attention on
//! up to 4 compute units (`N_ATTN_CU`, :196), one core each for RoPE, RMSNorm
//! and the gated activation (the egress consumers, :200), and each projection
//! column's weights fed on one or both of its shim channels (`W_DUAL_CHAN`,
//! :518). What the hardware refuses of it is checked here; what it costs is in
//! `cost`.

use serde::{Deserialize, Serialize};

use super::super::constraints::{Constraint, ConstraintViolation};
use super::super::device::Device;
use super::super::kernels::Kernel;
use super::{Launch, Plan, Section, Step};

/// Where the decode's KV cache lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FusedKv {
    /// On the device for the whole session; the dispatch appends this token's
    /// roped K/V row in place and reads the cache back for attention
    /// (fused_decode.py:25-26).
    #[default]
    Append,
    /// On the host; every token uploads each layer's attended window before
    /// the dispatch (the host cache stays the record).
    Upload,
}

/// The switches of the fused decode (`fused-decode kv=… channels=…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FusedOptions {
    pub kv: FusedKv,
    /// Shim host-to-array channels feeding each projection column's weights.
    pub weight_channels: usize,
}

/// Compute-tile columns and rows of the projections (fused_decode.py:466-467).
pub const PROJ_COLUMNS: usize = 4;
pub const PROJ_ROWS: usize = 4;
/// Attention compute units at most (fused_decode.py:196).
pub const ATTENTION_CUS_MAX: usize = 4;
/// Cores of RoPE, RMSNorm and the gated activation (fused_decode.py:200).
pub const VECTOR_CORES: usize = 3;
/// The call holding the final norm and the LM head: the dispatch ends there.
pub const HEAD_CALL: &str = "fused_decode.head";
/// The group every call of the fused dispatch belongs to.
pub const GROUP: &str = "fused_decode";
/// The device KV cache buffer: one region per layer, keys then values.
pub const KV_CACHE: &str = "kv_cache";

/// The fused decode's placement, as the builder laid it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FusedLayout {
    pub kv: FusedKv,
    pub weight_channels: usize,
    pub proj_columns: usize,
    pub proj_rows: usize,
    pub attention_cus: usize,
}

impl FusedLayout {
    pub fn new(options: FusedOptions, kv_heads: usize) -> Self {
        FusedLayout {
            kv: options.kv,
            weight_channels: options.weight_channels,
            proj_columns: PROJ_COLUMNS,
            proj_rows: PROJ_ROWS,
            attention_cus: attention_cus(kv_heads),
        }
    }

    /// Compute tiles the layout occupies.
    pub fn tiles(&self) -> usize {
        self.proj_columns * self.proj_rows + self.attention_cus + VECTOR_CORES
    }
}

/// The most CUs, at most four, that split `kv_heads` evenly (the published
/// engine fixes four; a model with 3 KV heads gets three here).
pub fn attention_cus(kv_heads: usize) -> usize {
    (1..=ATTENTION_CUS_MAX.min(kv_heads.max(1)))
        .rev()
        .find(|c| kv_heads % c == 0)
        .unwrap_or(1)
}

fn refused(constraint: Constraint, kernel: Kernel, detail: String) -> ConstraintViolation {
    ConstraintViolation {
        constraint,
        kernel,
        location: GROUP.to_string(),
        detail,
    }
}

impl Plan {
    /// Weight bytes one token streams through the fused dispatch: every layer's
    /// GEMVs and the LM head; and the largest layer's share.
    pub fn fused_weight_bytes(&self) -> (f64, f64) {
        let bytes = |steps: &[Step]| -> f64 {
            steps
                .iter()
                .filter_map(|s| match s {
                    Step::Call(c) => Some(c.launches.iter().map(weight_bytes).sum::<f64>()),
                    Step::Host(_) => None,
                })
                .sum()
        };
        let layer = bytes(&self.layer);
        (
            layer * self.num_layers as f64 + bytes(&self.epilogue),
            layer.max(bytes(&self.epilogue)),
        )
    }

    /// Weight buffer objects the dispatch takes: each within one buffer
    /// descriptor's reach, split between layers (the published builder's
    /// `DECODE_WGROUP`, mlir-air:programming_examples/llms/bench/decode_geometry.py:19-21).
    pub fn weight_groups(&self, device: &Device) -> usize {
        let (total, _) = self.fused_weight_bytes();
        (total / device.limits.buffer_offset_max_bytes as f64)
            .ceil()
            .max(1.0) as usize
    }

    /// What the hardware refuses of the fused layout: tiles beyond the array,
    /// shim channels beyond two per column in each direction, a projection off
    /// its columns, a layer's weights beyond one buffer object, host work
    /// inside the dispatch.
    pub(super) fn check_fused(
        &self,
        device: &Device,
        layout: &FusedLayout,
    ) -> Vec<ConstraintViolation> {
        let mut found = Vec::new();
        let array = device.columns * device.compute_rows;
        if layout.tiles() > array {
            found.push(refused(
                Constraint::Herd,
                Kernel::DecodeAttention,
                format!(
                    "{} projection tiles + {} attention CUs + {VECTOR_CORES} vector cores = {} tiles of {array}",
                    layout.proj_columns * layout.proj_rows,
                    layout.attention_cus,
                    layout.tiles()
                ),
            ));
        }
        let (shim_in, shim_out) = (device.shim_tile.dma_in, device.shim_tile.dma_out);
        if layout.weight_channels == 0 || layout.weight_channels > shim_in {
            found.push(refused(
                Constraint::DmaChannels,
                Kernel::Gemv,
                format!(
                    "{} weight channels per projection column; a shim tile has {shim_in}",
                    layout.weight_channels
                ),
            ));
        }
        // Weights, one KV readback per CU, and the activations with the norm
        // weights and RoPE table in; the appended rows and the output out.
        let needed_in = layout.proj_columns * layout.weight_channels + layout.attention_cus + 1;
        let appends = match layout.kv {
            FusedKv::Append => layout.attention_cus,
            FusedKv::Upload => 0,
        };
        for (dir, needed, per_column) in
            [("in", needed_in, shim_in), ("out", appends + 1, shim_out)]
        {
            if needed > device.columns * per_column {
                found.push(refused(
                    Constraint::DmaChannels,
                    Kernel::DecodeAttention,
                    format!(
                        "needs {needed} shim {dir} channels; the array has {}",
                        device.columns * per_column
                    ),
                ));
            }
        }
        found.extend(self.fused_steps_placed(layout));
        let (_, layer) = self.fused_weight_bytes();
        let reach = device.limits.buffer_offset_max_bytes as f64;
        if layer > reach {
            found.push(refused(
                Constraint::BufferSize,
                Kernel::Gemv,
                format!(
                    "one layer streams {layer} weight bytes; one buffer object reaches {reach}"
                ),
            ));
        }
        found
    }

    /// Every step of the layer and the epilogue is a call of the dispatch, and
    /// every projection sits on the projection columns.
    fn fused_steps_placed(&self, layout: &FusedLayout) -> Vec<ConstraintViolation> {
        let mut found = Vec::new();
        for (section, steps) in [
            (Section::Layer, &self.layer),
            (Section::Epilogue, &self.epilogue),
        ] {
            for step in steps {
                let Step::Call(call) = step else {
                    if section == Section::Layer {
                        found.push(refused(
                            Constraint::Merge,
                            Kernel::DecodeAttention,
                            "a host step inside the layer loop of the single dispatch".into(),
                        ));
                    }
                    continue;
                };
                for launch in &call.launches {
                    let herd = match launch {
                        Launch::Gemv { spec, .. } | Launch::GemvSwiglu { spec, .. } => spec.herd,
                        _ => continue,
                    };
                    if herd.cols() != layout.proj_columns || herd.rows() > layout.proj_rows {
                        found.push(refused(
                            Constraint::Herd,
                            Kernel::Gemv,
                            format!(
                                "{}/{}: herd [{},{}] is off the {}x{} projection tiles",
                                section.name(),
                                call.name,
                                herd.cols(),
                                herd.rows(),
                                layout.proj_columns,
                                layout.proj_rows
                            ),
                        ));
                    }
                }
            }
        }
        found
    }
}

fn weight_bytes(launch: &Launch) -> f64 {
    match launch {
        Launch::Gemv { spec, .. } => spec.weight_bytes(),
        Launch::GemvSwiglu { spec, .. } => 2.0 * spec.weight_bytes(),
        Launch::LmHeadGemv { spec, .. } => spec.part.weight_bytes(),
        _ => 0.0,
    }
}
