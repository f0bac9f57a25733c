//! The cost model's fitted parameters: each one's starting value, bounds, meaning
//! and the measurement its bounds come from, declared once in one table that
//! gives the `Params` struct, its `SPECS` list and its value vector.

use serde::{Deserialize, Serialize};

use crate::xdna2::packed_cost::PackedParams;

/// One fitted parameter's description.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ParamSpec {
    pub name: &'static str,
    pub initial: f64,
    pub lower: f64,
    pub upper: f64,
    /// What it is and where the starting value comes from.
    pub doc: &'static str,
    /// What measurement the bounds come from (or that none does).
    pub range: &'static str,
}

macro_rules! params {
    ($( $name:ident = $init:expr, [$lo:expr, $hi:expr], $doc:expr, $range:expr; )*) => {
        /// The cost model's fitted parameters (all positive, SI units).
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct Params {
            $( #[doc = $doc] pub $name: f64, )*
            /// The 4-bit kernels' parameters, fitted apart on the published
            /// 4-bit deployments (`packed_cost`); no bf16 launch reads them.
            #[serde(default)]
            pub packed: PackedParams,
        }

        impl Params {
            pub const SPECS: &'static [ParamSpec] = &[
                $( ParamSpec { name: stringify!($name), initial: $init, lower: $lo, upper: $hi, doc: $doc, range: $range }, )*
            ];

            /// The starting point of a fit.
            pub fn initial() -> Self {
                Params { $( $name: $init, )* packed: PackedParams::initial() }
            }

            /// Values in `SPECS` order.
            pub fn values(&self) -> Vec<f64> {
                vec![ $( self.$name, )* ]
            }

            /// Parameters from values in `SPECS` order.
            pub fn from_values(values: &[f64]) -> Self {
                let mut it = values.iter().copied();
                Params { $( $name: it.next().unwrap_or($init), )* packed: PackedParams::initial() }
            }
        }
    };
}

params! {
    dispatch_s = 80e-6, [50e-6, 200e-6],
        "per NPU call: XRT submit and completion wait; starts at the ~80 us small-kernel floor (calibration §2)",
        "50-200 us per call published (E, calibration §2); ~70 us measured with filelock and set_arg (M, SmolVLA)";
    launch_s = 10e-6, [1e-7, 1e-3],
        "per launch of a standalone kernel run (herd configuration, DMA set-up)",
        "no measurement of its own; the ~80 us small-kernel floor (calibration §2) bounds dispatch plus one launch";
    elf_launch_s = 30e-6, [1e-7, 1e-3],
        "per launch inside a multi-launch call (ELF): herd reconfiguration and DMA set-up between launches",
        "no measurement of its own";
    sync_bytes_per_s = 50e9, [1e9, 1e13],
        "per call, cache sync of the activation buffers it binds (scales prefill calls, not decode ones)",
        "no measurement of its own";
    write_bytes_per_s = 16e9, [15e9, 17e9],
        "host-to-buffer write bandwidth; starts at the measured 15-17 GB/s (calibration §2)",
        "8 MB in 0.5 ms, 16 MB in 1.0 ms, 20 MB in 1.3 ms: 15-17 GB/s (M/D, calibration §2)";
    write_buffer_s = 20e-6, [1e-7, 2e-3],
        "fixed cost per buffer written by the host before a call",
        "no measurement of its own";
    read_bytes_per_s = 50e9, [1e9, 1e13],
        "buffer-to-host read bandwidth (zero-copy views are cheap, calibration §2)",
        "no measurement of its own (the reads are zero-copy views, calibration §2)";
    read_buffer_s = 5e-6, [1e-7, 1e-3],
        "fixed cost per buffer read by the host after a call",
        "no measurement of its own";
    elf_gemv_factor = 1.0, [0.75, 1.42],
        "GEMV bodies in a deployed call vs the registry's standalone runs",
        "the Llama-3.2-1B 8-partition LM-head ELF streams 525 MB in 13.5 ms where 8 standalone 16384x2048 GEMVs take 17.5 ms (M/D, calibration §4): 0.77x, less the 3-5 % run-to-run jitter (§0); up to the 1.42x of the same module as ELF vs xclbin (M, §0)";
    elf_factor = 1.1, [1.05, 1.42],
        "kernel bodies in a multi-launch ELF vs standalone xclbin runs (calibration §0: 1.09-1.42x)",
        "Llama-3.2-1B in-pipeline calls 1.09-1.10x the sum of their standalone kernels (D, calibration §4) less the 3-5 % run-to-run jitter (§0), up to the 1.42x of the same module as ELF vs xclbin (M, §0)";
    dram_bytes_per_s = 63e9, [60e9, 70e9],
        "DRAM bandwidth the NPU sees; starts at the 63 GB/s eltwise add reaches (calibration §3)",
        "the fastest stream measured, eltwise add at 8M elements 63.0 GB/s (M, calibration §3), -5 % jitter to +11 % (it still rose from 57.7 GB/s at 4M); the DDR5-5600 peak of 89.6 GB/s is the host's, not the NPU's share";
    gemm_efficiency = 0.2, [0.01, 1.0],
        "fraction of the BFP16 MMA rate the GEMM inner loop sustains; starts at the best measured 9.8 TFLOP/s over the 51 TFLOP/s peak (calibration §3)",
        "a fraction of the MMA peak";
    gemm_l2_chunk_cycles = 1000.0, [1.0, 1e6],
        "overhead cycles per tile_k_l2 chunk (memory-tile refill)",
        "no measurement of its own";
    gemm_block_cycles = 5000.0, [1.0, 1e7],
        "overhead cycles per output tile (epilogue, C drain)",
        "no measurement of its own";
    gemv_tile_bytes_per_s = 4e9, [1e8, 5e10],
        "weight bytes per second one compute tile streams in a GEMV; starts at ~32 GB/s over 8 tiles (calibration §3)",
        "no measurement of a single tile";
    gemv_cascade_gain = 0.3, [0.001, 1.0],
        "streaming gained per extra cascade row of a GEMV herd, relative to one row (calibration §8 D5: 91 -> 78 ms/token)",
        "a fraction of one row's rate";
    gemv_no_pingpong_factor = 1.45, [1.35, 1.55],
        "GEMV slowdown with single-buffered L1 (omit_pingpong, calibration §8 D4)",
        "D4 (calibration §8): ~19 ms/token for the K=2048 GEMVs of the single-buffered decode modules, which stream 1.21 GB per token (o, gate, up) or 1.41 GB (with q, k, v) at the registry's ~31 GB/s: 39-45 ms, so 1.42-1.49x; bounded at 1.35-1.55 for the '~'";
    fa_efficiency = 0.3, [0.01, 1.0],
        "fraction of the bf16 MAC rate flash attention's matmuls sustain",
        "a fraction of the MAC peak";
    fa_step_cycles = 2000.0, [1.0, 1e6],
        "overhead cycles per 64-key block per dk chunk (online softmax, rescale)",
        "no measurement of its own";
    fa_round_cycles = 50000.0, [1.0, 1e8],
        "overhead cycles per round of query tiles per 64 of head_dim (Q load, cascade merge, O write)",
        "no measurement of its own";
    fa_launch_s = 0.3e-3, [1e-6, 5e-3],
        "extra set-up time of a flash-attention launch (cascade configuration)",
        "no measurement of its own";
    rmsnorm_cycles_per_element = 1.0, [0.01, 100.0],
        "tile streaming cycles per element of RMSNorm (also Q/K norm and softmax, which have no measurement of their own)",
        "no measurement of its own";
    add_cycles_per_element = 1.0, [0.01, 100.0],
        "tile streaming cycles per element of eltwise add",
        "no measurement of its own";
    silu_mul_cycles_per_element = 2.0, [0.01, 100.0],
        "tile streaming cycles per element of SiLU-mul",
        "no measurement of its own";
    rope_cycles_per_element = 1.0, [0.01, 100.0],
        "tile streaming cycles per element of RoPE",
        "no measurement of its own";
    host_prefill_layer_s = 7e-3, [6e-3, 8e-3],
        "host scheduling per prefill layer; starts at the measured ~7 ms/layer (calibration §5)",
        "Python scheduling inside the Llama-3.2-1B prefill loop ~7 ms/layer, ~125 ms per 16-layer pass (M, calibration §5)";
    host_attention_s = 0.2e-3, [1e-6, 1e-2],
        "CPU decode attention per layer, fixed part",
        "fitted on the four measured contexts (calibration §5)";
    host_attention_s_per_element = 4e-10, [1e-13, 1e-7],
        "CPU decode attention per layer per (query heads x head_dim x context) element",
        "fitted on the four measured contexts (calibration §5)";
}
