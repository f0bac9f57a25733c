//! The plan interpreter: the one functional execution of deployment plans on a
//! model's weights, used by deploy (phases 2–7), replay, the benchmarks and the
//! tests. Every launch runs its emulated kernel (bf16 between kernels, f32 inside,
//! BFP16 where selected); every host op runs the host's f32 computation; buffers
//! hold bf16 bits. An [`Interpreter`] keeps the host KV cache and the position
//! across a prefill plan and the decode plans that follow, as the reference
//! deployment's runner does.
//!
//! Plans are built at a production row count; a prompt fills only its first rows.
//! The interpreter runs the real rows only, each launch on a spec trimmed to them
//! with the production numerics (`rows`), so a 12-token prompt costs 12 rows, not
//! 2048, and gives the bits the full launch gives on those rows. The production
//! spec is what the plan holds and what [`Plan::check`] places.
//!
//! What the NPU path computes beyond the plan is in [`NpuPath`]: whether the q/k/v
//! bias is added, whether the Q/K norm runs, which frequencies the RoPE table
//! holds, and the [`Defects`] planted in its decode side. Planted faults switch
//! these; lessons switch the first three back.

mod host;
mod pass;
mod rope;
mod rows;
pub mod weights;

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::arch::{Architecture, RopeScaling};
use crate::model::weights::Weights;
use crate::xdna2::constraints::ConstraintViolation;
use crate::xdna2::device::Device;
use crate::xdna2::kernels::{self, KernelError};
use crate::xdna2::plan::{Phase, Plan, TransformError};
use weights::TensorIndex;

/// Frequencies of the RoPE table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RopeTable {
    /// The model's inverse frequencies with its scaling (llama3, linear) applied.
    Scaled,
    /// `1/theta^(2j/d)` without scaling.
    Unscaled,
}

/// Choices of the NPU path the plans do not spell out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NpuPath {
    /// Add the q/k/v bias (after RoPE) where the model has one.
    pub qkv_bias: bool,
    /// Run the per-head Q/K RMSNorm where the model has one.
    pub qk_norm: bool,
    pub rope: RopeTable,
    /// Bugs planted in the decode side (none in a real deployment).
    #[serde(default, skip_serializing_if = "Defects::none")]
    pub defects: Defects,
}

impl NpuPath {
    pub const CORRECT: NpuPath = NpuPath {
        qkv_bias: true,
        qk_norm: true,
        rope: RopeTable::Scaled,
        defects: Defects::NONE,
    };
}

/// Bugs of the host code and kernels on the decode side that a planted fault
/// switches on, so tests can show that the decode gates catch each one. Every one
/// leaves prefill alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Defects {
    /// Decode rotates Q and K (and the rotated bias) at position + 1.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rope_position_off_by_one: bool,
    /// Decode writes its K/V row into the slot after its position; its own slot
    /// keeps what it held (zeros on a fresh cache).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kv_wrong_slot: bool,
    /// Decode writes a stale K/V row into its slot: the previous position's
    /// (a staging buffer that was not refreshed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale_kv: bool,
    /// `stale_kv` from this position on only (the late faults: a cache bug
    /// past the verification prompts' context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_kv_from: Option<usize>,
    /// Decode attention pairs query head h with KV group `h / group + 1` (mod the
    /// KV heads) instead of `h / group`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gqa_mapping: bool,
    /// The last partition of a partitioned LM-head GEMV is not launched: its
    /// slice of the logits stays zero.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drop_lm_head_partition: bool,
    /// The gated MLP runs `silu_mul` where the plan has `gelu_mul` (the plans
    /// are built with the SiLU kernel in its place).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub silu_for_gelu: bool,
    /// Sliding-window layers attend over one position more than their window,
    /// in prefill (flash attention's mask) and in decode.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub window_off_by_one: bool,
    /// The packed 4-bit GEMV reads each byte's nibbles in the wrong order
    /// (weight `j + 16` of a block where weight `j` belongs, and back).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub packed_nibble_order: bool,
    /// The defects act only in single-dispatch fused decode plans (the
    /// planted faults that show the gates catch a bug of the fused path).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fused_only: bool,
    /// The plans' norms run with 100 × the config's epsilon (`param-eps`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub param_eps: bool,
    /// The RoPE tables are built from twice the config's base (`param-rope-base`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub param_rope_base: bool,
    /// Attention scales its scores by `(2 · head_dim)^-1/2` (`param-scale`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub param_scale: bool,
    /// The gated MLP reads its gate and up operands swapped (`param-gate-up-swap`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub param_gate_up_swap: bool,
}

impl Defects {
    pub const NONE: Defects = Defects {
        rope_position_off_by_one: false,
        kv_wrong_slot: false,
        stale_kv: false,
        stale_kv_from: None,
        gqa_mapping: false,
        drop_lm_head_partition: false,
        silu_for_gelu: false,
        window_off_by_one: false,
        packed_nibble_order: false,
        fused_only: false,
        param_eps: false,
        param_rope_base: false,
        param_scale: false,
        param_gate_up_swap: false,
    };

    pub fn none(&self) -> bool {
        *self == Defects::NONE
    }

    /// The defects that act on `plan`: none on a plan other than a fused
    /// decode when they are scoped to it.
    pub fn scoped(self, plan: &Plan) -> Defects {
        match self.fused_only && plan.fused.is_none() {
            true => Defects::NONE,
            false => self,
        }
    }
}

/// The inverse frequencies a table of `kind` holds for `arch`'s global RoPE
/// (the NPU side's own code, not the reference's: see `rope`).
pub fn table_frequencies(arch: &Architecture, kind: RopeTable) -> Vec<f32> {
    layer_table_frequencies(arch, kind, false)
}

/// [`table_frequencies`] of the global RoPE, or of the local base of the
/// sliding-window layers when `local`.
pub fn layer_table_frequencies(arch: &Architecture, kind: RopeTable, local: bool) -> Vec<f32> {
    match kind {
        RopeTable::Scaled => rope::scaled_frequencies(arch, local),
        RopeTable::Unscaled => rope::unscaled_frequencies(arch, local),
    }
}

/// The inverse frequencies the tables of `path` hold (what the interpreter's
/// RoPE reads): [`layer_table_frequencies`] of its table kind, from twice the
/// config's base under the planted `param-rope-base`.
pub fn path_table_frequencies(arch: &Architecture, path: &NpuPath, local: bool) -> Vec<f32> {
    if !path.defects.param_rope_base {
        return layer_table_frequencies(arch, path.rope, local);
    }
    let mut wrong = arch.clone();
    wrong.rope_theta *= 2.0;
    if let Some(rope) = wrong.local_rope.as_mut() {
        rope.theta *= 2.0;
    }
    layer_table_frequencies(&wrong, path.rope, local)
}

/// Whether the model's scaling changes any frequency (only then the two tables differ).
pub fn has_scaling(arch: &Architecture) -> bool {
    !matches!(arch.rope_scaling, RopeScaling::Default)
}

/// Counters the evaluator audits: the NPU path really ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub launches: u64,
    pub host_ops: u64,
    pub tokens: u64,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ExecError {
    #[error("plan refused: {}", .0.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("; "))]
    Refused(Vec<ConstraintViolation>),
    #[error("layer {layer}: {source}")]
    Kernel {
        layer: usize,
        #[source]
        source: KernelError,
    },
    #[error("the plan names buffer `{0}`, which it does not declare")]
    UnknownBuffer(String),
    #[error("buffer `{0}` is read before any step wrote it")]
    Unwritten(String),
    #[error("buffer `{0}` is not filled from a checkpoint tensor")]
    NotATensor(String),
    #[error("buffer `{buffer}` names `{tensor}`, which the model does not have")]
    MissingTensor { buffer: String, tensor: String },
    #[error("buffer `{buffer}`: {source}")]
    Transform {
        buffer: String,
        #[source]
        source: TransformError,
    },
    #[error("buffer `{buffer}` cannot be read as packed 4-bit blocks: {why}")]
    NotPacked { buffer: String, why: String },
    #[error("buffer `{0}`: a GEMM weight must be pre-transposed ([N, K] read as B)")]
    NotTransposed(String),
    #[error("{got} tokens do not fit the plan's {rows} rows")]
    TooManyTokens { got: usize, rows: usize },
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("position {position} is beyond the plan's context of {context}")]
    BeyondContext { position: usize, context: usize },
    #[error("a {0:?} plan cannot run here")]
    WrongPhase(Phase),
    #[error("prefill attention after earlier positions is not supported")]
    PrefillAfterPositions,
    #[error("non-causal attention over {rows} of {lq} rows would see the padding")]
    NonCausalPadding { rows: usize, lq: usize },
    #[error("the plan's epilogue produced no logits")]
    NoLogits,
}

impl ExecError {
    /// A kernel error outside any layer (prologue, epilogue, row helpers).
    fn kernel(source: KernelError) -> Self {
        ExecError::Kernel { layer: 0, source }
    }
}

/// The emulated NPU's host state across plans: the KV cache (bf16,
/// `[positions, kv_width]` per layer), the next position, weight copies made
/// once, and optionally every layer's output of the last prefill.
pub struct Interpreter<'m> {
    device: &'m Device,
    arch: &'m Architecture,
    index: TensorIndex<'m>,
    path: NpuPath,
    /// RoPE tables by their number of positions and whether they hold the
    /// local base.
    luts: HashMap<(usize, bool), Arc<Vec<u16>>>,
    /// Weight copies (padded heads, zero rows made explicit) by source and layer.
    copies: HashMap<(String, usize), Arc<Vec<u16>>>,
    kv: KvCache,
    position: usize,
    capture: bool,
    layer_outputs: Vec<Vec<u16>>,
    counters: Counters,
}

impl<'m> Interpreter<'m> {
    pub fn new(
        device: &'m Device,
        arch: &'m Architecture,
        weights: &'m Weights,
        path: NpuPath,
    ) -> Self {
        Interpreter {
            device,
            arch,
            index: TensorIndex::new(weights),
            path,
            luts: HashMap::new(),
            copies: HashMap::new(),
            kv: KvCache::new(arch.num_layers),
            position: 0,
            capture: false,
            layer_outputs: Vec::new(),
            counters: Counters::default(),
        }
    }

    /// Keeps every layer's output residual stream of each prefill (real rows).
    pub fn capture_layers(&mut self, on: bool) {
        self.capture = on;
    }

    /// Each layer's output of the last prefill run while capturing, as bf16 bits
    /// `[rows, hidden]` of the real rows.
    pub fn layer_outputs(&self) -> &[Vec<u16>] {
        &self.layer_outputs
    }

    /// Takes the captured layer outputs as f32.
    pub fn take_layer_outputs(&mut self) -> Vec<Vec<f32>> {
        std::mem::take(&mut self.layer_outputs)
            .iter()
            .map(|bits| crate::bf16::to_f32_vec(bits))
            .collect()
    }

    /// The position the next token takes.
    pub fn position(&self) -> usize {
        self.position
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Empties the KV cache.
    pub fn reset(&mut self) {
        self.kv.clear();
        self.position = 0;
    }

    /// Layer `layer`'s cached keys and values, `[slots, kv_width]` bf16 bits each
    /// (slots written so far; a slot past the position is a wrong write), from
    /// its first held position on (past 0 on a sliding-window layer that has
    /// dropped what slid out, as the reference's cache does).
    pub fn kv(&self, layer: usize) -> (&[u16], &[u16]) {
        self.kv.layer(layer)
    }

    /// The position of layer `layer`'s first held slot (past 0 on a
    /// sliding-window layer that dropped what slid out).
    pub fn kv_first(&self, layer: usize) -> usize {
        self.kv.first(layer)
    }

    /// The host state a prefill left (the KV cache and the next position), to
    /// resume decoding from it in another interpreter of the same path: the
    /// long-context probes prefill a long prompt once and decode from it again.
    pub fn cache_state(&self) -> CacheState {
        CacheState {
            kv: self.kv.clone(),
            position: self.position,
        }
    }

    /// Takes the KV cache and position of `state` as its own.
    pub fn resume(&mut self, state: &CacheState) {
        self.kv = state.kv.clone();
        self.position = state.position;
    }

    /// Runs a prefill plan on `tokens` from an empty cache; returns the logits of
    /// the last token.
    pub fn prefill(&mut self, plan: &Plan, tokens: &[u32]) -> Result<Vec<f32>, ExecError> {
        self.start_prefill(plan, tokens)?;
        let logits = pass::run(self, plan, tokens, None)?;
        self.advance(tokens.len());
        Ok(logits)
    }

    /// Runs the first `layers` layers of a prefill plan on `tokens` (no LM head)
    /// and returns each layer's output (phase 2's single block); the cache is
    /// left empty.
    pub fn prefill_layers(
        &mut self,
        plan: &Plan,
        tokens: &[u32],
        layers: usize,
    ) -> Result<Vec<Vec<f32>>, ExecError> {
        self.start_prefill(plan, tokens)?;
        let capture = std::mem::replace(&mut self.capture, true);
        let outcome = pass::run(self, plan, tokens, Some(layers));
        self.capture = capture;
        self.reset();
        outcome?;
        Ok(self.take_layer_outputs())
    }

    /// Runs a decode plan for `token` at the next position; returns its logits.
    pub fn decode(&mut self, plan: &Plan, token: u32) -> Result<Vec<f32>, ExecError> {
        if plan.phase != Phase::Decode {
            return Err(ExecError::WrongPhase(plan.phase));
        }
        if self.position >= plan.seq_len {
            return Err(ExecError::BeyondContext {
                position: self.position,
                context: plan.seq_len,
            });
        }
        plan.check(self.device).map_err(ExecError::Refused)?;
        let logits = pass::run(self, plan, &[token], None)?;
        self.advance(1);
        Ok(logits)
    }

    fn start_prefill(&mut self, plan: &Plan, tokens: &[u32]) -> Result<(), ExecError> {
        if plan.phase != Phase::Prefill {
            return Err(ExecError::WrongPhase(plan.phase));
        }
        if tokens.is_empty() {
            return Err(ExecError::EmptyPrompt);
        }
        if tokens.len() > plan.seq_len {
            return Err(ExecError::TooManyTokens {
                got: tokens.len(),
                rows: plan.seq_len,
            });
        }
        plan.check(self.device).map_err(ExecError::Refused)?;
        self.reset();
        Ok(())
    }

    fn advance(&mut self, rows: usize) {
        self.position += rows;
        self.counters.tokens += rows as u64;
    }

    /// The RoPE table over `positions` positions for this path (of the local
    /// base when `local`).
    fn lut(&mut self, positions: usize, local: bool) -> Arc<Vec<u16>> {
        let (arch, path) = (self.arch, self.path);
        self.luts
            .entry((positions, local))
            .or_insert_with(|| {
                let freqs = path_table_frequencies(arch, &path, local);
                Arc::new(kernels::rope_lut(&freqs, positions))
            })
            .clone()
    }
}

/// A saved host state ([`Interpreter::cache_state`]).
#[derive(Debug, Clone)]
pub struct CacheState {
    kv: KvCache,
    position: usize,
}

/// The host KV cache: per layer, keys and values `[slots, kv_width]` as bf16,
/// written slot by slot. A sliding-window layer drops the positions no later
/// query can see (`drop_before`), as transformers' sliding-window cache does;
/// its first held slot is then past 0 (`first`), and slots are addressed by
/// their position throughout.
#[derive(Debug, Clone)]
struct KvCache {
    layers: Vec<(Vec<u16>, Vec<u16>)>,
    first: Vec<usize>,
}

impl KvCache {
    fn new(layers: usize) -> Self {
        KvCache {
            layers: vec![(Vec::new(), Vec::new()); layers],
            first: vec![0; layers],
        }
    }

    fn clear(&mut self) {
        for (k, v) in &mut self.layers {
            k.clear();
            v.clear();
        }
        self.first.fill(0);
    }

    /// The position of layer `layer`'s first held slot.
    fn first(&self, layer: usize) -> usize {
        self.first.get(layer).copied().unwrap_or(0)
    }

    /// Drops layer `layer`'s slots before position `position`.
    fn drop_before(&mut self, layer: usize, position: usize, width: usize) {
        let first = self.first(layer);
        let Some((k, v)) = self.layers.get_mut(layer) else {
            return;
        };
        let drop = position.saturating_sub(first).min(k.len() / width.max(1));
        if drop == 0 {
            return;
        }
        k.drain(..drop * width);
        v.drain(..drop * width);
        self.first[layer] = first + drop;
    }

    fn layer(&self, layer: usize) -> (&[u16], &[u16]) {
        self.layers
            .get(layer)
            .map_or((&[][..], &[][..]), |(k, v)| (&k[..], &v[..]))
    }

    /// Writes `keys` and `values` (whole rows of `width`) from slot `slot` on;
    /// slots skipped over hold zeros.
    fn write(&mut self, layer: usize, slot: usize, width: usize, keys: &[u16], values: &[u16]) {
        let first = self.first(layer);
        let Some((k, v)) = self.layers.get_mut(layer) else {
            return;
        };
        // A slot that slid out of the window is not held any more.
        let Some(slot) = slot.checked_sub(first) else {
            return;
        };
        for (cache, rows) in [(k, keys), (v, values)] {
            kernels::append_rows(cache, slot * width, rows);
        }
    }

    /// The row of slot `slot`, zeros when it was never written.
    fn row(&self, layer: usize, slot: usize, width: usize) -> (Vec<u16>, Vec<u16>) {
        let (k, v) = self.layer(layer);
        let held = slot.checked_sub(self.first(layer));
        let take = |c: &[u16]| {
            held.and_then(|s| c.get(s * width..(s + 1) * width))
                .map_or_else(|| vec![0; width], <[u16]>::to_vec)
        };
        (take(k), take(v))
    }
}
