//! Planted faults: deliberate bugs injected into the emulated NPU path so tests can
//! prove that the right gate catches each one and that the executor either repairs it
//! with a bundle lesson or stops with a report. A fault never touches the CPU
//! reference, so every gate still compares against the truth.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::model::arch::{Activation, Architecture, RopeScaling};
use crate::phase::DeployPhase;

/// One injectable bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// A GEMM tiling whose column tiles do not cover N: `N % (tile_n·herd_n) != 0`,
    /// the case the toolchain does not assert (silent corruption).
    GemmNNotMultiple,
    /// The Q/K/V projection bias is left out of the NPU block.
    DropQkvBias,
    /// The RoPE table is built from the unscaled frequencies of a llama3-scaled model.
    NoLlama3Rope,
    /// The per-head Q/K RMSNorm of Qwen3 is skipped.
    SkipQkNorm,
    /// A GEMM tile configuration that needs more L1 than a compute tile has.
    L1Overflow,
    /// Decode rotates Q and K at position + 1 (prefill is right).
    DecodeRopeOffByOne,
    /// Decode writes its K/V row into the slot after its position.
    KvWrongSlot,
    /// Decode stores the previous position's K/V row again instead of its own.
    StaleKv,
    /// Decode attention reads the next KV group for each query head.
    GqaMapping,
    /// The last partition of the NPU LM head is not launched.
    DropLmHeadPartition,
    /// The gated MLP of a GELU-tanh model runs the SiLU kernel (`silu_mul`
    /// where the plan has `gelu_mul`).
    SiluForGelu,
    /// Sliding-window layers attend over one position more than their window
    /// (prefill's mask and decode's KV window).
    WindowOffByOne,
    /// The packed 4-bit GEMV reads each byte's two nibbles in the wrong order
    /// (the 4-bit weight path only; not in [`Fault::ALL`], the bf16 matrix).
    PackedNibbleOrder,
    /// The decode faults above acting in the single-dispatch fused decode
    /// alone (its RoPE, KV append and attention), so the per-call decode of
    /// phase 3 is right and the fused plan's probe in phase 5 must catch them
    /// (not in [`Fault::ALL`]: a bundle that teaches the fused decode runs them).
    FusedDecodeRopeOffByOne,
    FusedKvWrongSlot,
    FusedStaleKv,
    FusedGqaMapping,
    /// The plan's norms run with an epsilon 100 times the config's.
    ParamEps,
    /// The NPU path's RoPE tables are built from twice the config's base.
    ParamRopeBase,
    /// The attention launches scale their scores by `(2 · head_dim)^-1/2`.
    ParamScale,
    /// The gated MLP reads its gate and up operands the other way round.
    ParamGateUpSwap,
    /// Decode stores the previous position's K/V row instead of its own from
    /// position 65, 300 or 600 on (prefill is right): a cache bug that only a
    /// context past the verification prompts' 51-68 positions meets (not in
    /// [`Fault::ALL`]: [`Fault::LATE`]).
    #[serde(rename = "late-stale-kv-65")]
    LateStaleKv65,
    #[serde(rename = "late-stale-kv-300")]
    LateStaleKv300,
    #[serde(rename = "late-stale-kv-600")]
    LateStaleKv600,
}

impl Fault {
    pub const ALL: [Fault; 12] = [
        Fault::GemmNNotMultiple,
        Fault::DropQkvBias,
        Fault::NoLlama3Rope,
        Fault::SkipQkNorm,
        Fault::L1Overflow,
        Fault::DecodeRopeOffByOne,
        Fault::KvWrongSlot,
        Fault::StaleKv,
        Fault::GqaMapping,
        Fault::DropLmHeadPartition,
        Fault::SiluForGelu,
        Fault::WindowOffByOne,
    ];

    /// The faults of the 4-bit weight path, which only a model with packed
    /// GEMVs can carry.
    pub const PACKED: [Fault; 1] = [Fault::PackedNibbleOrder];

    /// The decode faults scoped to the fused decode plan.
    pub const FUSED: [Fault; 4] = [
        Fault::FusedDecodeRopeOffByOne,
        Fault::FusedKvWrongSlot,
        Fault::FusedStaleKv,
        Fault::FusedGqaMapping,
    ];

    /// The plan parameters phase 1 checks against the config (epsilon, RoPE
    /// base, softmax scale, gate/up wiring), each set wrong in the plans.
    pub const PARAM: [Fault; 4] = [
        Fault::ParamEps,
        Fault::ParamRopeBase,
        Fault::ParamScale,
        Fault::ParamGateUpSwap,
    ];

    /// The decode faults that start late in the context, which only the
    /// long-context probes reach (`gates::long`).
    pub const LATE: [Fault; 3] = [
        Fault::LateStaleKv65,
        Fault::LateStaleKv300,
        Fault::LateStaleKv600,
    ];

    /// The position from which a late fault acts.
    pub fn late_position(self) -> Option<usize> {
        match self {
            Fault::LateStaleKv65 => Some(65),
            Fault::LateStaleKv300 => Some(300),
            Fault::LateStaleKv600 => Some(600),
            _ => None,
        }
    }

    /// The per-call decode fault a fused one plants in the fused plan alone.
    pub fn unscoped(self) -> Fault {
        match self {
            Fault::FusedDecodeRopeOffByOne => Fault::DecodeRopeOffByOne,
            Fault::FusedKvWrongSlot => Fault::KvWrongSlot,
            Fault::FusedStaleKv => Fault::StaleKv,
            Fault::FusedGqaMapping => Fault::GqaMapping,
            other => other,
        }
    }

    /// The faults of the decode side, which only the decode gates can see.
    pub const DECODE: [Fault; 5] = [
        Fault::DecodeRopeOffByOne,
        Fault::KvWrongSlot,
        Fault::StaleKv,
        Fault::GqaMapping,
        Fault::DropLmHeadPartition,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::GemmNNotMultiple => "gemm-n-not-multiple",
            Fault::DropQkvBias => "drop-qkv-bias",
            Fault::NoLlama3Rope => "no-llama3-rope",
            Fault::SkipQkNorm => "skip-qk-norm",
            Fault::L1Overflow => "l1-overflow",
            Fault::DecodeRopeOffByOne => "decode-rope-off-by-one",
            Fault::KvWrongSlot => "kv-wrong-slot",
            Fault::StaleKv => "stale-kv",
            Fault::GqaMapping => "gqa-mapping",
            Fault::DropLmHeadPartition => "drop-lm-head-partition",
            Fault::SiluForGelu => "silu-for-gelu",
            Fault::WindowOffByOne => "window-off-by-one",
            Fault::PackedNibbleOrder => "packed-nibble-order",
            Fault::FusedDecodeRopeOffByOne => "fused-decode-rope-off-by-one",
            Fault::FusedKvWrongSlot => "fused-kv-wrong-slot",
            Fault::FusedStaleKv => "fused-stale-kv",
            Fault::FusedGqaMapping => "fused-gqa-mapping",
            Fault::ParamEps => "param-eps",
            Fault::ParamRopeBase => "param-rope-base",
            Fault::ParamScale => "param-scale",
            Fault::ParamGateUpSwap => "param-gate-up-swap",
            Fault::LateStaleKv65 => "late-stale-kv-65",
            Fault::LateStaleKv300 => "late-stale-kv-300",
            Fault::LateStaleKv600 => "late-stale-kv-600",
        }
    }

    /// What the fault does, for reports.
    pub fn description(self) -> &'static str {
        match self {
            Fault::GemmNNotMultiple => {
                "one GEMM gets a tile_n with N not a multiple of tile_n x herd_n"
            }
            Fault::DropQkvBias => "the q/k/v projection bias is dropped from the NPU block",
            Fault::NoLlama3Rope => "the RoPE table ignores the llama3 frequency scaling",
            Fault::SkipQkNorm => "the per-head q/k RMSNorm is skipped on the NPU",
            Fault::L1Overflow => "one GEMM gets a tile that overflows a compute tile's L1",
            Fault::DecodeRopeOffByOne => "decode rotates q and k one position too far",
            Fault::KvWrongSlot => "decode writes its K/V row into the next slot",
            Fault::StaleKv => "decode stores the previous position's K/V row again",
            Fault::GqaMapping => "decode attention pairs each query head with the next KV group",
            Fault::DropLmHeadPartition => "the last partition of the NPU LM head is not launched",
            Fault::SiluForGelu => "the GELU-tanh MLP runs the SiLU-mul kernel",
            Fault::WindowOffByOne => {
                "sliding-window layers attend over one position more than their window"
            }
            Fault::PackedNibbleOrder => {
                "the packed 4-bit GEMV reads each byte's high nibble as the block's first weight"
            }
            Fault::FusedDecodeRopeOffByOne => {
                "the fused decode rotates q and k one position too far"
            }
            Fault::FusedKvWrongSlot => "the fused decode appends its K/V row into the next slot",
            Fault::FusedStaleKv => "the fused decode appends the previous position's K/V row again",
            Fault::FusedGqaMapping => {
                "the fused decode's attention pairs each query head with the next KV group"
            }
            Fault::ParamEps => "the plan's norms run with 100 x the config's epsilon",
            Fault::ParamRopeBase => "the RoPE tables are built from 2 x the config's base",
            Fault::ParamScale => "attention scales its scores by (2 x head_dim)^-1/2",
            Fault::ParamGateUpSwap => "the gated MLP reads its gate and up operands swapped",
            Fault::LateStaleKv65 => {
                "decode stores the previous position's K/V row again from position 65 on"
            }
            Fault::LateStaleKv300 => {
                "decode stores the previous position's K/V row again from position 300 on"
            }
            Fault::LateStaleKv600 => {
                "decode stores the previous position's K/V row again from position 600 on"
            }
        }
    }
}

impl Fault {
    /// The phase whose gates must catch the fault: the kernel and table checks
    /// of phase 1, the single block of phase 2, the teacher-forced decode gate of
    /// phase 3, and the numerics probe of the phase-5 change that moves the LM
    /// head onto the NPU.
    pub fn catching_phase(self) -> DeployPhase {
        match self {
            Fault::GemmNNotMultiple
            | Fault::L1Overflow
            | Fault::NoLlama3Rope
            | Fault::SiluForGelu
            | Fault::PackedNibbleOrder => DeployPhase::Kernels,
            Fault::ParamEps | Fault::ParamRopeBase | Fault::ParamScale | Fault::ParamGateUpSwap => {
                DeployPhase::Kernels
            }
            Fault::DropQkvBias | Fault::SkipQkNorm | Fault::WindowOffByOne => DeployPhase::Block,
            Fault::DecodeRopeOffByOne | Fault::KvWrongSlot | Fault::StaleKv | Fault::GqaMapping => {
                DeployPhase::Model
            }
            Fault::LateStaleKv65 | Fault::LateStaleKv300 | Fault::LateStaleKv600 => {
                DeployPhase::Model
            }
            Fault::DropLmHeadPartition
            | Fault::FusedDecodeRopeOffByOne
            | Fault::FusedKvWrongSlot
            | Fault::FusedStaleKv
            | Fault::FusedGqaMapping => DeployPhase::Decode,
        }
    }

    /// How the name of the gate that must catch it begins.
    pub fn catching_gate(self) -> &'static str {
        match self {
            Fault::GemmNNotMultiple => "kernel gemm",
            Fault::L1Overflow => "placement gemm",
            Fault::NoLlama3Rope => "kernel rope",
            Fault::SiluForGelu => "kernel silu_mul",
            Fault::PackedNibbleOrder => "kernel gemv",
            Fault::DropQkvBias | Fault::SkipQkNorm | Fault::WindowOffByOne => "block cosine",
            Fault::DecodeRopeOffByOne | Fault::KvWrongSlot | Fault::StaleKv | Fault::GqaMapping => {
                "verify: teacher-forced logits"
            }
            Fault::LateStaleKv65 | Fault::LateStaleKv300 | Fault::LateStaleKv600 => {
                "verify: long-context"
            }
            Fault::DropLmHeadPartition => "probe: teacher-forced logits after partition-lm-head",
            Fault::FusedDecodeRopeOffByOne
            | Fault::FusedKvWrongSlot
            | Fault::FusedStaleKv
            | Fault::FusedGqaMapping => "probe: teacher-forced logits after fused-decode",
            Fault::ParamEps => "param rms_norm_eps",
            Fault::ParamRopeBase => "param rope frequencies",
            Fault::ParamScale => "param attention scale",
            Fault::ParamGateUpSwap => "param gate/up wiring",
        }
    }

    /// Why the fault has nothing to act on in `arch`, when it has not.
    pub fn inert_on(self, arch: &Architecture) -> Option<&'static str> {
        match self {
            Fault::NoLlama3Rope if !matches!(arch.rope_scaling, RopeScaling::Llama3 { .. }) => {
                Some("no llama3 scaling")
            }
            Fault::DropQkvBias if !arch.qkv_bias => Some("no q/k/v bias"),
            Fault::SkipQkNorm if !arch.qk_norm => Some("no q/k norm"),
            Fault::GqaMapping | Fault::FusedGqaMapping if arch.num_kv_heads < 2 => {
                Some("one KV head")
            }
            Fault::SiluForGelu if arch.activation != Activation::GeluTanh => {
                Some("no GELU-tanh MLP")
            }
            Fault::WindowOffByOne if arch.sliding_window.is_none() => Some("no sliding window"),
            _ => None,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown fault `{0}` (known: {known}, {packed}, {fused}, {param}, {late})", known = Fault::ALL.map(Fault::name).join(", "), packed = Fault::PACKED.map(Fault::name).join(", "), fused = Fault::FUSED.map(Fault::name).join(", "), param = Fault::PARAM.map(Fault::name).join(", "), late = Fault::LATE.map(Fault::name).join(", "))]
pub struct UnknownFault(pub String);

impl FromStr for Fault {
    type Err = UnknownFault;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Fault::ALL
            .into_iter()
            .chain(Fault::PACKED)
            .chain(Fault::FUSED)
            .chain(Fault::PARAM)
            .chain(Fault::LATE)
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownFault(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for fault in Fault::ALL
            .into_iter()
            .chain(Fault::PACKED)
            .chain(Fault::FUSED)
            .chain(Fault::PARAM)
            .chain(Fault::LATE)
        {
            assert_eq!(fault.name().parse::<Fault>(), Ok(fault));
            let json = serde_json::to_string(&fault).unwrap();
            assert_eq!(json, format!("\"{}\"", fault.name()));
        }
        assert!("drop-bias".parse::<Fault>().is_err());
    }
}
