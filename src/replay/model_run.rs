//! Model-level numerical runs for `--functional full`: the emulator executes the
//! deployment's plans on the model's weights (`xdna2::interpreter`) and the CPU f32
//! reference runs the same prompts; the block, diagnosis and verify gates are
//! recomputed from the two.
//!
//! Prompts are seeded token ids (no tokenizer is needed). Prefill plans run at
//! [`PROMPT_ROWS`] rows: the deployment pads prompts to its fixed row count, and
//! padding cannot change a real row under the causal mask, so fewer rows give the
//! same real rows for a fraction of the work.
//!
//! Two deployment states of the trajectory change what the NPU side computes,
//! and are reproduced exactly on its weights, never on the reference's:
//! interleaved RoPE pairs equal half-split RoPE on Q and K rows permuted within
//! each head (attention scores are dot products, which a common permutation
//! keeps), and weight buffers keyed per kernel leave every layer with the
//! weights written last, the last layer's.

use std::collections::BTreeMap;

use skillc_runtime::model::arch::Architecture;
use skillc_runtime::model::oracle::{blocks, LogitRows, Reference, ReferenceError};
use skillc_runtime::model::tensor::BfTensor;
use skillc_runtime::model::weights::{LayerWeights, Weights};
use skillc_runtime::model::Model;
use skillc_runtime::rng::SplitMix64;
use skillc_runtime::xdna2::builder::{plan_for, PlanError};
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::interpreter::{ExecError, Interpreter, NpuPath};
use skillc_runtime::xdna2::numerics::cosine;
use skillc_runtime::xdna2::plan::{Phase, Plan, PlanOptions};

use skillc_runtime::ops::{BufferKey, RopeConvention};

use super::state::State;

/// Rows of the prefill plans the model-level runs execute.
pub const PROMPT_ROWS: usize = 256;
/// Tokens per seeded prompt.
pub const PROMPT_TOKENS: usize = 16;

/// What a model-level action asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// Greedy decode on both sides with the top-k set check at the first divergence.
    Verify { tokens: usize, top_k: usize },
    /// One layer's output against the reference's.
    Block { layer: usize },
    /// Every layer's output against the reference's.
    Diagnose,
}

/// The metrics of one run and whether its gate passed.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub values: Vec<(&'static str, f64)>,
    pub pass: bool,
}

/// Why a model-level run could not be made.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelRunError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Npu(#[from] ExecError),
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    #[error("the model has no layer {0}")]
    NoLayer(usize),
}

/// Runs model-level checks, remembering results by everything that changes them.
pub struct Runner {
    seed: u64,
    cache: BTreeMap<String, Result<Outcome, ModelRunError>>,
}

impl Runner {
    pub fn new(seed: u64) -> Self {
        Runner {
            seed,
            cache: BTreeMap::new(),
        }
    }

    /// The outcome of `run` with `prompts` prompts in deployment `state`.
    pub fn run(
        &mut self,
        model: &Model,
        device: &Device,
        state: &State,
        run: Run,
        prompts: usize,
    ) -> Result<Outcome, ModelRunError> {
        let key = format!(
            "{run:?}/{prompts}/{:?}/{}/{}/{}",
            state.rope,
            state.weight_buffers,
            numerics_key(&state.options(Phase::Prefill)),
            numerics_key(&state.options(Phase::Decode)),
        );
        if let Some(done) = self.cache.get(&key) {
            return done.clone();
        }
        let outcome = self.execute(model, device, state, run, prompts);
        self.cache.insert(key, outcome.clone());
        outcome
    }

    fn execute(
        &self,
        model: &Model,
        device: &Device,
        state: &State,
        run: Run,
        prompts: usize,
    ) -> Result<Outcome, ModelRunError> {
        let npu_weights = npu_weights(&model.arch, &model.weights, state);
        let mut npu = Interpreter::new(device, &model.arch, &npu_weights, NpuPath::CORRECT);
        let mut reference = Reference::new(model)?;
        let prompts: Vec<Vec<u32>> = (0..prompts.max(1))
            .map(|i| self.prompt(&model.arch, i))
            .collect();
        let prefill = plan(
            model,
            device,
            Phase::Prefill,
            PROMPT_ROWS,
            &state.options(Phase::Prefill),
        )?;
        match run {
            Run::Verify { tokens, top_k } => {
                let decode = plan(
                    model,
                    device,
                    Phase::Decode,
                    PROMPT_TOKENS + tokens + 1,
                    &state.options(Phase::Decode),
                )?;
                let mut agree = 0;
                let mut nan = 0;
                for prompt in &prompts {
                    let (ok, bad) = verify_prompt(
                        &mut npu,
                        &mut reference,
                        &prefill,
                        &decode,
                        prompt,
                        tokens,
                        top_k,
                    )?;
                    agree += usize::from(ok);
                    nan += bad;
                }
                Ok(Outcome {
                    values: vec![("top_k_agree", agree as f64), ("nan_count", nan as f64)],
                    pass: agree == prompts.len() && nan == 0,
                })
            }
            Run::Block { layer } => {
                let (npu_layers, ref_layers) =
                    layer_outputs(&mut npu, &mut reference, &prefill, &prompts[0])?;
                let (Some(ours), Some(theirs)) = (npu_layers.get(layer), ref_layers.get(layer))
                else {
                    return Err(ModelRunError::NoLayer(layer));
                };
                let hidden = model.arch.hidden_size;
                let per_position = ours
                    .chunks(hidden)
                    .zip(theirs.chunks(hidden))
                    .map(|(a, b)| cosine(a, b))
                    .fold(f64::INFINITY, f64::min);
                let whole = cosine(ours, theirs);
                let nan = ours.iter().filter(|v| !v.is_finite()).count();
                Ok(Outcome {
                    values: vec![
                        ("cosine", whole),
                        ("position_cosine_min", per_position),
                        ("nan_count", nan as f64),
                    ],
                    pass: nan == 0,
                })
            }
            Run::Diagnose => {
                let (npu_layers, ref_layers) =
                    layer_outputs(&mut npu, &mut reference, &prefill, &prompts[0])?;
                let worst = npu_layers
                    .iter()
                    .zip(&ref_layers)
                    .map(|(a, b)| cosine(a, b))
                    .fold(f64::INFINITY, f64::min);
                Ok(Outcome {
                    values: vec![("cosine", worst)],
                    pass: true,
                })
            }
        }
    }

    fn prompt(&self, arch: &Architecture, index: usize) -> Vec<u32> {
        let mut rng = SplitMix64::for_stream(self.seed, &format!("replay.prompt.{index}"));
        (0..PROMPT_TOKENS)
            .map(|_| (rng.next_u64() % arch.vocab_size as u64) as u32)
            .collect()
    }
}

/// Plan options as they affect the numbers: call grouping, buffer classes,
/// single buffering and the LM head's row partitions do not (the executor runs
/// the same launches, row by row, on the same values).
fn numerics_key(options: &PlanOptions) -> String {
    let o = PlanOptions {
        merge_launches: false,
        static_weights: false,
        mark_intermediates: false,
        shared_intermediates: false,
        omit_pingpong: false,
        lm_head_parts: 1,
        ..options.clone()
    };
    serde_json::to_string(&o).unwrap_or_default()
}

fn plan(
    model: &Model,
    device: &Device,
    phase: Phase,
    seq_len: usize,
    options: &PlanOptions,
) -> Result<Plan, PlanError> {
    plan_for("replay", &model.arch, device, phase, seq_len, options)
}

/// One prompt of the verify gate: both sides greedy-decode; at the first
/// divergence each side's token must be in the other's top k, then it stops.
/// Returns whether it passed and how many non-finite logits the NPU side gave.
fn verify_prompt(
    npu: &mut Interpreter<'_>,
    reference: &mut Reference<'_>,
    prefill: &Plan,
    decode: &Plan,
    prompt: &[u32],
    tokens: usize,
    top_k: usize,
) -> Result<(bool, usize), ModelRunError> {
    let mut ours = npu.prefill(prefill, prompt)?;
    reference.reset();
    let mut theirs = reference.prefill(prompt, LogitRows::Last)?.logits.data;
    let mut nan = 0;
    for _ in 0..tokens {
        nan += ours.iter().filter(|v| !v.is_finite()).count();
        let (a, b) = (blocks::argmax(&ours), blocks::argmax(&theirs));
        if a != b {
            let in_top = |logits: &[f32], token: usize| {
                blocks::top_k(logits, top_k)
                    .iter()
                    .any(|(t, _)| *t == token)
            };
            return Ok((in_top(&ours, b) && in_top(&theirs, a), nan));
        }
        ours = npu.decode(decode, a as u32)?;
        theirs = reference.decode_step(b as u32)?;
    }
    Ok((nan == 0, nan))
}

/// Each layer's output residual stream, f32, real rows only.
type Layers = Vec<Vec<f32>>;

/// Every layer's output on the real rows of `prompt`, NPU side and reference.
fn layer_outputs(
    npu: &mut Interpreter<'_>,
    reference: &mut Reference<'_>,
    prefill: &Plan,
    prompt: &[u32],
) -> Result<(Layers, Layers), ModelRunError> {
    npu.capture_layers(true);
    npu.prefill(prefill, prompt)?;
    let ours = npu.take_layer_outputs();
    reference.reset();
    let theirs = reference
        .prefill(prompt, LogitRows::Last)?
        .layer_outputs
        .into_iter()
        .map(|m| m.data)
        .collect();
    Ok((ours, theirs))
}

/// The weights the NPU side runs with in `state`.
fn npu_weights(arch: &Architecture, weights: &Weights, state: &State) -> Weights {
    let mut w = weights.clone();
    if state.rope == RopeConvention::Interleaved {
        for layer in &mut w.layers {
            layer.q_proj = pair_rows(&layer.q_proj, arch.head_dim);
            layer.k_proj = pair_rows(&layer.k_proj, arch.head_dim);
        }
    }
    if state.weight_buffers == BufferKey::Shared {
        let last = w.layers.len().saturating_sub(1);
        if let Some(source) = w.layers.last().cloned() {
            for (i, layer) in w.layers.iter_mut().enumerate().take(last) {
                *layer = layer_as(&source, last, i);
            }
        }
    }
    w
}

/// Layer `from`'s weights under layer `to`'s tensor names (the executor finds
/// weights by checkpoint name).
fn layer_as(source: &LayerWeights, from: usize, to: usize) -> LayerWeights {
    let (old, new) = (format!("layers.{from}."), format!("layers.{to}."));
    let rename = |t: &BfTensor| {
        BfTensor::owned(
            t.name().replace(&old, &new),
            t.shape().to_vec(),
            t.bits().to_vec(),
        )
    };
    source.map(&rename)
}

/// Rows of an `[heads·hd, in]` projection reordered within each head so that
/// half-split RoPE on them rotates the pairs interleaved RoPE rotates on the
/// original rows: new row j takes old row 2j, new row j + hd/2 old row 2j + 1.
fn pair_rows(tensor: &BfTensor, head_dim: usize) -> BfTensor {
    let cols = tensor.cols();
    let half = head_dim / 2;
    let mut bits = vec![0u16; tensor.len()];
    for row in 0..tensor.rows() {
        let (head, j) = (row / head_dim, row % head_dim);
        let source = head * head_dim + if j < half { 2 * j } else { 2 * (j - half) + 1 };
        bits[row * cols..(row + 1) * cols].copy_from_slice(tensor.row(source));
    }
    BfTensor::owned(tensor.name(), tensor.shape().to_vec(), bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairing_rows_moves_even_rows_to_the_first_half_of_each_head() {
        let bits: Vec<u16> = (0..8).collect();
        let t = BfTensor::owned("q", vec![8, 1], bits);
        let paired = pair_rows(&t, 4);
        assert_eq!(paired.bits(), &[0, 2, 1, 3, 4, 6, 5, 7]);
    }
}
