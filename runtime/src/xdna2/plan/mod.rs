//! A deployment plan as plain data: a sequence of NPU calls (each a list of
//! kernel launches with shape, herd, tiling and precision, plus how the host
//! treats every buffer the call binds) and host ops, for the prologue, one
//! decoder layer (repeated `num_layers` times) and the epilogue.
//!
//! Buffers are named; weight buffers say which checkpoint tensor they hold
//! and how setup transforms it (pre-transpose, GQA-aware head padding). Each
//! call's bindings say whether the host writes the buffer before the call and
//! reads it after: static weight buffers, intermediates kept on device and
//! kernel-overwritten slots are the writes a plan skips. `exec` runs a plan,
//! `cost` times it; neither changes it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::constraints::ConstraintViolation;
use super::device::Device;
use super::kernels::{
    gemv::check_swiglu, DecodeAttentionSpec, Dtype, EltwiseSpec, FlashAttentionSpec, GemmSpec,
    GemvSpec, Kernel, KvAppendSpec, LmHeadSpec, NormSpec, QkvLayout, RopeSpec,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Prefill,
    Decode,
}

/// Which optimizations a plan was built with (see `builder`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanOptions {
    /// Merge launches into few calls per layer (rms_gemms_rope, flash_attn,
    /// o_ffn in prefill; rms_gemv_rope, o_gemv_ffn in decode).
    pub merge_launches: bool,
    /// Per-layer weight buffers written once at setup (`static_input_indices`).
    pub static_weights: bool,
    /// Skip host writes of kernel-overwritten slots (`intermediate_indices`).
    pub mark_intermediates: bool,
    /// Consecutive calls of one group share device buffers instead of the
    /// host reading and re-writing activations between them.
    pub shared_intermediates: bool,
    /// Prefill LM head on the last real row with the decode GEMV, after a host
    /// RMSNorm of that row; otherwise a full-sequence GEMM.
    pub last_token_lm_head: bool,
    /// Decode LM head on the NPU (else a CPU matmul).
    pub npu_lm_head: bool,
    /// LM-head partitions.
    pub lm_head_parts: usize,
    /// Decode projections as NPU GEMVs (else CPU matmuls).
    pub gemv_decode: bool,
    /// Decode attention on the host.
    pub cpu_decode_attention: bool,
    /// The fused O+FFN decode cascade, where its legality rules allow it.
    pub cascade_ffn: bool,
    /// Core rows of the cascade.
    pub cascade_rows: usize,
    /// Activation layout through RoPE and attention.
    pub layout: QkvLayout,
    /// Single-buffer L1 module-wide in decode calls.
    pub omit_pingpong: bool,
    /// GQA-aware phantom heads when heads × head_dim is not 1024-aligned.
    pub pad_heads: bool,
    /// Zero-pad every dimension no legal tiling divides to the nearest size
    /// one accepts (`padding.rs`); the plan records what it padded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pad_dims: bool,
    /// GEMM operand precision.
    pub precision: super::kernels::Precision,
    /// Q/K/V bias added on the NPU before RoPE, as broadcast adds inside the
    /// attention-input call (the published Qwen2.5 plans); otherwise on the
    /// host after RoPE (the reference trajectory's `bias-after-rope`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub bias_on_npu: bool,
    /// The calls the merged prefill O+FFN launches split into, in order (the
    /// published plans of large or non-aligned FFNs); empty: one call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub o_ffn_calls: Vec<CallSplit>,
    /// Every LM-head partition in one call, however many (the published
    /// 19-partition Qwen LM head); otherwise calls of at most the device's
    /// launch limit.
    #[serde(default, skip_serializing_if = "is_false")]
    pub lm_head_one_call: bool,
    /// The standalone decode down-projection GEMV single-buffered in its own
    /// module, whatever `omit_pingpong` says of the others (the published
    /// large-FFN decodes: `down_gemv` with `omit_pingpong=all`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub single_buffered_down: bool,
    /// The decode O+FFN cascade single-buffered in its own module, whatever
    /// `omit_pingpong` says of the others (the published Llama-3.2-1B and
    /// SmolLM2 decodes compile `o_gemv_ffn` with `omit_pingpong=all` and
    /// keep `rms_gemv_rope` and the LM head double-buffered).
    #[serde(default, skip_serializing_if = "is_false")]
    pub single_buffered_o_ffn: bool,
    /// Every merged launch group in one call, whatever its launch count, as the
    /// published plans compile them (9 launches in Qwen2.5's
    /// `rms_qkv_bias_rope`); otherwise a group past the device's launch limit
    /// is split into even calls (skillc's own plans: Gemma's 10-launch `o_ffn`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub published_calls: bool,
    /// Decode as one NPU dispatch per token (`fused`), where it places.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fused_decode: Option<FusedOptions>,
}

/// One call of a split launch group: its name and how many of the group's
/// launches it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallSplit {
    pub name: String,
    pub launches: usize,
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl PlanOptions {
    /// The reference deployment's final plan structure.
    pub fn reference() -> Self {
        PlanOptions {
            merge_launches: true,
            static_weights: true,
            mark_intermediates: true,
            shared_intermediates: true,
            last_token_lm_head: true,
            npu_lm_head: true,
            lm_head_parts: 8,
            gemv_decode: true,
            cpu_decode_attention: true,
            cascade_ffn: true,
            cascade_rows: 4,
            layout: QkvLayout::SeqFirst,
            omit_pingpong: true,
            pad_heads: true,
            pad_dims: false,
            precision: super::kernels::Precision::Bf16,
            bias_on_npu: false,
            o_ffn_calls: Vec::new(),
            lm_head_one_call: false,
            single_buffered_down: false,
            single_buffered_o_ffn: false,
            published_calls: false,
            fused_decode: None,
        }
    }

    /// Everything a deployment can run without optimizing: one call per
    /// launch, every buffer written per call, activations through the host,
    /// attention head-first behind host transposes.
    pub fn naive() -> Self {
        PlanOptions {
            merge_launches: false,
            static_weights: false,
            mark_intermediates: false,
            shared_intermediates: false,
            cascade_ffn: false,
            omit_pingpong: false,
            layout: QkvLayout::HeadFirst,
            ..Self::reference()
        }
    }
}

/// How the host holds a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BufferClass {
    /// Weights in a per-layer buffer written once at setup.
    StaticWeight,
    /// Weights written by the host before every call that binds them.
    Weight,
    /// Activations, scratch and outputs.
    Activation,
    /// Tensors only host ops read (embedding table, host-side norms, biases).
    Host,
}

/// A setup-time transform of a checkpoint tensor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "transform", rename_all = "snake_case")]
pub enum Transform {
    /// `[out, in]` → `[in, out]` (bf16 DMA cannot transpose, lesson 13).
    Transpose,
    /// Inserts phantom heads inside each KV group along `axis` (0 = rows,
    /// 1 = columns): `heads` real heads become `padded_heads`, zero-filled.
    PadHeads {
        axis: usize,
        heads: usize,
        padded_heads: usize,
        kv_heads: usize,
        head_dim: usize,
    },
    /// Rows `start..start + rows` of the tensor, zero-padded to `padded_rows`.
    Rows {
        start: usize,
        rows: usize,
        padded_rows: usize,
    },
    /// A vector repeated as `rows` identical rows (a bias as the second
    /// operand of an element-wise add over `rows` activations).
    Broadcast { rows: usize },
    /// One added to every element, rounded to bf16 once at setup: Gemma's
    /// `(1 + w)` norm weights, so the RMSNorm kernels multiply by the factor
    /// they always do (transformers forms `1 + w` in f32; the bf16 rounding of
    /// the sum is this path's own error, within the kernels' tolerance).
    OffsetOne,
    /// Zeros appended along both axes as padding decided (`padding.rs`):
    /// each axis is nested levels `[real, padded]` from the outermost in (one
    /// level for hidden or FFN; KV groups, heads per group and head_dim for a
    /// head axis), and a real element keeps its digit at every level. Empty
    /// levels leave the axis as it is.
    ZeroPad {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        rows: Vec<[usize; 2]>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        cols: Vec<[usize; 2]>,
    },
}

/// Where a weight buffer's contents come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum WeightSource {
    /// A checkpoint tensor; `{layer}` in the name is the layer index.
    Tensor {
        name: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        transforms: Vec<Transform>,
    },
    /// RoPE cos|sin table for `positions` positions (see `kernels::rope_lut`),
    /// of the model's global base, or of the local base of its sliding-window
    /// layers (`local`, see [`SlidingLayers`]).
    RopeLut {
        positions: usize,
        head_dim: usize,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        local: bool,
    },
}

/// The layers of a plan whose attention sees only the last `window`
/// positions (Gemma-3's sliding-window layers): flash attention runs with its
/// window mask there (`FlashAttentionSpec::window`), the host KV cache drops
/// what slid out of the window and decode attention reads the window only.
/// Every layer runs the plan's one layer template; on these layers a RoPE
/// launch or rotated bias that names the `lut` buffer reads `local_lut`
/// instead when there is one (the local RoPE base).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlidingLayers {
    pub window: usize,
    pub layers: Vec<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_lut: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Buffer {
    pub class: BufferClass,
    pub dtype: Dtype,
    pub elements: usize,
    /// For weights: what fills the buffer at setup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<WeightSource>,
    /// One buffer per layer (weights keyed by layer index, `bo_key`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_layer: bool,
}

impl Buffer {
    pub fn bytes(&self) -> f64 {
        (self.elements * self.dtype.bytes()) as f64
    }
}

/// What a binding is to the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Weight,
    Input,
    Output,
    /// Produced and consumed inside the call.
    Scratch,
}

/// One buffer bound to a call, and the host traffic it causes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    pub buffer: String,
    pub role: Role,
    /// The host writes it before the call.
    pub write: bool,
    /// The host reads it after the call.
    pub read: bool,
}

/// One kernel launch and the buffers it reads and writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kernel", rename_all = "snake_case")]
pub enum Launch {
    Gemm {
        a: String,
        b: String,
        out: String,
        spec: GemmSpec,
    },
    Gemv {
        w: String,
        x: String,
        out: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        residual: Option<String>,
        spec: GemvSpec,
    },
    GemvSwiglu {
        x: String,
        norm: String,
        gate: String,
        up: String,
        out: String,
        eps: f64,
        spec: GemvSpec,
    },
    Rmsnorm {
        x: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        weight: Option<String>,
        out: String,
        eps: f64,
        spec: NormSpec,
    },
    /// LayerNorm with the model's weight and bias when it has them.
    Layernorm {
        x: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        weight: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bias: Option<String>,
        out: String,
        eps: f64,
        spec: NormSpec,
    },
    QkRmsnorm {
        x: String,
        weight: String,
        out: String,
        eps: f64,
        spec: NormSpec,
    },
    /// RoPE at positions `base..base + rows`, where `base` is 0 in prefill and
    /// the current position in decode.
    Rope {
        x: String,
        lut: String,
        out: String,
        spec: RopeSpec,
    },
    SiluMul {
        gate: String,
        up: String,
        out: String,
        spec: EltwiseSpec,
    },
    /// `gelu_tanh(gate) · up`: Gemma's gated MLP (transformers'
    /// `gelu_pytorch_tanh`).
    GeluMul {
        gate: String,
        up: String,
        out: String,
        spec: EltwiseSpec,
    },
    EltwiseAdd {
        a: String,
        b: String,
        out: String,
        spec: EltwiseSpec,
    },
    Softmax {
        x: String,
        out: String,
        spec: NormSpec,
    },
    FlashAttention {
        q: String,
        k: String,
        v: String,
        out: String,
        spec: FlashAttentionSpec,
    },
    /// Partition `part` of the LM head: `w` holds the partition's rows
    /// (`spec.part.m`, zero-padded past the vocabulary); its logits land in
    /// their rows of `out`.
    LmHeadGemv {
        w: String,
        x: String,
        out: String,
        spec: LmHeadSpec,
        part: usize,
    },
    /// This token's K/V row into the device KV cache `cache` (fused decode).
    KvAppend {
        k: String,
        v: String,
        cache: String,
        spec: KvAppendSpec,
    },
    /// One query per head over the device KV cache `cache` (fused decode).
    DecodeAttention {
        q: String,
        cache: String,
        out: String,
        spec: DecodeAttentionSpec,
    },
}

impl Launch {
    pub fn kernel(&self) -> Kernel {
        match self {
            Launch::Gemm { .. } => Kernel::Gemm,
            Launch::Gemv { .. } => Kernel::Gemv,
            Launch::GemvSwiglu { .. } => Kernel::GemvSwiglu,
            Launch::Rmsnorm { .. } => Kernel::Rmsnorm,
            Launch::Layernorm { .. } => Kernel::Layernorm,
            Launch::QkRmsnorm { .. } => Kernel::QkRmsnorm,
            Launch::Rope { .. } => Kernel::Rope,
            Launch::SiluMul { .. } => Kernel::SiluMul,
            Launch::GeluMul { .. } => Kernel::GeluMul,
            Launch::EltwiseAdd { .. } => Kernel::EltwiseAdd,
            Launch::Softmax { .. } => Kernel::Softmax,
            Launch::FlashAttention { .. } => Kernel::FlashAttention,
            Launch::LmHeadGemv { .. } => Kernel::LmHeadGemv,
            Launch::KvAppend { .. } => Kernel::KvAppend,
            Launch::DecodeAttention { .. } => Kernel::DecodeAttention,
        }
    }

    /// Buffers read, in operand order.
    pub fn inputs(&self) -> Vec<&str> {
        match self {
            Launch::Gemm { a, b, .. } => vec![a, b],
            Launch::Gemv { w, x, residual, .. } => {
                let mut v = vec![w.as_str(), x.as_str()];
                v.extend(residual.as_deref());
                v
            }
            Launch::GemvSwiglu {
                x, norm, gate, up, ..
            } => vec![x, norm, gate, up],
            Launch::Rmsnorm { x, weight, .. } => {
                let mut v = vec![x.as_str()];
                v.extend(weight.as_deref());
                v
            }
            Launch::Layernorm {
                x, weight, bias, ..
            } => {
                let mut v = vec![x.as_str()];
                v.extend(weight.as_deref());
                v.extend(bias.as_deref());
                v
            }
            Launch::QkRmsnorm { x, weight, .. } => vec![x, weight],
            Launch::Rope { x, lut, .. } => vec![x, lut],
            Launch::SiluMul { gate, up, .. } | Launch::GeluMul { gate, up, .. } => vec![gate, up],
            Launch::EltwiseAdd { a, b, .. } => vec![a, b],
            Launch::Softmax { x, .. } => vec![x],
            Launch::FlashAttention { q, k, v, .. } => vec![q, k, v],
            Launch::LmHeadGemv { w, x, .. } => vec![w, x],
            Launch::KvAppend { k, v, .. } => vec![k, v],
            Launch::DecodeAttention { q, cache, .. } => vec![q, cache],
        }
    }

    pub fn output(&self) -> &str {
        match self {
            Launch::Gemm { out, .. }
            | Launch::Gemv { out, .. }
            | Launch::GemvSwiglu { out, .. }
            | Launch::Rmsnorm { out, .. }
            | Launch::Layernorm { out, .. }
            | Launch::QkRmsnorm { out, .. }
            | Launch::Rope { out, .. }
            | Launch::SiluMul { out, .. }
            | Launch::GeluMul { out, .. }
            | Launch::EltwiseAdd { out, .. }
            | Launch::Softmax { out, .. }
            | Launch::FlashAttention { out, .. }
            | Launch::LmHeadGemv { out, .. }
            | Launch::DecodeAttention { out, .. } => out,
            Launch::KvAppend { cache, .. } => cache,
        }
    }

    /// The kernel's own constraint check.
    pub fn check(&self, device: &Device) -> Vec<ConstraintViolation> {
        match self {
            Launch::Gemm { spec, .. } => spec.check(device),
            Launch::Gemv { spec, .. } => spec.check(device),
            Launch::GemvSwiglu { spec, .. } => check_swiglu(device, spec),
            Launch::Rmsnorm { spec, .. } => spec.check(device, Kernel::Rmsnorm),
            Launch::Layernorm { spec, .. } => spec.check(device, Kernel::Layernorm),
            Launch::QkRmsnorm { spec, .. } => spec.check(device, Kernel::QkRmsnorm),
            Launch::Rope { spec, .. } => spec.check(device),
            Launch::SiluMul { spec, .. } => spec.check(device, Kernel::SiluMul),
            Launch::GeluMul { spec, .. } => spec.check(device, Kernel::GeluMul),
            Launch::EltwiseAdd { spec, .. } => spec.check(device, Kernel::EltwiseAdd),
            Launch::Softmax { spec, .. } => spec.check(device, Kernel::Softmax),
            Launch::FlashAttention { spec, .. } => spec.check(device),
            Launch::LmHeadGemv { spec, .. } => spec.check(device),
            Launch::KvAppend { spec, .. } => spec.check(device),
            Launch::DecodeAttention { spec, .. } => spec.check(device),
        }
    }

    /// A short shape label, e.g. `2048x2048x512`.
    pub fn shape_label(&self) -> String {
        match self {
            Launch::Gemm { spec, .. } => format!("{}x{}x{}", spec.m, spec.k, spec.n),
            Launch::Gemv { spec, .. } => super::kernels::gemv_packed::label(spec),
            Launch::GemvSwiglu { spec, .. } => format!("{}x{}", spec.m, spec.k),
            Launch::Rmsnorm { spec, .. }
            | Launch::Layernorm { spec, .. }
            | Launch::QkRmsnorm { spec, .. }
            | Launch::Softmax { spec, .. } => {
                format!("{}x{}", spec.rows, spec.cols)
            }
            Launch::Rope { spec, .. } => format!("{}x{}", spec.rows * spec.heads, spec.head_dim),
            Launch::SiluMul { spec, .. }
            | Launch::GeluMul { spec, .. }
            | Launch::EltwiseAdd { spec, .. } => spec.n.to_string(),
            Launch::FlashAttention { spec, .. } => {
                let window = spec.window.map_or_else(String::new, |w| format!(" w{w}"));
                format!(
                    "{}x{} h{}/{} d{}{window}",
                    spec.lq, spec.lk, spec.heads, spec.kv_heads, spec.head_dim
                )
            }
            Launch::LmHeadGemv { spec, part, .. } => {
                format!(
                    "{}x{} part {}/{}",
                    spec.part.m,
                    spec.part.k,
                    part + 1,
                    spec.parts
                )
            }
            Launch::KvAppend { spec, .. } => format!("{} ctx {}", spec.kv_width, spec.context),
            Launch::DecodeAttention { spec, .. } => format!(
                "h{}/{} d{} ctx {} cu{}",
                spec.heads, spec.kv_heads, spec.head_dim, spec.context, spec.cus
            ),
        }
    }
}

/// One NPU call (an `xrt.run` of one ELF).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    pub name: String,
    /// The merge group it belongs to (a merged call is its own group).
    pub group: String,
    pub launches: Vec<Launch>,
    pub bindings: Vec<Binding>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    Call(Call),
    Host(HostOp),
}

/// Where a step sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    Prologue,
    Layer,
    Epilogue,
}

impl Section {
    pub fn name(self) -> &'static str {
        match self {
            Section::Prologue => "prologue",
            Section::Layer => "layer",
            Section::Epilogue => "epilogue",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub model: String,
    pub phase: Phase,
    /// Prefill: rows every kernel processes (prompts are padded to it).
    /// Decode: the context length the step attends to.
    pub seq_len: usize,
    pub num_layers: usize,
    pub options: PlanOptions,
    /// The zero padding of the model's dimensions the kernels run at, when
    /// any (see `padding.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub padding: Option<super::padding::Padding>,
    /// The layers that attend over a sliding window, when the model has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding: Option<SlidingLayers>,
    /// The single-dispatch decode's layout, when the plan is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fused: Option<FusedLayout>,
    pub buffers: BTreeMap<String, Buffer>,
    pub prologue: Vec<Step>,
    pub layer: Vec<Step>,
    pub epilogue: Vec<Step>,
}

impl Plan {
    /// The attention window of `layer`, if it is a sliding-window layer.
    pub fn window_of(&self, layer: usize) -> Option<usize> {
        self.sliding
            .as_ref()
            .filter(|s| s.layers.contains(&layer))
            .map(|s| s.window)
    }

    /// The buffer `layer` reads where the template names `buffer`: the local
    /// RoPE table on a sliding-window layer, else `buffer` itself.
    pub fn layer_buffer<'a>(&'a self, buffer: &'a str, layer: usize) -> &'a str {
        match &self.sliding {
            Some(s) if buffer == "lut" && s.layers.contains(&layer) => {
                s.local_lut.as_deref().unwrap_or(buffer)
            }
            _ => buffer,
        }
    }

    pub fn sections(&self) -> [(Section, &[Step]); 3] {
        [
            (Section::Prologue, &self.prologue),
            (Section::Layer, &self.layer),
            (Section::Epilogue, &self.epilogue),
        ]
    }

    /// Every call with its section.
    pub fn calls(&self) -> impl Iterator<Item = (Section, &Call)> {
        self.sections().into_iter().flat_map(|(section, steps)| {
            steps.iter().filter_map(move |s| match s {
                Step::Call(c) => Some((section, c)),
                Step::Host(_) => None,
            })
        })
    }

    /// GEMM launches whose N is not a multiple of tile_n × herd rows: the
    /// hardware runs them and leaves columns unwritten (see `kernels::gemm`).
    /// A debugger reads this after a validation gate reports mismatches.
    pub fn silent_corruptions(&self) -> Vec<String> {
        let mut found = Vec::new();
        for (section, call) in self.calls() {
            for (i, launch) in call.launches.iter().enumerate() {
                if let Launch::Gemm { spec, .. } = launch {
                    let unwritten = spec.unwritten_columns();
                    if unwritten > 0 {
                        found.push(format!(
                            "{}/{}/launch {i}: gemm {}x{}x{} tile_n {} x herd rows {} leaves {unwritten} of {} columns unwritten",
                            section.name(),
                            call.name,
                            spec.m,
                            spec.k,
                            spec.n,
                            spec.tile.tile_n,
                            spec.herd.rows(),
                            spec.n
                        ));
                    }
                }
            }
        }
        found
    }

    /// NPU calls per decoder layer.
    pub fn calls_per_layer(&self) -> usize {
        self.layer
            .iter()
            .filter(|s| matches!(s, Step::Call(_)))
            .count()
    }
}

mod file;
mod fused;
mod host_op;
mod legality;
mod standalone;
mod transform;

pub use file::{json_file, PlanFileError};
pub use fused::{
    attention_cus, FusedKv, FusedLayout, FusedOptions, ATTENTION_CUS_MAX, GROUP as FUSED_GROUP,
    HEAD_CALL as FUSED_HEAD_CALL, KV_CACHE as FUSED_KV_CACHE, PROJ_COLUMNS, PROJ_ROWS,
};
pub use host_op::HostOp;
pub use standalone::Standalone;
pub use transform::{axis_len, pad_heads, padded_index, zero_pad, TransformError};
