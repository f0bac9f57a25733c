//! The npu2 device description: the array's geometry, memories, DMA channels,
//! clock, MAC rates, hard limits and the measured host-side costs the plans'
//! host ops are scaled from. It is data (`runtime/data/xdna2/npu2.json`), not
//! code paths: every number carries its citation in `sources`, and a test
//! checks none is missing. Fitted quantities (dispatch overhead, bandwidths
//! seen in practice, efficiencies) are not here but in `cost::Params`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The committed npu2 description.
pub const NPU2_JSON: &str = include_str!("../../data/xdna2/npu2.json");

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    pub name: String,
    pub columns: usize,
    /// Rows of compute tiles per column.
    pub compute_rows: usize,
    pub clock_hz: f64,
    pub compute_tile: ComputeTile,
    pub mem_tile: MemTile,
    pub shim_tile: ShimTile,
    /// Width of one stream (DMA channel) per cycle.
    pub stream_bytes_per_cycle: f64,
    /// Theoretical DRAM bandwidth of the host; the NPU sees the fitted share.
    pub dram_peak_bytes_per_s: f64,
    pub limits: Limits,
    pub host: HostCosts,
    /// Citation for every number above, keyed by its path (`mem_tile.dma_in`).
    pub sources: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeTile {
    /// L1 data memory.
    pub data_memory_bytes: usize,
    pub dma_in: usize,
    pub dma_out: usize,
    pub macs_per_cycle_bf16: f64,
    pub macs_per_cycle_bfp16: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemTile {
    /// L2 memory per column.
    pub memory_bytes: usize,
    pub dma_in: usize,
    pub dma_out: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShimTile {
    /// Host-to-array channels per column.
    pub dma_in: usize,
    /// Array-to-host channels per column.
    pub dma_out: usize,
}

/// Hard limits the toolchain or the hardware enforces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub dma_repeat_max: usize,
    pub gemv_k_chunk: usize,
    pub gemv_k_multiple: usize,
    pub dma_stride_max_words: usize,
    pub dma_length_multiple_bytes: usize,
    pub launches_per_call_max: usize,
    pub cascade_rows_max: usize,
    pub cascade_hidden_multiple: usize,
    pub cascade_hidden_size_below: usize,
    pub fa_heads_per_unroll_max: usize,
    pub fa_key_block: usize,
    pub eltwise_tile_max: usize,
    pub buffer_offset_max_bytes: u64,
}

impl Limits {
    /// Longest GEMV reduction one launch can stream (repeat count × chunk).
    pub fn gemv_k_max(&self) -> usize {
        self.dma_repeat_max * self.gemv_k_chunk
    }
}

/// One measured host operation: `seconds` for `bytes` moved; other sizes
/// scale linearly.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostRate {
    pub seconds: f64,
    pub bytes: f64,
}

impl HostRate {
    pub fn time(&self, bytes: f64) -> f64 {
        self.seconds * bytes / self.bytes
    }
}

/// Measured host-op costs of the reference deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCosts {
    pub embed: HostRate,
    pub kv_extract: HostRate,
    pub cpu_lm_head: HostRate,
    /// Tokenizing the prompt, part of every TTFT.
    pub tokenize_s: f64,
    pub prefill_last_row_norm_s: f64,
    pub decode_final_norm_s: f64,
    pub decode_layer_s: f64,
}

#[derive(Debug, thiserror::Error)]
#[error("device description: {0}")]
pub struct DeviceError(#[from] serde_json::Error);

impl Device {
    /// The committed npu2 description.
    pub fn npu2() -> Self {
        // The file is compiled in and covered by a test; failing here is a bug.
        Self::from_json(NPU2_JSON).expect("committed npu2.json parses")
    }

    pub fn from_json(text: &str) -> Result<Self, DeviceError> {
        Ok(serde_json::from_str(text)?)
    }

    /// Peak FLOP/s of `tiles` tiles (2 FLOP per MAC).
    pub fn peak_flops(&self, tiles: usize, macs_per_cycle: f64) -> f64 {
        2.0 * tiles as f64 * macs_per_cycle * self.clock_hz
    }

    /// Bytes per second of one DMA channel (one stream).
    pub fn channel_bytes_per_s(&self) -> f64 {
        self.stream_bytes_per_cycle * self.clock_hz
    }

    /// Paths of every number in the description that has no citation.
    pub fn uncited(&self) -> Vec<String> {
        let value = serde_json::to_value(self).unwrap_or_default();
        let mut paths = Vec::new();
        collect_numeric_paths(&value, "", &mut paths);
        paths
            .into_iter()
            .filter(|p| !self.sources.contains_key(p))
            .collect()
    }
}

fn collect_numeric_paths(value: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                if prefix.is_empty() && key == "sources" {
                    continue;
                }
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                collect_numeric_paths(v, &path, out);
            }
        }
        serde_json::Value::Number(_) => out.push(prefix.to_string()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_is_cited() {
        let device = Device::npu2();
        assert_eq!(device.uncited(), Vec::<String>::new());
        assert_eq!(device.columns * device.compute_rows, 32);
        assert_eq!(device.limits.gemv_k_max(), 16320);
    }

    #[test]
    fn a_missing_citation_is_reported() {
        let mut device = Device::npu2();
        device.sources.remove("mem_tile.dma_in");
        assert_eq!(device.uncited(), vec!["mem_tile.dma_in".to_string()]);
    }
}
