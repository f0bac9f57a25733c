//! The cost model: modeled time of a launch, a call and a whole plan, without
//! executing anything (so a plan at seq_len 2048 is timed while verification
//! runs short prompts).
//!
//! Launch: the larger of compute time (MACs over tiles × MACs/cycle × the
//! efficiency of the tile shape, expressed as per-K-chunk and per-output-tile
//! overhead cycles on top of the MMA time) and data time (bytes over the DRAM
//! path), plus a per-launch overhead. Inside a call (an ELF) a launch has
//! costs of its own, which the Llama-3.2-1B in-pipeline calls pin (calibration
//! §4): its set-up between launches, and a body scaled from the registry's
//! standalone xclbin run by one fitted factor for GEMVs (the deployed LM-head
//! ELF streams faster than the same GEMVs run alone, §4) and another for every
//! other kernel (ELF slower than xclbin, §0). Call: dispatch
//! overhead plus the host writes and reads its bindings do not skip, plus a
//! per-byte sync of the activation buffers it binds. Host ops are scaled from
//! measured host figures in the device description. Parameters that are not
//! device facts are fitted by `fit` and stored in `data/xdna2/fitted.json`.

use serde::Serialize;

use super::device::Device;
use super::kernels::{FlashAttentionSpec, GemmSpec, GemvSpec, Kernel};
use super::packed_cost::packed_stream_s;
use super::plan::{
    Binding, BufferClass, Call, FusedKv, FusedLayout, HostOp, Launch, Phase, Plan, Role, Section,
    Step, FUSED_HEAD_CALL, FUSED_KV_CACHE,
};

mod params;

pub use params::{ParamSpec, Params};

/// Modeled cost of one launch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchCost {
    pub kernel: Kernel,
    pub shape: String,
    pub tiles: usize,
    pub flops: f64,
    /// Bytes over the DRAM path.
    pub dram_bytes: f64,
    pub compute_s: f64,
    pub data_s: f64,
    /// `max(compute, data)`, with the ELF factor when inside a plan call.
    pub body_s: f64,
    pub overhead_s: f64,
    pub total_s: f64,
    /// Peak FLOP/s of the tiles used (for the roofline).
    pub peak_flops: f64,
}

/// Modeled cost of one call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallTiming {
    pub section: Section,
    pub name: String,
    pub group: String,
    /// Times the call runs per plan execution (layers for layer calls).
    pub repeats: usize,
    pub dispatch_s: f64,
    pub write_s: f64,
    pub read_s: f64,
    pub sync_s: f64,
    pub bytes_written: f64,
    pub bytes_read: f64,
    pub launches: Vec<LaunchCost>,
    /// One execution of the call.
    pub total_s: f64,
}

/// Modeled cost of one host op.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostTiming {
    pub section: Section,
    pub op: String,
    pub repeats: usize,
    pub seconds: f64,
}

/// One step of the timeline, in plan order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum StepTiming {
    Call(CallTiming),
    Host(HostTiming),
}

impl StepTiming {
    pub fn section(&self) -> Section {
        match self {
            StepTiming::Call(c) => c.section,
            StepTiming::Host(h) => h.section,
        }
    }

    pub fn seconds(&self) -> f64 {
        match self {
            StepTiming::Call(c) => c.total_s,
            StepTiming::Host(h) => h.seconds,
        }
    }
}

/// Modeled time of a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timing {
    pub model: String,
    pub phase: Phase,
    pub seq_len: usize,
    pub num_layers: usize,
    /// Steps of the prologue, one layer, and the epilogue.
    pub steps: Vec<StepTiming>,
    pub prologue_s: f64,
    /// One decoder layer.
    pub layer_s: f64,
    pub epilogue_s: f64,
    /// Prologue + layers + epilogue: TTFT for prefill, one token for decode.
    pub total_s: f64,
    /// One-time write of static weight buffers (outside TTFT).
    pub setup_s: f64,
    pub npu_calls: usize,
}

impl Timing {
    /// All layers.
    pub fn layers_s(&self) -> f64 {
        self.layer_s * self.num_layers as f64
    }

    /// Total of the layer calls of `group` in one layer.
    pub fn group_s(&self, group: &str) -> f64 {
        self.calls()
            .filter(|c| c.section == Section::Layer && c.group == group)
            .map(|c| c.total_s)
            .sum()
    }

    pub fn calls(&self) -> impl Iterator<Item = &CallTiming> {
        self.steps.iter().filter_map(|s| match s {
            StepTiming::Call(c) => Some(c),
            StepTiming::Host(_) => None,
        })
    }

    /// The first call named `name` (any section).
    pub fn call(&self, name: &str) -> Option<&CallTiming> {
        self.calls().find(|c| c.name == name)
    }
}

/// Time of one launch run standalone (the registry's harness: one call, one
/// launch, no host buffer traffic in the timed loop).
pub fn time_standalone(launch: &Launch, device: &Device, params: &Params) -> f64 {
    params.dispatch_s + time_launch(launch, device, params, false).total_s
}

/// Modeled cost of a launch; `in_call` applies the multi-launch ELF factor.
pub fn time_launch(launch: &Launch, device: &Device, params: &Params, in_call: bool) -> LaunchCost {
    time_launch_fed(launch, device, params, in_call, 1)
}

/// [`time_launch`] with a GEMV's weights fed on `channels` shim channels per
/// column (the fused decode's dual feed).
fn time_launch_fed(
    launch: &Launch,
    device: &Device,
    params: &Params,
    in_call: bool,
    channels: usize,
) -> LaunchCost {
    let p = params;
    let dram = p.dram_bytes_per_s;
    let mut cost = match launch {
        Launch::Gemm { spec, .. } => gemm_cost(spec, device, p),
        Launch::Gemv { spec, .. } => gemv_cost(spec, (1, channels), device, p),
        Launch::GemvSwiglu { spec, .. } => gemv_cost(spec, (2, channels), device, p),
        Launch::LmHeadGemv { spec, .. } => gemv_cost(&spec.part, (1, channels), device, p),
        // The fused decode's attention at the rate fitted on the published
        // 4-bit sweeps (`packed_cost`), over every position the template reads.
        Launch::DecodeAttention { spec, .. } => {
            let elements = (spec.heads * spec.head_dim * spec.context) as f64;
            let bytes = (2 * spec.context * spec.kv_heads * spec.head_dim * 2) as f64;
            let mut cost = blank(spec.cus, 4.0 * elements, bytes, 0.0);
            cost.data_s = p.packed.fused_attention_s_per_element * elements;
            cost
        }
        Launch::KvAppend { spec, .. } => {
            let bytes = (2 * spec.kv_width * 2) as f64;
            let mut cost = blank(1, 0.0, bytes, 0.0);
            cost.data_s = bytes / dram;
            cost
        }
        Launch::FlashAttention { spec, .. } => flash_cost(spec, device, p),
        Launch::Rmsnorm { spec, .. }
        | Launch::QkRmsnorm { spec, .. }
        | Launch::Softmax { spec, .. } => {
            let n = (spec.rows * spec.cols) as f64;
            let bytes = 2.0 * n * 2.0
                + if spec.weighted {
                    spec.cols as f64 * 2.0
                } else {
                    0.0
                };
            vector_cost(
                n,
                bytes,
                spec.herd.tiles(),
                p.rmsnorm_cycles_per_element,
                device,
                dram,
            )
        }
        // LayerNorm has no published timing (uncalibrated): RMSNorm's cycles
        // per element twice (a mean pass before the variance pass), its
        // traffic plus the bias vector.
        Launch::Layernorm { spec, bias, .. } => {
            let n = (spec.rows * spec.cols) as f64;
            let vectors = usize::from(spec.weighted) + usize::from(bias.is_some());
            let bytes = 2.0 * n * 2.0 + (vectors * spec.cols) as f64 * 2.0;
            vector_cost(
                n,
                bytes,
                spec.herd.tiles(),
                2.0 * p.rmsnorm_cycles_per_element,
                device,
                dram,
            )
        }
        Launch::Rope { spec, .. } => {
            let n = (spec.rows * spec.heads * spec.head_dim) as f64;
            let bytes = 2.0 * n * 2.0 + (spec.rows * spec.head_dim * 2) as f64;
            vector_cost(
                n,
                bytes,
                spec.herd.tiles(),
                p.rope_cycles_per_element,
                device,
                dram,
            )
        }
        Launch::EltwiseAdd { spec, .. } => {
            let n = spec.n as f64;
            vector_cost(
                n,
                3.0 * n * 2.0,
                spec.herd.tiles(),
                p.add_cycles_per_element,
                device,
                dram,
            )
        }
        // GELU-tanh-mul has no published timing (uncalibrated): it streams like
        // SiLU-mul (two operands in, one out) with the same per-element cycles,
        // one transcendental (tanh for the sigmoid's exp) and a few more
        // multiply-adds that the vector unit's pipeline overlaps.
        Launch::SiluMul { spec, .. } | Launch::GeluMul { spec, .. } => {
            let n = spec.n as f64;
            vector_cost(
                n,
                3.0 * n * 2.0,
                spec.herd.tiles(),
                p.silu_mul_cycles_per_element,
                device,
                dram,
            )
        }
    };
    cost.kernel = launch.kernel();
    cost.shape = launch.shape_label();
    let factor = match (in_call, launch) {
        (false, _) => 1.0,
        (true, Launch::Gemv { .. } | Launch::GemvSwiglu { .. } | Launch::LmHeadGemv { .. }) => {
            p.elf_gemv_factor
        }
        // Its rate was fitted inside the dispatch.
        (true, Launch::DecodeAttention { .. }) => 1.0,
        (true, _) => p.elf_factor,
    };
    cost.body_s = factor * cost.compute_s.max(cost.data_s);
    cost.overhead_s += if in_call { p.elf_launch_s } else { p.launch_s };
    cost.total_s = cost.body_s + cost.overhead_s;
    cost
}

fn blank(tiles: usize, flops: f64, dram_bytes: f64, peak_flops: f64) -> LaunchCost {
    LaunchCost {
        kernel: Kernel::Gemm,
        shape: String::new(),
        tiles,
        flops,
        dram_bytes,
        compute_s: 0.0,
        data_s: 0.0,
        body_s: 0.0,
        overhead_s: 0.0,
        total_s: 0.0,
        peak_flops,
    }
}

/// Compute: per tile, output blocks × K chunks × K steps, each step the MMA
/// time at the fitted efficiency, plus overhead cycles per K chunk and per
/// output block (so small tiles pay more overhead per MAC). Data: A re-read per
/// column block of the herd, B per row block, C once.
fn gemm_cost(spec: &GemmSpec, device: &Device, p: &Params) -> LaunchCost {
    let t = spec.tile;
    let (cols, rows) = (spec.herd.cols(), spec.herd.rows());
    let blocks_m = spec.m.div_ceil(t.tile_m * cols).max(1) as f64;
    let blocks_n = (spec.written_columns() / (t.tile_n * rows).max(1)).max(1) as f64;
    let chunks = (spec.k / t.tile_k_l2.max(1)).max(1) as f64;
    let steps = (t.tile_k_l2 / t.tile_k_l1.max(1)).max(1) as f64;
    let macs = device.compute_tile.macs_per_cycle_bfp16 * p.gemm_efficiency;
    let step = (t.tile_m * t.tile_k_l1 * t.tile_n) as f64 / macs;
    let block = chunks * (steps * step + p.gemm_l2_chunk_cycles) + p.gemm_block_cycles;
    let (m, k, n) = (spec.m as f64, spec.k as f64, spec.n as f64);
    let bytes =
        2.0 * m * k * blocks_n + 2.0 * k * n * blocks_m + m * n * spec.out_dtype.bytes() as f64;
    let tiles = spec.herd.tiles();
    let peak = device.peak_flops(tiles, device.compute_tile.macs_per_cycle_bfp16);
    let mut cost = blank(tiles, spec.flops(), bytes, peak);
    cost.compute_s = blocks_m * blocks_n * block / device.clock_hz;
    cost.data_s = bytes / p.dram_bytes_per_s;
    cost
}

/// Weight streaming: each column streams at a per-tile rate; extra cascade
/// rows add a fitted fraction of a row's rate (they split K but share the
/// column's stream); the herd is capped by DRAM bandwidth and by the shim
/// channels feeding each column. `matrices` is 2 for the fused gate/up launch.
fn gemv_cost(
    spec: &GemvSpec,
    (matrices, channels): (usize, usize),
    device: &Device,
    p: &Params,
) -> LaunchCost {
    let tiles = spec.herd.tiles();
    let single_buffered = if spec.omit_pingpong {
        p.gemv_no_pingpong_factor
    } else {
        1.0
    };
    let per_tile = p.gemv_tile_bytes_per_s / single_buffered;
    let rows = 1.0 + p.gemv_cascade_gain * (spec.herd.rows() as f64 - 1.0);
    let weights = matrices as f64 * spec.weight_bytes();
    let bytes = weights + 2.0 * (spec.k + spec.m) as f64;
    let flops = 2.0 * matrices as f64 * spec.m as f64 * spec.k as f64;
    let peak = device.peak_flops(tiles, device.compute_tile.macs_per_cycle_bf16);
    let mut cost = blank(tiles, flops, bytes, peak);
    cost.compute_s = flops / peak;
    // A packed GEMV is bound by its tiles' unpacking, not by a byte rate.
    let stream = match spec.packed {
        Some(format) => single_buffered * packed_stream_s(spec, format, matrices, rows, &p.packed),
        None => weights / (spec.herd.cols() as f64 * rows * per_tile),
    };
    // Each column's weights arrive over its feeding channels (one, unless
    // the fused decode feeds both).
    let feed = (spec.herd.cols() * channels.max(1)) as f64;
    let channel = weights / (feed * device.channel_bytes_per_s());
    cost.data_s = stream.max(channel).max(bytes / p.dram_bytes_per_s);
    cost
}

/// Rounds of (heads per unroll × q-tiles) over the array; each round walks
/// its stage's key blocks, masked or not.
fn flash_cost(spec: &FlashAttentionSpec, device: &Device, p: &Params) -> LaunchCost {
    let t = spec.tile;
    let key = device.limits.fa_key_block as f64;
    let rounds =
        (spec.heads.div_ceil(t.heads_per_unroll.max(1)) * spec.lq.div_ceil(t.lqp.max(1))) as f64;
    let blocks = (spec.lk as f64 / (key * t.cascade.max(1) as f64)).ceil();
    let hd = spec.head_dim as f64;
    let macs = device.compute_tile.macs_per_cycle_bf16 * p.fa_efficiency;
    let step = key * key * 2.0 * hd / macs + p.fa_step_cycles * t.dk_chunks as f64;
    let round = blocks * step + p.fa_round_cycles * hd / 64.0;
    let kv_bytes = rounds * spec.lk as f64 * 2.0 * hd * 2.0;
    let qo_bytes = 2.0 * (spec.lq * spec.heads) as f64 * hd * 2.0;
    let tiles = spec.herd().tiles();
    let peak = device.peak_flops(tiles, device.compute_tile.macs_per_cycle_bf16);
    let mut cost = blank(tiles, spec.executed_flops(), kv_bytes + qo_bytes, peak);
    cost.compute_s = rounds * round / device.clock_hz;
    cost.data_s = (kv_bytes + qo_bytes) / p.dram_bytes_per_s;
    cost.overhead_s = p.fa_launch_s;
    cost
}

/// Streaming vector kernels: each tile streams its elements at a fitted
/// cycles-per-element rate (DMA-bound, calibration §3), capped by its DMA
/// channels and by DRAM.
fn vector_cost(
    elements: f64,
    bytes: f64,
    tiles: usize,
    cycles_per_element: f64,
    device: &Device,
    dram: f64,
) -> LaunchCost {
    let mut cost = blank(tiles, 0.0, bytes, 0.0);
    let tiles = tiles.max(1) as f64;
    let stream = elements * cycles_per_element / (tiles * device.clock_hz);
    // Never faster than the tiles' in and out channels carry the bytes.
    let channels = (device.compute_tile.dma_in + device.compute_tile.dma_out) as f64;
    let dma = bytes / (tiles * channels * device.channel_bytes_per_s());
    cost.data_s = stream.max(dma).max(bytes / dram);
    cost
}

/// Modeled time of every step of `plan`.
pub fn time_plan(plan: &Plan, device: &Device, params: &Params) -> Timing {
    let mut steps = Vec::new();
    let mut sums = [0.0f64; 3];
    let mut npu_calls = 0;
    let fused = plan.fused.as_ref().filter(|_| plan.phase == Phase::Decode);
    // The published TTFT starts at the prompt's text (tokenize, EOS-pad,
    // prefill, LM head): tokenizing is a host step no plan lists.
    if plan.phase == Phase::Prefill {
        let tokenize = HostTiming {
            section: Section::Prologue,
            op: "tokenize".to_string(),
            repeats: 1,
            seconds: device.host.tokenize_s,
        };
        sums[0] += tokenize.seconds;
        steps.push(StepTiming::Host(tokenize));
    }
    for (index, (section, list)) in plan.sections().into_iter().enumerate() {
        let repeats = if section == Section::Layer {
            plan.num_layers
        } else {
            1
        };
        for step in list {
            let timed = match (step, fused) {
                (Step::Call(call), Some(layout)) => {
                    let timed =
                        time_fused_call(plan, call, (section, repeats), device, params, layout);
                    npu_calls += usize::from(timed.dispatch_s > 0.0);
                    StepTiming::Call(timed)
                }
                (Step::Call(call), None) => {
                    npu_calls += repeats;
                    StepTiming::Call(time_call(plan, call, section, repeats, device, params))
                }
                (Step::Host(op), _) => StepTiming::Host(HostTiming {
                    section,
                    op: op.name().to_string(),
                    repeats,
                    seconds: time_host(plan, op, section, device, params),
                }),
            };
            sums[index] += timed.seconds();
            steps.push(timed);
        }
    }
    let [prologue_s, layer_s, epilogue_s] = sums;
    Timing {
        model: plan.model.clone(),
        phase: plan.phase,
        seq_len: plan.seq_len,
        num_layers: plan.num_layers,
        steps,
        prologue_s,
        layer_s,
        epilogue_s,
        total_s: prologue_s + layer_s * plan.num_layers as f64 + epilogue_s,
        setup_s: setup_time(plan, params),
        npu_calls,
    }
}

fn buffer_bytes(plan: &Plan, binding: &Binding) -> f64 {
    plan.buffers.get(&binding.buffer).map_or(0.0, |b| b.bytes())
}

fn time_call(
    plan: &Plan,
    call: &Call,
    section: Section,
    repeats: usize,
    device: &Device,
    params: &Params,
) -> CallTiming {
    let p = params;
    let (mut write_s, mut read_s, mut sync_s, mut written, mut read) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for binding in &call.bindings {
        let bytes = buffer_bytes(plan, binding);
        if binding.write {
            written += bytes;
            write_s += p.write_buffer_s + bytes / p.write_bytes_per_s;
        }
        if binding.read {
            read += bytes;
            read_s += p.read_buffer_s + bytes / p.read_bytes_per_s;
        }
        if binding.role != Role::Weight {
            sync_s += bytes / p.sync_bytes_per_s;
        }
    }
    let launches: Vec<LaunchCost> = call
        .launches
        .iter()
        .map(|l| time_launch(l, device, p, true))
        .collect();
    let body: f64 = launches.iter().map(|l| l.total_s).sum();
    CallTiming {
        section,
        name: call.name.clone(),
        group: call.group.clone(),
        repeats,
        dispatch_s: p.dispatch_s,
        write_s,
        read_s,
        sync_s,
        bytes_written: written,
        bytes_read: read,
        launches,
        total_s: p.dispatch_s + write_s + read_s + sync_s + body,
    }
}

/// A call of the single-dispatch fused decode: its launches at their in-ELF
/// bodies with no set-up of their own (the persistent design's herds stay
/// configured across its layers) and no host traffic of their own; the call
/// that ends the dispatch carries the one dispatch per token, one launch
/// set-up, the token's activations in and its output out, and with the KV
/// cache on the host every layer's attended window uploaded.
fn time_fused_call(
    plan: &Plan,
    call: &Call,
    (section, repeats): (Section, usize),
    device: &Device,
    params: &Params,
    layout: &FusedLayout,
) -> CallTiming {
    let p = params;
    let launches: Vec<LaunchCost> = call
        .launches
        .iter()
        .map(|l| {
            let mut cost = time_launch_fed(l, device, p, true, layout.weight_channels);
            cost.overhead_s = 0.0;
            cost.total_s = cost.body_s;
            cost
        })
        .collect();
    let body: f64 = launches.iter().map(|l| l.total_s).sum();
    let (mut dispatch_s, mut write_s, mut read_s, mut written, mut read) =
        (0.0, 0.0, 0.0, 0.0, 0.0);
    if call.name == FUSED_HEAD_CALL {
        dispatch_s = p.dispatch_s + p.elf_launch_s;
        let bytes = |name: &str| plan.buffers.get(name).map_or(0.0, |b| b.bytes());
        written = bytes("x");
        read = call
            .launches
            .iter()
            .find(|l| l.kernel() == Kernel::LmHeadGemv)
            .map_or(bytes("xf"), |l| bytes(l.output()));
        write_s = p.write_buffer_s + written / p.write_bytes_per_s;
        read_s = p.read_buffer_s + read / p.read_bytes_per_s;
        if layout.kv == FusedKv::Upload {
            let window =
                bytes(FUSED_KV_CACHE) * attended_context(plan) as f64 / plan.seq_len.max(1) as f64;
            written += window * plan.num_layers as f64;
            write_s += plan.num_layers as f64 * (p.write_buffer_s + window / p.write_bytes_per_s);
        }
    }
    CallTiming {
        section,
        name: call.name.clone(),
        group: call.group.clone(),
        repeats,
        dispatch_s,
        write_s,
        read_s,
        sync_s: 0.0,
        bytes_written: written,
        bytes_read: read,
        launches,
        total_s: dispatch_s + write_s + read_s + body,
    }
}

fn time_host(plan: &Plan, op: &HostOp, section: Section, device: &Device, params: &Params) -> f64 {
    let host = &device.host;
    let bf16 = 2.0;
    match op {
        HostOp::Embed { rows, hidden, .. } => host.embed.time((rows * hidden) as f64 * bf16),
        HostOp::KvStore { rows, kv_width, .. } => {
            host.kv_extract.time(2.0 * (rows * kv_width) as f64 * bf16)
        }
        HostOp::Transpose {
            rows,
            heads,
            head_dim,
            ..
        } => host
            .kv_extract
            .time((rows * heads * head_dim) as f64 * bf16),
        HostOp::BiasAdd {
            rows,
            heads,
            head_dim,
            ..
        } => host
            .kv_extract
            .time((rows * heads * head_dim) as f64 * bf16),
        HostOp::DecodeAttention {
            heads, head_dim, ..
        } => host_attention_time(params, *heads, *head_dim, attended_context(plan)),
        HostOp::Add { n, .. } | HostOp::SiluMul { n, .. } => {
            host_glue_time(device, 3.0 * *n as f64 * bf16)
        }
        HostOp::RmsNorm { cols, last_row, .. } | HostOp::LayerNorm { cols, last_row, .. } => {
            match (section, plan.phase) {
                (Section::Epilogue, Phase::Prefill) if *last_row => host.prefill_last_row_norm_s,
                (Section::Epilogue, _) => host.decode_final_norm_s,
                _ => host_glue_time(device, 2.0 * *cols as f64 * bf16),
            }
        }
        // One host pass over the logits, as a glue op (uncalibrated).
        HostOp::SoftCap { n, .. } => host_glue_time(device, 2.0 * *n as f64 * bf16),
        HostOp::Matvec { m, k, .. } => host.cpu_lm_head.time((m * k) as f64 * bf16),
        HostOp::Scheduling { .. } => match plan.phase {
            Phase::Prefill => params.host_prefill_layer_s,
            Phase::Decode => host.decode_layer_s,
        },
    }
}

/// One host element-wise op (residual add, RMSNorm, SwiGLU) moving `bytes`:
/// the cost of one such op on a single row, as measured for the decode final
/// RMSNorm (an M=1 array op costs its call overhead, not its few KB of
/// traffic), plus the bytes at the host's measured activation rate (KV
/// extraction) for the large arrays of a prefill.
fn host_glue_time(device: &Device, bytes: f64) -> f64 {
    device.host.decode_final_norm_s + device.host.kv_extract.time(bytes)
}

/// CPU decode attention of one layer: one query per head over `context`
/// cached positions.
pub fn host_attention_time(params: &Params, heads: usize, head_dim: usize, context: usize) -> f64 {
    params.host_attention_s
        + params.host_attention_s_per_element * (heads * head_dim * context) as f64
}

/// What of `arch`'s plans the cost model times with no published measurement
/// behind it, for the note printed beside every modeled figure: the GELU-tanh
/// gate (Gemma), the decode-attention saving of a sliding window, LayerNorm
/// (StableLM, OLMo), the soft-caps (Gemma-2). (Sandwich norms are RMSNorm
/// launches, windowed prefill attention costs what causal attention does and a
/// partial rotary RoPE what a full one does, all calibrated kernels.)
pub fn uncalibrated_parts(arch: &crate::model::arch::Architecture) -> Vec<&'static str> {
    let mut parts = Vec::new();
    if arch.norm_kind == crate::model::arch::NormKind::Layer {
        parts.push(
            "layernorm (no published timing; timed at twice RMSNorm's cycles per element) and              the host's LayerNorm (timed as its RMSNorm)",
        );
    }
    if arch.attn_logit_softcap.is_some() {
        parts.push("the attention soft-cap (a tanh per score; timed as the uncapped attention)");
    }
    if arch.final_logit_softcap.is_some() {
        parts.push("the final logit soft-cap (a host pass over the logits, timed as host glue)");
    }
    if arch.activation == crate::model::arch::Activation::GeluTanh {
        parts.push("gelu_mul (no published timing; timed at SiLU-mul's cycles per element)");
    }
    if arch.sliding_window.is_some() {
        parts.push(
            "decode attention over the sliding window (the published Gemma3-4B decode reads every \
             cached position, calibration §7)",
        );
    }
    parts
}

/// The cached positions one decode step's attention reads per layer, averaged
/// over the layers (the layer template is timed once and counted per layer):
/// the whole context, or at most the window on sliding-window layers. The
/// window's saving is **uncalibrated**: the published Gemma3-4B decode reads
/// every position on every layer (calibration §7, its slope grows with the
/// context like the other models').
fn attended_context(plan: &Plan) -> usize {
    let Some(sliding) = &plan.sliding else {
        return plan.seq_len;
    };
    let layers = plan.num_layers.max(1);
    let windowed = sliding.layers.len().min(layers);
    let positions =
        windowed * sliding.window.min(plan.seq_len) + (layers - windowed) * plan.seq_len;
    positions.div_ceil(layers)
}

/// One-time write of every static weight buffer (per layer where per-layer).
fn setup_time(plan: &Plan, params: &Params) -> f64 {
    plan.buffers
        .values()
        .filter(|b| b.class == BufferClass::StaticWeight)
        .map(|b| {
            let copies = if b.per_layer { plan.num_layers } else { 1 } as f64;
            copies * (params.write_buffer_s + b.bytes() / params.write_bytes_per_s)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdna2::kernels::{Dtype, Herd, Precision};
    use crate::xdna2::plan::Standalone;

    /// Parameters that tell the three in-ELF terms apart: a GEMV body in a
    /// call at half its standalone time, any other body at twice, and a
    /// launch overhead that differs inside a call.
    fn distinct_params() -> Params {
        Params {
            elf_gemv_factor: 0.5,
            elf_factor: 2.0,
            launch_s: 1e-6,
            elf_launch_s: 1e-4,
            ..Params::initial()
        }
    }

    #[test]
    fn a_gemv_in_a_call_takes_the_gemv_factor_and_the_elf_launch_overhead() {
        let device = Device::npu2();
        let p = distinct_params();
        let launch = Standalone::Gemv(GemvSpec::select(&device, 2048, 2048, Herd::ROW)).launch();
        let alone = time_launch(&launch, &device, &p, false);
        let in_call = time_launch(&launch, &device, &p, true);
        assert!((in_call.body_s / alone.body_s - 0.5).abs() < 1e-12);
        assert!((alone.overhead_s - 1e-6).abs() < 1e-15);
        assert!((in_call.overhead_s - 1e-4).abs() < 1e-15);
        let standalone = time_standalone(&launch, &device, &p);
        assert!((standalone - (p.dispatch_s + alone.total_s)).abs() < 1e-15);
    }

    #[test]
    fn a_gemm_in_a_call_takes_the_elf_factor() {
        let device = Device::npu2();
        let p = distinct_params();
        let spec = GemmSpec::select(&device, 2048, 2048, 2048, Precision::Bf16, Dtype::Bf16);
        let launch = Standalone::Gemm(spec).launch();
        let alone = time_launch(&launch, &device, &p, false);
        let in_call = time_launch(&launch, &device, &p, true);
        assert!((in_call.body_s / alone.body_s - 2.0).abs() < 1e-12);
        assert!((in_call.overhead_s - 1e-4).abs() < 1e-15);
    }
}
