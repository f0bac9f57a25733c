//! The attention half of a layer: the input norm, Q/K/V projections, Q/K norms
//! and RoPE as one group, Qwen2.5's q/k/v bias (on the NPU before RoPE or on
//! the host after it), and prefill's flash-attention call.

use super::super::kernels::{FlashAttentionSpec, QkvLayout};
use super::super::plan::{BufferClass, HostOp, Launch, Phase, Step, Transform};
use super::dims::zero_pad;
use super::{Builder, Group};

impl Builder<'_> {
    /// The attention block's front half: input RMSNorm, Q/K/V projections,
    /// optional Q/K norm, RoPE. Returns the group and the names of q, k, v.
    pub(super) fn attention_front(&mut self) -> (Group, [String; 3]) {
        let d = self.dims;
        let rows = self.rows();
        let (qd, kvd) = (d.q_dim(), d.kv_dim());
        let x = self.act("x", rows * d.hidden);
        let xn = self.act("xn", rows * d.hidden);
        let class = self.weight_class();
        let ln1 = self.layer_norm_buffers("ln1", "input_layernorm", class);
        let wq = self.projection("wq", "self_attn.q_proj", qd, d.hidden);
        let wk = self.projection("wk", "self_attn.k_proj", kvd, d.hidden);
        let wv = self.projection("wv", "self_attn.v_proj", kvd, d.hidden);
        let (q, k, v) = (
            self.act("q", rows * qd),
            self.act("k", rows * kvd),
            self.act("v", rows * kvd),
        );
        let lut = self.lut();
        let mut launches = vec![self.norm_launch(&x, &ln1, &xn, rows)];
        for (w, out) in [(&wq, &q), (&wk, &k), (&wv, &v)] {
            let n = self.buffers[out.as_str()].elements / rows;
            launches.push(self.matmul(&xn, w, out, d.hidden, n));
        }
        let (mut q_in, mut k_in, mut v_out) = (q.clone(), k.clone(), v.clone());
        if self.bias_on_npu() && self.arch.qkv_bias {
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

    /// Whether the q/k/v bias is added on the NPU before RoPE: the published
    /// Qwen2.5 plans, and the fused decode (no host step inside its dispatch;
    /// the published builder adds it in the RoPE kernel,
    /// mlir-air:programming_examples/fused_decode/fused_decode.py:422-426).
    fn bias_on_npu(&self) -> bool {
        self.options.bias_on_npu || self.fused().is_some()
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
    pub(super) fn bias_after_rope(&mut self, qkv: &[String; 3]) {
        if !self.arch.qkv_bias || self.bias_on_npu() {
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
                rotary_dim: self.rotary_dim().filter(|_| rotate),
            });
        }
    }

    /// The flash-attention call, with host transposes around it when it runs
    /// head-first.
    pub(super) fn attention_call(&mut self, q: &str, k: &str, v: &str, attn: &str) {
        let d = self.dims;
        let s = self.seq;
        let mut spec = FlashAttentionSpec::select(s, s, d.heads, d.kv_heads, d.head_dim, true);
        if spec.tile.dk_chunks == 1 {
            spec.layout = self.options.layout;
        }
        spec.scale_dim = d.scale_dim();
        spec.softcap = self.arch.attn_logit_softcap.map(|cap| cap as u32);
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
}
