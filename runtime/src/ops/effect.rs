//! What each operation does to a deployment's design: the one definition both the
//! executor (`skillc deploy`, `exec::design`) and replay (`skillc replay`) apply.
//!
//! [`effect`] maps a typed [`Op`] to an [`Effect`] with an exhaustive match, so an
//! operation added to the table does not compile until it says what it does.
//! [`PlanChange::apply`] and [`PathChange::apply`] are the only places plan options
//! and NPU-path choices change.
//!
//! The two users differ in one deliberate way, which [`PlanScope`] names: the
//! executor builds both plans from one set of options (a technique applies to the
//! deployment), while replay follows a recorded trajectory, in which a buffer
//! technique of a phase-4 session changed the prefill plan and one of a phase-5
//! session the decode plan. Merges likewise: the builder merges all launch groups
//! of a plan at once, which is what the executor does on `merge-launches`; replay
//! counts the groups a trajectory merged one by one and merges a plan once all of
//! its groups are.

use super::typed::{KernelChoice, Op};
use super::words::{BufferKey, RopeConvention, RopeScaling};
use crate::model::arch::Architecture;
use crate::xdna2::device::Device;
use crate::xdna2::interpreter::{NpuPath, RopeTable};
use crate::xdna2::kernels::{Epilogue, Herd, Kernel, LmHeadSpec, Precision, QkvLayout};
use crate::xdna2::plan::{FusedOptions, PlanOptions};

/// Weight channels per projection column when `fused-decode` names none: both
/// of the column's shim channels, as the published decode feeds them
/// (mlir-air:programming_examples/fused_decode/README.md:155-159).
pub const FUSED_WEIGHT_CHANNELS: usize = 2;

/// What an operation does to the design.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Measures or checks (kernel and block validation, verification, profiles,
    /// the scope check, the evaluation): the design is unchanged.
    Measures,
    /// Builds, loads, registers, records or notes: nothing the plans hold.
    Records,
    /// Chooses or retunes one kernel's configuration; the caller places it at the
    /// kernel × shape it applies to.
    Kernel(KernelSettings),
    /// Changes the options of the plans in `plans`.
    Plan {
        change: PlanChange,
        plans: PlanScope,
    },
    /// Changes how the NPU path computes (bias, Q/K norm, the RoPE table).
    Path(PathChange),
    /// States the RoPE pairing the checkpoint was trained with.
    RopePairing(RopeConvention),
}

/// What a kernel choice sets; `None` keeps the kernel's current value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSettings {
    pub kernel: Kernel,
    pub herd: Option<Herd>,
    /// GEMM `[tile_m, tile_k_l2, tile_k_l1, tile_n]`; row kernels `[tile]`.
    pub tile: Option<Vec<usize>>,
    pub precision: Option<Precision>,
    pub epilogue: Option<Epilogue>,
    pub layout: Option<QkvLayout>,
}

impl KernelChoice {
    pub fn settings(&self) -> KernelSettings {
        KernelSettings {
            kernel: self.kernel,
            herd: self.herd,
            tile: self.tile.clone(),
            precision: self.precision,
            epilogue: self.epilogue,
            layout: self.layout,
        }
    }
}

/// The plans a change applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanScope {
    Prefill,
    Decode,
    Both,
    /// The plan the session optimizes: prefill up to phase 4, decode from phase 5
    /// (for the executor, whose options serve both plans, the deployment).
    Session,
}

/// One change of the plan options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanChange {
    /// Merge a builder group's launches into one call (`a-b`: several groups).
    MergeLaunches {
        group: String,
    },
    SplitLaunches {
        group: String,
    },
    StaticWeights {
        key: BufferKey,
    },
    MarkIntermediates,
    Layout(QkvLayout),
    LastTokenLmHead,
    PartitionLmHead {
        parts: usize,
    },
    CascadeFfn {
        rows: usize,
    },
    OmitPingpong,
    /// Decode as one dispatch per token (`xdna2::plan::FusedOptions`).
    FusedDecode(FusedOptions),
    GemvDecode,
    CpuDecodeAttention,
    PadHeads,
    /// Zero-pad the model dimensions no legal tiling divides (`xdna2::padding`).
    PadDims,
    /// Prefill GEMM weights are pre-transposed at setup by every plan already.
    PretransposeWeights,
}

/// One change of the NPU path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathChange {
    QkvBiasAfterRope,
    QkNorm,
    RopeTable(RopeTable),
}

/// Why an operation cannot apply to this model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("the model has no q/k/v bias")]
    NoQkvBias,
    #[error("the model has no Q/K norm")]
    NoQkNorm,
    #[error("`{op}` {param}={value} exceeds the model's {what} ({limit})")]
    ExceedsModel {
        op: super::OpKind,
        param: &'static str,
        value: usize,
        what: &'static str,
        limit: usize,
    },
}

/// What `op` does to a design for a model of `arch` on `device`: parameter values
/// bounded by the model they apply to are checked here.
pub fn effect(op: &Op, arch: &Architecture, device: &Device) -> Result<Effect, ApplyError> {
    use PlanScope::{Both, Decode, Prefill, Session};
    let plan = |change, plans| Ok(Effect::Plan { change, plans });
    within_model(op, arch)?;
    match op {
        Op::CheckScope
        | Op::CompareReference { .. }
        | Op::ValidateKernel(_)
        | Op::ValidateBlock { .. }
        | Op::VerifyModel { .. }
        | Op::DiagnoseLayers
        | Op::ProfilePrefill { .. }
        | Op::ProfileDecode { .. }
        | Op::Evaluate { .. } => Ok(Effect::Measures),
        Op::LoadWeights { .. }
        | Op::BuildReference
        | Op::EnumerateKernels
        | Op::RegisterKernel { .. }
        | Op::BuildBlock { .. }
        | Op::BuildModel
        | Op::WriteArtifacts
        | Op::RecordLessons
        | Op::NoteHost { .. } => Ok(Effect::Records),
        Op::SelectTiling(choice) => Ok(Effect::Kernel(choice.settings())),
        Op::TuneTiling { kernel, tile, herd } => Ok(Effect::Kernel(KernelSettings {
            kernel: *kernel,
            herd: *herd,
            tile: tile.clone(),
            precision: None,
            epilogue: None,
            layout: None,
        })),
        Op::RopeConvention { convention } => Ok(Effect::RopePairing(*convention)),
        Op::RopeScaling { scaling } => Ok(Effect::Path(PathChange::RopeTable(match scaling {
            RopeScaling::Config => RopeTable::Scaled,
            RopeScaling::None => RopeTable::Unscaled,
        }))),
        Op::BiasAfterRope if arch.qkv_bias => Ok(Effect::Path(PathChange::QkvBiasAfterRope)),
        Op::BiasAfterRope => Err(ApplyError::NoQkvBias),
        Op::QkNorm if arch.qk_norm => Ok(Effect::Path(PathChange::QkNorm)),
        Op::QkNorm => Err(ApplyError::NoQkNorm),
        Op::PadHeads { .. } => plan(PlanChange::PadHeads, Both),
        Op::PadDims => plan(PlanChange::PadDims, Both),
        Op::MergeLaunches { group } => plan(
            PlanChange::MergeLaunches {
                group: group.clone(),
            },
            Both,
        ),
        Op::SplitLaunches { group } => plan(
            PlanChange::SplitLaunches {
                group: group.clone(),
            },
            Both,
        ),
        Op::ReuseStaticWeights { key } => plan(
            PlanChange::StaticWeights {
                key: key.unwrap_or_default(),
            },
            Session,
        ),
        Op::MarkIntermediates => plan(PlanChange::MarkIntermediates, Session),
        Op::AlignLayout { layout } => plan(PlanChange::Layout(*layout), Both),
        Op::LastTokenLmHead => plan(PlanChange::LastTokenLmHead, Prefill),
        Op::PartitionLmHead { parts } => {
            let most = LmHeadSpec::max_parts(device, arch.vocab_size, arch.hidden_size);
            within(op, "parts", *parts, "LM-head row blocks", most)?;
            plan(PlanChange::PartitionLmHead { parts: *parts }, Both)
        }
        Op::CascadeFfn { rows } => plan(PlanChange::CascadeFfn { rows: *rows }, Decode),
        Op::OmitPingpong => plan(PlanChange::OmitPingpong, Decode),
        Op::FusedDecode { kv, channels } => plan(
            PlanChange::FusedDecode(FusedOptions {
                kv: kv.unwrap_or_default(),
                weight_channels: channels.unwrap_or(FUSED_WEIGHT_CHANNELS),
            }),
            Decode,
        ),
        Op::GemvDecode { .. } => plan(PlanChange::GemvDecode, Decode),
        Op::CpuDecodeAttention => plan(PlanChange::CpuDecodeAttention, Decode),
        Op::PretransposeWeights => plan(PlanChange::PretransposeWeights, Both),
    }
}

/// Layers, token counts and sequence lengths a model has room for: a recorded
/// value beyond them would index past the model or run without end.
fn within_model(op: &Op, arch: &Architecture) -> Result<(), ApplyError> {
    let context = usize::try_from(arch.max_position_embeddings).unwrap_or(usize::MAX);
    let last_layer = arch.num_layers.saturating_sub(1);
    let limits: &[(&'static str, Option<usize>, &'static str, usize)] = match op {
        Op::BuildBlock { layer } | Op::ValidateBlock { layer, .. } => {
            &[("layer", *layer, "last layer index", last_layer)]
        }
        Op::VerifyModel { tokens, top_k } => &[
            ("tokens", *tokens, "context length", context),
            ("top_k", *top_k, "vocabulary size", arch.vocab_size),
        ],
        Op::ProfilePrefill { seq_len, .. } => &[("seq_len", *seq_len, "context length", context)],
        Op::ProfileDecode { tokens, seq_len } => &[
            ("tokens", *tokens, "context length", context),
            ("seq_len", *seq_len, "context length", context),
        ],
        _ => &[],
    };
    for &(param, value, what, limit) in limits {
        if let Some(value) = value {
            within(op, param, value, what, limit)?;
        }
    }
    Ok(())
}

fn within(
    op: &Op,
    param: &'static str,
    value: usize,
    what: &'static str,
    limit: usize,
) -> Result<(), ApplyError> {
    if value <= limit {
        Ok(())
    } else {
        Err(ApplyError::ExceedsModel {
            op: op.kind(),
            param,
            value,
            what,
            limit,
        })
    }
}

impl PlanChange {
    /// The one definition of what a change does to plan options.
    pub fn apply(&self, options: &mut PlanOptions) {
        match self {
            PlanChange::MergeLaunches { .. } => options.merge_launches = true,
            PlanChange::SplitLaunches { .. } => options.merge_launches = false,
            PlanChange::StaticWeights { .. } => options.static_weights = true,
            PlanChange::MarkIntermediates => {
                options.mark_intermediates = true;
                options.shared_intermediates = true;
            }
            PlanChange::Layout(layout) => options.layout = *layout,
            PlanChange::LastTokenLmHead => options.last_token_lm_head = true,
            PlanChange::PartitionLmHead { parts } => {
                options.npu_lm_head = true;
                options.lm_head_parts = *parts;
            }
            PlanChange::CascadeFfn { rows } => {
                options.cascade_ffn = true;
                options.cascade_rows = *rows;
            }
            PlanChange::OmitPingpong => options.omit_pingpong = true,
            PlanChange::FusedDecode(fused) => options.fused_decode = Some(*fused),
            PlanChange::GemvDecode => options.gemv_decode = true,
            PlanChange::CpuDecodeAttention => options.cpu_decode_attention = true,
            PlanChange::PadHeads => options.pad_heads = true,
            PlanChange::PadDims => options.pad_dims = true,
            PlanChange::PretransposeWeights => {}
        }
    }
}

impl PathChange {
    /// The one definition of what a change does to the NPU path.
    pub fn apply(self, path: &mut NpuPath) {
        match self {
            PathChange::QkvBiasAfterRope => path.qkv_bias = true,
            PathChange::QkNorm => path.qk_norm = true,
            PathChange::RopeTable(table) => path.rope = table,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::config::load_config;
    use crate::ops::Value;
    use crate::ops::{OpKind, ParamError, ParamKind, ParamSpec};
    use crate::xdna2::interpreter::Defects;

    /// A value of `spec`'s kind inside its bound.
    fn sample(spec: &ParamSpec) -> Value {
        match spec.kind {
            ParamKind::Int => Value::Int(1),
            ParamKind::Float => Value::Float(0.5),
            ParamKind::Bool => Value::Bool(true),
            ParamKind::Str => Value::Text("a note".into()),
            ParamKind::Ident => Value::Text("rms_gemms_rope".into()),
            ParamKind::Enum(words) => Value::Text(words[0].into()),
            ParamKind::IntList if spec.name == "herd" => Value::IntList(vec![8, 4]),
            ParamKind::IntList => Value::IntList(vec![2; spec.components.len().max(1)]),
        }
    }

    /// A model with every optional feature, so that no operation is refused for
    /// what the model lacks.
    fn every_feature() -> Architecture {
        let path = format!(
            "{}/../../shared/fixtures/qwen25-tiny/config.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut arch = load_config(std::path::Path::new(&path)).expect("fixture config");
        arch.qk_norm = true;
        arch
    }

    #[test]
    fn lm_head_partitions_are_bounded_by_the_vocabulary() {
        let arch = every_feature();
        let device = Device::npu2();
        let most = LmHeadSpec::max_parts(&device, arch.vocab_size, arch.hidden_size);
        assert!((1..arch.vocab_size).contains(&most), "{most}");
        let parts = |parts| effect(&Op::PartitionLmHead { parts }, &arch, &device);
        assert!(parts(most).is_ok());
        for too_many in [most + 1, 100_000, 1_000_000_000_000] {
            assert_eq!(
                parts(too_many),
                Err(ApplyError::ExceedsModel {
                    op: OpKind::PartitionLmHead,
                    param: "parts",
                    value: too_many,
                    what: "LM-head row blocks",
                    limit: most,
                })
            );
        }
    }

    /// Adding an operation to the table without reading, printing or applying it
    /// fails to compile (the matches over `OpKind` and `Op` are exhaustive); this
    /// test fails when the typed parameters and the table disagree.
    #[test]
    fn every_operation_of_the_table_reads_prints_and_applies() {
        let arch = every_feature();
        let device = Device::npu2();
        for kind in OpKind::ALL {
            let spec = kind.spec();
            let full: BTreeMap<String, Value> = spec
                .params
                .iter()
                .map(|p| (p.name.to_string(), sample(p)))
                .collect();
            let op = Op::read(kind, &full).unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(op.kind(), kind);
            assert_eq!(
                op.params(),
                full,
                "{kind}: every parameter reads and prints back"
            );
            for required in spec.params.iter().filter(|p| p.required) {
                let mut partial = full.clone();
                partial.remove(required.name);
                assert_eq!(
                    Op::read(kind, &partial),
                    Err(ParamError::Missing {
                        op: kind,
                        param: required.name
                    }),
                    "{kind} needs {}",
                    required.name
                );
            }
            let effect = effect(&op, &arch, &device).unwrap_or_else(|e| panic!("{kind}: {e}"));
            if kind.measures() {
                assert_eq!(effect, Effect::Measures, "{kind} measures");
            }
            assert_changes_what_it_says(kind, &effect);
            assert_technique_iff_optimizing_change(kind, &effect);
        }
    }

    /// `OpKind::is_technique` is what phases 4 and 5 try: an operation those phases
    /// may use whose effect changes the design (not a measurement, not a record).
    /// The one such change that is no technique is `select-tiling`: a kernel choice,
    /// which the executor makes per site in phase 1 whichever phase recorded it.
    fn assert_technique_iff_optimizing_change(kind: OpKind, effect: &Effect) {
        use crate::phase::DeployPhase;
        let optimizing = kind
            .spec()
            .phases
            .iter()
            .any(|p| matches!(p, DeployPhase::Prefill | DeployPhase::Decode));
        let changes = !matches!(effect, Effect::Measures | Effect::Records);
        assert_eq!(
            kind.is_technique(),
            optimizing && changes && kind != OpKind::SelectTiling,
            "{kind}: a technique is a change phases 4 and 5 may make"
        );
    }

    /// A plan or path change alters options with every technique off (a struct
    /// literal, so a new option must be placed here); the exceptions are the two
    /// that restate what every plan already does.
    fn assert_changes_what_it_says(kind: OpKind, effect: &Effect) {
        match effect {
            Effect::Plan { change, .. } => {
                let before = PlanOptions {
                    merge_launches: false,
                    static_weights: false,
                    mark_intermediates: false,
                    shared_intermediates: false,
                    last_token_lm_head: false,
                    npu_lm_head: false,
                    lm_head_parts: 1,
                    gemv_decode: false,
                    cpu_decode_attention: false,
                    cascade_ffn: false,
                    cascade_rows: 1,
                    layout: QkvLayout::HeadFirst,
                    omit_pingpong: false,
                    pad_heads: false,
                    pad_dims: false,
                    precision: Precision::Bf16,
                    bias_on_npu: false,
                    o_ffn_calls: Vec::new(),
                    lm_head_one_call: false,
                    single_buffered_down: false,
                    single_buffered_o_ffn: false,
                    published_calls: false,
                    fused_decode: None,
                };
                let mut after = before.clone();
                change.apply(&mut after);
                let restates = matches!(
                    change,
                    PlanChange::PretransposeWeights | PlanChange::SplitLaunches { .. }
                );
                assert_eq!(after == before, restates, "{kind}: {change:?}");
            }
            Effect::Path(change) => {
                let before = NpuPath {
                    qkv_bias: false,
                    qk_norm: false,
                    rope: RopeTable::Unscaled,
                    defects: Defects::NONE,
                };
                let mut after = before;
                change.apply(&mut after);
                let restates = *change == PathChange::RopeTable(RopeTable::Unscaled);
                assert_eq!(after == before, restates, "{kind}: {change:?}");
            }
            Effect::Kernel(settings) => assert_ne!(settings.herd, None, "{kind} sets its herd"),
            Effect::Measures | Effect::Records | Effect::RopePairing(_) => {}
        }
    }
}
