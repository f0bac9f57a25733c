//! The operations of the runtime: one [`OpSpec`] per [`OpKind`] (name, phases,
//! typed parameters with their docs). The table is the single source of truth for
//! operation names: `OpKind`'s spelling, `FromStr` and serde all read it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::formats::FormatDependence::{self, Depends, Independent};
use super::words::{BufferKey, RopeConvention, RopeScaling, WeightOrigin};
use crate::phase::DeployPhase;
use crate::xdna2::plan::FusedKv;
// The table's rows name phases by this short alias.
use crate::phase::DeployPhase as P;
use crate::xdna2::kernels::{Epilogue, Kernel, Precision, QkvLayout};

/// Every operation, in table order. Strings become an `OpKind` once, where text
/// comes in (the parser's checks, bundle.json), and match arms over it are
/// exhaustive: an operation added here fails to compile wherever its meaning is
/// missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    CheckScope,
    LoadWeights,
    BuildReference,
    CompareReference,
    RopeConvention,
    RopeScaling,
    EnumerateKernels,
    SelectTiling,
    ValidateKernel,
    RegisterKernel,
    PadDims,
    BuildBlock,
    PadHeads,
    BiasAfterRope,
    QkNorm,
    ValidateBlock,
    BuildModel,
    VerifyModel,
    DiagnoseLayers,
    MergeLaunches,
    SplitLaunches,
    ReuseStaticWeights,
    MarkIntermediates,
    AlignLayout,
    LastTokenLmHead,
    TuneTiling,
    ProfilePrefill,
    GemvDecode,
    CpuDecodeAttention,
    PretransposeWeights,
    PartitionLmHead,
    CascadeFfn,
    OmitPingpong,
    FusedDecode,
    ProfileDecode,
    WriteArtifacts,
    RecordLessons,
    Evaluate,
    NoteHost,
}

impl OpKind {
    /// Every operation, in table order.
    pub const ALL: [OpKind; 39] = [
        OpKind::CheckScope,
        OpKind::LoadWeights,
        OpKind::BuildReference,
        OpKind::CompareReference,
        OpKind::RopeConvention,
        OpKind::RopeScaling,
        OpKind::EnumerateKernels,
        OpKind::SelectTiling,
        OpKind::ValidateKernel,
        OpKind::RegisterKernel,
        OpKind::PadDims,
        OpKind::BuildBlock,
        OpKind::PadHeads,
        OpKind::BiasAfterRope,
        OpKind::QkNorm,
        OpKind::ValidateBlock,
        OpKind::BuildModel,
        OpKind::VerifyModel,
        OpKind::DiagnoseLayers,
        OpKind::MergeLaunches,
        OpKind::SplitLaunches,
        OpKind::ReuseStaticWeights,
        OpKind::MarkIntermediates,
        OpKind::AlignLayout,
        OpKind::LastTokenLmHead,
        OpKind::TuneTiling,
        OpKind::ProfilePrefill,
        OpKind::GemvDecode,
        OpKind::CpuDecodeAttention,
        OpKind::PretransposeWeights,
        OpKind::PartitionLmHead,
        OpKind::CascadeFfn,
        OpKind::OmitPingpong,
        OpKind::FusedDecode,
        OpKind::ProfileDecode,
        OpKind::WriteArtifacts,
        OpKind::RecordLessons,
        OpKind::Evaluate,
        OpKind::NoteHost,
    ];

    /// The operation's row of [`OPERATIONS`].
    pub const fn spec(self) -> &'static OpSpec {
        &OPERATIONS[self as usize]
    }

    /// The language's name, e.g. `select-tiling`.
    pub const fn name(self) -> &'static str {
        self.spec().name
    }

    /// Whether the operation measures or checks (its observations are gates or
    /// figures) rather than changes or builds the deployment. The distiller keeps
    /// these out of steps when a fix re-checks them.
    pub fn measures(self) -> bool {
        use OpKind::*;
        match self {
            ValidateKernel | ValidateBlock | VerifyModel | CompareReference | ProfilePrefill
            | ProfileDecode | DiagnoseLayers | Evaluate => true,
            CheckScope | LoadWeights | BuildReference | RopeConvention | RopeScaling
            | EnumerateKernels | SelectTiling | RegisterKernel | PadDims | BuildBlock
            | PadHeads | BiasAfterRope | QkNorm | BuildModel | MergeLaunches | SplitLaunches
            | ReuseStaticWeights | MarkIntermediates | AlignLayout | LastTokenLmHead
            | TuneTiling | GemvDecode | CpuDecodeAttention | PretransposeWeights
            | PartitionLmHead | CascadeFfn | OmitPingpong | FusedDecode | WriteArtifacts
            | RecordLessons | NoteHost => false,
        }
    }

    /// Whether the operation is an optimization technique: a change to the plan that
    /// phases 4 and 5 try one at a time and keep only when it helps. The executor
    /// tries exactly these steps of a bundle; every one must be allowed in phase 4
    /// or 5 and change the design (a test in `ops::effect` checks both ways).
    pub fn is_technique(self) -> bool {
        use OpKind::*;
        match self {
            MergeLaunches | SplitLaunches | ReuseStaticWeights | MarkIntermediates
            | AlignLayout | LastTokenLmHead | TuneTiling | GemvDecode | CpuDecodeAttention
            | PretransposeWeights | PartitionLmHead | CascadeFfn | OmitPingpong | FusedDecode => {
                true
            }
            CheckScope | LoadWeights | BuildReference | CompareReference | RopeConvention
            | RopeScaling | EnumerateKernels | SelectTiling | ValidateKernel | RegisterKernel
            | PadDims | BuildBlock | PadHeads | BiasAfterRope | QkNorm | ValidateBlock
            | BuildModel | VerifyModel | DiagnoseLayers | ProfilePrefill | ProfileDecode
            | WriteArtifacts | RecordLessons | Evaluate | NoteHost => false,
        }
    }
}

/// An operation name outside the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an operation of the runtime")]
pub struct UnknownOperation(pub String);

impl FromStr for OpKind {
    type Err = UnknownOperation;

    fn from_str(name: &str) -> Result<Self, UnknownOperation> {
        operation(name)
            .map(|spec| spec.kind)
            .ok_or_else(|| UnknownOperation(name.to_string()))
    }
}

/// Ordered by name, like the strings operations were before they had a type, so
/// whatever is sorted by operation keeps its order.
impl Ord for OpKind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl PartialOrd for OpKind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for OpKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for OpKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

// The table is indexed by `OpKind`: row i must be operation i, and every
// operation has its row. Checked at compile time.
const _: () = {
    assert!(OPERATIONS.len() == OpKind::ALL.len());
    let mut i = 0;
    while i < OPERATIONS.len() {
        assert!(OPERATIONS[i].kind as usize == i);
        assert!(OpKind::ALL[i] as usize == i);
        i += 1;
    }
};

/// The kind of value a parameter accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ParamKind {
    Int,
    Float,
    Bool,
    /// Free text in quotes.
    Str,
    /// A bare identifier such as `gemm` or `rms_gemms_rope`.
    Ident,
    /// A bracketed list of integers such as `[8,4]`; `components` names each slot
    /// so a fix can change one of them (`tile_n=32`).
    IntList,
    /// One of a closed set of identifiers.
    Enum(&'static [&'static str]),
}

/// One parameter of an operation.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: ParamKind,
    pub required: bool,
    /// Names of the list slots, in order, for [`ParamKind::IntList`] parameters.
    pub components: &'static [&'static str],
    /// The values a numeric parameter admits (every slot, for lists).
    pub bound: Bound,
    pub doc: &'static str,
}

/// The range of a numeric parameter, checked by the front end (`skillc check`)
/// and wherever parameters are read ([`super::Op::read`]: replay, deploy, a
/// hand-edited bundle.json).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// Not numeric, or any value of its kind.
    Any,
    /// A size, count or relative tolerance: above zero (a float also normal,
    /// not subnormal).
    Positive,
    /// An index, a seed, a warm-up count or an absolute tolerance: zero or more.
    NonNegative,
    /// A cosine threshold, between -1 and 1.
    Cosine,
}

impl Bound {
    pub fn admits(self, value: f64) -> bool {
        match self {
            Bound::Any => true,
            Bound::Positive => value > 0.0 && value.is_normal(),
            Bound::NonNegative => value >= 0.0,
            Bound::Cosine => (-1.0..=1.0).contains(&value),
        }
    }

    /// The rule, as a diagnostic states it.
    pub fn rule(self) -> &'static str {
        match self {
            Bound::Any => "any value",
            Bound::Positive => "must be above 0",
            Bound::NonNegative => "must not be negative",
            Bound::Cosine => "a cosine lies between -1 and 1",
        }
    }
}

/// One operation of the runtime.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct OpSpec {
    pub kind: OpKind,
    pub name: &'static str,
    /// Phases in which the operation may appear.
    pub phases: &'static [DeployPhase],
    pub params: &'static [ParamSpec],
    pub doc: &'static str,
    /// Whether its parameters and results depend on the weights' format: a step or
    /// fix of such an operation carries the format it was recorded on.
    pub weights: FormatDependence,
}

impl OpSpec {
    pub fn param(&self, name: &str) -> Option<&'static ParamSpec> {
        self.params.iter().find(|p| p.name == name)
    }

    /// Resolves a parameter name or a list component name (`tile_n`) to the
    /// parameter that holds it and the slot index when it is a component.
    pub fn resolve_param(&self, name: &str) -> Option<(&'static ParamSpec, Option<usize>)> {
        if let Some(p) = self.param(name) {
            return Some((p, None));
        }
        self.params.iter().find_map(|p| {
            p.components
                .iter()
                .position(|c| *c == name)
                .map(|slot| (p, Some(slot)))
        })
    }

    pub fn allowed_in(&self, phase: DeployPhase) -> bool {
        self.phases.contains(&phase)
    }
}

const fn req(name: &'static str, kind: ParamKind, doc: &'static str) -> ParamSpec {
    ParamSpec {
        name,
        kind,
        required: true,
        components: &[],
        bound: Bound::Any,
        doc,
    }
}

const fn opt(name: &'static str, kind: ParamKind, doc: &'static str) -> ParamSpec {
    ParamSpec {
        name,
        kind,
        required: false,
        components: &[],
        bound: Bound::Any,
        doc,
    }
}

const fn list(
    name: &'static str,
    required: bool,
    components: &'static [&'static str],
    doc: &'static str,
) -> ParamSpec {
    ParamSpec {
        name,
        kind: ParamKind::IntList,
        required,
        components,
        bound: Bound::Positive,
        doc,
    }
}

impl ParamSpec {
    const fn bounded(self, bound: Bound) -> ParamSpec {
        ParamSpec { bound, ..self }
    }
}

use Bound::{Cosine, NonNegative, Positive};

use ParamKind::{Bool, Float, Ident, Int, Str};

/// Kernel names the emulator implements; `kernel=` parameters take one of these.
pub const KERNELS: &[&str] = Kernel::WORDS;

const KERNEL: ParamKind = ParamKind::Enum(Kernel::WORDS);
const PRECISION: ParamKind = ParamKind::Enum(Precision::WORDS);
const LAYOUT: ParamKind = ParamKind::Enum(QkvLayout::WORDS);
const EPILOGUE: ParamKind = ParamKind::Enum(Epilogue::WORDS);
const BUFFER_KEY: ParamKind = ParamKind::Enum(BufferKey::WORDS);
const ROPE_CONVENTION: ParamKind = ParamKind::Enum(RopeConvention::WORDS);
const ROPE_SCALING: ParamKind = ParamKind::Enum(RopeScaling::WORDS);
const WEIGHT_SOURCE: ParamKind = ParamKind::Enum(WeightOrigin::WORDS);
const FUSED_KV: ParamKind = ParamKind::Enum(FusedKv::WORDS);

const SHAPE: ParamSpec = list(
    "shape",
    true,
    &["m", "k", "n"],
    "problem shape, e.g. [M,K,N] for GEMM",
);
const HERD: ParamSpec = list(
    "herd",
    false,
    &["herd_m", "herd_n"],
    "compute-tile herd [columns,rows]",
);
const TILE: ParamSpec = list(
    "tile",
    false,
    &["tile_m", "tile_k_l2", "tile_k_l1", "tile_n"],
    "GEMM tile [tile_m, tile_k_l2, tile_k_l1, tile_n]; row kernels use [tile_m] or [tile_n]",
);

/// Every operation the runtime can execute.
pub const OPERATIONS: &[OpSpec] = &[
    // Phase 0: the CPU reference.
    OpSpec {
        kind: OpKind::CheckScope,
        name: "check-scope",
        phases: &[P::Reference],
        params: &[],
        doc: "refuse architectures outside scope (MoE, MLA, encoder-decoder) with the reason",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::LoadWeights,
        name: "load-weights",
        phases: &[P::Reference],
        params: &[
            opt("source", WEIGHT_SOURCE, "checkpoint safetensors or seeded random weights"),
            opt("seed", Int, "seed for random weights").bounded(NonNegative),
        ],
        doc: "load the model's weights (bf16 in memory)",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::BuildReference,
        name: "build-reference",
        phases: &[P::Reference],
        params: &[],
        doc: "build the CPU f32 reference forward pass",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::CompareReference,
        name: "compare-reference",
        phases: &[P::Reference],
        params: &[
            req("against", Ident, "what the reference is compared with, e.g. transformers"),
            opt("tol", Float, "max abs error relative to max |value|").bounded(Positive),
        ],
        doc: "compare the CPU reference with an external reference",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::RopeConvention,
        name: "rope-convention",
        phases: &[P::Reference, P::Kernels, P::Block, P::Model],
        params: &[req(
            "convention",
            ROPE_CONVENTION,
            "which dimensions RoPE rotates together: i with i + head_dim/2, or 2i with 2i+1",
        )],
        doc: "choose the RoPE pairing the checkpoint was trained with",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::RopeScaling,
        name: "rope-scaling",
        phases: &[P::Kernels, P::Block],
        params: &[req(
            "scaling",
            ROPE_SCALING,
            "build the RoPE table from the config's scaled inverse frequencies (llama3, linear) or the unscaled ones",
        )],
        doc: "choose the inverse frequencies the RoPE table is built from",
        weights: Independent,
    },
    // Phase 1: kernels.
    OpSpec {
        kind: OpKind::EnumerateKernels,
        name: "enumerate-kernels",
        phases: &[P::Kernels],
        params: &[],
        doc: "derive every kernel x shape the model needs",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::SelectTiling,
        name: "select-tiling",
        phases: &[P::Kernels, P::Prefill, P::Decode],
        params: &[
            req("kernel", KERNEL, "kernel name"),
            SHAPE,
            HERD,
            TILE,
            opt("precision", PRECISION, "bf16 operands or BFP16 block emulation"),
            opt(
                "epilogue",
                EPILOGUE,
                "GEMM output path: bf16 cast in place, bf16 drain tile, or f32",
            ),
            opt(
                "layout",
                LAYOUT,
                "activation layout the kernel reads (FlashAttention variant)",
            ),
        ],
        doc: "choose a tiling and herd for one kernel at one shape",
        weights: Depends("the tile and herd are sized by the bytes of the weight panel each tile stages"),
    },
    OpSpec {
        kind: OpKind::ValidateKernel,
        name: "validate-kernel",
        phases: &[P::Kernels],
        params: &[
            req("kernel", KERNEL, "kernel name"),
            SHAPE,
            opt("rtol", Float, "relative tolerance").bounded(Positive),
            opt("atol", Float, "absolute tolerance").bounded(NonNegative),
        ],
        doc: "run one kernel on the NPU against the f32 reference, element-wise",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::RegisterKernel,
        name: "register-kernel",
        phases: &[P::Kernels],
        params: &[req("kernel", KERNEL, "kernel name"), opt("shape", ParamKind::IntList, "shape").bounded(Positive)],
        doc: "record a validated kernel configuration in the kernel registry",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::PadDims,
        name: "pad-dims",
        phases: &[P::Kernels],
        params: &[],
        doc: "zero-pad every model dimension no legal tiling divides (hidden, FFN, head_dim, \
              KV groups) to the nearest size one accepts, searched over the device constraints",
        weights: Depends("padded sizes must be whole blocks of the stored format"),
    },
    // Phase 2: one decoder block.
    OpSpec {
        kind: OpKind::BuildBlock,
        name: "build-block",
        phases: &[P::Block],
        params: &[opt("layer", Int, "layer index").bounded(NonNegative)],
        doc: "wire one decoder block from validated kernels",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::PadHeads,
        name: "pad-heads",
        phases: &[P::Block],
        params: &[req("multiple", Int, "pad dims to this multiple with phantom heads").bounded(Positive)],
        doc: "GQA-aware padding of non-aligned dimensions",
        weights: Depends("padded weights are a copy: they cannot stay in their stored blocks"),
    },
    OpSpec {
        kind: OpKind::BiasAfterRope,
        name: "bias-after-rope",
        phases: &[P::Block],
        params: &[],
        doc: "add the QKV bias on the host after RoPE, using RoPE(q+b) = RoPE(q) + RoPE(b)",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::QkNorm,
        name: "qk-norm",
        phases: &[P::Block],
        params: &[],
        doc: "apply per-head Q/K RMSNorm before RoPE (Qwen3)",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::ValidateBlock,
        name: "validate-block",
        phases: &[P::Block],
        params: &[
            opt("layer", Int, "layer index").bounded(NonNegative),
            opt("cosine_min", Float, "whole-tensor cosine threshold").bounded(Cosine),
            opt("position_min", Float, "per-position cosine threshold").bounded(Cosine),
        ],
        doc: "compare one block on the NPU with the reference",
        weights: Independent,
    },
    // Phase 3: whole model.
    OpSpec {
        kind: OpKind::BuildModel,
        name: "build-model",
        phases: &[P::Model],
        params: &[],
        doc: "chain every block and the LM head",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::VerifyModel,
        name: "verify-model",
        phases: &[P::Model, P::Prefill, P::Decode, P::Finalize, P::Evaluate],
        params: &[
            opt("tokens", Int, "greedy tokens generated per prompt").bounded(Positive),
            opt("top_k", Int, "top-k set checked at the first divergence").bounded(Positive),
        ],
        doc: "greedy-decode on both sides; at the first divergence each token must be in the other's top-k",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::DiagnoseLayers,
        name: "diagnose-layers",
        phases: &[P::Model],
        params: &[],
        doc: "per-layer cosine table (diagnosis, not a gate)",
        weights: Independent,
    },
    // Phase 4: prefill optimization.
    OpSpec {
        kind: OpKind::MergeLaunches,
        name: "merge-launches",
        phases: &[P::Prefill, P::Decode],
        params: &[req("group", Ident, "name of the merged call, e.g. rms_gemms_rope")],
        doc: "merge consecutive launches into one NPU call",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::SplitLaunches,
        name: "split-launches",
        phases: &[P::Prefill, P::Decode],
        params: &[req("group", Ident, "merged call to split back")],
        doc: "undo a merge (compile blow-up, mismatch)",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::ReuseStaticWeights,
        name: "reuse-static-weights",
        phases: &[P::Prefill, P::Decode],
        params: &[opt(
            "key",
            BUFFER_KEY,
            "one weight buffer per layer (the default), or one shared by every layer",
        )],
        doc: "per-layer weight buffers written once at setup, skipped per call",
        weights: Depends("the static buffers hold the weights as stored, so their footprint is the format's bytes"),
    },
    OpSpec {
        kind: OpKind::MarkIntermediates,
        name: "mark-intermediates",
        phases: &[P::Prefill, P::Decode],
        params: &[],
        doc: "skip host writes of buffers the kernels overwrite",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::AlignLayout,
        name: "align-layout",
        phases: &[P::Prefill],
        params: &[req("layout", LAYOUT, "activation layout")],
        doc: "keep activations in one layout so host transposes disappear",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::LastTokenLmHead,
        name: "last-token-lm-head",
        phases: &[P::Prefill],
        params: &[],
        doc: "prefill LM head on the last real row only, reusing the decode GEMV",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::TuneTiling,
        name: "tune-tiling",
        phases: &[P::Prefill, P::Decode],
        params: &[req("kernel", KERNEL, "kernel name"), TILE, HERD],
        doc: "retune one kernel's tiling for speed",
        weights: Depends("the tile is sized by the bytes of the weight panel each tile stages"),
    },
    OpSpec {
        kind: OpKind::ProfilePrefill,
        name: "profile-prefill",
        phases: &[P::Model, P::Prefill, P::Finalize],
        params: &[
            opt("seq_len", Int, "sequence length").bounded(Positive),
            opt("warmup", Int, "warm-up iterations").bounded(NonNegative),
            opt("iters", Int, "timed iterations").bounded(Positive),
        ],
        doc: "time prefill",
        weights: Independent,
    },
    // Phase 5: decode optimization.
    OpSpec {
        kind: OpKind::GemvDecode,
        name: "gemv-decode",
        // Phase 3 wires the first decode (verify generates 32 tokens); phase 5 tunes it.
        phases: &[P::Model, P::Decode],
        params: &[HERD],
        doc: "decode projections as NPU GEMVs",
        weights: Depends("a GEMV streams its weights: its herd and tile are sized by their bytes"),
    },
    OpSpec {
        kind: OpKind::CpuDecodeAttention,
        name: "cpu-decode-attention",
        phases: &[P::Decode],
        params: &[],
        doc: "decode attention (one query) on the host",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::PretransposeWeights,
        name: "pretranspose-weights",
        phases: &[P::Model, P::Decode],
        params: &[],
        doc: "one-time host transpose of (out,in) weights for GEMV",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::PartitionLmHead,
        name: "partition-lm-head",
        phases: &[P::Decode],
        params: &[req("parts", Int, "number of LM-head partitions").bounded(Positive)],
        doc: "split the LM head GEMV so each partition fits L2 and the repeat limit",
        weights: Depends("partitions are sized so the head's weight bytes fit L2"),
    },
    OpSpec {
        kind: OpKind::CascadeFfn,
        name: "cascade-ffn",
        phases: &[P::Decode],
        params: &[req("rows", Int, "core rows of the cascade").bounded(Positive)],
        doc: "fused O+FFN decode GEMV cascade",
        weights: Depends("the cascade's L1 and L2 footprints are the weights' bytes"),
    },
    OpSpec {
        kind: OpKind::OmitPingpong,
        name: "omit-pingpong",
        phases: &[P::Decode],
        params: &[],
        doc: "drop ping-pong buffers module-wide to fit L1",
        weights: Depends("single buffering exists to fit a weight row's bytes in L1"),
    },
    OpSpec {
        kind: OpKind::FusedDecode,
        name: "fused-decode",
        phases: &[P::Decode],
        params: &[
            opt("kv", FUSED_KV, "KV cache on the device, appended in place (append), or uploaded per token (upload)"),
            opt("channels", Int, "shim channels feeding each projection column's weights").bounded(Positive),
        ],
        doc: "one NPU dispatch per token: every layer and the LM head in one persistent design, attention on the NPU",
        weights: Depends("the dispatch streams every projection's bytes over the projection columns' shim channels"),
    },
    OpSpec {
        kind: OpKind::ProfileDecode,
        name: "profile-decode",
        phases: &[P::Model, P::Decode, P::Finalize],
        params: &[
            opt("tokens", Int, "decoded tokens").bounded(Positive),
            opt("seq_len", Int, "context length").bounded(Positive),
        ],
        doc: "time decode",
        weights: Depends("decode streams every weight once per token: its time scales with their bytes"),
    },
    // Phases 6 and 7.
    OpSpec {
        kind: OpKind::WriteArtifacts,
        name: "write-artifacts",
        phases: &[P::Finalize],
        params: &[],
        doc: "write the production plan, report and trajectory",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::RecordLessons,
        name: "record-lessons",
        phases: &[P::Finalize],
        params: &[],
        doc: "append this run's lessons to the trajectory",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::Evaluate,
        name: "evaluate",
        phases: &[P::Evaluate],
        params: &[opt("fresh_process", Bool, "re-run verification in a fresh process")],
        doc: "independent evaluation of the written artifacts",
        weights: Independent,
    },
    OpSpec {
        kind: OpKind::NoteHost,
        name: "note-host",
        phases: &[P::Reference, P::Kernels, P::Block, P::Model, P::Prefill, P::Decode, P::Finalize, P::Evaluate],
        params: &[opt("text", Str, "what changed on the host")],
        doc: "a host-side change with no NPU effect (kept for the record)",
        weights: Independent,
    },
];

pub fn operation(name: &str) -> Option<&'static OpSpec> {
    OPERATIONS.iter().find(|op| op.name == name)
}

#[cfg(test)]
#[path = "operations_tests.rs"]
mod tests;
