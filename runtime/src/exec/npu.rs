//! The emulated NPU forward pass: an interpreter of the deployment plans over the
//! model's weights, calling the emulator's kernels launch by launch and doing the
//! plan's host ops (embedding, KV cache, decode attention, bias-after-RoPE, glue)
//! on the host, with a KV cache carried across decode steps.
//!
//! Plans are built at the production sequence length (2048 rows); a prompt fills
//! only its first rows and the rest is padding. Every kernel here is row-independent
//! (GEMM rows, per-row norms, per-position RoPE, element-wise ops) or causal
//! (attention: a real row never sees padding), so the interpreter runs the real
//! rows only: each launch's production spec is what the plan holds and what the
//! device checks; the launch runs on a spec trimmed to the real rows (a GEMM in row
//! chunks of at most its tile_m on one herd column; the same tile_n, herd rows,
//! K tiling and precision, hence the same numerics). Flash attention runs over the
//! prompt's keys padded to whole key blocks, so its cascade splits those keys
//! rather than 2048 (same datapath, other stage boundaries).
//!
//! What the NPU path computes beyond the plan is in [`NpuPath`]: whether the q/k/v
//! bias is added, whether the Q/K norm runs, which frequencies the RoPE table holds.
//! Planted faults switch these off; lessons switch them back on.

use std::collections::HashMap;

use rayon::prelude::*;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::checks::verify::Decoder;
use super::weights::{resolve, TensorIndex};
use crate::bf16;
use crate::model::arch::{Architecture, RopeScaling};
use crate::model::oracle::blocks;
use crate::model::Model;
use crate::xdna2::device::Device;
use crate::xdna2::host::{add_bias, decode_attention, transpose};
use crate::xdna2::kernels::{
    self, BOperand, EltwiseSpec, FlashAttentionSpec, GemmSpec, GemmTile, Herd, NormSpec, QkvLayout,
    RopeSpec,
};
use crate::xdna2::plan::{Buffer, HostOp, Launch, Plan, Step, Transform, WeightSource};

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
}

impl NpuPath {
    pub const CORRECT: NpuPath = NpuPath {
        qkv_bias: true,
        qk_norm: true,
        rope: RopeTable::Scaled,
    };
}

/// The inverse frequencies a table of `kind` holds for `arch`.
pub fn table_frequencies(arch: &Architecture, kind: RopeTable) -> Vec<f32> {
    match kind {
        RopeTable::Scaled => blocks::inv_freq(arch),
        RopeTable::Unscaled => blocks::default_inv_freq(arch.rope_theta, arch.head_dim),
    }
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

/// The emulated NPU with its KV cache.
pub struct NpuModel<'m> {
    device: &'m Device,
    arch: &'m Architecture,
    index: TensorIndex<'m>,
    prefill: &'m Plan,
    decode: &'m Plan,
    path: NpuPath,
    lut: Arc<Vec<u16>>,
    padded: HashMap<(String, usize), Arc<Vec<u16>>>,
    /// Per layer: keys and values `[positions, kv_width]` as bf16.
    kv: Vec<(Vec<u16>, Vec<u16>)>,
    position: usize,
    pub counters: Counters,
    /// Residual stream after each layer of the last prefill, when recording.
    pub layer_outputs: Option<Vec<Vec<f32>>>,
}

/// A buffer's contents during one pass.
type Buffers = HashMap<String, Vec<u16>>;

/// A weight buffer: the checkpoint's bits, or a transformed copy kept for the
/// model's lifetime.
#[derive(Clone)]
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

impl<'m> NpuModel<'m> {
    pub fn new(
        device: &'m Device,
        model: &'m Model,
        prefill: &'m Plan,
        decode: &'m Plan,
        path: NpuPath,
    ) -> Self {
        let arch = &model.arch;
        let positions = prefill.seq_len.max(decode.seq_len);
        let lut = Arc::new(kernels::rope_lut(
            &table_frequencies(arch, path.rope),
            positions,
        ));
        Self {
            device,
            arch,
            index: TensorIndex::new(&model.weights),
            prefill,
            decode,
            path,
            lut,
            padded: HashMap::new(),
            kv: vec![(Vec::new(), Vec::new()); arch.num_layers],
            position: 0,
            counters: Counters::default(),
            layer_outputs: None,
        }
    }

    /// Keeps every layer's output of the next prefill (phases 2 and 3).
    pub fn record_layers(&mut self) {
        self.layer_outputs = Some(Vec::new());
    }

    fn reset(&mut self) {
        for (k, v) in &mut self.kv {
            k.clear();
            v.clear();
        }
        self.position = 0;
    }

    /// Prefills `prompt` through the first `layers` layers only (no LM head) and
    /// returns each layer's output (phase 2's single block).
    pub fn prefill_layers(
        &mut self,
        prompt: &[u32],
        layers: usize,
    ) -> Result<Vec<Vec<f32>>, String> {
        self.reset();
        self.record_layers();
        let plan = self.prefill;
        self.pass_limited(plan, prompt, Some(layers))?;
        self.reset();
        Ok(self.layer_outputs.take().unwrap_or_default())
    }

    /// Runs `plan` on `ids` at the next positions; returns the last row's logits.
    fn pass(&mut self, plan: &'m Plan, ids: &[u32]) -> Result<Vec<f32>, String> {
        self.pass_limited(plan, ids, None)
    }

    fn pass_limited(
        &mut self,
        plan: &'m Plan,
        ids: &[u32],
        layers: Option<usize>,
    ) -> Result<Vec<f32>, String> {
        let rows = ids.len();
        if self.position + rows > plan.seq_len.max(self.lut.len() / self.arch.head_dim.max(1)) {
            return Err(format!(
                "position {} is beyond the plan's {} positions",
                self.position + rows,
                plan.seq_len
            ));
        }
        let mut run = Pass {
            model: self,
            plan,
            rows,
            base: 0,
            ids,
            bufs: Buffers::new(),
            layer: 0,
        };
        run.base = run.model.position;
        for step in &plan.prologue {
            run.step(step)?;
        }
        let record =
            run.model.layer_outputs.is_some() && plan.phase == crate::xdna2::plan::Phase::Prefill;
        let mut outputs = Vec::new();
        let last = layers.map_or(plan.num_layers, |l| l.min(plan.num_layers));
        for layer in 0..last {
            run.layer = layer;
            for step in &plan.layer {
                run.step(step)?;
            }
            if record {
                outputs.push(bf16::to_f32_vec(run.get("x")?));
            }
        }
        if last < plan.num_layers {
            if record {
                self.layer_outputs = Some(outputs);
            }
            return Ok(Vec::new());
        }
        for step in &plan.epilogue {
            run.step(step)?;
        }
        let logits = run.logits()?;
        self.position += rows;
        self.counters.tokens += rows as u64;
        if record {
            self.layer_outputs = Some(outputs);
        }
        Ok(logits)
    }
}

impl Decoder for NpuModel<'_> {
    fn prefill(&mut self, prompt: &[u32]) -> Result<Vec<f32>, String> {
        self.reset();
        let plan = self.prefill;
        self.pass(plan, prompt)
    }

    fn decode(&mut self, token: u32) -> Result<Vec<f32>, String> {
        let plan = self.decode;
        self.pass(plan, &[token])
    }
}

/// One pass of a plan: the buffers and where the pass is.
struct Pass<'p, 'm> {
    model: &'p mut NpuModel<'m>,
    plan: &'m Plan,
    /// Real rows (prompt length in prefill, 1 in decode).
    rows: usize,
    /// Position of the first row.
    base: usize,
    ids: &'p [u32],
    bufs: Buffers,
    layer: usize,
}

impl<'m> Pass<'_, 'm> {
    fn get(&self, name: &str) -> Result<&Vec<u16>, String> {
        self.bufs
            .get(name)
            .ok_or_else(|| format!("buffer `{name}` is read before any step wrote it"))
    }

    fn buffer(&self, name: &str) -> Result<&'m Buffer, String> {
        let plan: &'m Plan = self.plan;
        plan.buffers
            .get(name)
            .ok_or_else(|| format!("the plan has no buffer `{name}`"))
    }

    /// A weight or host tensor of the current layer: borrowed from the model when
    /// its transforms only re-lay it out, else materialized once and kept.
    fn weight(&mut self, name: &str) -> Result<WeightRef<'m>, String> {
        let buffer = self.buffer(name)?;
        let source = buffer.source.as_ref();
        if let Some(WeightSource::RopeLut { .. }) = source {
            return Ok(WeightRef::Shared(self.model.lut.clone()));
        }
        let copies = matches!(source, Some(WeightSource::Tensor { transforms, .. })
            if transforms.iter().any(|t| matches!(t, Transform::PadHeads { .. })));
        let key = (
            format!("{:?}/{name}", self.plan.phase),
            if buffer.per_layer { self.layer } else { 0 },
        );
        if copies {
            if let Some(w) = self.model.padded.get(&key) {
                return Ok(WeightRef::Shared(w.clone()));
            }
        }
        let data = resolve(self.plan, name, self.layer, &self.model.index)?;
        match data.bits {
            std::borrow::Cow::Borrowed(b) if !copies => Ok(WeightRef::Borrowed(b)),
            bits => {
                let shared = Arc::new(bits.into_owned());
                if copies {
                    self.model.padded.insert(key, shared.clone());
                }
                Ok(WeightRef::Shared(shared))
            }
        }
    }

    /// A weight the kernel reads in full (`len` elements): a tensor borrowed
    /// without its zero padding rows (see `weights`) is materialized with them,
    /// once, and kept.
    fn full_weight(&mut self, name: &str, len: usize) -> Result<WeightRef<'m>, String> {
        let w = self.weight(name)?;
        if w.len() >= len {
            return Ok(w);
        }
        let per_layer = self.buffer(name)?.per_layer;
        let key = (
            format!("{:?}/{name}/zero-rows", self.plan.phase),
            if per_layer { self.layer } else { 0 },
        );
        if let Some(full) = self.model.padded.get(&key) {
            return Ok(WeightRef::Shared(full.clone()));
        }
        let mut bits = w.to_vec();
        bits.resize(len, 0);
        let full = Arc::new(bits);
        self.model.padded.insert(key, full.clone());
        Ok(WeightRef::Shared(full))
    }

    fn put(&mut self, name: &str, data: Vec<u16>) {
        self.bufs.insert(name.to_string(), data);
    }

    fn step(&mut self, step: &'m Step) -> Result<(), String> {
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

    fn launch(&mut self, launch: &'m Launch) -> Result<(), String> {
        let d = self.model.device;
        let rows = self.rows;
        let err = |e: kernels::KernelError| e.to_string();
        match launch {
            Launch::Gemm { a, b, out, spec } => {
                let x = self.get(a)?.clone();
                let y = gemm_rows(d, spec, &x, rows, &self.weight(b)?)?;
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
                let r = match residual {
                    Some(r) => Some(self.get(r)?.clone()),
                    None => None,
                };
                let wb = self.full_weight(w, spec.m * spec.k)?;
                let y = kernels::gemv(d, spec, &wb, &xv, r.as_deref()).map_err(err)?;
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
                let w = match weight {
                    Some(w) => Some(self.weight(w)?),
                    None => None,
                };
                let small = NormSpec {
                    rows: xv.len() / spec.cols.max(1),
                    herd: Herd::SINGLE,
                    ..*spec
                };
                let y =
                    kernels::rms_norm(d, &small, *eps as f32, &xv, w.as_deref()).map_err(err)?;
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
                let small = NormSpec {
                    rows: xv.len() / spec.cols.max(1),
                    herd: Herd::SINGLE,
                    ..*spec
                };
                let y = kernels::qk_rms_norm(d, &small, *eps as f32, &xv, &w).map_err(err)?;
                self.put(out, y);
            }
            Launch::Rope { x, out, spec, .. } => {
                let xv = self.get(x)?.clone();
                let small = RopeSpec {
                    rows,
                    herd: Herd::SINGLE,
                    ..*spec
                };
                let y = kernels::rope(d, &small, &xv, &self.model.lut, self.base).map_err(err)?;
                self.put(out, y);
            }
            Launch::SiluMul { gate, up, out, .. } => {
                let (g, u) = (self.get(gate)?.clone(), self.get(up)?);
                let small = EltwiseSpec::select(d, g.len(), Herd::SINGLE);
                let y = kernels::silu_mul(d, &small, &g, u).map_err(err)?;
                self.put(out, y);
            }
            Launch::EltwiseAdd { a, b, out, .. } => {
                let (x, y) = (self.get(a)?.clone(), self.get(b)?);
                let small = EltwiseSpec::select(d, x.len(), Herd::SINGLE);
                let z = kernels::eltwise_add(d, &small, &x, y).map_err(err)?;
                self.put(out, z);
            }
            Launch::Softmax { x, out, spec } => {
                let xv = self.get(x)?.clone();
                let small = NormSpec {
                    rows: xv.len() / spec.cols.max(1),
                    herd: Herd::SINGLE,
                    ..*spec
                };
                let y = kernels::softmax(d, &small, &xv).map_err(err)?;
                self.put(out, y);
            }
            Launch::FlashAttention { q, k, v, out, spec } => {
                if self.base != 0 {
                    return Err("prefill attention after earlier positions is not supported".into());
                }
                let y = attention_rows(d, spec, rows, self.get(q)?, self.get(k)?, self.get(v)?)?;
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
                let wb = self.weight(w)?;
                let result = kernels::lm_head_partition(d, spec, *part, &wb, &xv, &mut logits);
                self.put(out, logits);
                result.map_err(err)?;
            }
        }
        Ok(())
    }

    fn host(&mut self, op: &'m HostOp) -> Result<(), String> {
        match op {
            HostOp::Embed {
                table, out, hidden, ..
            } => {
                let ids = self.ids;
                let t = self.weight(table)?;
                let y = kernels::embedding(&t, *hidden, ids).map_err(|e| e.to_string())?;
                self.put(out, y);
            }
            HostOp::KvStore { k, v, .. } => {
                let (kb, vb) = (self.get(k)?.clone(), self.get(v)?.clone());
                let cache = &mut self.model.kv[self.layer];
                cache.0.extend_from_slice(&kb);
                cache.1.extend_from_slice(&vb);
            }
            HostOp::DecodeAttention {
                q,
                out,
                heads,
                kv_heads,
                head_dim,
            } => {
                let qv = self.get(q)?.clone();
                let (keys, values) = &self.model.kv[self.layer];
                let positions = keys.len() / (*kv_heads * *head_dim).max(1);
                let y =
                    decode_attention(&qv, keys, values, positions, (*heads, *kv_heads, *head_dim));
                self.put(out, y);
            }
            HostOp::Transpose {
                from,
                to,
                heads,
                head_dim,
                to_layout,
                ..
            } => {
                let x = self.get(from)?;
                let y = transpose(x, self.rows, *heads, *head_dim, *to_layout);
                self.put(to, y);
            }
            HostOp::BiasAdd {
                x,
                bias,
                heads,
                head_dim,
                lut,
                ..
            } => {
                if !self.model.path.qkv_bias {
                    // Planted fault: the bias is dropped.
                    return Ok(());
                }
                let b = self.weight(bias)?;
                let mut xv = self.get(x)?.clone();
                let table = lut.as_ref().map(|_| &self.model.lut[..]);
                add_bias(&mut xv, &b, *heads, *head_dim, table, self.base);
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
            } => {
                let xv = self.get(x)?;
                let row: Vec<f32> = if *last_row {
                    bf16::to_f32_vec(&xv[xv.len() - cols..])
                } else {
                    bf16::to_f32_vec(xv)
                };
                let w = self.weight(weight)?;
                let mut y = vec![0.0f32; row.len()];
                for (o, r) in y.chunks_mut(*cols).zip(row.chunks(*cols)) {
                    blocks::rms_norm(r, &w, *eps as f32, o);
                }
                self.put(out, bf16::from_f32_vec(&y));
            }
            HostOp::SiluMul { gate, up, out, .. } => {
                let mut g = bf16::to_f32_vec(self.get(gate)?);
                let u = bf16::to_f32_vec(self.get(up)?);
                blocks::gated_activation(self.model.arch.activation, &mut g, &u);
                self.put(out, bf16::from_f32_vec(&g));
            }
            HostOp::Matvec { w, x, out, k, .. } => {
                let xv = bf16::to_f32_vec(self.get(x)?);
                let wb = self.weight(w)?;
                let y: Vec<f32> = wb
                    .par_chunks(*k)
                    .map(|row| crate::model::oracle::linear::dot(row, &xv))
                    .collect();
                self.put(out, bf16::from_f32_vec(&y));
            }
            HostOp::Scheduling { .. } => {}
        }
        Ok(())
    }

    /// Logits of the last real row: the LM-head GEMV's output, or the last row of
    /// each LM-head GEMM partition.
    fn logits(&self) -> Result<Vec<f32>, String> {
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
            return Err("the plan's epilogue produced no logits".into());
        }
        logits.truncate(vocab);
        Ok(logits)
    }
}

/// Columns per GEMM call when the interpreter splits N (a whole number of the
/// herd's column blocks), to keep the emulator's f32 copy of B small.
const N_CHUNK: usize = 1024;

/// A GEMM on the real rows: row chunks of at most the production tile_m, each a
/// launch on one herd column with the production tile_n, herd rows, K tiling and
/// precision (see the module documentation). N is split too, into whole blocks of
/// `tile_n · herd_rows` columns; the columns the production tiling leaves unwritten
/// (N not a multiple of the block) stay unwritten, as on the device.
fn gemm_rows(
    d: &Device,
    spec: &GemmSpec,
    a: &[u16],
    rows: usize,
    w: &[u16],
) -> Result<Vec<u16>, String> {
    let (k, n) = (spec.k, spec.n);
    let block = (spec.tile.tile_n * spec.herd.rows()).max(1);
    let written = spec.written_columns();
    let cols = (N_CHUNK / block).max(1) * block;
    let chunk = spec.tile.tile_m.max(8);
    let mut out = vec![0u16; rows * n];
    let mut start = 0;
    while start < rows {
        let real = chunk.min(rows - start);
        let padded = real.div_ceil(8) * 8;
        let mut a_chunk = vec![0u16; padded * k];
        a_chunk[..real * k].copy_from_slice(&a[start * k..(start + real) * k]);
        let mut n0 = 0;
        while n0 < written {
            let nc = cols.min(written - n0);
            // Rows past a partition's real ones are zero padding (see `weights`).
            let real_rows = (w.len() / k.max(1)).saturating_sub(n0).min(nc);
            let b: std::borrow::Cow<'_, [u16]> = if real_rows == nc {
                std::borrow::Cow::Borrowed(&w[n0 * k..(n0 + nc) * k])
            } else {
                let mut padded_b = vec![0u16; nc * k];
                if real_rows > 0 {
                    padded_b[..real_rows * k].copy_from_slice(&w[n0 * k..(n0 + real_rows) * k]);
                }
                std::borrow::Cow::Owned(padded_b)
            };
            let small = GemmSpec {
                m: padded,
                n: nc,
                herd: Herd([1, spec.herd.rows()]),
                tile: GemmTile {
                    tile_m: padded,
                    ..spec.tile
                },
                ..*spec
            };
            let y =
                kernels::gemm(d, &small, &a_chunk, BOperand::NxK(&b)).map_err(|e| e.to_string())?;
            for r in 0..real {
                out[(start + r) * n + n0..][..nc].copy_from_slice(&y[r * nc..(r + 1) * nc]);
            }
            n0 += nc;
        }
        start += real;
    }
    Ok(out)
}

/// Prefill flash attention over the real rows, padded to whole key blocks.
fn attention_rows(
    d: &Device,
    spec: &FlashAttentionSpec,
    rows: usize,
    q: &[u16],
    k: &[u16],
    v: &[u16],
) -> Result<Vec<u16>, String> {
    let key = d.limits.fa_key_block.max(1);
    let len = rows.div_ceil(key) * key;
    let mut small = FlashAttentionSpec::select(
        len,
        len,
        spec.heads,
        spec.kv_heads,
        spec.head_dim,
        spec.causal,
    );
    small.layout = spec.layout;
    small.tile.heads_per_unroll = spec.tile.heads_per_unroll;
    let hd = spec.head_dim;
    let pad = |x: &[u16], heads: usize| pad_positions(x, rows, len, heads, hd, spec.layout);
    let (qp, kp, vp) = (
        pad(q, spec.heads),
        pad(k, spec.kv_heads),
        pad(v, spec.kv_heads),
    );
    let out = kernels::flash_attention(d, &small, &qp, &kp, &vp).map_err(|e| e.to_string())?;
    Ok(unpad_positions(
        &out,
        rows,
        len,
        spec.heads,
        hd,
        spec.layout,
    ))
}

fn pad_positions(
    x: &[u16],
    rows: usize,
    len: usize,
    heads: usize,
    hd: usize,
    layout: QkvLayout,
) -> Vec<u16> {
    let mut out = vec![0u16; len * heads * hd];
    match layout {
        QkvLayout::SeqFirst => out[..rows * heads * hd].copy_from_slice(&x[..rows * heads * hd]),
        QkvLayout::HeadFirst => {
            for h in 0..heads {
                out[h * len * hd..][..rows * hd].copy_from_slice(&x[h * rows * hd..][..rows * hd]);
            }
        }
    }
    out
}

fn unpad_positions(
    x: &[u16],
    rows: usize,
    len: usize,
    heads: usize,
    hd: usize,
    layout: QkvLayout,
) -> Vec<u16> {
    match layout {
        QkvLayout::SeqFirst => x[..rows * heads * hd].to_vec(),
        QkvLayout::HeadFirst => {
            let mut out = Vec::with_capacity(rows * heads * hd);
            for h in 0..heads {
                out.extend_from_slice(&x[h * len * hd..][..rows * hd]);
            }
            out
        }
    }
}
