//! The long-context probes of phase 3 and of the phase 4–5 probes of a change
//! that touches attention, the KV cache or prefill's row chunking. The
//! verification prompts reach 51–68 positions: a decode or cache bug that starts
//! later, a sliding window that never fills and a prefill past its first row
//! chunk or cascade stage are never run by them. These probes run them, cheaply:
//!
//! - one synthetic long prompt: the first verification prompt and the
//!   reference's greedy continuation of it, repeated to `start` tokens, where
//!   `start` is twice the largest of the plan's sliding window, its decode KV
//!   tile, its flash-attention key block and 512 ([`reach`]);
//! - the long-prompt prefill check: one NPU prefill whose rows cross every row
//!   boundary the prefill plan has (GEMM row chunk, flash-attention key block
//!   and cascade stage, window: [`boundaries`]): the whole long prompt in
//!   phase 3, one length past the largest boundary for a later change of
//!   prefill alone ([`prefill_lengths`]); its last row's logits, and every
//!   layer's K/V rows at both sides of each boundary, the first and the last,
//!   against the oracle's;
//! - the long-context decode probe: from the cache of the `start`-token
//!   prefill, [`PROBE_STEPS`] decode steps fed the oracle's greedy tokens; the
//!   logits of each and the K/V rows they wrote, every layer.
//!
//! The oracle's side is computed once per deployment ([`LongReference`]): one
//! prefill of the long prompt (prefill is causal, so the logits at every
//! checked length come from its final hidden rows) and the decode steps. The
//! same on the bf16-storage oracle, fed the same tokens, is each gate's floor,
//! and each limit is [`DerivedLimit`] of it, as the teacher-forced gates'
//! (`floor`). Errors are `max |ours − ref| / max |ref|`, as everywhere.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::decode::{logits_error, max_rel, ForcedDecoder, NpuDecoder, ReferenceRun, Worst};
use super::decode::{KV_MAX_REL, KV_RULE, LOGITS_MAX_REL, LOGITS_RULE};
use super::floor::DerivedLimit;
use crate::exec::design::Plans;
use crate::model::arch::Architecture;
use crate::model::oracle::storage::Bf16Storage;
use crate::model::oracle::{blocks, LogitRows, Reference, ReferenceError};
use crate::model::Model;
use crate::xdna2::device::Device;
use crate::xdna2::interpreter::{CacheState, ExecError};
use crate::xdna2::kernels::decode_attention::KV_BLOCK_POSITIONS;
use crate::xdna2::plan::{Launch, Plan, Step};

/// Decode steps of the long-context probe: enough to write and then read
/// back a few late slots, few enough to stay cheap.
pub const PROBE_STEPS: usize = 4;
/// The least context the probes reach past, whatever the plan's tiles: the
/// decode probe runs at twice the largest of this, the window and the tiles.
pub const MIN_REACH: usize = 512;

/// Where the decode probe starts: `2 × max(window, decode KV tile, flash
/// key block, MIN_REACH)`, within the plans' context.
pub fn reach(plans: &Plans, device: &Device) -> usize {
    let window = plans.decode.sliding.as_ref().map_or(0, |s| s.window);
    let largest = window
        .max(KV_BLOCK_POSITIONS)
        .max(device.limits.fa_key_block)
        .max(MIN_REACH);
    (2 * largest).min(plans.decode.seq_len.saturating_sub(PROBE_STEPS + 1))
}

/// The row boundaries of a prefill plan: each GEMM's row chunk, the
/// flash-attention key block and cascade stage, the sliding window.
pub fn boundaries(plan: &Plan, device: &Device) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    out.extend(plan.sliding.as_ref().map(|s| s.window));
    for (_, steps) in plan.sections() {
        for step in steps {
            let Step::Call(call) = step else { continue };
            for launch in &call.launches {
                match launch {
                    // The interpreter's row chunk (`interpreter::rows`).
                    Launch::Gemm { spec, .. } => {
                        out.insert(spec.tile.tile_m.max(8));
                    }
                    Launch::FlashAttention { spec, .. } => {
                        let key = device.limits.fa_key_block.max(1);
                        out.insert(key);
                        out.insert((spec.lk / spec.tile.cascade.max(1)).max(key));
                    }
                    _ => {}
                }
            }
        }
    }
    out
}

/// The prefill lengths checked below `start`: one past each boundary.
pub fn prefill_lengths(plan: &Plan, device: &Device, start: usize) -> Vec<usize> {
    boundaries(plan, device)
        .into_iter()
        .map(|b| b + 1)
        .filter(|&l| l < start)
        .collect()
}

/// The positions whose K/V rows a prefill of `len` tokens is checked at: the
/// first, the last, and both sides of each boundary below it.
fn sampled_positions(boundaries: &BTreeSet<usize>, len: usize) -> Vec<usize> {
    let mut out = BTreeSet::from([0, len - 1]);
    for &b in boundaries.iter().filter(|&&b| b < len) {
        out.insert(b - 1);
        out.insert(b);
    }
    out.into_iter().collect()
}

/// The synthetic long prompt: `prompt` and its greedy continuation `run`,
/// repeated to `len` tokens (text the model itself wrote, so a trained model
/// meets a context it is sure about, not drawn ids).
pub fn long_prompt(prompt: &[u32], run: &ReferenceRun, len: usize) -> Vec<u32> {
    let unit: Vec<u32> = prompt
        .iter()
        .copied()
        .chain(run.steps.iter().map(|s| s.token))
        .collect();
    unit.iter().copied().cycle().take(len).collect()
}

/// Every layer's cache as a side holds it: the position of its first row,
/// keys and values `[rows, kv_width]`.
type Cache = Vec<(usize, Vec<f32>, Vec<f32>)>;

/// One oracle's run of the long prompt: its prefill and the decode steps.
#[derive(Debug, Clone)]
pub struct OracleLong {
    /// Final hidden rows of the prefill, `[start, hidden]`.
    final_hidden: Vec<f32>,
    /// The cache after the prefill.
    cache: Cache,
    /// The logits of each decode step.
    decode_logits: Vec<Vec<f32>>,
    /// The cache after the decode steps.
    decode_cache: Cache,
}

/// What the probes compare against, computed once per deployment.
#[derive(Debug, Clone)]
pub struct LongReference {
    pub prompt: Vec<u32>,
    pub start: usize,
    /// The tokens fed to the decode steps (the plain oracle's greedy choices).
    pub tokens: Vec<u32>,
    plain: OracleLong,
    floor: OracleLong,
    storage: Bf16Storage,
    hidden: usize,
    kv_width: usize,
}

impl LongReference {
    /// The plain oracle's and the bf16-storage oracle's runs of the long
    /// prompt `prompt` (in parallel: two tasks).
    pub fn compute(model: &Model, prompt: Vec<u32>) -> Result<Self, ReferenceError> {
        let storage = Bf16Storage::decode_floor();
        let start = prompt.len();
        let mut plain = Reference::new(model)?;
        let mut floor = Reference::new(model)?.with_storage(storage.clone());
        let (a, b) = rayon::join(
            || plain.prefill(&prompt, LogitRows::Last),
            || floor.prefill(&prompt, LogitRows::Last),
        );
        let (a, b) = (a?, b?);
        let (plain_cache, floor_cache) = (
            oracle_cache(&plain, &model.arch),
            oracle_cache(&floor, &model.arch),
        );
        // The plain oracle's greedy tokens feed both (teacher forcing).
        let mut tokens = Vec::with_capacity(PROBE_STEPS);
        let mut logits = a.logits.data.clone();
        let mut plain_logits = Vec::with_capacity(PROBE_STEPS);
        for _ in 0..PROBE_STEPS {
            let token = blocks::argmax(&logits) as u32;
            tokens.push(token);
            logits = plain.decode_step(token)?;
            plain_logits.push(logits.clone());
        }
        let floor_logits = tokens
            .iter()
            .map(|&t| floor.decode_step(t))
            .collect::<Result<Vec<_>, _>>()?;
        let plain_long = OracleLong {
            final_hidden: a.final_hidden.data,
            cache: plain_cache,
            decode_logits: plain_logits,
            decode_cache: oracle_cache(&plain, &model.arch),
        };
        let floor_long = OracleLong {
            final_hidden: b.final_hidden.data,
            cache: floor_cache,
            decode_logits: floor_logits,
            decode_cache: oracle_cache(&floor, &model.arch),
        };
        Ok(Self {
            prompt,
            start,
            tokens,
            plain: plain_long,
            floor: floor_long,
            storage,
            hidden: model.arch.hidden_size,
            kv_width: model.arch.kv_dim(),
        })
    }

    /// The oracle's logits at the last row of the prefix of `len` tokens.
    fn logits_at(&self, model: &Model, side: &OracleLong, len: usize) -> Vec<f32> {
        let row = &side.final_hidden[(len - 1) * self.hidden..len * self.hidden];
        match Reference::new(model) {
            Ok(reference) => reference.head_logits(row),
            Err(_) => Vec::new(),
        }
    }

    /// The floor of each error over the prefill `lengths` and the decode
    /// steps, and the limits they give.
    pub fn limits(
        &self,
        model: &Model,
        boundaries: &BTreeSet<usize>,
        lengths: &[usize],
    ) -> (LongErrors, LongLimits) {
        let mut floor = LongErrors::none();
        for &len in lengths {
            let ours = self.logits_at(model, &self.floor, len);
            let theirs = self.logits_at(model, &self.plain, len);
            floor
                .prefill_logits
                .keep(logits_error(&ours, &theirs), || format!("length {len}"));
            let positions = sampled_positions(boundaries, len);
            let kv = rows_error(
                &self.floor.cache,
                &self.plain.cache,
                &positions,
                self.kv_width,
            );
            floor
                .prefill_kv
                .keep(kv.value, || format!("length {len}, {}", kv.at));
        }
        self.decode_errors(
            &mut floor,
            &self.floor.decode_logits,
            &self.floor.decode_cache,
        );
        let limit = |fixed, rule: &str, w: &Worst| DerivedLimit::new(fixed, rule, w, &self.storage);
        let limits = LongLimits {
            prefill_logits: limit(LOGITS_MAX_REL, LOGITS_RULE, &floor.prefill_logits),
            prefill_kv: limit(KV_MAX_REL, KV_RULE, &floor.prefill_kv),
            decode_logits: limit(LOGITS_MAX_REL, LOGITS_RULE, &floor.decode_logits),
            decode_kv: limit(KV_MAX_REL, KV_RULE, &floor.decode_kv),
        };
        (floor, limits)
    }

    /// The decode errors of `logits` and `cache` (a side's decode steps)
    /// against the plain oracle's, into `errors`.
    fn decode_errors(&self, errors: &mut LongErrors, logits: &[Vec<f32>], cache: &Cache) {
        for (step, (ours, theirs)) in logits.iter().zip(&self.plain.decode_logits).enumerate() {
            let position = self.start + step;
            errors.decode_logits.keep(logits_error(ours, theirs), || {
                format!("position {position}")
            });
        }
        let written: Vec<usize> = (self.start..self.start + PROBE_STEPS).collect();
        errors.decode_kv = rows_error(cache, &self.plain.decode_cache, &written, self.kv_width);
    }
}

/// Each layer's cache of an oracle as it stands (its rows end at its
/// position).
fn oracle_cache(reference: &Reference<'_>, arch: &Architecture) -> Cache {
    let (end, width) = (reference.position(), arch.kv_dim().max(1));
    (0..arch.num_layers)
        .map(|l| {
            let (k, v) = reference.kv(l);
            (end - k.len() / width, k.to_vec(), v.to_vec())
        })
        .collect()
}

/// The four errors of the probes, each where it is worst.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LongErrors {
    pub prefill_logits: Worst,
    pub prefill_kv: Worst,
    pub decode_logits: Worst,
    pub decode_kv: Worst,
}

impl LongErrors {
    fn none() -> Self {
        Self {
            prefill_logits: Worst::none(),
            prefill_kv: Worst::none(),
            decode_logits: Worst::none(),
            decode_kv: Worst::none(),
        }
    }
}

/// The limits of the four errors, from their floors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LongLimits {
    pub prefill_logits: DerivedLimit,
    pub prefill_kv: DerivedLimit,
    pub decode_logits: DerivedLimit,
    pub decode_kv: DerivedLimit,
}

/// What the NPU side of a probe runs: the prefill check, the decode probe or
/// both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checks {
    pub prefill: bool,
    pub decode: bool,
}

/// The NPU side of the probes on `decoder`: the prefill at each of `lengths`,
/// then, when `checks.decode`, the prefill of the whole long prompt (or
/// `resume_from`, a saved state of it) and the decode steps. Returns the errors and the state
/// after the long prompt's prefill when it ran.
pub fn npu_errors(
    decoder: &mut NpuDecoder<'_, '_>,
    reference: &LongReference,
    (boundaries, lengths): (&BTreeSet<usize>, &[usize]),
    checks: Checks,
    resume_from: Option<&CacheState>,
    model: &Model,
) -> Result<(LongErrors, Option<CacheState>), ExecError> {
    let mut errors = LongErrors::none();
    let mut prefill_at = |decoder: &mut NpuDecoder<'_, '_>, len: usize| {
        let logits = decoder.prefill(&reference.prompt[..len])?;
        let theirs = reference.logits_at(model, &reference.plain, len);
        errors
            .prefill_logits
            .keep(logits_error(&logits, &theirs), || format!("length {len}"));
        let ours = npu_cache(decoder, model.arch.num_layers);
        let positions = sampled_positions(boundaries, len);
        let kv = rows_error(
            &ours,
            &reference.plain.cache,
            &positions,
            reference.kv_width,
        );
        errors
            .prefill_kv
            .keep(kv.value, || format!("length {len}, {}", kv.at));
        Ok::<(), ExecError>(())
    };
    for &len in lengths {
        prefill_at(decoder, len)?;
    }
    if !checks.decode {
        return Ok((errors, None));
    }
    let saved = match resume_from {
        Some(state) => {
            decoder.resume(state);
            None
        }
        None => {
            prefill_at(decoder, reference.start)?;
            Some(decoder.cache_state())
        }
    };
    let mut logits = Vec::with_capacity(PROBE_STEPS);
    for &token in &reference.tokens {
        logits.push(decoder.decode(token)?);
    }
    let cache = npu_cache(decoder, model.arch.num_layers);
    reference.decode_errors(&mut errors, &logits, &cache);
    Ok((errors, saved))
}

/// The NPU's cache, every layer, with the position of its first held row.
fn npu_cache(decoder: &NpuDecoder<'_, '_>, layers: usize) -> Cache {
    (0..layers)
        .map(|l| {
            let (k, v) = decoder.kv(l);
            (decoder.kv_first(l), k, v)
        })
        .collect()
}

/// The worst layer's error of the K/V rows at `positions` both caches hold
/// (keys and values apart; a row `ours` lacks counts as zeros).
fn rows_error(ours: &Cache, theirs: &Cache, positions: &[usize], width: usize) -> Worst {
    let mut worst = Worst::none();
    fn row(cache: &[f32], first: usize, p: usize, width: usize) -> Option<&[f32]> {
        p.checked_sub(first)
            .and_then(|i| cache.get(i * width..(i + 1) * width))
    }
    for (layer, ((of, ok, ov), (tf, tk, tv))) in ours.iter().zip(theirs).enumerate() {
        for (name, mine, reference) in [("keys", ok, tk), ("values", ov, tv)] {
            let (mut a, mut b, mut at) = (Vec::new(), Vec::new(), Vec::new());
            for &p in positions {
                let Some(r) = row(reference, *tf, p, width) else {
                    continue;
                };
                b.extend_from_slice(r);
                match row(mine, *of, p, width) {
                    Some(m) => a.extend_from_slice(m),
                    None => a.extend(std::iter::repeat_n(0.0, width)),
                }
                at.push(p);
            }
            if b.is_empty() {
                continue;
            }
            let (e, i) = max_rel(|i| a[i], &b, b.len());
            worst.keep(e, || {
                format!(
                    "layer {layer} {name}, position {}",
                    at.get(i / width.max(1)).copied().unwrap_or(0)
                )
            });
        }
    }
    worst
}

/// The probes' errors against their limits, one line per gate, for the
/// phase notes.
pub fn summary(errors: &LongErrors, limits: &LongLimits) -> BTreeMap<&'static str, String> {
    let one = |w: &Worst, l: &DerivedLimit| {
        format!(
            "{} at {} (limit {})",
            super::gate::format_value(w.value),
            w.at,
            l.formula()
        )
    };
    BTreeMap::from([
        (
            "prefill logits",
            one(&errors.prefill_logits, &limits.prefill_logits),
        ),
        (
            "prefill KV rows",
            one(&errors.prefill_kv, &limits.prefill_kv),
        ),
        (
            "decode logits",
            one(&errors.decode_logits, &limits.decode_logits),
        ),
        ("KV after decode", one(&errors.decode_kv, &limits.decode_kv)),
    ])
}
