//! The CPU f32 reference: the oracle every numerical gate compares against.
//!
//! Weights stay as loaded (bf16, or a GGUF file's packed blocks, read at their
//! exact dequantized values), every activation, the KV cache, norms, RoPE
//! and softmax are f32, following transformers' eager float32 path:
//! embedding (× √hidden for Gemma) → per layer [RMSNorm → q/k/v (+bias) → q/k
//! RMSNorm → RoPE (the layer's base) → GQA causal attention over the KV cache
//! (within the window on sliding-window layers) → o_proj (→ sandwich norm) →
//! residual → RMSNorm → gated MLP (→ sandwich norm) → residual] → final RMSNorm
//! → LM head (→ Gemma-2's logit soft-cap). Every norm is the architecture's
//! kind (RMSNorm, or StableLM's and OLMo's LayerNorm) and applies its weight
//! as the architecture says (`w`, Gemma's `1 + w`, none in OLMo) and its
//! bias (StableLM); RoPE rotates the partial rotary dimensions only where the
//! model says so, and attention scores are soft-capped where it caps them.
//!
//! Sliding-window layers keep only the window in their cache: once a position
//! can no longer be seen by any later query (it is `window` or more behind the
//! next one) its keys and values are dropped, as transformers' sliding-window
//! cache does, so decode beyond the window attends to exactly the last
//! `window` positions.
//!
//! [`Reference::with_storage`] rounds chosen activations to bf16 where they
//! are stored ([`storage`]), the floor of bf16 storage between kernels that
//! the decode gates' limits are derived from; by default nothing is.
//!
//! Numerics: one token's projections are GEMVs with a fixed summation order
//! (identical on every machine); several tokens' go through the blocked GEMM,
//! which uses FMA where the CPU has it. Against the transformers fixtures both
//! stay near 1e-6 of the tensors' scale (`tests/fixtures.rs`).
//!
//! ```no_run
//! # use skillc_runtime::model::{Model, oracle::{Reference, LogitRows}};
//! # fn demo(model: &Model) -> Result<(), Box<dyn std::error::Error>> {
//! let mut reference = Reference::new(model)?;
//! let prefill = reference.prefill(&[1, 2, 3], LogitRows::Last)?;
//! let next = reference.decode_step(7)?; // logits at position 3
//! let tokens = Reference::new(model)?.greedy(&[1, 2, 3], 16)?;
//! # Ok(()) }
//! ```

pub mod blocks;
pub mod compare;
pub mod gemm;
pub mod linear;
pub mod storage;

use rayon::prelude::*;
use thiserror::Error;

use super::arch::Architecture;
use super::weights::{LayerWeights, NormTensors, Weights};
use super::Model;
use storage::{Bf16Storage, StoredTensor};

/// Why the reference refused to run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReferenceError {
    #[error("token id {id} at prompt position {index} is outside the vocabulary (size {vocab})")]
    TokenOutOfRange { id: u32, index: usize, vocab: usize },
    #[error("the weights have {weights} layers but the architecture {arch}")]
    LayerCount { weights: usize, arch: usize },
    #[error("the prompt is empty")]
    EmptyPrompt,
}

/// Which prefill rows get logits: the LM head over a large vocabulary is the
/// biggest single GEMM, and generation only needs the last row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitRows {
    Last,
    All,
}

/// A row-major f32 matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Matrix {
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Self {
            rows,
            cols,
            data: vec![0.0; rows * cols],
        }
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    pub fn last_row(&self) -> &[f32] {
        self.row(self.rows - 1)
    }
}

/// Everything a prefill computes, for the gates.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefillOutput {
    /// Token embeddings (the input of layer 0), `[T, hidden]`.
    pub embeddings: Matrix,
    /// Residual stream after each decoder layer, `[T, hidden]` each.
    pub layer_outputs: Vec<Matrix>,
    /// After the final norm, `[T, hidden]`.
    pub final_hidden: Matrix,
    /// `[T, vocab]` for [`LogitRows::All`], `[1, vocab]` (last position) for
    /// [`LogitRows::Last`].
    pub logits: Matrix,
}

/// What [`Reference::generate`] produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub tokens: Vec<u32>,
    /// True when the last token is a stop token (EOS).
    pub stopped: bool,
    /// The logits after the prompt (the first token's).
    pub first_logits: Vec<f32>,
}

/// Keys and values of every layer, `[held positions, kv_dim]` each, f32.
#[derive(Debug, Clone)]
struct KvCache {
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
    /// Per layer, the position of the first row held (above 0 once a
    /// sliding-window layer has dropped what it can no longer see).
    first: Vec<usize>,
    len: usize,
}

/// The reference model with its KV cache.
#[derive(Debug)]
pub struct Reference<'m> {
    arch: &'m Architecture,
    weights: &'m Weights,
    /// The distinct RoPE frequency tables (one, or Gemma's global and local)
    /// and which one each layer uses.
    rope_tables: Vec<Vec<f32>>,
    layer_rope: Vec<usize>,
    cache: KvCache,
    /// The tensors rounded to bf16 where they are stored (none: plain f32).
    storage: Bf16Storage,
}

impl<'m> Reference<'m> {
    /// A reference with an empty cache.
    pub fn new(model: &'m Model) -> Result<Self, ReferenceError> {
        Self::from_parts(&model.arch, &model.weights)
    }

    /// Like [`Reference::new`] for an architecture and weights held apart
    /// (e.g. weights the executor rearranged); `weights` must match `arch`.
    pub fn from_parts(
        arch: &'m Architecture,
        weights: &'m Weights,
    ) -> Result<Self, ReferenceError> {
        if weights.layers.len() != arch.num_layers {
            return Err(ReferenceError::LayerCount {
                weights: weights.layers.len(),
                arch: arch.num_layers,
            });
        }
        let layers = arch.num_layers;
        let mut rope_tables: Vec<Vec<f32>> = Vec::new();
        let mut layer_rope = Vec::with_capacity(layers);
        for layer in 0..layers {
            let table = blocks::layer_inv_freq(arch, layer);
            let index = match rope_tables.iter().position(|t| *t == table) {
                Some(index) => index,
                None => {
                    rope_tables.push(table);
                    rope_tables.len() - 1
                }
            };
            layer_rope.push(index);
        }
        Ok(Self {
            arch,
            weights,
            rope_tables,
            layer_rope,
            cache: KvCache {
                keys: vec![Vec::new(); layers],
                values: vec![Vec::new(); layers],
                first: vec![0; layers],
                len: 0,
            },
            storage: Bf16Storage::none(),
        })
    }

    /// The same reference storing `storage`'s tensors in bf16 (the error floor
    /// of bf16 storage between kernels; [`storage`]).
    pub fn with_storage(mut self, storage: Bf16Storage) -> Self {
        self.storage = storage;
        self
    }

    /// The tensors this reference stores in bf16.
    pub fn storage(&self) -> &Bf16Storage {
        &self.storage
    }

    /// Positions in the KV cache (the position the next token takes).
    pub fn position(&self) -> usize {
        self.cache.len
    }

    /// Layer `layer`'s cached keys and values, `[positions, kv_dim]` f32 each
    /// (keys after RoPE), what the decode gates compare the NPU's cache with.
    pub fn kv(&self, layer: usize) -> (&[f32], &[f32]) {
        match (self.cache.keys.get(layer), self.cache.values.get(layer)) {
            (Some(k), Some(v)) => (k, v),
            _ => (&[], &[]),
        }
    }

    /// Empties the KV cache.
    pub fn reset(&mut self) {
        for layer in self.cache.keys.iter_mut().chain(&mut self.cache.values) {
            layer.clear();
        }
        self.cache.first.fill(0);
        self.cache.len = 0;
    }

    /// Runs `ids` at the next positions (0.. on a fresh reference), filling the
    /// cache, and returns every intermediate the gates compare.
    pub fn prefill(
        &mut self,
        ids: &[u32],
        rows: LogitRows,
    ) -> Result<PrefillOutput, ReferenceError> {
        self.forward(ids, rows, true)
    }

    /// Feeds one token at the next position; returns its logits.
    pub fn decode_step(&mut self, token: u32) -> Result<Vec<f32>, ReferenceError> {
        Ok(self.forward(&[token], LogitRows::Last, false)?.logits.data)
    }

    /// Greedy continuation of `prompt`: `n` tokens, each the argmax of the
    /// previous step's logits (EOS does not stop it). Starts from the current
    /// cache (empty on a fresh reference).
    pub fn greedy(&mut self, prompt: &[u32], n: usize) -> Result<Vec<u32>, ReferenceError> {
        let mut tokens = Vec::with_capacity(n);
        if n == 0 {
            return Ok(tokens);
        }
        let mut logits = self.prefill(prompt, LogitRows::Last)?.logits.data;
        loop {
            let next = blocks::argmax(&logits) as u32;
            tokens.push(next);
            if tokens.len() == n {
                return Ok(tokens);
            }
            logits = self.decode_step(next)?;
        }
    }

    /// Greedy continuation of `prompt` that stops after a token of `stop`
    /// (which is kept, last) or after `max_new` tokens. Also returns the
    /// logits after the prompt.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        max_new: usize,
        stop: &[u32],
    ) -> Result<Generation, ReferenceError> {
        let first = self.prefill(prompt, LogitRows::Last)?.logits.data;
        let mut tokens = Vec::with_capacity(max_new);
        let mut logits = first.clone();
        while tokens.len() < max_new {
            let next = blocks::argmax(&logits) as u32;
            tokens.push(next);
            if stop.contains(&next) {
                return Ok(Generation {
                    tokens,
                    stopped: true,
                    first_logits: first,
                });
            }
            if tokens.len() < max_new {
                logits = self.decode_step(next)?;
            }
        }
        Ok(Generation {
            tokens,
            stopped: false,
            first_logits: first,
        })
    }

    fn check_tokens(&self, ids: &[u32]) -> Result<(), ReferenceError> {
        if ids.is_empty() {
            return Err(ReferenceError::EmptyPrompt);
        }
        let vocab = self.arch.vocab_size;
        if let Some((index, &id)) = ids.iter().enumerate().find(|(_, &id)| id as usize >= vocab) {
            return Err(ReferenceError::TokenOutOfRange { id, index, vocab });
        }
        Ok(())
    }

    fn forward(
        &mut self,
        ids: &[u32],
        rows: LogitRows,
        record: bool,
    ) -> Result<PrefillOutput, ReferenceError> {
        self.check_tokens(ids)?;
        let (h, t) = (self.arch.hidden_size, ids.len());
        let start = self.cache.len;
        let mut x = Matrix::zeros(t, h);
        let scale = self.arch.embedding_scale();
        for (row, &id) in x.data.chunks_exact_mut(h).zip(ids) {
            self.weights.embed_tokens.row_values(id as usize, row);
            if self.arch.scale_embeddings {
                row.iter_mut().for_each(|v| *v *= scale);
            }
        }
        self.storage.store(StoredTensor::Residual, &mut x.data);
        let embeddings = if record {
            x.clone()
        } else {
            Matrix::zeros(0, h)
        };
        let angles: Vec<Vec<(Vec<f32>, Vec<f32>)>> = self
            .rope_tables
            .iter()
            .map(|table| {
                (start..start + t)
                    .map(|p| blocks::rope_angles(table, p))
                    .collect()
            })
            .collect();
        let mut layer_outputs = Vec::new();
        for (i, layer) in self.weights.layers.iter().enumerate() {
            let angles = &angles[self.layer_rope[i]];
            self.attention_block(i, layer, &mut x, start, angles);
            self.mlp_block(layer, &mut x);
            if record {
                layer_outputs.push(x.clone());
            }
        }
        self.cache.len += t;
        self.drop_unseen_positions();
        norm(self.arch, &mut x.data, &self.weights.final_norm);
        self.storage.store(StoredTensor::NormOutputs, &mut x.data);
        let logits = self.logits(&x, rows);
        Ok(PrefillOutput {
            embeddings,
            layer_outputs,
            final_hidden: x,
            logits,
        })
    }

    /// The LM head (with the final soft-cap where the model has one) on rows
    /// of final hidden states (after the final norm), `[rows, vocab]`: the
    /// logits at any position of a prefill from its `final_hidden`.
    pub fn head_logits(&self, final_hidden: &[f32]) -> Vec<f32> {
        let cols = self.arch.hidden_size;
        let hidden = Matrix {
            rows: final_hidden.len() / cols.max(1),
            cols,
            data: final_hidden.to_vec(),
        };
        self.logits(&hidden, LogitRows::All).data
    }

    fn logits(&self, hidden: &Matrix, rows: LogitRows) -> Matrix {
        let head = self.weights.output_projection();
        let (input, t) = match rows {
            LogitRows::All => (&hidden.data[..], hidden.rows),
            LogitRows::Last => (hidden.last_row(), 1),
        };
        let mut logits = Matrix::zeros(t, head.rows());
        linear::matmul(input, t, head, &mut logits.data);
        if let Some(cap) = self.arch.final_logit_softcap {
            let cap = cap as f32;
            logits
                .data
                .iter_mut()
                .for_each(|z| *z = blocks::softcap(*z, cap));
        }
        logits
    }

    /// On sliding-window layers, drops the cached positions no query from the
    /// next position on can see.
    fn drop_unseen_positions(&mut self) {
        let kv_dim = self.arch.kv_dim();
        for layer in 0..self.arch.num_layers {
            let Some(sw) = self.arch.window_of(layer) else {
                continue;
            };
            let keep_from = sw.first_visible(self.cache.len);
            let drop = keep_from.saturating_sub(self.cache.first[layer]);
            if drop > 0 {
                self.cache.keys[layer].drain(..drop * kv_dim);
                self.cache.values[layer].drain(..drop * kv_dim);
                self.cache.first[layer] += drop;
            }
        }
    }

    /// `x += o_proj(attention(norm(x)))`, appending this layer's keys and
    /// values to the cache.
    fn attention_block(
        &mut self,
        i: usize,
        layer: &LayerWeights,
        x: &mut Matrix,
        start: usize,
        angles: &[(Vec<f32>, Vec<f32>)],
    ) {
        let arch = self.arch;
        let (t, d, rot) = (x.rows, arch.head_dim, arch.rotary_dim());
        let (eps, style) = (arch.rms_norm_eps as f32, arch.norm_weight);
        let mut normed = x.clone();
        norm(arch, &mut normed.data, &layer.input_norm);
        let storage = &self.storage;
        storage.store(StoredTensor::NormOutputs, &mut normed.data);
        let project = |w: &super::tensor::BfTensor, bias: Option<&super::tensor::BfTensor>| {
            let mut y = vec![0.0f32; t * w.rows()];
            linear::matmul(&normed.data, t, w, &mut y);
            if let Some(b) = bias {
                linear::add_bias(&mut y, b);
            }
            y
        };
        let mut q = project(&layer.q_proj, layer.q_bias.as_ref());
        let mut k = project(&layer.k_proj, layer.k_bias.as_ref());
        let mut v = project(&layer.v_proj, layer.v_bias.as_ref());
        storage.store(StoredTensor::Values, &mut v);
        if let (Some(qn), Some(kn)) = (&layer.q_norm, &layer.k_norm) {
            blocks::rms_norm_rows_in_place(&mut q, &qn.values(), style, eps);
            blocks::rms_norm_rows_in_place(&mut k, &kn.values(), style, eps);
            storage.store(StoredTensor::NormOutputs, &mut q);
            storage.store(StoredTensor::NormOutputs, &mut k);
        }
        for (qs, (cos, sin)) in q.chunks_exact_mut(arch.q_dim()).zip(angles) {
            qs.chunks_exact_mut(d)
                .for_each(|head| blocks::apply_rope(&mut head[..rot], cos, sin));
        }
        for (ks, (cos, sin)) in k.chunks_exact_mut(arch.kv_dim()).zip(angles) {
            ks.chunks_exact_mut(d)
                .for_each(|head| blocks::apply_rope(&mut head[..rot], cos, sin));
        }
        storage.store(StoredTensor::QkAfterRope, &mut q);
        storage.store(StoredTensor::QkAfterRope, &mut k);
        self.cache.keys[i].extend_from_slice(&k);
        self.cache.values[i].extend_from_slice(&v);
        let (keys, values) = (&self.cache.keys[i], &self.cache.values[i]);
        let (held_from, kv_dim, q_dim) = (self.cache.first[i], arch.kv_dim(), arch.q_dim());
        let window = arch.window_of(i);
        let mut attended = vec![0.0f32; t * q_dim];
        // A row attends to up to every cached position, with every head.
        let row_work = q_dim * (start + t - held_from);
        attended
            .par_chunks_mut(q_dim)
            .zip(q.par_chunks(q_dim))
            .with_min_len(crate::threads::min_len(row_work))
            .enumerate()
            .for_each(|(r, (out, q_row))| {
                let position = start + r;
                let from = window.map_or(0, |sw| sw.first_visible(position)) - held_from;
                let seen = (from * kv_dim)..((position + 1 - held_from) * kv_dim);
                blocks::attention_row(arch, q_row, &keys[seen.clone()], &values[seen], out);
            });
        storage.store(StoredTensor::AttentionContext, &mut attended);
        let mut o = vec![0.0f32; t * arch.hidden_size];
        linear::matmul(&attended, t, &layer.o_proj, &mut o);
        if let Some(sandwich) = &layer.sandwich {
            norm(arch, &mut o, &sandwich.attention_out);
        }
        storage.store(StoredTensor::AttentionOutput, &mut o);
        for (xv, ov) in x.data.iter_mut().zip(&o) {
            *xv += ov;
        }
        storage.store(StoredTensor::Residual, &mut x.data);
    }

    /// `x += down(act(gate(norm(x))) · up(norm(x)))`.
    fn mlp_block(&self, layer: &LayerWeights, x: &mut Matrix) {
        let t = x.rows;
        let f = self.arch.intermediate_size;
        let mut normed = x.clone();
        norm(self.arch, &mut normed.data, &layer.post_attention_norm);
        let storage = &self.storage;
        storage.store(StoredTensor::NormOutputs, &mut normed.data);
        let mut gate = vec![0.0f32; t * f];
        let mut up = vec![0.0f32; t * f];
        linear::matmul(&normed.data, t, &layer.gate_proj, &mut gate);
        linear::matmul(&normed.data, t, &layer.up_proj, &mut up);
        storage.store(StoredTensor::GateUp, &mut gate);
        storage.store(StoredTensor::GateUp, &mut up);
        blocks::gated_activation(self.arch.activation, &mut gate, &up);
        storage.store(StoredTensor::Activation, &mut gate);
        let mut down = vec![0.0f32; t * self.arch.hidden_size];
        linear::matmul(&gate, t, &layer.down_proj, &mut down);
        if let Some(sandwich) = &layer.sandwich {
            norm(self.arch, &mut down, &sandwich.mlp_out);
        }
        storage.store(StoredTensor::MlpOutput, &mut down);
        for (xv, dv) in x.data.iter_mut().zip(&down) {
            *xv += dv;
        }
        storage.store(StoredTensor::Residual, &mut x.data);
    }
}

/// `arch`'s norm with `tensors` on each hidden-wide row of `x`, in place.
fn norm(arch: &Architecture, x: &mut [f32], tensors: &NormTensors) {
    let (w, b) = (tensors.weight_values(), tensors.bias_values());
    let how = (arch.norm_kind, arch.norm_weight, arch.rms_norm_eps as f32);
    blocks::norm_rows_in_place(x, arch.hidden_size, how, w.as_deref(), b.as_deref());
}
