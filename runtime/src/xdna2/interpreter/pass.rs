//! One pass of a plan over the real rows: the prologue, every layer, the
//! epilogue; each launch on its emulated kernel (trimmed to the real rows, see
//! `rows`), each host op on the host.

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use super::host::{add_bias, transpose};
use super::rows::{attention_rows, gemm_rows};
use super::weights::{resolve, resolve_packed};
use super::{Defects, ExecError, Interpreter};
use crate::bf16;
use crate::model::arch::Activation;
use crate::threads;
use crate::xdna2::kernels::{
    self, elementwise, gemv_packed, gemv_packed::NibbleOrder, EltwiseSpec, FlashAttentionSpec,
    Herd, KernelError, NormSpec, RopeSpec,
};
use crate::xdna2::plan::{Buffer, HostOp, Launch, Phase, Plan, Step, Transform, WeightSource};

/// Runs `plan` on `ids` at the interpreter's next positions, through the first
/// `layers` layers when given (then without the epilogue: no logits); returns the
/// last real row's logits.
pub(super) fn run(
    model: &mut Interpreter<'_>,
    plan: &Plan,
    ids: &[u32],
    layers: Option<usize>,
) -> Result<Vec<f32>, ExecError> {
    let record = model.capture && plan.phase == Phase::Prefill;
    if record {
        model.layer_outputs.clear();
    }
    let base = model.position;
    let defects = model.path.defects.scoped(plan);
    let mut pass = Pass {
        defects,
        model,
        plan,
        rows: ids.len(),
        base,
        ids,
        bufs: HashMap::new(),
        layer: 0,
    };
    for step in &plan.prologue {
        pass.step(step)?;
    }
    let last = layers.map_or(plan.num_layers, |l| l.min(plan.num_layers));
    for layer in 0..last {
        pass.layer = layer;
        for step in &plan.layer {
            pass.step(step)?;
        }
        if record {
            let x = real_columns(pass.get("x")?, plan, pass.model.arch.hidden_size);
            pass.model.layer_outputs.push(x);
        }
    }
    if last < plan.num_layers {
        return Ok(Vec::new());
    }
    pass.layer = plan.num_layers;
    for step in &plan.epilogue {
        pass.step(step)?;
    }
    pass.logits()
}

/// A weight buffer: the checkpoint's bits, or a copy kept for the interpreter's
/// lifetime.
enum WeightRef<'m> {
    Borrowed(&'m [u16]),
    Shared(Arc<Vec<u16>>),
}

impl std::ops::Deref for WeightRef<'_> {
    type Target = [u16];

    fn deref(&self) -> &[u16] {
        match self {
            WeightRef::Borrowed(b) => b,
            WeightRef::Shared(v) => v,
        }
    }
}

/// One pass of a plan: the activation buffers and where the pass is.
struct Pass<'p, 'm> {
    /// The planted defects that act on this plan.
    defects: Defects,
    model: &'p mut Interpreter<'m>,
    plan: &'p Plan,
    /// Real rows (prompt length in prefill, 1 in decode).
    rows: usize,
    /// Position of the first row.
    base: usize,
    ids: &'p [u32],
    bufs: HashMap<String, Vec<u16>>,
    layer: usize,
}

impl<'m> Pass<'_, 'm> {
    fn get(&self, name: &str) -> Result<&Vec<u16>, ExecError> {
        self.bufs
            .get(name)
            .ok_or_else(|| ExecError::Unwritten(name.to_string()))
    }

    fn put(&mut self, name: &str, data: Vec<u16>) {
        self.bufs.insert(name.to_string(), data);
    }

    fn buffer(&self, name: &str) -> Result<&Buffer, ExecError> {
        self.plan
            .buffers
            .get(name)
            .ok_or_else(|| ExecError::UnknownBuffer(name.to_string()))
    }

    fn kernel(&self) -> impl Fn(KernelError) -> ExecError {
        let layer = self.layer;
        move |source| ExecError::Kernel { layer, source }
    }

    /// A weight or host tensor of the current layer: borrowed from the model when
    /// its transforms only re-lay it out or slice it, else made once and kept.
    fn weight(&mut self, name: &str) -> Result<WeightRef<'m>, ExecError> {
        let buffer = self.buffer(name)?;
        let (source, per_layer) = (buffer.source.clone(), buffer.per_layer);
        let transforms = match &source {
            Some(WeightSource::RopeLut {
                positions, local, ..
            }) => {
                return Ok(WeightRef::Shared(self.model.lut(*positions, *local)));
            }
            Some(WeightSource::Tensor { transforms, .. }) => transforms,
            None => return Err(ExecError::NotATensor(name.to_string())),
        };
        let copies = transforms.iter().any(|t| {
            matches!(
                t,
                Transform::PadHeads { .. } | Transform::ZeroPad { .. } | Transform::OffsetOne
            )
        });
        let key = (
            format!("{source:?}"),
            if per_layer { self.layer } else { 0 },
        );
        if copies {
            if let Some(w) = self.model.copies.get(&key) {
                return Ok(WeightRef::Shared(w.clone()));
            }
        }
        let data = resolve(self.plan, name, self.layer, &self.model.index)?;
        match data.bits {
            std::borrow::Cow::Borrowed(b) if !copies => Ok(WeightRef::Borrowed(b)),
            bits => {
                let shared = Arc::new(bits.into_owned());
                if copies {
                    self.model.copies.insert(key, shared.clone());
                }
                Ok(WeightRef::Shared(shared))
            }
        }
    }

    /// A weight the kernel reads in full (`len` elements): a tensor borrowed
    /// without its zero padding rows is completed with them, once, and kept.
    fn full_weight(&mut self, name: &str, len: usize) -> Result<WeightRef<'m>, ExecError> {
        let w = self.weight(name)?;
        if w.len() >= len {
            return Ok(w);
        }
        let buffer = self.buffer(name)?;
        let key = (
            format!("{:?}/zero-rows", buffer.source),
            if buffer.per_layer { self.layer } else { 0 },
        );
        if let Some(full) = self.model.copies.get(&key) {
            return Ok(WeightRef::Shared(full.clone()));
        }
        let mut bits = w.to_vec();
        bits.resize(len, 0);
        let full = Arc::new(bits);
        self.model.copies.insert(key, full.clone());
        Ok(WeightRef::Shared(full))
    }

    fn step(&mut self, step: &Step) -> Result<(), ExecError> {
        match step {
            Step::Call(call) => {
                for launch in &call.launches {
                    self.launch(launch)?;
                    self.model.counters.launches += 1;
                }
                Ok(())
            }
            Step::Host(op) => {
                self.model.counters.host_ops += 1;
                self.host(op)
            }
        }
    }

    /// A row kernel's spec over the real rows of `x` on one herd.
    fn rows_of(x: &[u16], spec: &NormSpec) -> NormSpec {
        NormSpec {
            rows: x.len() / spec.cols.max(1),
            herd: Herd::SINGLE,
            ..*spec
        }
    }

    fn launch(&mut self, launch: &Launch) -> Result<(), ExecError> {
        let d = self.model.device;
        let err = self.kernel();
        match launch {
            Launch::Gemm { a, b, out, spec } => {
                if !self.transposed(b) {
                    return Err(ExecError::NotTransposed(b.clone()));
                }
                let x = self.get(a)?.clone();
                let y = gemm_rows(d, spec, &x, self.rows, &self.weight(b)?).map_err(err)?;
                self.put(out, y);
            }
            Launch::Gemv {
                w,
                x,
                out,
                residual,
                spec,
            } => {
                let xv = self.get(x)?.clone();
                let r = residual
                    .as_ref()
                    .map(|r| self.get(r).cloned())
                    .transpose()?;
                let y = if spec.packed.is_some() {
                    let packed = resolve_packed(self.plan, w, self.layer, &self.model.index)?;
                    let order = NibbleOrder::of(self.defects.packed_nibble_order);
                    gemv_packed::gemv_packed_ordered(d, spec, packed, &xv, r.as_deref(), order)
                        .map_err(err)?
                } else {
                    let wb = self.full_weight(w, spec.m * spec.k)?;
                    kernels::gemv(d, spec, &wb, &xv, r.as_deref()).map_err(err)?
                };
                self.put(out, y);
            }
            Launch::GemvSwiglu {
                x,
                norm,
                gate,
                up,
                out,
                eps,
                spec,
            } => {
                let xv = self.get(x)?.clone();
                let n = self.weight(norm)?;
                let g = self.full_weight(gate, spec.m * spec.k)?;
                let u = self.full_weight(up, spec.m * spec.k)?;
                let y = kernels::gemv_swiglu(d, spec, *eps as f32, &xv, &n, &g, &u).map_err(err)?;
                self.put(out, y);
            }
            Launch::Rmsnorm {
                x,
                weight,
                out,
                eps,
                spec,
            } => {
                let xv = self.get(x)?.clone();
                let w = weight.as_ref().map(|w| self.weight(w)).transpose()?;
                let small = Self::rows_of(&xv, spec);
                let y =
                    kernels::rms_norm(d, &small, *eps as f32, &xv, w.as_deref()).map_err(err)?;
                self.put(out, y);
            }
            Launch::Layernorm {
                x,
                weight,
                bias,
                out,
                eps,
                spec,
            } => {
                let xv = self.get(x)?.clone();
                let w = weight.as_ref().map(|w| self.weight(w)).transpose()?;
                let b = bias.as_ref().map(|b| self.weight(b)).transpose()?;
                let small = Self::rows_of(&xv, spec);
                let vectors = (w.as_deref(), b.as_deref());
                let y = kernels::layer_norm(d, &small, *eps as f32, &xv, vectors).map_err(err)?;
                self.put(out, y);
            }
            Launch::QkRmsnorm {
                x,
                weight,
                out,
                eps,
                spec,
            } => {
                let xv = self.get(x)?.clone();
                if !self.model.path.qk_norm {
                    // Planted fault: the norm is skipped.
                    self.put(out, xv);
                    return Ok(());
                }
                let w = self.weight(weight)?;
                let small = Self::rows_of(&xv, spec);
                let y = kernels::qk_rms_norm(d, &small, *eps as f32, &xv, &w).map_err(err)?;
                self.put(out, y);
            }
            Launch::Rope { x, lut, out, spec } => {
                let xv = self.get(x)?.clone();
                let table = self.weight(self.plan.layer_buffer(lut, self.layer))?;
                let small = RopeSpec {
                    rows: self.rows,
                    herd: Herd::SINGLE,
                    ..*spec
                };
                let y = kernels::rope(d, &small, &xv, &table, self.rope_position()).map_err(err)?;
                self.put(out, y);
            }
            Launch::SiluMul { gate, up, out, .. } | Launch::GeluMul { gate, up, out, .. } => {
                let gated = match launch {
                    Launch::SiluMul { .. } => kernels::silu_mul,
                    _ => kernels::gelu_mul,
                };
                let (g, u) = (self.get(gate)?, self.get(up)?);
                let small = EltwiseSpec::select(d, g.len(), Herd::SINGLE);
                let y = gated(d, &small, g, u).map_err(err)?;
                self.put(out, y);
            }
            Launch::EltwiseAdd { a, b, out, .. } => {
                // The second operand is an activation, or a weight (a bias
                // broadcast over the rows, added on the NPU).
                let weight = match self.bufs.contains_key(b) {
                    true => None,
                    false => Some(self.weight(b)?),
                };
                let x = self.get(a)?;
                // A broadcast bias holds the plan's rows; a pass runs its real
                // rows, the leading ones (every row of a broadcast is the same).
                let y: &[u16] = match &weight {
                    Some(w) => &w[..x.len().min(w.len())],
                    None => self.get(b)?,
                };
                let small = EltwiseSpec::select(d, x.len(), Herd::SINGLE);
                let z = kernels::eltwise_add(d, &small, x, y).map_err(err)?;
                self.put(out, z);
            }
            Launch::Softmax { x, out, spec } => {
                let xv = self.get(x)?;
                let small = Self::rows_of(xv, spec);
                let y = kernels::softmax(d, &small, xv).map_err(err)?;
                self.put(out, y);
            }
            Launch::FlashAttention { q, k, v, out, spec } => {
                if self.base != 0 {
                    return Err(ExecError::PrefillAfterPositions);
                }
                let qkv = (
                    self.get(q)?.as_slice(),
                    self.get(k)?.as_slice(),
                    self.get(v)?.as_slice(),
                );
                let spec = &FlashAttentionSpec {
                    window: self.window(),
                    ..*spec
                };
                let y = attention_rows(d, spec, self.rows, qkv).map_err(|e| match e {
                    ExecError::Kernel { source, .. } => err(source),
                    other => other,
                })?;
                self.put(out, y);
            }
            Launch::LmHeadGemv {
                w,
                x,
                out,
                spec,
                part,
            } => {
                let xv = self.get(x)?.clone();
                let mut logits = self.bufs.remove(out.as_str()).unwrap_or_default();
                logits.resize(spec.vocab, 0);
                let last = spec.parts > 1 && *part + 1 == spec.parts;
                if last && self.defects.drop_lm_head_partition {
                    // Planted fault: the partition is not launched.
                    self.put(out, logits);
                    return Ok(());
                }
                let wb = self.weight(w)?;
                let result = kernels::lm_head_partition(d, spec, *part, &wb, &xv, &mut logits);
                self.put(out, logits);
                result.map_err(err)?;
            }
            Launch::KvAppend { k, v, spec, .. } => self.store_kv(k, v, spec.kv_width)?,
            Launch::DecodeAttention { q, out, spec, .. } => {
                let scale = spec.scale_dim.unwrap_or(spec.head_dim);
                let shape = (spec.heads, spec.kv_heads, spec.head_dim, scale);
                self.attend(q, out, shape, spec.softcap.map(f64::from))?;
            }
        }
        Ok(())
    }

    /// Stores this position's K and V rows of `k` and `v` in the KV cache
    /// (prefill: every row, then the sliding window's drop); the host's KV
    /// store and the fused decode's append alike. The planted decode defects
    /// write a stale row or the wrong slot.
    fn store_kv(&mut self, k: &str, v: &str, width: usize) -> Result<(), ExecError> {
        let (mut keys, mut values) = (self.get(k)?.clone(), self.get(v)?.clone());
        let defects = self.defects;
        let decode = self.plan.phase == Phase::Decode;
        let mut slot = self.base;
        let late = defects.stale_kv_from.is_some_and(|from| slot >= from);
        if decode && (defects.stale_kv || late) && slot > 0 {
            (keys, values) = self.model.kv.row(self.layer, slot - 1, width);
        }
        if decode && defects.kv_wrong_slot {
            slot += 1;
        }
        self.model.kv.write(self.layer, slot, width, &keys, &values);
        // Prefill attends over its own rows, not the cache.
        if !decode {
            self.slide(width);
        }
        Ok(())
    }

    /// Decode attention of `q` over the cached positions this layer sees (the
    /// window's on a sliding-window layer) into `out`: the host's and the
    /// fused decode's alike.
    fn attend(
        &mut self,
        q: &str,
        out: &str,
        (heads, kv_heads, head_dim, scale_dim): (usize, usize, usize, usize),
        softcap: Option<f64>,
    ) -> Result<(), ExecError> {
        let qv = self.get(q)?;
        let (keys, values) = self.model.kv.layer(self.layer);
        let shift = usize::from(self.defects.gqa_mapping);
        // Positions held from `first` on; the window sees the last ones.
        let first = self.model.kv.first(self.layer);
        let from = self
            .window()
            .map_or(0, |w| (self.base + 1).saturating_sub(w))
            .max(first);
        let positions = self.base + 1 - from;
        let width = kv_heads * head_dim;
        let start = (from - first) * width;
        if keys.len() < start + positions * width {
            return Err(ExecError::Unwritten(format!(
                "KV cache slot {} of layer {}",
                self.base, self.layer
            )));
        }
        let y = kernels::decode_attention(
            qv,
            (&keys[start..], &values[start..]),
            positions,
            (heads, kv_heads, head_dim, scale_dim),
            (shift, softcap.map(|c| c as f32)),
        );
        self.put(out, y);
        self.slide(width);
        Ok(())
    }

    /// The attention window of the current layer, if it is a sliding-window
    /// layer (planted fault `window-off-by-one`: one position wider).
    fn window(&self) -> Option<usize> {
        let widen = usize::from(self.defects.window_off_by_one);
        self.plan.window_of(self.layer).map(|w| w + widen)
    }

    /// On a sliding-window layer, drops the cached positions the next query
    /// (at `base + rows`) cannot see, once this pass has attended: the cache
    /// then holds what the reference's does.
    fn slide(&mut self, width: usize) {
        if let Some(window) = self.window() {
            let keep_from = (self.base + self.rows + 1).saturating_sub(window);
            self.model.kv.drop_before(self.layer, keep_from, width);
        }
    }

    /// The position RoPE rotates the first row at (planted fault: one too far in
    /// decode).
    fn rope_position(&self) -> usize {
        let off = self.plan.phase == Phase::Decode && self.defects.rope_position_off_by_one;
        self.base + usize::from(off)
    }

    /// Whether a weight buffer is the checkpoint's `[out, in]` tensor that setup
    /// pre-transposes (what the GEMM reads as its `[N, K]` operand).
    fn transposed(&self, name: &str) -> bool {
        matches!(self.plan.buffers.get(name).and_then(|b| b.source.as_ref()),
            Some(WeightSource::Tensor { transforms, .. }) if transforms.contains(&Transform::Transpose))
    }

    fn host(&mut self, op: &HostOp) -> Result<(), ExecError> {
        match op {
            HostOp::Embed {
                table,
                out,
                hidden,
                scale,
                ..
            } => {
                let ids = self.ids;
                let t = self.weight(table)?;
                let mut y = kernels::embedding(&t, *hidden, ids).map_err(self.kernel())?;
                if let Some(scale) = scale {
                    let factor = bf16::round(*scale);
                    for v in &mut y {
                        *v = bf16::from_f32(bf16::to_f32(*v) * factor);
                    }
                }
                self.put(out, y);
            }
            HostOp::KvStore { k, v, kv_width, .. } => self.store_kv(k, v, *kv_width)?,
            HostOp::DecodeAttention {
                q,
                out,
                heads,
                kv_heads,
                head_dim,
                scale_dim,
                softcap,
            } => {
                let shape = (*heads, *kv_heads, *head_dim, scale_dim.unwrap_or(*head_dim));
                self.attend(q, out, shape, *softcap)?;
            }
            HostOp::Transpose {
                from,
                to,
                heads,
                head_dim,
                to_layout,
                ..
            } => {
                let y = transpose(self.get(from)?, self.rows, *heads, *head_dim, *to_layout);
                self.put(to, y);
            }
            HostOp::BiasAdd {
                x,
                bias,
                heads,
                head_dim,
                lut,
                rotary_dim,
                ..
            } => {
                if !self.model.path.qkv_bias {
                    // Planted fault: the bias is dropped.
                    return Ok(());
                }
                let b = self.weight(bias)?;
                let table = match lut {
                    Some(l) => Some(self.weight(self.plan.layer_buffer(l, self.layer))?),
                    None => None,
                };
                let mut xv = self.get(x)?.clone();
                let position = self.rope_position();
                let shape = (*heads, *head_dim, rotary_dim.unwrap_or(*head_dim));
                add_bias(&mut xv, &b, shape, table.as_deref(), position);
                self.put(x, xv);
            }
            HostOp::Add { a, b, out, .. } => {
                let y = self
                    .get(a)?
                    .iter()
                    .zip(self.get(b)?)
                    .map(|(&x, &y)| bf16::from_f32(bf16::to_f32(x) + bf16::to_f32(y)))
                    .collect();
                self.put(out, y);
            }
            HostOp::RmsNorm {
                x,
                weight,
                out,
                cols,
                eps,
                last_row,
                real_cols,
            } => {
                let xv = self.get(x)?;
                let rows: Vec<u16> = if *last_row {
                    xv[xv.len() - cols..].to_vec()
                } else {
                    xv.clone()
                };
                let w = self.weight(weight)?;
                // Padded columns are zeros in and out: the mean is over the real ones.
                let real = real_cols.unwrap_or(*cols).min(*cols);
                let mut y = vec![0u16; rows.len()];
                for (o, r) in y.chunks_mut(*cols).zip(rows.chunks(*cols)) {
                    let weight = Some(&w[..real]);
                    elementwise::rms_norm_row(
                        &r[..real],
                        real,
                        weight,
                        *eps as f32,
                        &mut o[..real],
                    );
                }
                self.put(out, y);
            }
            HostOp::LayerNorm {
                x,
                weight,
                bias,
                out,
                cols,
                eps,
                last_row,
                real_cols,
            } => {
                let rows: Vec<u16> = {
                    let xv = self.get(x)?;
                    if *last_row {
                        xv[xv.len() - cols..].to_vec()
                    } else {
                        xv.clone()
                    }
                };
                let w = match weight {
                    Some(n) => Some(self.weight(n)?),
                    None => None,
                };
                let b = match bias {
                    Some(n) => Some(self.weight(n)?),
                    None => None,
                };
                // Padded columns stay zeros: the statistics are over the real ones.
                let real = real_cols.unwrap_or(*cols).min(*cols);
                let mut y = vec![0u16; rows.len()];
                for (o, r) in y.chunks_mut(*cols).zip(rows.chunks(*cols)) {
                    let vectors = (
                        w.as_deref().map(|v| &v[..real]),
                        b.as_deref().map(|v| &v[..real]),
                    );
                    elementwise::layer_norm_row(
                        &r[..real],
                        real,
                        vectors,
                        *eps as f32,
                        &mut o[..real],
                    );
                }
                self.put(out, y);
            }
            HostOp::SoftCap { x, cap, .. } => {
                let cap = *cap as f32;
                let y: Vec<u16> = self
                    .get(x)?
                    .iter()
                    .map(|&z| bf16::from_f32(elementwise::softcap_value(bf16::to_f32(z), cap)))
                    .collect();
                self.put(x, y);
            }
            HostOp::SiluMul { gate, up, out, .. } => {
                let value = match self.model.arch.activation {
                    Activation::Silu => elementwise::silu_mul_value,
                    Activation::GeluTanh => elementwise::gelu_mul_value,
                };
                let y = self
                    .get(gate)?
                    .iter()
                    .zip(self.get(up)?)
                    .map(|(&g, &u)| value(g, u))
                    .collect();
                self.put(out, y);
            }
            HostOp::Matvec { w, x, out, k, .. } => {
                let xv = bf16::to_f32_vec(self.get(x)?);
                let wb = self.weight(w)?;
                let y: Vec<f32> = wb
                    .par_chunks(*k)
                    .with_min_len(threads::min_len(*k))
                    .map(|row| kernels::decode_attention::dot_bf16_f32(row, &xv))
                    .collect();
                self.put(out, bf16::from_f32_vec(&y));
            }
            HostOp::Scheduling { .. } => {}
        }
        Ok(())
    }

    /// Logits of the last real row: the LM-head GEMV's output, or the last row of
    /// each LM-head GEMM partition.
    fn logits(&self) -> Result<Vec<f32>, ExecError> {
        let vocab = self.model.arch.vocab_size;
        if let Some(l) = self.bufs.get("logits") {
            return Ok(bf16::to_f32_vec(&l[..vocab.min(l.len())]));
        }
        let mut logits = Vec::with_capacity(vocab);
        let mut part = 0;
        while let Some(p) = self.bufs.get(&format!("logits.{part}")) {
            let width = p.len() / self.rows.max(1);
            logits.extend(bf16::to_f32_vec(&p[(self.rows - 1) * width..]));
            part += 1;
        }
        if logits.len() < vocab {
            return Err(ExecError::NoLogits);
        }
        logits.truncate(vocab);
        Ok(logits)
    }
}

/// The real columns of a residual-stream buffer: the first `hidden` of each row
/// of a plan that pads hidden (padding appends zeros, see `xdna2::padding`).
fn real_columns(x: &[u16], plan: &Plan, hidden: usize) -> Vec<u16> {
    let width = plan.padding.map_or(hidden, |p| p.hidden.padded);
    if width == hidden {
        return x.to_vec();
    }
    x.chunks(width.max(1))
        .flat_map(|row| &row[..hidden.min(row.len())])
        .copied()
        .collect()
}
