//! Builds the reference deployment's plan structure for any architecture:
//! prefill as `rms_gemms_rope` → `flash_attn` → `o_ffn` per layer with host
//! KV extraction, a last-row host RMSNorm and the partitioned LM-head GEMV;
//! decode as `rms_gemv_rope` → host attention → `o_gemv_ffn` (the 3-launch
//! cascade where its rules allow, else standalone GEMV calls with host glue).
//! Each optimization is a switch in `PlanOptions`, so the unoptimized plan and
//! every step towards the reference are the same function with other options;
//! `apply` turns one switch on, which is how a deployment applies
//! optimizations one at a time.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::device::Device;
use super::kernels::{
    Dtype, EltwiseSpec, FlashAttentionSpec, GemmSpec, GemvSpec, Herd, LmHeadSpec, NormSpec,
    QkvLayout, RopeSpec,
};
use super::padding::{self, Padding, PaddingError, Shape};
use super::plan::{
    Binding, Buffer, BufferClass, Call, HostOp, Launch, Phase, Plan, PlanOptions, Role,
    SlidingLayers, Step, Transform, WeightSource,
};
use crate::model::arch::{Activation, Architecture, NormWeight};

/// One optimization of the reference trajectory, as a plan transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Optimization {
    MergeLaunches,
    ReuseStaticWeights,
    MarkIntermediates,
    SharedIntermediates,
    LastTokenLmHead,
    NpuLmHead,
    CascadeFfn,
    AlignLayout,
    OmitPingpong,
}

impl PlanOptions {
    /// These options with one more optimization on.
    pub fn with(&self, optimization: Optimization) -> PlanOptions {
        let mut o = self.clone();
        match optimization {
            Optimization::MergeLaunches => o.merge_launches = true,
            Optimization::ReuseStaticWeights => o.static_weights = true,
            Optimization::MarkIntermediates => o.mark_intermediates = true,
            Optimization::SharedIntermediates => o.shared_intermediates = true,
            Optimization::LastTokenLmHead => o.last_token_lm_head = true,
            Optimization::NpuLmHead => o.npu_lm_head = true,
            Optimization::CascadeFfn => o.cascade_ffn = true,
            Optimization::AlignLayout => o.layout = QkvLayout::SeqFirst,
            Optimization::OmitPingpong => o.omit_pingpong = true,
        }
        o
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("{model}: {what} has no plan structure in the reference deployment")]
    Unsupported { model: String, what: String },
    #[error("{model}: the O+FFN split runs {split} launches, the group has {launches}")]
    Split {
        model: String,
        split: usize,
        launches: usize,
    },
    #[error("{model}: {why}")]
    Padding { model: String, why: String },
}

/// A feature of a model the plans cannot express, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedFeature {
    pub name: &'static str,
    pub reason: String,
}

/// Every feature of `arch` the plan builder cannot express (it refuses a model on
/// the first; phase 0 names them all).
pub fn unsupported_features(arch: &Architecture) -> Vec<UnsupportedFeature> {
    // Gemma-3 is planned: (1 + w) norms (`Transform::OffsetOne`), sandwich
    // norms (RMSNorm launches before the residual adds), the embedding scale
    // (`HostOp::Embed::scale`), the GELU-tanh MLP (`gelu_mul`), sliding-window
    // layers with their local RoPE table (`Plan::sliding`). What follows is not.
    let mut found = Vec::new();
    if let Some(scalar) = arch.query_pre_attn_scalar {
        if integer_scale_dim(scalar).is_none() {
            found.push(UnsupportedFeature {
                name: "query_pre_attn_scalar",
                reason: format!(
                    "scores are scaled by {scalar}^-1/2; the attention kernels scale by the \
                     inverse square root of a whole number of dimensions"
                ),
            });
        }
    }
    found
}

/// The buffer of the sliding-window layers' RoPE table.
const LOCAL_LUT: &str = "lut_local";

/// The local RoPE table's buffer, when the sliding-window layers rotate with a
/// base of their own.
fn local_lut(arch: &Architecture) -> Option<String> {
    (arch.local_rope.is_some() && arch.sliding_window.is_some()).then(|| LOCAL_LUT.to_string())
}

/// The plan's sliding-window layers, from the architecture.
fn sliding_layers(arch: &Architecture) -> Option<SlidingLayers> {
    arch.sliding_window.as_ref().map(|sw| SlidingLayers {
        window: sw.window as usize,
        layers: sw.layers.clone(),
        local_lut: local_lut(arch),
    })
}

/// `query_pre_attn_scalar` as the whole number the attention kernels scale by
/// (`scale_dim^-1/2`), when it is one.
fn integer_scale_dim(scalar: f64) -> Option<usize> {
    (scalar > 0.0 && scalar.fract() == 0.0 && scalar <= 1e6).then_some(scalar as usize)
}

/// Rebuilds `plan` for `arch` with one more optimization on.
pub fn apply(
    plan: &Plan,
    arch: &Architecture,
    device: &Device,
    optimization: Optimization,
) -> Result<Plan, PlanError> {
    let options = plan.options.with(optimization);
    plan_for(
        &plan.model,
        arch,
        device,
        plan.phase,
        plan.seq_len,
        &options,
    )
}

/// The dimensions the plans run before `pad-dims`: query heads after
/// `pad-heads`' intra-group phantom heads when that is on.
pub fn unpadded_shape(arch: &Architecture, options: &PlanOptions) -> Shape {
    Shape {
        hidden: arch.hidden_size,
        ffn: arch.intermediate_size,
        head_dim: arch.head_dim,
        heads: if options.pad_heads {
            padded_heads(arch)
        } else {
            arch.num_heads
        },
        kv_heads: arch.num_kv_heads,
        qk_norm: arch.qk_norm,
    }
}

/// What `pad-dims` pads `arch` to on `device`: nothing unless the option is on.
pub fn padding_of(
    arch: &Architecture,
    device: &Device,
    options: &PlanOptions,
) -> Result<Padding, PaddingError> {
    let shape = unpadded_shape(arch, options);
    if !options.pad_dims {
        return Ok(Padding::none(&shape));
    }
    Ok(padding::search(device, &shape)?.padding)
}

/// The plan of `phase` for `arch` at `seq_len` (prefill rows, or the decode
/// context) under `options`.
pub fn plan_for(
    model: &str,
    arch: &Architecture,
    device: &Device,
    phase: Phase,
    seq_len: usize,
    options: &PlanOptions,
) -> Result<Plan, PlanError> {
    let padding = padding_of(arch, device, options).map_err(|e| PlanError::Padding {
        model: model.to_string(),
        why: e.to_string(),
    })?;
    padded_plan(model, arch, device, (phase, seq_len), options, padding)
}

/// [`plan_for`] at the given padding (which must pad this model's unpadded
/// shape, `unpadded_shape`), whatever `options.pad_dims` says: how the
/// exactness of padding is tested one dimension at a time.
pub fn padded_plan(
    model: &str,
    arch: &Architecture,
    device: &Device,
    (phase, seq_len): (Phase, usize),
    options: &PlanOptions,
    padding: Padding,
) -> Result<Plan, PlanError> {
    let unsupported = |what: &str| PlanError::Unsupported {
        model: model.to_string(),
        what: what.to_string(),
    };
    if let Some(feature) = unsupported_features(arch).first() {
        return Err(unsupported(feature.name));
    }
    if phase == Phase::Decode && !options.gemv_decode {
        return Err(unsupported("decode with CPU projections"));
    }
    let base = unpadded_shape(arch, options);
    let consistent = padding.hidden.real == base.hidden
        && padding.ffn.real == base.ffn
        && padding.head_dim.real == base.head_dim
        && padding.heads.real == base.heads
        && padding.kv_heads.real == base.kv_heads
        && padding.heads.padded == padding.kv_heads.padded * padding.group()
        && padding.dims().iter().all(|(_, p)| p.padded >= p.real);
    if !consistent {
        return Err(PlanError::Padding {
            model: model.to_string(),
            why: format!("{padding:?} does not pad this model's dimensions {base:?}"),
        });
    }
    let mut b = Builder::new(model, arch, device, (phase, seq_len), options, padding);
    match phase {
        Phase::Prefill => b.prefill()?,
        Phase::Decode => b.decode(),
    }
    Ok(b.finish())
}

/// Model dimensions as the kernels see them, with the real ones they pad.
#[derive(Debug, Clone, Copy)]
struct Dims {
    hidden: usize,
    real_hidden: usize,
    ffn: usize,
    real_ffn: usize,
    head_dim: usize,
    real_head_dim: usize,
    /// Query heads as the kernels see them: `kv_heads × group`.
    heads: usize,
    /// Query heads per KV head (after `pad-heads`' phantom heads).
    group: usize,
    /// The config's query heads.
    real_heads: usize,
    kv_heads: usize,
    real_kv_heads: usize,
    vocab: usize,
    eps: f64,
    /// `query_pre_attn_scalar` as a whole number of dimensions.
    attn_scalar: Option<usize>,
}

impl Dims {
    fn q_dim(&self) -> usize {
        self.heads * self.head_dim
    }

    fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Whether `pad-heads` put phantom heads inside the KV groups.
    fn padded(&self) -> bool {
        self.real_kv_heads * self.group != self.real_heads
    }

    fn level(real: usize, padded: usize) -> Vec<[usize; 2]> {
        if real == padded {
            Vec::new()
        } else {
            vec![[real, padded]]
        }
    }

    /// A hidden-wide vector: its padded length and levels.
    fn hidden_vector(&self) -> (usize, Vec<[usize; 2]>) {
        (self.hidden, self.hidden_levels())
    }

    /// A head_dim-wide vector (a Q/K norm weight).
    fn head_vector(&self) -> (usize, Vec<[usize; 2]>) {
        (self.head_dim, self.head_dim_levels())
    }

    /// Zero-padding levels of a hidden axis.
    fn hidden_levels(&self) -> Vec<[usize; 2]> {
        Self::level(self.real_hidden, self.hidden)
    }

    fn ffn_levels(&self) -> Vec<[usize; 2]> {
        Self::level(self.real_ffn, self.ffn)
    }

    fn head_dim_levels(&self) -> Vec<[usize; 2]> {
        Self::level(self.real_head_dim, self.head_dim)
    }

    /// A `[kv groups, heads per group, head_dim]` axis: KV groups appended,
    /// zeros appended to each head.
    fn heads_levels(&self, per_group: usize) -> Vec<[usize; 2]> {
        if self.kv_heads == self.real_kv_heads && self.head_dim == self.real_head_dim {
            return Vec::new();
        }
        vec![
            [self.real_kv_heads, self.kv_heads],
            [per_group, per_group],
            [self.real_head_dim, self.head_dim],
        ]
    }

    fn q_levels(&self) -> Vec<[usize; 2]> {
        self.heads_levels(self.group)
    }

    fn kv_levels(&self) -> Vec<[usize; 2]> {
        self.heads_levels(1)
    }

    /// The real column count of a hidden-wide norm, when padded.
    fn real_hidden_cols(&self) -> Option<usize> {
        (self.hidden != self.real_hidden).then_some(self.real_hidden)
    }

    /// The real head_dim, when the heads are padded.
    fn real_head_dim(&self) -> Option<usize> {
        (self.head_dim != self.real_head_dim).then_some(self.real_head_dim)
    }

    /// What the attention scores are scaled by the inverse square root of, when
    /// it is not the kernels' head_dim: `query_pre_attn_scalar` (Gemma), else
    /// the real head_dim of padded heads.
    fn scale_dim(&self) -> Option<usize> {
        match self.attn_scalar {
            Some(s) if s != self.head_dim => Some(s),
            Some(_) => None,
            None => self.real_head_dim(),
        }
    }

    /// Whether any dimension the decode cascade reads is padded: its fused
    /// RMSNorm averages over its whole K, and its K split moves with K.
    fn cascade_padded(&self) -> bool {
        self.hidden != self.real_hidden
            || self.ffn != self.real_ffn
            || self.head_dim != self.real_head_dim
            || self.kv_heads != self.real_kv_heads
    }
}

/// A `ZeroPad` transform for these levels, if any axis is padded.
fn zero_pad(rows: Vec<[usize; 2]>, cols: Vec<[usize; 2]>) -> Option<Transform> {
    (!rows.is_empty() || !cols.is_empty()).then_some(Transform::ZeroPad { rows, cols })
}

/// The smallest GQA-compatible head count that makes heads × head_dim a
/// multiple of 1024 (phase-2 prerequisite for non-aligned dims), if any
/// exists within twice the real count.
fn padded_heads(arch: &Architecture) -> usize {
    let (heads, kv, hd) = (arch.num_heads, arch.num_kv_heads.max(1), arch.head_dim);
    if (heads * hd) % 1024 == 0 {
        return heads;
    }
    (heads + 1..=2 * heads)
        .find(|h| h % kv == 0 && (h * hd) % 1024 == 0)
        .unwrap_or(heads)
}

struct Builder<'a> {
    model: String,
    arch: &'a Architecture,
    device: &'a Device,
    phase: Phase,
    seq: usize,
    options: &'a PlanOptions,
    padding: Option<Padding>,
    dims: Dims,
    buffers: BTreeMap<String, Buffer>,
    prologue: Vec<Step>,
    layer: Vec<Step>,
    epilogue: Vec<Step>,
}

/// The weights of a layer's O+FFN block: its four projections and the norm in
/// front of its MLP.
struct OFfnWeights {
    wo: String,
    wg: String,
    wu: String,
    wd: String,
    ln2: String,
}

/// Launches merged (or not) as one group, with the buffers consumed after it.
struct Group {
    name: &'static str,
    launches: Vec<Launch>,
    outputs: Vec<String>,
}

impl<'a> Builder<'a> {
    fn new(
        model: &str,
        arch: &'a Architecture,
        device: &'a Device,
        (phase, seq): (Phase, usize),
        options: &'a PlanOptions,
        padding: Padding,
    ) -> Self {
        let dims = Dims {
            hidden: padding.hidden.padded,
            real_hidden: padding.hidden.real,
            ffn: padding.ffn.padded,
            real_ffn: padding.ffn.real,
            head_dim: padding.head_dim.padded,
            real_head_dim: padding.head_dim.real,
            heads: padding.heads.padded,
            group: padding.group(),
            real_heads: arch.num_heads,
            kv_heads: padding.kv_heads.padded,
            real_kv_heads: padding.kv_heads.real,
            vocab: arch.vocab_size,
            eps: arch.rms_norm_eps,
            attn_scalar: arch.query_pre_attn_scalar.and_then(integer_scale_dim),
        };
        Builder {
            model: model.to_string(),
            arch,
            device,
            phase,
            seq,
            options,
            padding: Some(padding).filter(Padding::is_padded),
            dims,
            buffers: BTreeMap::new(),
            prologue: Vec::new(),
            layer: Vec::new(),
            epilogue: Vec::new(),
        }
    }

    fn finish(self) -> Plan {
        Plan {
            model: self.model,
            phase: self.phase,
            seq_len: self.seq,
            num_layers: self.arch.num_layers,
            options: self.options.clone(),
            padding: self.padding,
            sliding: sliding_layers(self.arch),
            buffers: self.buffers,
            prologue: self.prologue,
            layer: self.layer,
            epilogue: self.epilogue,
        }
    }

    /// Rows every activation has: the sequence in prefill, one in decode.
    fn rows(&self) -> usize {
        match self.phase {
            Phase::Prefill => self.seq,
            Phase::Decode => 1,
        }
    }

    fn act(&mut self, name: &str, elements: usize) -> String {
        self.buffers.insert(
            name.to_string(),
            Buffer {
                class: BufferClass::Activation,
                dtype: Dtype::Bf16,
                elements,
                source: None,
                per_layer: false,
            },
        );
        name.to_string()
    }

    fn weight_class(&self) -> BufferClass {
        if self.options.static_weights {
            BufferClass::StaticWeight
        } else {
            BufferClass::Weight
        }
    }

    fn tensor(
        &mut self,
        name: &str,
        class: BufferClass,
        tensor: String,
        elements: usize,
        transforms: Vec<Transform>,
    ) -> String {
        let per_layer = tensor.contains("{layer}");
        self.buffers.insert(
            name.to_string(),
            Buffer {
                class,
                dtype: Dtype::Bf16,
                elements,
                source: Some(WeightSource::Tensor {
                    name: tensor,
                    transforms,
                }),
                per_layer,
            },
        );
        name.to_string()
    }

    /// A layer projection `[out, in]` as the phase's kernel reads it:
    /// pre-transposed for prefill GEMMs, as stored for decode GEMVs; query
    /// heads padded where the plan pads them.
    fn projection(&mut self, name: &str, module: &str, out: usize, inp: usize) -> String {
        let d = self.dims;
        let mut transforms = Vec::new();
        let pad = |axis| Transform::PadHeads {
            axis,
            heads: d.real_heads,
            padded_heads: d.heads,
            kv_heads: d.kv_heads,
            head_dim: d.head_dim,
        };
        if d.padded() && module == "self_attn.q_proj" {
            transforms.push(pad(0));
        }
        if d.padded() && module == "self_attn.o_proj" {
            transforms.push(pad(1));
        }
        let (rows, cols) = match module {
            "self_attn.q_proj" => (d.q_levels(), d.hidden_levels()),
            "self_attn.k_proj" | "self_attn.v_proj" => (d.kv_levels(), d.hidden_levels()),
            "self_attn.o_proj" => (d.hidden_levels(), d.q_levels()),
            "mlp.down_proj" => (d.hidden_levels(), d.ffn_levels()),
            _ => (d.ffn_levels(), d.hidden_levels()),
        };
        transforms.extend(zero_pad(rows, cols));
        if self.phase == Phase::Prefill {
            transforms.push(Transform::Transpose);
        }
        let class = self.weight_class();
        self.tensor(
            name,
            class,
            format!("model.layers.{{layer}}.{module}.weight"),
            out * inp,
            transforms,
        )
    }

    /// A per-layer vector (a norm weight) of `elements`, zero-padded along
    /// `levels`.
    fn layer_vector(
        &mut self,
        name: &str,
        tensor: &str,
        (elements, levels): (usize, Vec<[usize; 2]>),
        class: BufferClass,
    ) -> String {
        let transforms = self.norm_transforms(levels);
        self.tensor(
            name,
            class,
            format!("model.layers.{{layer}}.{tensor}"),
            elements,
            transforms,
        )
    }

    /// A norm weight's setup: `1 + w` where the model's norms apply that
    /// (before the zero padding, so padded columns stay zero), then the padding.
    fn norm_transforms(&self, levels: Vec<[usize; 2]>) -> Vec<Transform> {
        let mut transforms = Vec::new();
        if self.arch.norm_weight == NormWeight::OffsetOne {
            transforms.push(Transform::OffsetOne);
        }
        transforms.extend(zero_pad(levels, Vec::new()));
        transforms
    }

    /// The RoPE table: rows as wide as the real head_dim (the rotated part);
    /// with the local base's table beside it when sliding-window layers have
    /// one (`SlidingLayers::local_lut`).
    fn lut(&mut self) -> String {
        let positions = self.seq;
        let hd = self.dims.real_head_dim;
        let has_local = local_lut(self.arch).is_some();
        for (name, local) in [("lut", false), (LOCAL_LUT, true)] {
            if local && !has_local {
                continue;
            }
            self.buffers.insert(
                name.to_string(),
                Buffer {
                    class: self.weight_class(),
                    dtype: Dtype::Bf16,
                    elements: positions * hd,
                    source: Some(WeightSource::RopeLut {
                        positions,
                        head_dim: hd,
                        local,
                    }),
                    per_layer: false,
                },
            );
        }
        "lut".to_string()
    }

    /// The embedding table on the host, its columns zero-padded to hidden.
    fn embedding_table(&mut self) -> String {
        let d = self.dims;
        self.tensor(
            "embed",
            BufferClass::Host,
            "model.embed_tokens.weight".into(),
            d.vocab * d.hidden,
            zero_pad(Vec::new(), d.hidden_levels())
                .into_iter()
                .collect(),
        )
    }

    /// A host-side hidden-wide vector (the final norm's weight).
    fn final_norm(&mut self, class: BufferClass) -> String {
        let (elements, levels) = self.dims.hidden_vector();
        let transforms = self.norm_transforms(levels);
        self.tensor(
            "final_norm",
            class,
            "model.norm.weight".into(),
            elements,
            transforms,
        )
    }

    fn output_projection_tensor(&self) -> String {
        if self.arch.tie_word_embeddings {
            "model.embed_tokens.weight".to_string()
        } else {
            "lm_head.weight".to_string()
        }
    }

    /// A row norm of `cols` (padded) columns whose real ones are `real_cols`.
    fn norm(&self, rows: usize, cols: usize, real_cols: Option<usize>) -> NormSpec {
        let herd = if rows % self.device.columns == 0 {
            Herd::ROW
        } else {
            Herd::SINGLE
        };
        NormSpec {
            rows,
            cols,
            herd,
            weighted: true,
            real_cols,
        }
    }

    fn eltwise(&self, n: usize) -> EltwiseSpec {
        EltwiseSpec::select(self.device, n, Herd::ROW)
    }

    fn rope_spec(&self, heads: usize) -> RopeSpec {
        let rows = self.rows();
        let herd = if rows * heads % self.device.columns == 0 && self.phase == Phase::Prefill {
            Herd::ROW
        } else {
            Herd::SINGLE
        };
        RopeSpec {
            rows,
            heads,
            head_dim: self.dims.head_dim,
            herd,
            rotary_dim: self.dims.real_head_dim(),
        }
    }

    fn gemm(&self, a: &str, b: &str, out: &str, k: usize, n: usize) -> Launch {
        let spec = GemmSpec::select(
            self.device,
            self.seq,
            k,
            n,
            self.options.precision,
            Dtype::Bf16,
        );
        Launch::Gemm {
            a: a.into(),
            b: b.into(),
            out: out.into(),
            spec,
        }
    }

    fn gemv_spec(&self, m: usize, k: usize, herd: Herd) -> GemvSpec {
        let mut spec = GemvSpec::select(self.device, m, k, herd);
        spec.omit_pingpong = self.options.omit_pingpong;
        spec
    }

    fn gemv(&self, w: &str, x: &str, out: &str, residual: Option<&str>, herd: Herd) -> Launch {
        let size = |name: &str| self.buffers.get(name).map_or(0, |b| b.elements);
        let (m, k) = (size(out), size(x));
        let mut spec = self.gemv_spec(m, k, herd);
        spec.residual = residual.is_some();
        Launch::Gemv {
            w: w.into(),
            x: x.into(),
            out: out.into(),
            residual: residual.map(str::to_string),
            spec,
        }
    }

    /// `x` times the layer weight `w` into `out` (`k` to `n` columns): a GEMM
    /// over the prompt's rows in prefill, a GEMV on one row in decode.
    fn matmul(&self, x: &str, w: &str, out: &str, k: usize, n: usize) -> Launch {
        match self.phase {
            Phase::Prefill => self.gemm(x, w, out, k, n),
            Phase::Decode => self.gemv(w, x, out, None, Herd::ROW),
        }
    }

    fn host(&mut self, op: HostOp) {
        self.layer.push(Step::Host(op));
    }

    /// The attention block's front half: input RMSNorm, Q/K/V projections,
    /// optional Q/K norm, RoPE. Returns the group and the names of q, k, v.
    fn attention_front(&mut self) -> (Group, [String; 3]) {
        let d = self.dims;
        let rows = self.rows();
        let (qd, kvd) = (d.q_dim(), d.kv_dim());
        let x = self.act("x", rows * d.hidden);
        let xn = self.act("xn", rows * d.hidden);
        let ln1 = self.layer_vector(
            "ln1",
            "input_layernorm.weight",
            d.hidden_vector(),
            self.weight_class(),
        );
        let wq = self.projection("wq", "self_attn.q_proj", qd, d.hidden);
        let wk = self.projection("wk", "self_attn.k_proj", kvd, d.hidden);
        let wv = self.projection("wv", "self_attn.v_proj", kvd, d.hidden);
        let (q, k, v) = (
            self.act("q", rows * qd),
            self.act("k", rows * kvd),
            self.act("v", rows * kvd),
        );
        let lut = self.lut();
        let mut launches = vec![Launch::Rmsnorm {
            x: x.clone(),
            weight: Some(ln1),
            out: xn.clone(),
            eps: d.eps,
            spec: self.norm(rows, d.hidden, d.real_hidden_cols()),
        }];
        for (w, out) in [(&wq, &q), (&wk, &k), (&wv, &v)] {
            let n = self.buffers[out.as_str()].elements / rows;
            launches.push(self.matmul(&xn, w, out, d.hidden, n));
        }
        let (mut q_in, mut k_in, mut v_out) = (q.clone(), k.clone(), v.clone());
        if self.options.bias_on_npu && self.arch.qkv_bias {
            let biased = self.npu_bias(&[q.clone(), k.clone(), v.clone()]);
            launches.extend(biased.iter().map(|(launch, _)| launch.clone()));
            [q_in, k_in, v_out] = biased.map(|(_, out)| out);
        }
        if self.arch.qk_norm {
            let class = self.weight_class();
            let qn_w =
                self.layer_vector("q_norm", "self_attn.q_norm.weight", d.head_vector(), class);
            let kn_w =
                self.layer_vector("k_norm", "self_attn.k_norm.weight", d.head_vector(), class);
            let (qn, kn) = (self.act("qn", rows * qd), self.act("kn", rows * kvd));
            for (x, w, out, heads) in [(&q_in, qn_w, &qn, d.heads), (&k_in, kn_w, &kn, d.kv_heads)]
            {
                launches.push(Launch::QkRmsnorm {
                    x: x.clone(),
                    weight: w,
                    out: out.clone(),
                    eps: d.eps,
                    spec: self.norm(rows * heads, d.head_dim, d.real_head_dim()),
                });
            }
            (q_in, k_in) = (qn, kn);
        }
        let (qr, kr) = (self.act("qr", rows * qd), self.act("kr", rows * kvd));
        for (x, out, heads) in [(&q_in, &qr, d.heads), (&k_in, &kr, d.kv_heads)] {
            launches.push(Launch::Rope {
                x: x.clone(),
                lut: lut.clone(),
                out: out.clone(),
                spec: self.rope_spec(heads),
            });
        }
        let name = match self.phase {
            Phase::Prefill => "rms_gemms_rope",
            Phase::Decode => "rms_gemv_rope",
        };
        let outputs = vec![qr.clone(), kr.clone(), v_out.clone()];
        (
            Group {
                name,
                launches,
                outputs,
            },
            [qr, kr, v_out],
        )
    }

    /// Qwen2.5's q/k/v bias as broadcast adds on the NPU, before RoPE (the
    /// published plans): each projection output plus its bias repeated over
    /// the rows. Returns each add with the buffer it writes.
    fn npu_bias(&mut self, qkv: &[String; 3]) -> [(Launch, String); 3] {
        let d = self.dims;
        let rows = self.rows();
        let parts = [
            ("bq", "q_proj", d.heads, d.q_levels()),
            ("bk", "k_proj", d.kv_heads, d.kv_levels()),
            ("bv", "v_proj", d.kv_heads, d.kv_levels()),
        ];
        let class = self.weight_class();
        std::array::from_fn(|i| {
            let (name, module, heads, levels) = parts[i].clone();
            let mut transforms = self.bias_transforms(name, levels);
            transforms.push(Transform::Broadcast { rows });
            let width = heads * d.head_dim;
            let bias = self.tensor(
                name,
                class,
                format!("model.layers.{{layer}}.self_attn.{module}.bias"),
                rows * width,
                transforms,
            );
            let biased = self.act(&format!("{}b", qkv[i]), rows * width);
            let launch = Launch::EltwiseAdd {
                a: qkv[i].clone(),
                b: bias,
                out: biased.clone(),
                spec: self.eltwise(rows * width),
            };
            (launch, biased)
        })
    }

    /// Phantom query heads along a bias's rows (axis 0).
    /// How a q/k/v bias vector reaches the plan's padded width: phantom query
    /// heads first (at the real head size), then the zero padding of its axis.
    fn bias_transforms(&self, name: &str, levels: Vec<[usize; 2]>) -> Vec<Transform> {
        let d = self.dims;
        let mut transforms = Vec::new();
        if name == "bq" && d.padded() {
            transforms.push(Transform::PadHeads {
                axis: 0,
                heads: d.real_heads,
                padded_heads: d.real_kv_heads * d.group,
                kv_heads: d.real_kv_heads,
                head_dim: d.real_head_dim,
            });
        }
        transforms.extend(zero_pad(levels, Vec::new()));
        transforms
    }

    /// Qwen2.5's q/k/v bias, added on the host after RoPE.
    fn bias_after_rope(&mut self, qkv: &[String; 3]) {
        if !self.arch.qkv_bias || self.options.bias_on_npu {
            return;
        }
        let d = self.dims;
        let rows = self.rows();
        let parts = [
            ("bq", "q_proj", d.heads, true, d.q_levels()),
            ("bk", "k_proj", d.kv_heads, true, d.kv_levels()),
            ("bv", "v_proj", d.kv_heads, false, d.kv_levels()),
        ];
        for ((name, module, heads, rotate, levels), x) in parts.into_iter().zip(qkv) {
            let transforms = self.bias_transforms(name, levels);
            let bias = self.tensor(
                name,
                BufferClass::Host,
                format!("model.layers.{{layer}}.self_attn.{module}.bias"),
                heads * d.head_dim,
                transforms,
            );
            self.host(HostOp::BiasAdd {
                x: x.clone(),
                bias,
                rows,
                heads,
                head_dim: d.head_dim,
                lut: rotate.then(|| "lut".to_string()),
                rotary_dim: d.real_head_dim().filter(|_| rotate),
            });
        }
    }

    fn prefill(&mut self) -> Result<(), PlanError> {
        let d = self.dims;
        let s = self.seq;
        let embed = self.embedding_table();
        self.act("x", s * d.hidden);
        self.prologue.push(Step::Host(HostOp::Embed {
            table: embed,
            out: "x".into(),
            rows: s,
            hidden: d.hidden,
            scale: self.embedding_scale(),
        }));

        let (front, [qr, kr, v]) = self.attention_front();
        self.emit(front);
        self.bias_after_rope(&[qr.clone(), kr.clone(), v.clone()]);
        self.host(HostOp::KvStore {
            k: kr.clone(),
            v: v.clone(),
            rows: s,
            kv_width: d.kv_dim(),
        });
        let attn = self.act("attn", s * d.q_dim());
        self.attention_call(&qr, &kr, &v, &attn);
        let o_ffn = self.o_ffn_prefill(&attn);
        self.emit_split(o_ffn)?;
        self.host(HostOp::Scheduling {
            what: "prefill layer loop".into(),
        });
        self.lm_head_prefill();
        Ok(())
    }

    /// The flash-attention call, with host transposes around it when it runs
    /// head-first.
    fn attention_call(&mut self, q: &str, k: &str, v: &str, attn: &str) {
        let d = self.dims;
        let s = self.seq;
        let mut spec = FlashAttentionSpec::select(s, s, d.heads, d.kv_heads, d.head_dim, true);
        if spec.tile.dk_chunks == 1 {
            spec.layout = self.options.layout;
        }
        spec.scale_dim = d.scale_dim();
        let mut names = [
            q.to_string(),
            k.to_string(),
            v.to_string(),
            attn.to_string(),
        ];
        if spec.layout == QkvLayout::HeadFirst {
            let heads = [d.heads, d.kv_heads, d.kv_heads, d.heads];
            for i in 0..4 {
                let elements = self.buffers[names[i].as_str()].elements;
                let hf = self.act(&format!("{}_hf", names[i]), elements);
                if i < 3 {
                    self.host(HostOp::Transpose {
                        from: names[i].clone(),
                        to: hf.clone(),
                        rows: s,
                        heads: heads[i],
                        head_dim: d.head_dim,
                        to_layout: QkvLayout::HeadFirst,
                    });
                }
                names[i] = hf;
            }
        }
        let [q, k, v, out] = names;
        let group = Group {
            name: "flash_attn",
            launches: vec![Launch::FlashAttention {
                q,
                k,
                v,
                out: out.clone(),
                spec,
            }],
            outputs: vec![out.clone()],
        };
        self.emit(group);
        // The reference writes 20 MB before its flash_attn call at Llama-1B
        // dims (calibration §4): Q, K, V and the output slot, which its
        // attention wrapper passes as a host array rather than an
        // intermediate.
        if let Some(Step::Call(call)) = self.layer.last_mut() {
            for binding in call.bindings.iter_mut().filter(|b| b.buffer == out) {
                binding.write = true;
            }
        }
        if spec.layout == QkvLayout::HeadFirst {
            self.host(HostOp::Transpose {
                from: out,
                to: attn.to_string(),
                rows: s,
                heads: d.heads,
                head_dim: d.head_dim,
                to_layout: QkvLayout::SeqFirst,
            });
        }
    }

    /// A layer's o_proj, gate, up and down projections and the norm in front
    /// of its MLP (`post_attention_layernorm`, or Gemma's
    /// `pre_feedforward_layernorm`).
    fn o_ffn_weights(&mut self) -> OFfnWeights {
        let d = self.dims;
        let wo = self.projection("wo", "self_attn.o_proj", d.hidden, d.q_dim());
        let wg = self.projection("wg", "mlp.gate_proj", d.ffn, d.hidden);
        let wu = self.projection("wu", "mlp.up_proj", d.ffn, d.hidden);
        let wd = self.projection("wd", "mlp.down_proj", d.hidden, d.ffn);
        let class = self.weight_class();
        let mlp_norm = if self.arch.sandwich_norms {
            "pre_feedforward_layernorm.weight"
        } else {
            "post_attention_layernorm.weight"
        };
        let ln2 = self.layer_vector("ln2", mlp_norm, d.hidden_vector(), class);
        OFfnWeights {
            wo,
            wg,
            wu,
            wd,
            ln2,
        }
    }

    /// The O+FFN block's activations, as many rows as the phase has:
    /// `[o, h1, hn, down]` hidden-wide and `[gate, up, act]` FFN-wide.
    fn o_ffn_acts(&mut self) -> ([String; 4], [String; 3]) {
        let d = self.dims;
        let rows = self.rows();
        (
            ["o", "h1", "hn", "down"].map(|n| self.act(n, rows * d.hidden)),
            ["gate", "up", "act"].map(|n| self.act(n, rows * d.ffn)),
        )
    }

    /// Gemma's sandwich norms, the weights of the RMSNorms on the attention and
    /// MLP outputs before their residual adds, held as `class`.
    fn sandwich_weights(&mut self, class: BufferClass) -> Option<[String; 2]> {
        if !self.arch.sandwich_norms {
            return None;
        }
        let v = self.dims.hidden_vector();
        Some([
            self.layer_vector(
                "ln_attn_out",
                "post_attention_layernorm.weight",
                v.clone(),
                class,
            ),
            self.layer_vector("ln_mlp_out", "post_feedforward_layernorm.weight", v, class),
        ])
    }

    /// The NPU RMSNorm of a sandwich norm on `rows` rows of `x` into `out`.
    fn sandwich_norm(&mut self, x: &str, weight: &str, out: &str, rows: usize) -> Launch {
        let d = self.dims;
        let out = self.act(out, rows * d.hidden);
        Launch::Rmsnorm {
            x: x.into(),
            weight: Some(weight.into()),
            out,
            eps: d.eps,
            spec: self.norm(rows, d.hidden, d.real_hidden_cols()),
        }
    }

    /// The gated activation of the model's MLP on the NPU.
    fn gated(&self, gate: String, up: String, out: String, n: usize) -> Launch {
        let spec = self.eltwise(n);
        match self.arch.activation {
            Activation::Silu => Launch::SiluMul {
                gate,
                up,
                out,
                spec,
            },
            Activation::GeluTanh => Launch::GeluMul {
                gate,
                up,
                out,
                spec,
            },
        }
    }

    /// The embedding rows' factor (Gemma's √hidden), when the model has one.
    fn embedding_scale(&self) -> Option<f32> {
        self.arch
            .scale_embeddings
            .then(|| self.arch.embedding_scale())
    }

    /// `launches` with the sandwich norm `weight` applied to `produced` (the
    /// output of the last launch) before the residual add reads it: returns
    /// what the add reads.
    fn normed_output(
        &mut self,
        launches: &mut Vec<Launch>,
        produced: String,
        weight: Option<&String>,
        out: &str,
        rows: usize,
    ) -> String {
        match weight {
            Some(w) => {
                let norm = self.sandwich_norm(&produced, w, out, rows);
                launches.push(norm);
                out.to_string()
            }
            None => produced,
        }
    }

    fn o_ffn_prefill(&mut self, attn: &str) -> Group {
        let weights = self.o_ffn_weights();
        Group {
            name: "o_ffn",
            launches: self.o_ffn_launches(attn, weights),
            outputs: vec!["x".into()],
        }
    }

    /// The layer's second half on the NPU as one group's launches: o_proj, the
    /// attention output's sandwich norm, the residual add, the MLP's norm, gate
    /// and up, the gated activation, down, the MLP output's sandwich norm and
    /// the residual add; GEMMs over the prompt in prefill, GEMVs in decode.
    fn o_ffn_launches(&mut self, attn: &str, w: OFfnWeights) -> Vec<Launch> {
        let d = self.dims;
        let rows = self.rows();
        let class = self.weight_class();
        let sandwich = self.sandwich_weights(class);
        let ([o, h1, hn, down], [gate, up, act]) = self.o_ffn_acts();
        let mut launches = vec![self.matmul(attn, &w.wo, &o, d.q_dim(), d.hidden)];
        let o = self.normed_output(
            &mut launches,
            o,
            sandwich.as_ref().map(|w| &w[0]),
            "on",
            rows,
        );
        launches.extend([
            Launch::EltwiseAdd {
                a: "x".into(),
                b: o,
                out: h1.clone(),
                spec: self.eltwise(rows * d.hidden),
            },
            Launch::Rmsnorm {
                x: h1.clone(),
                weight: Some(w.ln2),
                out: hn.clone(),
                eps: d.eps,
                spec: self.norm(rows, d.hidden, d.real_hidden_cols()),
            },
            self.matmul(&hn, &w.wg, &gate, d.hidden, d.ffn),
            self.matmul(&hn, &w.wu, &up, d.hidden, d.ffn),
            self.gated(gate, up, act.clone(), rows * d.ffn),
            self.matmul(&act, &w.wd, &down, d.ffn, d.hidden),
        ]);
        let down = self.normed_output(
            &mut launches,
            down,
            sandwich.as_ref().map(|w| &w[1]),
            "down_n",
            rows,
        );
        launches.push(Launch::EltwiseAdd {
            a: h1,
            b: down,
            out: "x".into(),
            spec: self.eltwise(rows * d.hidden),
        });
        launches
    }

    fn lm_head_prefill(&mut self) {
        let d = self.dims;
        let s = self.seq;
        let class = if self.options.last_token_lm_head {
            BufferClass::Host
        } else {
            self.weight_class()
        };
        let final_norm = self.final_norm(class);
        if self.options.last_token_lm_head {
            let xf = self.act("xf", d.hidden);
            self.epilogue.push(Step::Host(HostOp::RmsNorm {
                x: "x".into(),
                weight: final_norm,
                out: xf.clone(),
                cols: d.hidden,
                eps: d.eps,
                last_row: true,
                real_cols: d.real_hidden_cols(),
            }));
            self.lm_head_gemv(&xf);
            return;
        }
        let xf = self.act("xf_all", s * d.hidden);
        let norm = Group {
            name: "final_norm",
            launches: vec![Launch::Rmsnorm {
                x: "x".into(),
                weight: Some(final_norm),
                out: xf.clone(),
                eps: d.eps,
                spec: self.norm(s, d.hidden, d.real_hidden_cols()),
            }],
            outputs: vec![xf.clone()],
        };
        let parts = self.options.lm_head_parts.max(1);
        let part_n = d.vocab.div_ceil(parts).div_ceil(512) * 512;
        let tensor = self.output_projection_tensor();
        let mut launches = Vec::new();
        let mut outputs = Vec::new();
        for p in 0..parts {
            let start = (p * part_n).min(d.vocab);
            let rows = ((p + 1) * part_n).min(d.vocab) - start;
            let mut transforms = vec![Transform::Rows {
                start,
                rows,
                padded_rows: part_n,
            }];
            transforms.extend(zero_pad(Vec::new(), d.hidden_levels()));
            transforms.push(Transform::Transpose);
            let w = self.tensor(
                &format!("lm_head.{p}"),
                self.weight_class(),
                tensor.clone(),
                part_n * d.hidden,
                transforms,
            );
            let out = self.act(&format!("logits.{p}"), s * part_n);
            launches.push(self.gemm(&xf, &w, &out, d.hidden, part_n));
            outputs.push(out);
        }
        let head = Group {
            name: "lm_head_gemm",
            launches,
            outputs,
        };
        self.emit_into(norm, Part::Epilogue);
        self.emit_into(head, Part::Epilogue);
    }

    /// The partitioned LM-head GEMV on one normalized row `x` (NPU), or a
    /// CPU matvec.
    fn lm_head_gemv(&mut self, x: &str) {
        let d = self.dims;
        let tensor = self.output_projection_tensor();
        let logits = self.act("logits", d.vocab);
        if !self.options.npu_lm_head {
            let w = self.tensor(
                "lm_head",
                BufferClass::Host,
                tensor,
                d.vocab * d.hidden,
                zero_pad(Vec::new(), d.hidden_levels())
                    .into_iter()
                    .collect(),
            );
            self.epilogue.push(Step::Host(HostOp::Matvec {
                w,
                x: x.into(),
                out: logits,
                m: d.vocab,
                k: d.hidden,
            }));
            return;
        }
        // Double-buffered whatever `omit_pingpong` says: the LM head is its
        // own module (the option is module-global), and the reference's
        // 8-partition LM head streamed 38.9 GB/s, faster than the registry's
        // double-buffered 16384x2048 GEMV (calibration §4).
        let spec = LmHeadSpec::select(
            self.device,
            d.vocab,
            d.hidden,
            self.options.lm_head_parts.max(1),
        );
        let class = self.weight_class();
        let launches: Vec<Launch> = (0..spec.parts)
            .map(|part| {
                let rows = spec.rows(part);
                let mut transforms = vec![Transform::Rows {
                    start: rows.start,
                    rows: rows.len(),
                    padded_rows: spec.part.m,
                }];
                transforms.extend(zero_pad(Vec::new(), d.hidden_levels()));
                let w = self.tensor(
                    &format!("lm_head.{part}"),
                    class,
                    tensor.clone(),
                    spec.part.m * d.hidden,
                    transforms,
                );
                Launch::LmHeadGemv {
                    w,
                    x: x.into(),
                    out: logits.clone(),
                    spec,
                    part,
                }
            })
            .collect();
        // More partitions than one call may hold run as several calls.
        let per_call = if self.options.lm_head_one_call {
            launches.len()
        } else {
            self.device.limits.launches_per_call_max
        };
        for chunk in launches.chunks(per_call.max(1)) {
            let group = Group {
                name: "lm_head_gemv",
                launches: chunk.to_vec(),
                outputs: vec![logits.clone()],
            };
            self.emit_into(group, Part::Epilogue);
        }
    }

    fn decode(&mut self) {
        let d = self.dims;
        let embed = self.embedding_table();
        self.act("x", d.hidden);
        self.prologue.push(Step::Host(HostOp::Embed {
            table: embed,
            out: "x".into(),
            rows: 1,
            hidden: d.hidden,
            scale: self.embedding_scale(),
        }));

        let (front, [qr, kr, v]) = self.attention_front();
        self.emit(front);
        self.bias_after_rope(&[qr.clone(), kr.clone(), v.clone()]);
        self.host(HostOp::KvStore {
            k: kr,
            v,
            rows: 1,
            kv_width: d.kv_dim(),
        });
        let attn = self.act("attn", d.q_dim());
        self.host(HostOp::DecodeAttention {
            q: qr,
            out: attn.clone(),
            heads: d.heads,
            kv_heads: d.kv_heads,
            head_dim: d.head_dim,
            scale_dim: d.scale_dim(),
        });
        self.o_ffn_decode(&attn);
        self.host(HostOp::Scheduling {
            what: "decode layer loop".into(),
        });

        let final_norm = self.final_norm(BufferClass::Host);
        let xf = self.act("xf", d.hidden);
        self.epilogue.push(Step::Host(HostOp::RmsNorm {
            x: "x".into(),
            weight: final_norm,
            out: xf.clone(),
            cols: d.hidden,
            eps: d.eps,
            last_row: false,
            real_cols: d.real_hidden_cols(),
        }));
        self.lm_head_gemv(&xf);
    }

    /// Whether the fused O+FFN cascade is legal for these dims (calibration
    /// §1: hidden size below 2560, FFN size and the O input divisible by 512).
    fn cascade_legal(&self) -> bool {
        let d = self.dims;
        let l = &self.device.limits;
        // The cascade adds o_proj's and down_proj's outputs to the residual
        // inside its GEMVs: no room for a sandwich norm between.
        !d.cascade_padded()
            && !self.arch.sandwich_norms
            && d.hidden < l.cascade_hidden_size_below
            && d.ffn % l.cascade_hidden_multiple == 0
            && d.q_dim() % l.cascade_hidden_multiple == 0
    }

    fn o_ffn_decode(&mut self, attn: &str) {
        let weights = self.o_ffn_weights();
        let launches = if self.options.cascade_ffn && self.cascade_legal() {
            self.o_ffn_cascade(attn, weights)
        } else if self.options.cascade_ffn || !self.o_ffn_placeable(attn, &weights) {
            // The cascade does not fit these dims: standalone GEMV calls with
            // the glue on the host (lessons 18–19).
            self.o_ffn_host_glue(attn, weights);
            return;
        } else {
            self.o_ffn_launches(attn, weights)
        };
        self.emit(Group {
            name: "o_gemv_ffn",
            launches,
            outputs: vec!["x".into()],
        });
    }

    /// The decode O+FFN block as the 3-launch cascade: o_proj and down_proj
    /// add the residual inside their GEMVs, the RMSNorm runs fused into the
    /// SwiGLU GEMV.
    fn o_ffn_cascade(&mut self, attn: &str, w: OFfnWeights) -> Vec<Launch> {
        let d = self.dims;
        let ([_, h1, _, _], [_, _, act]) = self.o_ffn_acts();
        let herd = Herd([self.device.columns, self.options.cascade_rows]);
        let mut swiglu = self.gemv_spec(d.ffn, d.hidden, herd);
        swiglu.omit_pingpong = self.options.omit_pingpong;
        vec![
            self.gemv(&w.wo, attn, &h1, Some("x"), herd),
            Launch::GemvSwiglu {
                x: h1.clone(),
                norm: w.ln2,
                gate: w.wg,
                up: w.wu,
                out: act.clone(),
                eps: d.eps,
                spec: swiglu,
            },
            self.gemv(&w.wd, &act, "x", Some(&h1), herd),
        ]
    }

    /// Whether the GEMV kernel can place each of the decode block's four
    /// projections on one row of the array.
    fn o_ffn_placeable(&mut self, attn: &str, w: &OFfnWeights) -> bool {
        let ([o, _, hn, down], [gate, up, act]) = self.o_ffn_acts();
        [
            (&w.wo, attn, &o),
            (&w.wg, &hn, &gate),
            (&w.wu, &hn, &up),
            (&w.wd, &act, &down),
        ]
        .iter()
        .all(|(w, x, out)| {
            self.gemv(w, x, out, None, Herd::ROW)
                .check(self.device)
                .is_empty()
        })
    }

    /// The decode O+FFN block as standalone GEMV calls with the residual adds,
    /// norms and activation on the host.
    fn o_ffn_host_glue(&mut self, attn: &str, w: OFfnWeights) {
        let d = self.dims;
        let ([o, h1, hn, down], [gate, up, act]) = self.o_ffn_acts();
        if let Some(b) = self.buffers.get_mut("ln2") {
            b.class = BufferClass::Host;
        }
        let sandwich = self.sandwich_weights(BufferClass::Host);
        self.projection_call("o_gemv", &w.wo, attn, &o);
        let o = self.host_normed(o, sandwich.as_ref().map(|w| &w[0]), "on");
        self.host(HostOp::Add {
            a: "x".into(),
            b: o,
            out: h1.clone(),
            n: d.hidden,
        });
        self.host(HostOp::RmsNorm {
            x: h1.clone(),
            weight: w.ln2,
            out: hn.clone(),
            cols: d.hidden,
            eps: d.eps,
            last_row: false,
            real_cols: d.real_hidden_cols(),
        });
        self.projection_call("gate_gemv", &w.wg, &hn, &gate);
        self.projection_call("up_gemv", &w.wu, &hn, &up);
        self.host(HostOp::SiluMul {
            gate,
            up,
            out: act.clone(),
            n: d.ffn,
        });
        self.projection_call("down_gemv", &w.wd, &act, &down);
        let down = self.host_normed(down, sandwich.as_ref().map(|w| &w[1]), "down_n");
        self.host(HostOp::Add {
            a: h1,
            b: down,
            out: "x".into(),
            n: d.hidden,
        });
    }

    /// `x` through the host RMSNorm `weight` into `out` when there is one (a
    /// sandwich norm of the host-glue decode path): returns what to read next.
    fn host_normed(&mut self, x: String, weight: Option<&String>, out: &str) -> String {
        let Some(w) = weight else {
            return x;
        };
        let d = self.dims;
        let out = self.act(out, d.hidden);
        self.host(HostOp::RmsNorm {
            x,
            weight: w.clone(),
            out: out.clone(),
            cols: d.hidden,
            eps: d.eps,
            last_row: false,
            real_cols: d.real_hidden_cols(),
        });
        out
    }

    /// One decode projection as its own GEMV call, or on the CPU when the
    /// GEMV kernel cannot place it (e.g. K not a multiple of 64).
    fn projection_call(&mut self, name: &'static str, w: &str, x: &str, out: &str) {
        let mut launch = self.gemv(w, x, out, None, Herd::ROW);
        if let Launch::Gemv { spec, .. } = &mut launch {
            spec.omit_pingpong |= self.options.single_buffered_down && name == "down_gemv";
        }
        if launch.check(self.device).is_empty() {
            self.emit(Group {
                name,
                launches: vec![launch],
                outputs: vec![out.to_string()],
            });
            return;
        }
        let (m, k) = (self.buffers[out].elements, self.buffers[x].elements);
        if let Some(b) = self.buffers.get_mut(w) {
            b.class = BufferClass::Host;
        }
        self.host(HostOp::Matvec {
            w: w.into(),
            x: x.into(),
            out: out.into(),
            m,
            k,
        });
    }

    fn emit(&mut self, group: Group) {
        self.emit_into(group, Part::Layer);
    }

    /// Emits the prefill O+FFN group as the options' split calls, when it is
    /// merged and a split is given.
    fn emit_split(&mut self, group: Group) -> Result<(), PlanError> {
        let splits = &self.options.o_ffn_calls;
        if splits.is_empty() || !self.options.merge_launches {
            self.emit(group);
            return Ok(());
        }
        let split: usize = splits.iter().map(|s| s.launches).sum();
        if split != group.launches.len() {
            return Err(PlanError::Split {
                model: self.model.clone(),
                split,
                launches: group.launches.len(),
            });
        }
        let mut start = 0;
        for s in splits {
            let call = self.call(&group, start..start + s.launches, s.name.clone());
            self.layer.push(Step::Call(call));
            start += s.launches;
        }
        Ok(())
    }

    /// Emits a group as one merged call or one call per launch.
    fn emit_into(&mut self, group: Group, part: Part) {
        let n = group.launches.len();
        let limit = self.device.limits.launches_per_call_max.max(1);
        let fits = n <= limit || self.options.published_calls;
        let calls: Vec<Call> = if (self.options.merge_launches && fits) || n == 1 {
            vec![self.call(&group, 0..n, group.name.to_string())]
        } else if self.options.merge_launches {
            // More launches than one call may hold (Gemma's sandwich norms make
            // o_ffn 10): as few calls as the limit allows, of even size.
            let parts = n.div_ceil(limit);
            let size = n.div_ceil(parts);
            (0..parts)
                .map(|p| {
                    let range = p * size..((p + 1) * size).min(n);
                    self.call(&group, range, format!("{}.{p}", group.name))
                })
                .collect()
        } else {
            (0..group.launches.len())
                .map(|i| {
                    let name =
                        format!("{}.{}.{}", group.name, i, group.launches[i].kernel().name());
                    self.call(&group, i..i + 1, name)
                })
                .collect()
        };
        let steps = match part {
            Part::Layer => &mut self.layer,
            Part::Epilogue => &mut self.epilogue,
        };
        steps.extend(calls.into_iter().map(Step::Call));
    }

    /// The call running `range` of the group's launches, with the host
    /// traffic of every buffer it binds.
    fn call(&self, group: &Group, range: std::ops::Range<usize>, name: String) -> Call {
        let o = self.options;
        let inside = &group.launches[range.clone()];
        let before = &group.launches[..range.start];
        let after = &group.launches[range.end..];
        let mut order: Vec<&str> = Vec::new();
        for l in inside {
            for n in l.inputs().into_iter().chain([l.output()]) {
                if !order.contains(&n) {
                    order.push(n);
                }
            }
        }
        let written_before: BTreeSet<&str> = before.iter().map(Launch::output).collect();
        let read_after: BTreeSet<&str> = after.iter().flat_map(Launch::inputs).collect();
        let bindings = order
            .into_iter()
            .map(|name| {
                let buffer = &self.buffers[name];
                if buffer.class != BufferClass::Activation {
                    return Binding {
                        buffer: name.into(),
                        role: Role::Weight,
                        write: buffer.class == BufferClass::Weight,
                        read: false,
                    };
                }
                let first_read = inside.iter().position(|l| l.inputs().contains(&name));
                let first_write = inside.iter().position(|l| l.output() == name);
                let is_input = match (first_read, first_write) {
                    (Some(r), Some(w)) => r <= w,
                    (Some(_), None) => true,
                    _ => false,
                };
                let group_output = group.outputs.iter().any(|g| g == name);
                let needed_later =
                    first_write.is_some() && (group_output || read_after.contains(name));
                let read = first_write.is_some()
                    && (group_output || (read_after.contains(name) && !o.shared_intermediates));
                if is_input {
                    let resident = written_before.contains(name) && o.shared_intermediates;
                    Binding {
                        buffer: name.into(),
                        role: Role::Input,
                        write: !resident,
                        read,
                    }
                } else {
                    let role = if needed_later {
                        Role::Output
                    } else {
                        Role::Scratch
                    };
                    Binding {
                        buffer: name.into(),
                        role,
                        write: !o.mark_intermediates,
                        read,
                    }
                }
            })
            .collect();
        Call {
            name,
            group: group.name.to_string(),
            launches: inside.to_vec(),
            bindings,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Part {
    Layer,
    Epilogue,
}
