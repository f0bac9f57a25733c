//! Each phase's plan in order: the embedding in the prologue, the layer's
//! attention and O+FFN halves with the host steps between them, the LM head in
//! the epilogue.

use super::super::plan::{BufferClass, HostOp, Step};
use super::{Builder, PlanError};

impl Builder<'_> {
    pub(super) fn prefill(&mut self) -> Result<(), PlanError> {
        let d = self.dims;
        let s = self.seq;
        self.embed();
        let [qr, kr, v] = self.attention_input();
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

    pub(super) fn decode(&mut self) {
        if let Some(fused) = self.fused() {
            self.fused_decode(fused);
            return;
        }
        let d = self.dims;
        self.embed();
        let [qr, _, _] = self.attention_input();
        let attn = self.act("attn", d.q_dim());
        self.host(HostOp::DecodeAttention {
            q: qr,
            out: attn.clone(),
            heads: d.heads,
            kv_heads: d.kv_heads,
            head_dim: d.head_dim,
            scale_dim: d.scale_dim(),
            softcap: self.arch.attn_logit_softcap,
        });
        self.o_ffn_decode(&attn);
        self.host(HostOp::Scheduling {
            what: "decode layer loop".into(),
        });

        let final_norm = self.final_norm(BufferClass::Host);
        self.lm_head_on_one_row(&final_norm, false);
    }

    /// The prologue: the token embeddings of the phase's rows into `x`.
    pub(super) fn embed(&mut self) {
        let d = self.dims;
        let rows = self.rows();
        let table = self.embedding_table();
        self.act("x", rows * d.hidden);
        self.prologue.push(Step::Host(HostOp::Embed {
            table,
            out: "x".into(),
            rows,
            hidden: d.hidden,
            scale: self.embedding_scale(),
        }));
    }

    /// The layer up to attention: the attention-input group, the host bias
    /// where it runs after RoPE, and the new rows' keys and values into the
    /// KV cache. Returns the rotated q and k and v.
    fn attention_input(&mut self) -> [String; 3] {
        let (front, [qr, kr, v]) = self.attention_front();
        self.emit(front);
        self.bias_after_rope(&[qr.clone(), kr.clone(), v.clone()]);
        self.host(HostOp::KvStore {
            k: kr.clone(),
            v: v.clone(),
            rows: self.rows(),
            kv_width: self.dims.kv_dim(),
        });
        [qr, kr, v]
    }

    /// The embedding rows' factor (Gemma's √hidden), when the model has one.
    fn embedding_scale(&self) -> Option<f32> {
        self.arch
            .scale_embeddings
            .then(|| self.arch.embedding_scale())
    }
}
