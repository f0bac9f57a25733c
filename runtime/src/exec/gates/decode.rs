//! The teacher-forced decode comparison of phases 3, 5 and 7. The reference
//! greedy-decodes each prompt once (phase 0) and keeps the logits of every step
//! and, at the end, the KV cache of every layer. The NPU path then runs the same
//! prompt and is fed the reference's tokens, so both sides compute every step on
//! the same context, and three errors are measured, each as
//! `max |npu − reference| / max |reference|` (the measure phase 0 uses against
//! transformers):
//!
//! - the logits of every step (the prefill's last position and each decode step),
//!   worst step;
//! - the KV cache after prefill: keys (after RoPE and bias) and values of the
//!   prompt's slots, per layer, worst layer;
//! - the KV cache after the last decode step: every slot either side wrote, per
//!   layer (a slot only one side wrote counts against zeros), worst layer.
//!
//! The greedy choice and top-k ids of every NPU step feed the greedy gate
//! (`topk`).

use serde::{Deserialize, Serialize};

use super::floor::DecodeLimits;
use super::gate::format_value;
use super::topk::{GreedyStep, TopKGate};
use crate::exec::design::Plans;
use crate::model::oracle::{LogitRows, Reference, ReferenceError};
use crate::model::Model;
use crate::xdna2::interpreter::{ExecError, Interpreter};
use crate::xdna2::padding::Padding;

/// The fixed part of the teacher-forced logits limit (the limit is the larger
/// of it and twice the bf16-storage floor measured on the deployment's own
/// model and tokens, `floor`). Derived from the bf16 error measured on the
/// four transformers fixtures (llama32-tiny, qwen25-tiny,
/// qwen3-tiny, smollm2-tiny; the deployment's two prompts, 32 steps each): worst
/// 0.0242 (qwen3-tiny, prompt 2), which is about 12 bf16 unit roundoffs (2^-9).
/// The limit is twice that, rounded up; the smallest error a planted decode fault
/// gives on those fixtures is 0.42 (kv-wrong-slot on qwen25-tiny), eight times
/// the limit.
pub const LOGITS_MAX_REL: f64 = 0.05;
/// Where [`LOGITS_MAX_REL`] comes from (for the report).
pub const LOGITS_RULE: &str = "2x the worst bf16 logits error measured on the four transformers fixtures (0.0242, qwen3-tiny), rounded up";
/// The fixed part of the KV-cache limits (after prefill and after decode): measured
/// worst 0.0208 on the same fixtures (qwen3-tiny, layer 1 keys), twice that
/// rounded up; planted decode faults give 0.57 or more.
pub const KV_MAX_REL: f64 = 0.05;
/// Where [`KV_MAX_REL`] comes from.
pub const KV_RULE: &str = "2x the worst bf16 KV-cache error measured on the four transformers fixtures (0.0208, qwen3-tiny), rounded up";

/// The reference's greedy decode of one prompt, kept for the NPU to follow.
#[derive(Debug, Clone)]
pub struct ReferenceRun {
    pub prompt_len: usize,
    /// The size of the top-k sets each step keeps (the gate's `k`).
    pub top_k: usize,
    /// Elements of one KV-cache slot (`kv_heads · head_dim`).
    pub kv_width: usize,
    /// The greedy choice and top-k ids of every step.
    pub steps: Vec<GreedyStep>,
    /// The logits of every step.
    pub logits: Vec<Vec<f32>>,
    /// Every layer's keys and values right after the prefill, `[slots, kv_dim]`
    /// (a sliding-window layer holds only what the next query can see).
    pub kv_prefill: Vec<(Vec<f32>, Vec<f32>)>,
    /// Every layer's keys and values after the last step, `[slots, kv_dim]`.
    pub kv: Vec<(Vec<f32>, Vec<f32>)>,
    /// Non-finite logits met on the way.
    pub non_finite: usize,
}

impl ReferenceRun {
    /// The tokens the NPU is fed after its prefill: the reference's greedy choices
    /// but the last.
    pub fn forced_tokens(&self) -> impl Iterator<Item = u32> + '_ {
        let n = self.steps.len().saturating_sub(1);
        self.steps[..n].iter().map(|s| s.token)
    }
}

/// `gate.tokens` greedy steps of the reference from `prompt` on a fresh cache,
/// each with its top-`gate.k` ids.
pub fn reference_run(
    model: &Model,
    prompt: &[u32],
    gate: TopKGate,
) -> Result<ReferenceRun, ReferenceError> {
    let mut reference = Reference::new(model)?;
    let mut logits = reference.prefill(prompt, LogitRows::Last)?.logits.data;
    let mut run = ReferenceRun {
        prompt_len: prompt.len(),
        top_k: gate.k,
        kv_width: model.arch.kv_dim(),
        steps: Vec::with_capacity(gate.tokens),
        logits: Vec::with_capacity(gate.tokens),
        kv_prefill: cache_of(&reference, model.arch.num_layers),
        kv: Vec::new(),
        non_finite: 0,
    };
    loop {
        run.non_finite += super::gate::non_finite(&logits);
        let step = GreedyStep::from_logits(&logits, gate.k);
        let token = step.token;
        run.steps.push(step);
        run.logits.push(logits);
        if run.steps.len() >= gate.tokens {
            break;
        }
        logits = reference.decode_step(token)?;
    }
    run.kv = cache_of(&reference, model.arch.num_layers);
    Ok(run)
}

/// Every layer's cached keys and values of `reference`, as they stand.
fn cache_of(reference: &Reference<'_>, layers: usize) -> Vec<(Vec<f32>, Vec<f32>)> {
    (0..layers)
        .map(|l| {
            let (k, v) = reference.kv(l);
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

/// The worst error of one comparison and where it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Worst {
    pub value: f64,
    /// `step 3`, `layer 5 keys, slot 13`.
    pub at: String,
}

impl Worst {
    pub fn none() -> Self {
        Worst {
            value: 0.0,
            at: "-".into(),
        }
    }

    /// Keeps the larger error; NaN wins (it never passes a gate).
    pub fn keep(&mut self, value: f64, at: impl FnOnce() -> String) {
        if value.is_nan() || (!self.value.is_nan() && value > self.value) {
            self.value = value;
            self.at = at();
        }
    }
}

/// The teacher-forced errors of one prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecodeErrors {
    pub logits: Worst,
    pub kv_prefill: Worst,
    pub kv_decode: Worst,
}

impl DecodeErrors {
    /// The worst of each error over several prompts.
    pub fn worst<'a>(all: impl IntoIterator<Item = &'a DecodeErrors>) -> DecodeErrors {
        let mut out = DecodeErrors {
            logits: Worst::none(),
            kv_prefill: Worst::none(),
            kv_decode: Worst::none(),
        };
        for e in all {
            out.logits.keep(e.logits.value, || e.logits.at.clone());
            out.kv_prefill
                .keep(e.kv_prefill.value, || e.kv_prefill.at.clone());
            out.kv_decode
                .keep(e.kv_decode.value, || e.kv_decode.at.clone());
        }
        out
    }
}

impl DecodeErrors {
    /// Every error within its limit (NaN never is).
    pub fn within(&self, limits: &DecodeLimits) -> bool {
        self.logits.value <= limits.logits.limit
            && self.kv_prefill.value <= limits.kv_prefill.limit
            && self.kv_decode.value <= limits.kv_decode.limit
    }

    /// The three errors and where each is worst, for notes and the audit.
    pub fn summary(&self, limits: &DecodeLimits) -> String {
        let one = |w: &Worst, limit: f64| {
            format!(
                "{} at {} (limit {})",
                format_value(w.value),
                w.at,
                format_value(limit)
            )
        };
        format!(
            "max|d|/max|ref| of logits {}, KV after prefill {}, KV after decode {}",
            one(&self.logits, limits.logits.limit),
            one(&self.kv_prefill, limits.kv_prefill.limit),
            one(&self.kv_decode, limits.kv_decode.limit)
        )
    }
}

/// `max |ours − theirs| / max |theirs|` over the longer of the two (missing
/// values are zeros) and the index of the largest difference; NaN when any value
/// is not finite.
pub fn max_rel(ours: impl Fn(usize) -> f32, theirs: &[f32], len: usize) -> (f64, usize) {
    let (mut diff, mut scale, mut at) = (0.0f64, 0.0f64, 0);
    for i in 0..len {
        let (a, b) = (ours(i) as f64, theirs.get(i).copied().unwrap_or(0.0) as f64);
        if !a.is_finite() || !b.is_finite() {
            return (f64::NAN, i);
        }
        scale = scale.max(b.abs());
        if (a - b).abs() > diff {
            diff = (a - b).abs();
            at = i;
        }
    }
    if diff == 0.0 {
        (0.0, at)
    } else if scale == 0.0 {
        (f64::INFINITY, at)
    } else {
        (diff / scale, at)
    }
}

/// One run of a prompt fed the reference's tokens (on the NPU path, or on a
/// bf16-storage variant of the oracle).
#[derive(Debug, Clone)]
pub struct ForcedRun {
    /// The greedy choice and top-k ids at every step.
    pub steps: Vec<GreedyStep>,
    pub errors: DecodeErrors,
    pub non_finite: usize,
}

/// What the teacher-forced comparison runs: a prefill, then one token at a
/// time, with a KV cache to read back. The NPU path of a plan
/// ([`NpuDecoder`]) and the oracle (a bf16-storage variant gives the gates'
/// floor, `floor`) both are one.
pub trait ForcedDecoder {
    type Error;
    /// Runs the prompt on a fresh cache; the logits of its last position.
    fn prefill(&mut self, prompt: &[u32]) -> Result<Vec<f32>, Self::Error>;
    /// Feeds one token at the next position; its logits.
    fn decode(&mut self, token: u32) -> Result<Vec<f32>, Self::Error>;
    /// Layer `layer`'s cached keys and values as they stand, `[slots, kv_dim]`
    /// each (the unpadded heads).
    fn kv(&self, layer: usize) -> (Vec<f32>, Vec<f32>);
}

/// The NPU path of `plans` as a [`ForcedDecoder`]: its cache is read with the
/// padding of the plan that ran last.
pub struct NpuDecoder<'n, 'm> {
    pub npu: &'n mut Interpreter<'m>,
    pub plans: &'n Plans,
    padding: Option<Padding>,
}

impl<'n, 'm> NpuDecoder<'n, 'm> {
    pub fn new(npu: &'n mut Interpreter<'m>, plans: &'n Plans) -> Self {
        Self {
            npu,
            plans,
            padding: None,
        }
    }
}

impl NpuDecoder<'_, '_> {
    /// Continues from a saved prefill state (`state`, made by this path's
    /// prefill plan): its cache is read with that plan's padding.
    pub fn resume(&mut self, state: &crate::xdna2::interpreter::CacheState) {
        self.padding = self.plans.prefill.padding;
        self.npu.resume(state);
    }

    /// The saved state of the last prefill, to resume from later.
    pub fn cache_state(&self) -> crate::xdna2::interpreter::CacheState {
        self.npu.cache_state()
    }

    /// The position of layer `layer`'s first held slot.
    pub fn kv_first(&self, layer: usize) -> usize {
        self.npu.kv_first(layer)
    }
}

impl ForcedDecoder for NpuDecoder<'_, '_> {
    type Error = ExecError;

    fn prefill(&mut self, prompt: &[u32]) -> Result<Vec<f32>, ExecError> {
        self.padding = self.plans.prefill.padding;
        self.npu.prefill(&self.plans.prefill, prompt)
    }

    fn decode(&mut self, token: u32) -> Result<Vec<f32>, ExecError> {
        self.padding = self.plans.decode.padding;
        self.npu.decode(&self.plans.decode, token)
    }

    fn kv(&self, layer: usize) -> (Vec<f32>, Vec<f32>) {
        let (keys, values) = self.npu.kv(layer);
        // A padded plan caches padded heads; its real elements are what the
        // unpadded plan would hold (`xdna2::padding`), the rest are zeros.
        let real = |cache: &[u16]| {
            let bits = self
                .padding
                .map_or_else(|| cache.to_vec(), |p| p.real_kv(cache));
            crate::bf16::to_f32_vec(&bits)
        };
        (real(keys), real(values))
    }
}

impl ForcedDecoder for Reference<'_> {
    type Error = ReferenceError;

    fn prefill(&mut self, prompt: &[u32]) -> Result<Vec<f32>, ReferenceError> {
        self.reset();
        Ok(Reference::prefill(self, prompt, LogitRows::Last)?
            .logits
            .data)
    }

    fn decode(&mut self, token: u32) -> Result<Vec<f32>, ReferenceError> {
        self.decode_step(token)
    }

    fn kv(&self, layer: usize) -> (Vec<f32>, Vec<f32>) {
        let (k, v) = Reference::kv(self, layer);
        (k.to_vec(), v.to_vec())
    }
}

/// Runs `prompt` on the NPU path of `plans`, fed the tokens of `reference`, and
/// measures the errors of the module documentation.
pub fn teacher_forced(
    npu: &mut Interpreter<'_>,
    plans: &Plans,
    prompt: &[u32],
    reference: &ReferenceRun,
) -> Result<ForcedRun, ExecError> {
    forced_run(&mut NpuDecoder::new(npu, plans), prompt, reference)
}

/// Runs `prompt` on `decoder`, fed the tokens of `reference`, and measures the
/// errors of the module documentation.
pub fn forced_run<D: ForcedDecoder>(
    decoder: &mut D,
    prompt: &[u32],
    reference: &ReferenceRun,
) -> Result<ForcedRun, D::Error> {
    let mut logits = decoder.prefill(prompt)?;
    let kv_prefill = kv_error(decoder, reference, &reference.kv_prefill);
    let mut run = ForcedRun {
        steps: Vec::with_capacity(reference.steps.len()),
        errors: DecodeErrors {
            logits: Worst::none(),
            kv_prefill,
            kv_decode: Worst::none(),
        },
        non_finite: 0,
    };
    let mut forced = reference.forced_tokens();
    for (step, expected) in reference.logits.iter().enumerate() {
        run.non_finite += super::gate::non_finite(&logits);
        run.errors
            .logits
            .keep(logits_error(&logits, expected), || format!("step {step}"));
        run.steps
            .push(GreedyStep::from_logits(&logits, reference.top_k));
        let Some(token) = forced.next() else {
            break;
        };
        logits = decoder.decode(token)?;
    }
    run.errors.kv_decode = kv_error(decoder, reference, &reference.kv);
    Ok(run)
}

/// `max |ours − expected| / max |expected|` of one step's logits; NaN when the
/// vocabularies differ.
pub(super) fn logits_error(logits: &[f32], expected: &[f32]) -> f64 {
    if logits.len() == expected.len() {
        max_rel(|i| logits[i], expected, expected.len()).0
    } else {
        f64::NAN
    }
}

/// The logits error of a short teacher-forced run: `prompt`'s prefill and the
/// first `steps` decode steps fed the reference's tokens, each step's logits
/// against the reference's (phases 4 and 5 probe every numerics change with it
/// before timing it, so a change that breaks the arithmetic is seen by the
/// phase that makes it, kept or not).
pub fn teacher_forced_logits(
    npu: &mut Interpreter<'_>,
    plans: &Plans,
    prompt: &[u32],
    reference: &ReferenceRun,
    steps: usize,
) -> Result<Worst, ExecError> {
    let mut worst = Worst::none();
    let mut logits = npu.prefill(&plans.prefill, prompt)?;
    let mut forced = reference.forced_tokens();
    for (step, expected) in reference.logits.iter().take(steps + 1).enumerate() {
        worst.keep(logits_error(&logits, expected), || format!("step {step}"));
        let Some(token) = forced.next().filter(|_| step < steps) else {
            break;
        };
        logits = npu.decode(&plans.decode, token)?;
    }
    Ok(worst)
}

/// The worst layer's cache error of `decoder` against the reference's cache
/// `expected` (after prefill or after the last step), over every slot either
/// side holds.
fn kv_error<D: ForcedDecoder>(
    decoder: &D,
    reference: &ReferenceRun,
    expected: &[(Vec<f32>, Vec<f32>)],
) -> Worst {
    let mut worst = Worst::none();
    let width = reference.kv_width;
    for (layer, (keys, values)) in expected.iter().enumerate() {
        let (ours_keys, ours_values) = decoder.kv(layer);
        for (name, ours, theirs) in [("keys", ours_keys, keys), ("values", ours_values, values)] {
            let len = theirs.len().max(ours.len());
            let (e, at) = max_rel(|i| ours.get(i).copied().unwrap_or(0.0), theirs, len);
            worst.keep(e, || {
                format!("layer {layer} {name}, slot {}", at / width.max(1))
            });
        }
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_rel_scales_by_the_reference_and_counts_missing_values_as_zeros() {
        let (e, at) = max_rel(|i| [1.0, 2.5][i], &[1.0, 2.0], 2);
        assert_eq!((e, at), (0.25, 1));
        let (e, at) = max_rel(|i| [1.0, 2.0, 4.0][i], &[1.0, 2.0], 3);
        assert_eq!((e, at), (2.0, 2));
        assert!(max_rel(|_| f32::NAN, &[1.0], 1).0.is_nan());
        assert_eq!(max_rel(|_| 0.0, &[0.0], 1).0, 0.0);
    }

    #[test]
    fn the_worst_error_wins_and_nan_wins_over_everything() {
        let mut w = Worst::none();
        w.keep(0.1, || "a".into());
        w.keep(0.05, || "b".into());
        assert_eq!(w.at, "a");
        w.keep(f64::NAN, || "c".into());
        w.keep(1.0, || "d".into());
        assert_eq!(w.at, "c");
    }
}
