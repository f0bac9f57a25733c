//! Functional execution of a plan on real tensors: every launch runs its
//! kernel (with the hardware numerics of `kernels`), every host op runs the
//! host's f32 computation, buffers hold bf16 bits. A `Session` keeps the host
//! KV cache and the position across a prefill plan and decode plans, as the
//! reference deployment's runner does.
//!
//! Weight buffers read checkpoint tensors without copying where the plan's
//! setup transform is only a change of layout (the GEMM reads a `[N,K]`
//! tensor as the pre-transposed `[K,N]` operand it is); padded or sliced
//! tensors are materialized once per layer and kept.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::device::Device;
use super::host::{add_bias, decode_attention, transpose};
use super::kernels::{
    eltwise_add, embedding, flash_attention, gemm_into, gemv, gemv_swiglu, lm_head_partition,
    qk_rms_norm, rms_norm, rope, rope_lut, silu_mul, softmax, BOperand, KernelError,
};
use super::plan::{pad_heads, Buffer, HostOp, Launch, Phase, Plan, Step, Transform, WeightSource};
use crate::bf16;
use crate::model::arch::Architecture;
use crate::model::oracle::blocks;
use crate::model::weights::Weights;

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("plan refused: {}", .0.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("; "))]
    Refused(Vec<super::constraints::ConstraintViolation>),
    #[error("layer {layer}: {source}")]
    Kernel {
        layer: usize,
        #[source]
        source: KernelError,
    },
    #[error("plan names buffer {0}, which it does not declare")]
    UnknownBuffer(String),
    #[error("buffer {buffer}: checkpoint tensor {tensor} is missing")]
    MissingTensor { buffer: String, tensor: String },
    #[error("buffer {buffer}: {message}")]
    Transform { buffer: String, message: String },
    #[error("{got} tokens do not fit the plan's {rows} rows")]
    TooManyTokens { got: usize, rows: usize },
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("position {position} is beyond the plan's context of {context}")]
    BeyondContext { position: usize, context: usize },
    #[error("a {0:?} plan cannot run here")]
    WrongPhase(Phase),
}

/// Host state across plans: the KV cache (bf16, `[positions, kv_dim]` per
/// layer), the next position, and optionally every layer's output.
pub struct Session<'w> {
    arch: &'w Architecture,
    device: &'w Device,
    /// Checkpoint tensors by name: bits and shape.
    tensors: BTreeMap<&'w str, (&'w [u16], &'w [usize])>,
    inv_freq: Vec<f32>,
    keys: Vec<Vec<u16>>,
    values: Vec<Vec<u16>>,
    position: usize,
    capture: bool,
    /// Residual stream after each layer of the last run (when capturing).
    pub layer_outputs: Vec<Vec<u16>>,
}

/// A weight buffer's contents for one layer.
#[derive(Clone)]
enum WeightData<'w> {
    Borrowed(&'w [u16]),
    Owned(Arc<Vec<u16>>),
}

impl WeightData<'_> {
    fn bits(&self) -> &[u16] {
        match self {
            WeightData::Borrowed(b) => b,
            WeightData::Owned(v) => v,
        }
    }
}

/// One run of a plan: activation buffers, resolved weights.
struct Run<'s, 'w> {
    session: &'s mut Session<'w>,
    plan: &'s Plan,
    memory: BTreeMap<String, Vec<u16>>,
    weights: BTreeMap<(String, usize), WeightData<'w>>,
    /// Real rows (prompt length) in prefill; 1 in decode.
    rows: usize,
    /// Position of the first row.
    base: usize,
}

impl<'w> Session<'w> {
    pub fn new(arch: &'w Architecture, weights: &'w Weights, device: &'w Device) -> Self {
        let tensors = weights
            .tensors()
            .into_iter()
            .map(|t| (t.name(), (t.bits(), t.shape())))
            .collect();
        Session {
            arch,
            device,
            tensors,
            inv_freq: blocks::inv_freq(arch),
            keys: vec![Vec::new(); arch.num_layers],
            values: vec![Vec::new(); arch.num_layers],
            position: 0,
            capture: false,
            layer_outputs: Vec::new(),
        }
    }

    /// Keeps every layer's output residual stream in `layer_outputs`.
    pub fn capture_layers(&mut self, on: bool) {
        self.capture = on;
    }

    /// The position the next token takes.
    pub fn position(&self) -> usize {
        self.position
    }

    pub fn reset(&mut self) {
        self.keys
            .iter_mut()
            .chain(&mut self.values)
            .for_each(Vec::clear);
        self.position = 0;
    }

    /// Runs a prefill plan on `tokens` (padded to the plan's rows with the
    /// last token, which the causal mask keeps from affecting real rows);
    /// returns the logits of the last real token.
    pub fn prefill(&mut self, plan: &Plan, tokens: &[u32]) -> Result<Vec<f32>, ExecError> {
        if plan.phase != Phase::Prefill {
            return Err(ExecError::WrongPhase(plan.phase));
        }
        let last = *tokens.last().ok_or(ExecError::EmptyPrompt)?;
        if tokens.len() > plan.seq_len {
            return Err(ExecError::TooManyTokens {
                got: tokens.len(),
                rows: plan.seq_len,
            });
        }
        plan.check(self.device).map_err(ExecError::Refused)?;
        self.reset();
        let mut ids = tokens.to_vec();
        ids.resize(plan.seq_len, last);
        let mut run = Run::new(self, plan, tokens.len(), 0);
        run.execute(&ids)?;
        let logits = run.logits()?;
        self.position = tokens.len();
        Ok(logits)
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
        let base = self.position;
        let mut run = Run::new(self, plan, 1, base);
        run.execute(&[token])?;
        let logits = run.logits()?;
        self.position += 1;
        Ok(logits)
    }
}

impl<'s, 'w> Run<'s, 'w> {
    fn new(session: &'s mut Session<'w>, plan: &'s Plan, rows: usize, base: usize) -> Self {
        session.layer_outputs.clear();
        Run {
            session,
            plan,
            memory: BTreeMap::new(),
            weights: BTreeMap::new(),
            rows,
            base,
        }
    }

    fn execute(&mut self, ids: &[u32]) -> Result<(), ExecError> {
        let plan = self.plan;
        for step in &plan.prologue {
            self.step(step, 0, ids)?;
        }
        for layer in 0..plan.num_layers {
            for step in &plan.layer {
                self.step(step, layer, ids)?;
            }
            if self.session.capture {
                let x = self.activation("x")?.clone();
                self.session.layer_outputs.push(x);
            }
            self.weights.retain(|(_, l), _| *l != layer);
        }
        for step in &plan.epilogue {
            self.step(step, plan.num_layers, ids)?;
        }
        Ok(())
    }

    fn step(&mut self, step: &Step, layer: usize, ids: &[u32]) -> Result<(), ExecError> {
        match step {
            Step::Call(call) => {
                for launch in &call.launches {
                    self.launch(launch, layer)?;
                }
                Ok(())
            }
            Step::Host(op) => self.host(op, layer, ids),
        }
    }

    fn declared(&self, name: &str) -> Result<&'s Buffer, ExecError> {
        self.plan
            .buffers
            .get(name)
            .ok_or_else(|| ExecError::UnknownBuffer(name.to_string()))
    }

    /// An activation buffer, zero-filled on first use.
    fn activation(&mut self, name: &str) -> Result<&mut Vec<u16>, ExecError> {
        let elements = self.declared(name)?.elements;
        Ok(self
            .memory
            .entry(name.to_string())
            .or_insert_with(|| vec![0; elements]))
    }

    fn take(&mut self, name: &str) -> Result<Vec<u16>, ExecError> {
        let buffer = self.activation(name)?;
        Ok(std::mem::take(buffer))
    }

    fn put(&mut self, name: &str, data: Vec<u16>) {
        self.memory.insert(name.to_string(), data);
    }

    /// Reads an operand: a weight for this layer, or an activation.
    fn read(&mut self, name: &str, layer: usize) -> Result<Vec<u16>, ExecError> {
        if self.declared(name)?.source.is_some() {
            return Ok(self.weight(name, layer)?.bits().to_vec());
        }
        Ok(self.activation(name)?.clone())
    }

    fn weight(&mut self, name: &str, layer: usize) -> Result<WeightData<'w>, ExecError> {
        let key = (name.to_string(), layer);
        if let Some(w) = self.weights.get(&key) {
            return Ok(w.clone());
        }
        let buffer = self.declared(name)?;
        let data = match &buffer.source {
            Some(WeightSource::Tensor {
                name: tensor,
                transforms,
            }) => {
                let tensor = tensor.replace("{layer}", &layer.to_string());
                let (bits, shape) =
                    *self.session.tensors.get(tensor.as_str()).ok_or_else(|| {
                        ExecError::MissingTensor {
                            buffer: name.to_string(),
                            tensor: tensor.clone(),
                        }
                    })?;
                let cols = if shape.len() == 2 { shape[1] } else { 1 };
                materialize(name, bits, cols, transforms)?
            }
            Some(WeightSource::RopeLut { positions, .. }) => {
                WeightData::Owned(Arc::new(rope_lut(&self.session.inv_freq, *positions)))
            }
            None => return Err(ExecError::UnknownBuffer(name.to_string())),
        };
        self.weights.insert(key, data.clone());
        Ok(data)
    }

    /// Whether a weight buffer is stored as the checkpoint's `[out, in]`
    /// tensor that setup pre-transposes.
    fn transposed(&self, name: &str) -> bool {
        matches!(&self.plan.buffers.get(name).and_then(|b| b.source.as_ref()),
            Some(WeightSource::Tensor { transforms, .. }) if transforms.contains(&Transform::Transpose))
    }

    fn launch(&mut self, launch: &Launch, layer: usize) -> Result<(), ExecError> {
        let device = self.session.device;
        let k = |source| ExecError::Kernel { layer, source };
        let out = match launch {
            Launch::Gemm { a, b, out, spec } => {
                let a = self.read(a, layer)?;
                let mut result = self.take(out)?;
                if self.declared(b)?.source.is_some() {
                    let w = self.weight(b, layer)?;
                    // A row view of a partition is unpadded; the GEMM reads the full slot.
                    let mut bits = std::borrow::Cow::Borrowed(w.bits());
                    if bits.len() < spec.k * spec.n {
                        bits.to_mut().resize(spec.k * spec.n, 0);
                    }
                    let operand = if self.transposed(b) {
                        BOperand::NxK(&bits)
                    } else {
                        BOperand::KxN(&bits)
                    };
                    gemm_into(device, spec, &a, operand, &mut result).map_err(k)?;
                } else {
                    let b = self.read(b, layer)?;
                    gemm_into(device, spec, &a, BOperand::KxN(&b), &mut result).map_err(k)?;
                }
                result
            }
            Launch::Gemv {
                w,
                x,
                residual,
                spec,
                ..
            } => {
                let x = self.read(x, layer)?;
                let r = residual
                    .as_deref()
                    .map(|r| self.read(r, layer))
                    .transpose()?;
                let w = self.weight(w, layer)?;
                gemv(device, spec, w.bits(), &x, r.as_deref()).map_err(k)?
            }
            Launch::GemvSwiglu {
                x,
                norm,
                gate,
                up,
                eps,
                spec,
                ..
            } => {
                let x = self.read(x, layer)?;
                let norm = self.read(norm, layer)?;
                let (g, u) = (self.weight(gate, layer)?, self.weight(up, layer)?);
                gemv_swiglu(device, spec, *eps as f32, &x, &norm, g.bits(), u.bits()).map_err(k)?
            }
            Launch::Rmsnorm {
                x,
                weight,
                eps,
                spec,
                ..
            } => {
                let x = self.read(x, layer)?;
                let w = weight.as_deref().map(|w| self.read(w, layer)).transpose()?;
                rms_norm(device, spec, *eps as f32, &x, w.as_deref()).map_err(k)?
            }
            Launch::QkRmsnorm {
                x,
                weight,
                eps,
                spec,
                ..
            } => {
                let x = self.read(x, layer)?;
                let w = self.read(weight, layer)?;
                qk_rms_norm(device, spec, *eps as f32, &x, &w).map_err(k)?
            }
            Launch::Rope { x, lut, spec, .. } => {
                let x = self.read(x, layer)?;
                let lut = self.weight(lut, layer)?;
                rope(device, spec, &x, lut.bits(), self.base).map_err(k)?
            }
            Launch::SiluMul { gate, up, spec, .. } => {
                let (g, u) = (self.read(gate, layer)?, self.read(up, layer)?);
                silu_mul(device, spec, &g, &u).map_err(k)?
            }
            Launch::EltwiseAdd { a, b, spec, .. } => {
                let (a, b) = (self.read(a, layer)?, self.read(b, layer)?);
                eltwise_add(device, spec, &a, &b).map_err(k)?
            }
            Launch::Softmax { x, spec, .. } => {
                let x = self.read(x, layer)?;
                softmax(device, spec, &x).map_err(k)?
            }
            Launch::FlashAttention {
                q, k: key, v, spec, ..
            } => {
                let (q, kk, v) = (
                    self.read(q, layer)?,
                    self.read(key, layer)?,
                    self.read(v, layer)?,
                );
                flash_attention(device, spec, &q, &kk, &v).map_err(k)?
            }
            Launch::LmHeadGemv {
                w,
                x,
                out,
                spec,
                part,
            } => {
                let x = self.read(x, layer)?;
                let w = self.weight(w, layer)?;
                let mut logits = self.take(out)?;
                lm_head_partition(device, spec, *part, w.bits(), &x, &mut logits).map_err(k)?;
                logits
            }
        };
        self.put(launch.output(), out);
        Ok(())
    }

    fn host(&mut self, op: &HostOp, layer: usize, ids: &[u32]) -> Result<(), ExecError> {
        match op {
            HostOp::Embed {
                table, out, hidden, ..
            } => {
                let table = self.weight(table, layer)?;
                let rows = embedding(table.bits(), *hidden, ids)
                    .map_err(|source| ExecError::Kernel { layer, source })?;
                self.put(out, rows);
            }
            HostOp::KvStore { k, v, kv_width, .. } => {
                let n = self.rows * kv_width;
                let (keys, values) = (self.read(k, layer)?, self.read(v, layer)?);
                self.session.keys[layer].extend_from_slice(&keys[..n]);
                self.session.values[layer].extend_from_slice(&values[..n]);
            }
            HostOp::DecodeAttention {
                q,
                out,
                heads,
                kv_heads,
                head_dim,
            } => {
                let q = self.read(q, layer)?;
                let positions = self.base + 1;
                let result = decode_attention(
                    &q,
                    &self.session.keys[layer],
                    &self.session.values[layer],
                    positions,
                    (*heads, *kv_heads, *head_dim),
                );
                self.put(out, result);
            }
            HostOp::Transpose {
                from,
                to,
                rows,
                heads,
                head_dim,
                to_layout,
            } => {
                let x = self.read(from, layer)?;
                self.put(to, transpose(&x, *rows, *heads, *head_dim, *to_layout));
            }
            HostOp::BiasAdd {
                x,
                bias,
                heads,
                head_dim,
                lut,
                ..
            } => {
                let bias = self.read(bias, layer)?;
                let lut = lut.as_deref().map(|l| self.weight(l, layer)).transpose()?;
                let base = self.base;
                let data = self.activation(x)?;
                add_bias(
                    data,
                    &bias,
                    *heads,
                    *head_dim,
                    lut.as_ref().map(|l| l.bits()),
                    base,
                );
            }
            HostOp::Add { a, b, out, .. } => {
                let (a, b) = (self.read(a, layer)?, self.read(b, layer)?);
                let sum = a
                    .iter()
                    .zip(&b)
                    .map(|(&x, &y)| bf16::from_f32(bf16::to_f32(x) + bf16::to_f32(y)))
                    .collect();
                self.put(out, sum);
            }
            HostOp::RmsNorm {
                x,
                weight,
                out,
                cols,
                eps,
                last_row,
            } => {
                let x = self.read(x, layer)?;
                let weight = self.read(weight, layer)?;
                let row = if *last_row { self.rows - 1 } else { 0 };
                let input = bf16::to_f32_vec(&x[row * cols..(row + 1) * cols]);
                let mut normed = vec![0.0f32; *cols];
                blocks::rms_norm(&input, &weight, *eps as f32, &mut normed);
                self.put(out, bf16::from_f32_vec(&normed));
            }
            HostOp::SiluMul { gate, up, out, .. } => {
                let (g, u) = (self.read(gate, layer)?, self.read(up, layer)?);
                let act = g
                    .iter()
                    .zip(&u)
                    .map(|(&g, &u)| bf16::from_f32(blocks::silu(bf16::to_f32(g)) * bf16::to_f32(u)))
                    .collect();
                self.put(out, act);
            }
            HostOp::Matvec { w, x, out, k, .. } => {
                let x32 = bf16::to_f32_vec(&self.read(x, layer)?);
                let w = self.weight(w, layer)?;
                let y = w
                    .bits()
                    .chunks(*k)
                    .map(|row| bf16::from_f32(bf16::dot_bf16_f32(row, &x32)))
                    .collect();
                self.put(out, y);
            }
            HostOp::Scheduling { .. } => {}
        }
        Ok(())
    }

    /// Logits of the last real token.
    fn logits(&mut self) -> Result<Vec<f32>, ExecError> {
        if self.plan.buffers.contains_key("logits") {
            return Ok(bf16::to_f32_vec(self.activation("logits")?));
        }
        // Full-sequence LM head: partitions `logits.{p}` of `[rows, part_n]`.
        let vocab = self.session.arch.vocab_size;
        let row = self.rows - 1;
        let mut logits = Vec::with_capacity(vocab);
        let mut part = 0;
        while let Some(buffer) = self.plan.buffers.get(&format!("logits.{part}")) {
            let width = buffer.elements / self.plan.seq_len;
            let data = self.activation(&format!("logits.{part}"))?;
            logits.extend(
                data[row * width..(row + 1) * width]
                    .iter()
                    .map(|&b| bf16::to_f32(b)),
            );
            part += 1;
        }
        logits.truncate(vocab);
        Ok(logits)
    }
}

/// Applies a weight buffer's setup transforms without copying what it can
/// borrow: `Transpose` is a layout tag read in place, `Rows` a view of the
/// real rows (the zero padding past the tensor is never read).
fn materialize<'w>(
    buffer: &str,
    bits: &'w [u16],
    mut cols: usize,
    transforms: &[Transform],
) -> Result<WeightData<'w>, ExecError> {
    let mut data = WeightData::Borrowed(bits);
    for t in transforms {
        match *t {
            Transform::Transpose => {}
            Transform::Rows { start, rows, .. } => {
                let end = (start + rows) * cols;
                data = match data {
                    WeightData::Borrowed(b) if end <= b.len() => {
                        WeightData::Borrowed(&b[start * cols..end])
                    }
                    other => {
                        let b = other.bits();
                        let slice =
                            b.get(start * cols..end)
                                .ok_or_else(|| ExecError::Transform {
                                    buffer: buffer.to_string(),
                                    message: format!(
                                        "rows {start}..{} beyond the tensor",
                                        start + rows
                                    ),
                                })?;
                        WeightData::Owned(Arc::new(slice.to_vec()))
                    }
                };
            }
            Transform::PadHeads {
                axis,
                heads,
                padded_heads,
                kv_heads,
                head_dim,
            } => {
                let bits = data.bits();
                let (padded, _, new_cols) = pad_heads(
                    bits,
                    bits.len() / cols.max(1),
                    cols,
                    axis,
                    heads,
                    padded_heads,
                    kv_heads,
                    head_dim,
                )
                .map_err(|message| ExecError::Transform {
                    buffer: buffer.to_string(),
                    message,
                })?;
                data = WeightData::Owned(Arc::new(padded));
                cols = new_cols;
            }
            Transform::Broadcast { rows } => {
                let row = data.bits().to_vec();
                cols = row.len();
                data = WeightData::Owned(Arc::new(row.repeat(rows)));
            }
        }
    }
    Ok(data)
}
