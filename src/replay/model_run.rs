//! Model-level numerical runs for `--functional full`: the emulator executes the
//! deployment's plans on the model's weights (`xdna2::interpreter`) and the CPU f32
//! reference runs the same prompts; the block, diagnosis and verify gates are
//! recomputed from the two by the executor's own definitions of them
//! (`exec::gates::block`, `exec::gates::verify`).
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

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use skillc_runtime::exec::design::Plans;
use skillc_runtime::exec::gates::block::{BlockComparison, BlockThresholds};
use skillc_runtime::exec::gates::decode::ReferenceRun;
use skillc_runtime::exec::gates::floor::DecodeLimits;
use skillc_runtime::exec::gates::gate::{min_or_nan, GateCheck, ThresholdSource};
use skillc_runtime::exec::gates::topk::TopKGate;
use skillc_runtime::exec::gates::verify::{
    diagnose_layers, reference_runs, verify_gates, verify_on,
};
use skillc_runtime::model::arch::Architecture;
use skillc_runtime::model::oracle::{LogitRows, Reference, ReferenceError};
use skillc_runtime::model::tensor::BfTensor;
use skillc_runtime::model::weights::{LayerWeights, Weights};
use skillc_runtime::model::Model;
use skillc_runtime::rng::SplitMix64;
use skillc_runtime::xdna2::builder::{plan_for, PlanError};
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::interpreter::{ExecError, Interpreter, NpuPath};
use skillc_runtime::xdna2::plan::{Phase, Plan, PlanOptions};

use skillc_runtime::ops::{BufferKey, Metric, RopeConvention};

use super::state::State;

/// Rows of the prefill plans the model-level runs execute.
pub const PROMPT_ROWS: usize = 256;
/// Tokens per seeded prompt.
pub const PROMPT_TOKENS: usize = 16;

/// What a model-level action asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Run {
    /// The NPU side fed the reference's greedy tokens, judged by the verification
    /// gates: teacher-forced logits and KV cache, top-k set check at every step.
    Verify(TopKGate),
    /// One layer's output against the reference's, at the action's thresholds
    /// (the reference system's where it recorded none).
    Block {
        layer: usize,
        cosine_min: Option<f64>,
        position_min: Option<f64>,
    },
    /// Every layer's output against the reference's.
    Diagnose,
}

/// The metrics of one run and whether its gate passed.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub values: Vec<(Metric, f64)>,
    pub pass: bool,
}

impl Outcome {
    /// The language's metrics of `gates`, in order, and whether all passed (the
    /// runtime's own measures, such as the teacher-forced errors, only vote).
    fn of(gates: &[GateCheck]) -> Self {
        Outcome {
            values: gates
                .iter()
                .filter_map(|g| Some((g.metric.language()?, g.value)))
                .collect(),
            pass: gates.iter().all(|g| g.passed),
        }
    }
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

/// The reference side of a verification: its greedy runs of the prompts and the
/// decode gates' limits from the bf16-storage floor, which no deployment state
/// changes.
struct ReferenceSide {
    runs: Vec<ReferenceRun>,
    limits: DecodeLimits,
}

/// Runs model-level checks, remembering results by everything that changes them.
pub struct Runner {
    seed: u64,
    cache: BTreeMap<String, Result<Outcome, ModelRunError>>,
    references: BTreeMap<(usize, TopKGate), ReferenceSide>,
}

impl Runner {
    pub fn new(seed: u64) -> Self {
        Runner {
            seed,
            cache: BTreeMap::new(),
            references: BTreeMap::new(),
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
        &mut self,
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
            Run::Verify(gate) => {
                let decode = plan(
                    model,
                    device,
                    Phase::Decode,
                    PROMPT_TOKENS + gate.tokens + 1,
                    &state.options(Phase::Decode),
                )?;
                let reference = match self.references.entry((prompts.len(), gate)) {
                    Entry::Occupied(known) => known.into_mut(),
                    Entry::Vacant(slot) => {
                        let (runs, _) = reference_runs(model, &prompts, gate)?;
                        let limits = DecodeLimits::measure(model, &prompts, &runs)?;
                        slot.insert(ReferenceSide { runs, limits })
                    }
                };
                let plans = Plans { prefill, decode };
                let v = verify_on(&mut npu, &plans, &prompts, &reference.runs, None)?;
                let source = ThresholdSource::rule("every prompt passes the top-k set check");
                let gates = verify_gates(&v, &reference.limits, gate, prompts.len(), source);
                Ok(Outcome::of(&gates))
            }
            Run::Block {
                layer,
                cosine_min,
                position_min,
            } => {
                let (npu_layers, ref_layers) =
                    layer_outputs(&mut npu, &mut reference, &prefill, &prompts[0])?;
                let (Some(ours), Some(theirs)) = (npu_layers.get(layer), ref_layers.get(layer))
                else {
                    return Err(ModelRunError::NoLayer(layer));
                };
                let arch = &model.arch;
                let block = BlockComparison::of(ours, theirs, arch.hidden_size);
                let thresholds = BlockThresholds::recorded(cosine_min, position_min, arch.head_dim);
                Ok(Outcome::of(&block.gates(&thresholds, BTreeMap::new())))
            }
            Run::Diagnose => {
                let (npu_layers, ref_layers) =
                    layer_outputs(&mut npu, &mut reference, &prefill, &prompts[0])?;
                let theirs: Vec<&[f32]> = ref_layers.iter().map(Vec::as_slice).collect();
                let table = diagnose_layers(&npu_layers, &theirs, model.arch.hidden_size);
                let cosines: Vec<f64> = table.iter().map(|d| d.cosine).collect();
                Ok(Outcome {
                    values: vec![(Metric::Cosine, min_or_nan(&cosines))],
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
