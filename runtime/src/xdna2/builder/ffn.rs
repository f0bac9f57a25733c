//! The second half of a layer, O+FFN: o_proj, the residual adds, the MLP's
//! norm, gate/up, the gated activation and down_proj, with Gemma's sandwich
//! norms. On the NPU as one group in prefill and decode; in decode also as the
//! 3-launch cascade where its rules allow, or as standalone GEMV calls with the
//! glue on the host where the GEMVs cannot be placed.

use super::super::kernels::Herd;
use super::super::plan::{BufferClass, HostOp, Launch};
use super::{Builder, Group, NormBuffers};
use crate::model::arch::{NormKind, NormWeight};

/// The weights of a layer's O+FFN block: its four projections and the norm in
/// front of its MLP.
pub(super) struct OFfnWeights {
    wo: String,
    wg: String,
    wu: String,
    wd: String,
    ln2: NormBuffers,
}

impl Builder<'_> {
    /// A layer's o_proj, gate, up and down projections and the norm in front
    /// of its MLP (`post_attention_layernorm`, or Gemma's
    /// `pre_feedforward_layernorm`).
    pub(super) fn o_ffn_weights(&mut self) -> OFfnWeights {
        let d = self.dims;
        let wo = self.projection("wo", "self_attn.o_proj", d.hidden, d.q_dim());
        let wg = self.projection("wg", "mlp.gate_proj", d.ffn, d.hidden);
        let wu = self.projection("wu", "mlp.up_proj", d.ffn, d.hidden);
        let wd = self.projection("wd", "mlp.down_proj", d.hidden, d.ffn);
        let class = self.weight_class();
        let mlp_norm = if self.arch.sandwich_norms {
            "pre_feedforward_layernorm"
        } else {
            "post_attention_layernorm"
        };
        let ln2 = self.layer_norm_buffers("ln2", mlp_norm, class);
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
    fn sandwich_weights(&mut self, class: BufferClass) -> Option<[NormBuffers; 2]> {
        if !self.arch.sandwich_norms {
            return None;
        }
        Some([
            self.layer_norm_buffers("ln_attn_out", "post_attention_layernorm", class),
            self.layer_norm_buffers("ln_mlp_out", "post_feedforward_layernorm", class),
        ])
    }

    /// The NPU norm of a sandwich norm on `rows` rows of `x` into `out`.
    fn sandwich_norm(&mut self, x: &str, weight: &NormBuffers, out: &str, rows: usize) -> Launch {
        let d = self.dims;
        let out = self.act(out, rows * d.hidden);
        self.norm_launch(x, weight, &out, rows)
    }

    /// `launches` with the sandwich norm `weight` applied to `produced` (the
    /// output of the last launch) before the residual add reads it: returns
    /// what the add reads.
    fn normed_output(
        &mut self,
        launches: &mut Vec<Launch>,
        produced: String,
        weight: Option<&NormBuffers>,
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

    pub(super) fn o_ffn_prefill(&mut self, attn: &str) -> Group {
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
    pub(super) fn o_ffn_launches(&mut self, attn: &str, w: OFfnWeights) -> Vec<Launch> {
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
            self.norm_launch(&h1, &w.ln2, &hn, rows),
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

    /// Whether the fused O+FFN cascade is legal for these dims (calibration
    /// §1: hidden size below 2560, FFN size and the O input divisible by 512).
    fn cascade_legal(&self) -> bool {
        let d = self.dims;
        let l = &self.device.limits;
        // The cascade adds o_proj's and down_proj's outputs to the residual
        // inside its GEMVs: no room for a sandwich norm between; and its
        // SwiGLU GEMV fuses a weighted RMSNorm, not a LayerNorm.
        !d.cascade_padded()
            && !self.arch.sandwich_norms
            && self.arch.norm_kind == NormKind::Rms
            && self.arch.norm_weight != NormWeight::Absent
            && d.hidden < l.cascade_hidden_size_below
            && d.ffn % l.cascade_hidden_multiple == 0
            && d.q_dim() % l.cascade_hidden_multiple == 0
    }

    pub(super) fn o_ffn_decode(&mut self, attn: &str) {
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
        let mut launches = vec![
            self.gemv(&w.wo, attn, &h1, Some("x"), herd),
            Launch::GemvSwiglu {
                x: h1.clone(),
                norm: w.ln2.weight.clone().unwrap_or_default(),
                gate: w.wg,
                up: w.wu,
                out: act.clone(),
                eps: d.eps,
                spec: self.gemv_spec(d.ffn, d.hidden, herd),
            },
            self.gemv(&w.wd, &act, "x", Some(&h1), herd),
        ];
        // The cascade is one module: its buffering is the module's.
        let single_buffered = self.options.omit_pingpong || self.options.single_buffered_o_ffn;
        for launch in &mut launches {
            if let Launch::Gemv { spec, .. } | Launch::GemvSwiglu { spec, .. } = launch {
                spec.omit_pingpong = single_buffered;
            }
        }
        launches
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
        self.reclass_norm(&w.ln2, BufferClass::Host);
        let sandwich = self.sandwich_weights(BufferClass::Host);
        self.projection_call("o_gemv", &w.wo, attn, &o);
        let o = self.host_normed(o, sandwich.as_ref().map(|w| &w[0]), "on");
        self.host(HostOp::Add {
            a: "x".into(),
            b: o,
            out: h1.clone(),
            n: d.hidden,
        });
        let norm = self.host_norm(&h1, &w.ln2, &hn, false);
        self.host(norm);
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
    fn host_normed(&mut self, x: String, weight: Option<&NormBuffers>, out: &str) -> String {
        let Some(w) = weight else {
            return x;
        };
        let d = self.dims;
        let out = self.act(out, d.hidden);
        let norm = self.host_norm(&x, w, &out, false);
        self.host(norm);
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
}
