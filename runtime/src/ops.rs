//! The operation and metric vocabulary shared by the trajectory language, the
//! distiller and the runtime.
//!
//! This table is the single source of truth: the front end validates actions and
//! lesson fixes against it, the distiller copies operation names from it into
//! bundles, and the executor dispatches on it. Adding an operation here is the only
//! way to make it exist anywhere.

use serde::Serialize;

/// Keywords of the trajectory language (grammar/README.md, "Keywords"): never an
/// entry id. The parser reserves them and the executor's trajectory writer avoids
/// them when it makes ids and bare words.
pub const KEYWORDS: &[&str] = &[
    "trajectory",
    "session",
    "skill",
    "trigger",
    "phase",
    "model",
    "target",
    "baseline",
    "action",
    "observe",
    "lesson",
    "note",
    "decision",
    "when",
    "after",
    "about",
    "evidence",
    "fixes",
    "by",
    "supersedes",
    "reverts",
    "symptom",
    "cause",
    "fix",
    "in",
    "fails",
    "with",
    "and",
    "or",
    "not",
    "measured",
    "modeled",
    "pass",
    "fail",
    "true",
    "false",
];

/// Whether `word` is a keyword of the trajectory language.
pub fn is_keyword(word: &str) -> bool {
    KEYWORDS.contains(&word)
}

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
    pub doc: &'static str,
}

/// One operation of the runtime.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct OpSpec {
    pub name: &'static str,
    /// Phases in which the operation may appear (0..=7).
    pub phases: &'static [u8],
    pub params: &'static [ParamSpec],
    pub doc: &'static str,
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

    pub fn allowed_in(&self, phase: u8) -> bool {
        self.phases.contains(&phase)
    }
}

const fn req(name: &'static str, kind: ParamKind, doc: &'static str) -> ParamSpec {
    ParamSpec {
        name,
        kind,
        required: true,
        components: &[],
        doc,
    }
}

const fn opt(name: &'static str, kind: ParamKind, doc: &'static str) -> ParamSpec {
    ParamSpec {
        name,
        kind,
        required: false,
        components: &[],
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
        doc,
    }
}

use ParamKind::{Bool, Float, Ident, Int, Str};

/// Kernel names the emulator implements; `kernel=` parameters take one of these.
pub const KERNELS: &[&str] = &[
    "gemm",
    "gemv",
    "gemv_swiglu",
    "rmsnorm",
    "qk_rmsnorm",
    "rope",
    "silu_mul",
    "eltwise_add",
    "softmax",
    "flash_attention",
    "embedding",
    "lm_head_gemv",
];

const KERNEL: ParamKind = ParamKind::Enum(KERNELS);
const PRECISION: ParamKind = ParamKind::Enum(&["bf16", "bfp16"]);
const LAYOUT: ParamKind = ParamKind::Enum(&["seq-first", "head-first"]);
const EPILOGUE: ParamKind = ParamKind::Enum(&["fused-cast", "drain", "f32"]);
const BUFFER_KEY: ParamKind = ParamKind::Enum(&["per-layer", "shared"]);
const ROPE_CONVENTION: ParamKind = ParamKind::Enum(&["half-split", "interleaved"]);
const ROPE_SCALING: ParamKind = ParamKind::Enum(&["config", "none"]);
const WEIGHT_SOURCE: ParamKind = ParamKind::Enum(&["checkpoint", "random"]);

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
        name: "check-scope",
        phases: &[0],
        params: &[],
        doc: "refuse architectures outside scope (MoE, MLA, encoder-decoder) with the reason",
    },
    OpSpec {
        name: "load-weights",
        phases: &[0],
        params: &[
            opt("source", WEIGHT_SOURCE, "checkpoint safetensors or seeded random weights"),
            opt("seed", Int, "seed for random weights"),
        ],
        doc: "load the model's weights (bf16 in memory)",
    },
    OpSpec {
        name: "build-reference",
        phases: &[0],
        params: &[],
        doc: "build the CPU f32 reference forward pass",
    },
    OpSpec {
        name: "compare-reference",
        phases: &[0],
        params: &[
            req("against", Ident, "what the reference is compared with, e.g. transformers"),
            opt("tol", Float, "max abs error relative to max |value|"),
        ],
        doc: "compare the CPU reference with an external reference",
    },
    OpSpec {
        name: "rope-convention",
        phases: &[0, 1, 2, 3],
        params: &[req(
            "convention",
            ROPE_CONVENTION,
            "which dimensions RoPE rotates together: i with i + head_dim/2, or 2i with 2i+1",
        )],
        doc: "choose the RoPE pairing the checkpoint was trained with",
    },
    OpSpec {
        name: "rope-scaling",
        phases: &[1, 2],
        params: &[req(
            "scaling",
            ROPE_SCALING,
            "build the RoPE table from the config's scaled inverse frequencies (llama3, linear) or the unscaled ones",
        )],
        doc: "choose the inverse frequencies the RoPE table is built from",
    },
    // Phase 1: kernels.
    OpSpec {
        name: "enumerate-kernels",
        phases: &[1],
        params: &[],
        doc: "derive every kernel x shape the model needs",
    },
    OpSpec {
        name: "select-tiling",
        phases: &[1, 4, 5],
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
    },
    OpSpec {
        name: "validate-kernel",
        phases: &[1],
        params: &[
            req("kernel", KERNEL, "kernel name"),
            SHAPE,
            opt("rtol", Float, "relative tolerance"),
            opt("atol", Float, "absolute tolerance"),
        ],
        doc: "run one kernel on the emulator against the f32 reference, element-wise",
    },
    OpSpec {
        name: "register-kernel",
        phases: &[1],
        params: &[req("kernel", KERNEL, "kernel name"), opt("shape", ParamKind::IntList, "shape")],
        doc: "record a validated kernel configuration in the kernel registry",
    },
    // Phase 2: one decoder block.
    OpSpec {
        name: "build-block",
        phases: &[2],
        params: &[opt("layer", Int, "layer index")],
        doc: "wire one decoder block from validated kernels",
    },
    OpSpec {
        name: "pad-heads",
        phases: &[2],
        params: &[req("multiple", Int, "pad dims to this multiple with phantom heads")],
        doc: "GQA-aware padding of non-aligned dimensions",
    },
    OpSpec {
        name: "bias-after-rope",
        phases: &[2],
        params: &[],
        doc: "add the QKV bias on the host after RoPE, using RoPE(q+b) = RoPE(q) + RoPE(b)",
    },
    OpSpec {
        name: "qk-norm",
        phases: &[2],
        params: &[],
        doc: "apply per-head Q/K RMSNorm before RoPE (Qwen3)",
    },
    OpSpec {
        name: "validate-block",
        phases: &[2],
        params: &[
            opt("layer", Int, "layer index"),
            opt("cosine_min", Float, "whole-tensor cosine threshold"),
            opt("position_min", Float, "per-position cosine threshold"),
        ],
        doc: "compare one block on the emulated NPU with the reference",
    },
    // Phase 3: whole model.
    OpSpec {
        name: "build-model",
        phases: &[3],
        params: &[],
        doc: "chain every block and the LM head",
    },
    OpSpec {
        name: "verify-model",
        phases: &[3, 4, 5, 6, 7],
        params: &[
            opt("tokens", Int, "greedy tokens generated per prompt"),
            opt("top_k", Int, "top-k set checked at the first divergence"),
        ],
        doc: "greedy-decode on both sides; at the first divergence each token must be in the other's top-k",
    },
    OpSpec {
        name: "diagnose-layers",
        phases: &[3],
        params: &[],
        doc: "per-layer cosine table (diagnosis, not a gate)",
    },
    // Phase 4: prefill optimization.
    OpSpec {
        name: "merge-launches",
        phases: &[4, 5],
        params: &[req("group", Ident, "name of the merged call, e.g. rms_gemms_rope")],
        doc: "merge consecutive launches into one NPU call",
    },
    OpSpec {
        name: "split-launches",
        phases: &[4, 5],
        params: &[req("group", Ident, "merged call to split back")],
        doc: "undo a merge (compile blow-up, mismatch)",
    },
    OpSpec {
        name: "reuse-static-weights",
        phases: &[4, 5],
        params: &[opt(
            "key",
            BUFFER_KEY,
            "one weight buffer per layer (the default), or one shared by every layer",
        )],
        doc: "per-layer weight buffers written once at setup, skipped per call",
    },
    OpSpec {
        name: "mark-intermediates",
        phases: &[4, 5],
        params: &[],
        doc: "skip host writes of buffers the kernels overwrite",
    },
    OpSpec {
        name: "align-layout",
        phases: &[4],
        params: &[req("layout", LAYOUT, "activation layout")],
        doc: "keep activations in one layout so host transposes disappear",
    },
    OpSpec {
        name: "last-token-lm-head",
        phases: &[4],
        params: &[],
        doc: "prefill LM head on the last real row only, reusing the decode GEMV",
    },
    OpSpec {
        name: "tune-tiling",
        phases: &[4, 5],
        params: &[req("kernel", KERNEL, "kernel name"), TILE, HERD],
        doc: "retune one kernel's tiling for speed",
    },
    OpSpec {
        name: "profile-prefill",
        phases: &[3, 4, 6],
        params: &[
            opt("seq_len", Int, "sequence length"),
            opt("warmup", Int, "warm-up iterations"),
            opt("iters", Int, "timed iterations"),
        ],
        doc: "time prefill",
    },
    // Phase 5: decode optimization.
    OpSpec {
        name: "gemv-decode",
        // Phase 3 wires the first decode (verify generates 32 tokens); phase 5 tunes it.
        phases: &[3, 5],
        params: &[HERD],
        doc: "decode projections as NPU GEMVs",
    },
    OpSpec {
        name: "cpu-decode-attention",
        phases: &[5],
        params: &[],
        doc: "decode attention (one query) on the host",
    },
    OpSpec {
        name: "pretranspose-weights",
        phases: &[3, 5],
        params: &[],
        doc: "one-time host transpose of (out,in) weights for GEMV",
    },
    OpSpec {
        name: "partition-lm-head",
        phases: &[5],
        params: &[req("parts", Int, "number of LM-head partitions")],
        doc: "split the LM head GEMV so each partition fits L2 and the repeat limit",
    },
    OpSpec {
        name: "cascade-ffn",
        phases: &[5],
        params: &[req("rows", Int, "core rows of the cascade")],
        doc: "fused O+FFN decode GEMV cascade",
    },
    OpSpec {
        name: "omit-pingpong",
        phases: &[5],
        params: &[],
        doc: "drop ping-pong buffers module-wide to fit L1",
    },
    OpSpec {
        name: "profile-decode",
        phases: &[3, 5, 6],
        params: &[
            opt("tokens", Int, "decoded tokens"),
            opt("seq_len", Int, "context length"),
        ],
        doc: "time decode",
    },
    // Phases 6 and 7.
    OpSpec {
        name: "write-artifacts",
        phases: &[6],
        params: &[],
        doc: "write the production plan, report and trajectory",
    },
    OpSpec {
        name: "record-lessons",
        phases: &[6],
        params: &[],
        doc: "append this run's lessons to the trajectory",
    },
    OpSpec {
        name: "evaluate",
        phases: &[7],
        params: &[opt("fresh_process", Bool, "re-run verification in a fresh process")],
        doc: "independent evaluation of the written artifacts",
    },
    OpSpec {
        name: "note-host",
        phases: &[0, 1, 2, 3, 4, 5, 6, 7],
        params: &[opt("text", Str, "what changed on the host")],
        doc: "a host-side change with no NPU effect (kept for the record)",
    },
];

pub fn operation(name: &str) -> Option<&'static OpSpec> {
    OPERATIONS.iter().find(|op| op.name == name)
}

/// What a metric measures; units are checked against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dimension {
    /// Unitless ratio or similarity.
    Ratio,
    Count,
    Time,
    TokenRate,
    FlopRate,
    ByteRate,
}

/// Which direction of a metric is better; gates compare in that direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Better {
    Higher,
    Lower,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct MetricSpec {
    pub name: &'static str,
    pub dimension: Dimension,
    pub better: Better,
    /// The unit values are normalised to.
    pub canonical_unit: &'static str,
    pub doc: &'static str,
}

const fn metric(
    name: &'static str,
    dimension: Dimension,
    better: Better,
    canonical_unit: &'static str,
    doc: &'static str,
) -> MetricSpec {
    MetricSpec {
        name,
        dimension,
        better,
        canonical_unit,
        doc,
    }
}

use Better::{Higher, Lower};
use Dimension::{ByteRate, Count, FlopRate, Ratio, Time, TokenRate};

pub const METRICS: &[MetricSpec] = &[
    metric(
        "cosine",
        Ratio,
        Higher,
        "",
        "whole-tensor cosine similarity",
    ),
    metric(
        "position_cosine_min",
        Ratio,
        Higher,
        "",
        "minimum per-position cosine",
    ),
    metric("max_abs", Ratio, Lower, "", "maximum absolute error"),
    metric("max_rel", Ratio, Lower, "", "maximum relative error"),
    metric("mean_rel_l1", Ratio, Lower, "", "mean|out-ref| / mean|ref|"),
    metric(
        "mismatches",
        Count,
        Lower,
        "",
        "elements outside atol + rtol*|ref|",
    ),
    metric(
        "top_k_agree",
        Count,
        Higher,
        "",
        "prompts whose top-k set check passed",
    ),
    metric("nan_count", Count, Lower, "", "NaN or infinite values"),
    metric("ttft_s", Time, Lower, "s", "time to first token"),
    metric("prefill_s", Time, Lower, "s", "prefill time"),
    metric("ms_per_token", Time, Lower, "ms", "decode time per token"),
    metric(
        "tok_s",
        TokenRate,
        Higher,
        "tok/s",
        "decode tokens per second",
    ),
    metric("kernel_ms", Time, Lower, "ms", "kernel or call time"),
    metric(
        "gflops",
        FlopRate,
        Higher,
        "GFLOP/s",
        "achieved compute rate",
    ),
    metric("gbps", ByteRate, Higher, "GB/s", "achieved bandwidth"),
    metric(
        "calls_per_layer",
        Count,
        Lower,
        "",
        "NPU calls per decoder layer",
    ),
    metric("compile_s", Time, Lower, "s", "compile time"),
];

pub fn metric_spec(name: &str) -> Option<&'static MetricSpec> {
    METRICS.iter().find(|m| m.name == name)
}

/// A unit the language accepts, with its dimension and the factor to the
/// dimension's canonical unit.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct UnitSpec {
    pub symbol: &'static str,
    pub dimension: Dimension,
    pub to_canonical: f64,
}

const fn unit(symbol: &'static str, dimension: Dimension, to_canonical: f64) -> UnitSpec {
    UnitSpec {
        symbol,
        dimension,
        to_canonical,
    }
}

/// Canonical units: s for time except where a metric says ms (callers convert with
/// [`convert`]), tok/s, GFLOP/s, GB/s.
pub const UNITS: &[UnitSpec] = &[
    unit("s", Time, 1.0),
    unit("ms", Time, 1e-3),
    unit("us", Time, 1e-6),
    unit("ns", Time, 1e-9),
    unit("min", Time, 60.0),
    unit("tok/s", TokenRate, 1.0),
    unit("GFLOP/s", FlopRate, 1.0),
    unit("TFLOP/s", FlopRate, 1e3),
    unit("MB/s", ByteRate, 1e-3),
    unit("GB/s", ByteRate, 1.0),
    unit("%", Ratio, 1e-2),
    unit("x", Ratio, 1.0),
];

pub fn unit_spec(symbol: &str) -> Option<&'static UnitSpec> {
    UNITS.iter().find(|u| u.symbol == symbol)
}

/// Converts `value` from unit `from` to unit `to`; `None` when the dimensions differ.
pub fn convert(value: f64, from: &str, to: &str) -> Option<f64> {
    let (f, t) = (unit_spec(from)?, unit_spec(to)?);
    (f.dimension == t.dimension).then(|| value * f.to_canonical / t.to_canonical)
}

/// A function of the remedy expression language (lesson fixes and causes, e.g.
/// `tile_n=divisor(N / herd_n)`). The set is closed: the front end rejects any other
/// name, and [`eval_function`] defines what each computes.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FunctionSpec {
    pub name: &'static str,
    pub arity: usize,
    pub doc: &'static str,
}

const fn function(name: &'static str, arity: usize, doc: &'static str) -> FunctionSpec {
    FunctionSpec { name, arity, doc }
}

pub const FUNCTIONS: &[FunctionSpec] = &[
    function(
        "divisor",
        1,
        "largest divisor of x not above the current value of the parameter being assigned",
    ),
    function("min", 2, "smaller of a and b"),
    function("max", 2, "larger of a and b"),
    function("ceil_div", 2, "a / b rounded up"),
    function("round_up", 2, "smallest multiple of m not below a"),
    function("round_down", 2, "largest multiple of m not above a"),
    function("pow2_floor", 1, "largest power of two not above x"),
    function("gcd", 2, "greatest common divisor of a and b"),
];

pub fn function_spec(name: &str) -> Option<&'static FunctionSpec> {
    FUNCTIONS.iter().find(|f| f.name == name)
}

/// Evaluates a remedy function on integers. `current` is the value the assigned
/// parameter had before the fix (only `divisor` reads it). `None` for an unknown
/// function, a wrong argument count, or an undefined result (division by zero, no
/// positive divisor).
pub fn eval_function(name: &str, args: &[i64], current: Option<i64>) -> Option<i64> {
    let spec = function_spec(name)?;
    if args.len() != spec.arity {
        return None;
    }
    match (name, args) {
        ("divisor", [x]) => {
            let limit = current.unwrap_or(*x).min(*x);
            (1..=limit).rev().find(|d| x % d == 0)
        }
        ("min", [a, b]) => Some(*a.min(b)),
        ("max", [a, b]) => Some(*a.max(b)),
        ("ceil_div", [a, b]) if *b != 0 => {
            Some(a.div_euclid(*b) + i64::from(a.rem_euclid(*b) != 0))
        }
        ("round_up", [a, m]) if *m > 0 => {
            Some(a.div_euclid(*m) * m + if a.rem_euclid(*m) != 0 { *m } else { 0 })
        }
        ("round_down", [a, m]) if *m > 0 => Some(a.div_euclid(*m) * m),
        ("pow2_floor", [x]) if *x > 0 => Some(1i64 << (63 - x.leading_zeros())),
        ("gcd", [a, b]) => {
            let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
            while b != 0 {
                (a, b) = (b, a % b);
            }
            i64::try_from(a).ok()
        }
        _ => None,
    }
}

/// A name a remedy expression may read besides the parameters of its operation.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct VariableSpec {
    pub name: &'static str,
    pub doc: &'static str,
}

const fn variable(name: &'static str, doc: &'static str) -> VariableSpec {
    VariableSpec { name, doc }
}

/// Model and problem sizes available to remedy expressions. Parameters of the fix's
/// operation and their list components (`tile_n`, `herd_n`, …) are available too,
/// holding the values of the action being fixed.
pub const VARIABLES: &[VariableSpec] = &[
    variable("M", "first slot of the action's shape (rows)"),
    variable("K", "second slot of the action's shape (reduction)"),
    variable("N", "third slot of the action's shape (columns)"),
    variable("seq_len", "sequence length"),
    variable("hidden_size", "model width"),
    variable("intermediate_size", "FFN width"),
    variable("head_dim", "attention head size"),
    variable("n_heads", "query heads"),
    variable("n_kv_heads", "key/value heads"),
    variable("vocab_size", "vocabulary size"),
    variable("n_layers", "decoder layers"),
];

pub fn variable_spec(name: &str) -> Option<&'static VariableSpec> {
    VARIABLES.iter().find(|v| v.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_are_unique() {
        let ops: BTreeSet<_> = OPERATIONS.iter().map(|o| o.name).collect();
        assert_eq!(ops.len(), OPERATIONS.len());
        let metrics: BTreeSet<_> = METRICS.iter().map(|m| m.name).collect();
        assert_eq!(metrics.len(), METRICS.len());
    }

    #[test]
    fn keywords_are_the_ones_the_language_reference_lists() {
        let text = include_str!("../../grammar/README.md");
        let section = text
            .split("## Keywords")
            .nth(1)
            .expect("grammar/README.md has a Keywords section");
        let listed: BTreeSet<&str> = section
            .split('`')
            .nth(1)
            .expect("the section opens with the keyword list in backquotes")
            .split_whitespace()
            .collect();
        let ours: BTreeSet<&str> = KEYWORDS.iter().copied().collect();
        assert_eq!(ours, listed);
        assert_eq!(ours.len(), KEYWORDS.len(), "no keyword twice");
    }

    #[test]
    fn components_resolve_to_their_slot() {
        let op = operation("select-tiling").expect("select-tiling exists");
        let (param, slot) = op.resolve_param("tile_n").expect("tile_n is a component");
        assert_eq!((param.name, slot), ("tile", Some(3)));
        assert!(op.resolve_param("tile_q").is_none());
    }

    #[test]
    fn units_convert_within_a_dimension_only() {
        assert_eq!(convert(1500.0, "ms", "s"), Some(1.5));
        assert_eq!(convert(2.0, "TFLOP/s", "GFLOP/s"), Some(2000.0));
        assert_eq!(convert(1.0, "ms", "GB/s"), None);
    }

    #[test]
    fn remedy_functions_compute_what_they_document() {
        assert_eq!(eval_function("divisor", &[224], Some(128)), Some(112));
        assert_eq!(eval_function("divisor", &[7], Some(4)), Some(1));
        assert_eq!(eval_function("ceil_div", &[128256, 16384], None), Some(8));
        assert_eq!(eval_function("round_up", &[896, 1024], None), Some(1024));
        assert_eq!(eval_function("round_down", &[896, 256], None), Some(768));
        assert_eq!(eval_function("pow2_floor", &[896], None), Some(512));
        assert_eq!(eval_function("gcd", &[896, 2048], None), Some(128));
        assert_eq!(eval_function("ceil_div", &[1, 0], None), None);
        assert_eq!(eval_function("min", &[1], None), None);
        assert_eq!(eval_function("nope", &[1], None), None);
    }

    #[test]
    fn metric_canonical_units_exist() {
        for m in METRICS {
            if !m.canonical_unit.is_empty() {
                let u = unit_spec(m.canonical_unit).expect("canonical unit is known");
                assert_eq!(u.dimension, m.dimension, "{}", m.name);
            }
        }
    }
}
