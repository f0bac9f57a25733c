//! Each phase's plan in order: the embedding in the prologue, the layer's
//! attention and O+FFN halves with the host steps between them, the LM head in
//! the epilogue.

use super::super::plan::{BufferClass, HostOp, Step};
use super::{Builder, PlanError};

impl Builder<'_> {
    pub(super) fn prefill(&mut self) -> Result<(), PlanError> {
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

    pub(super) fn decode(&mut self) {
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

    /// The embedding rows' factor (Gemma's √hidden), when the model has one.
    fn embedding_scale(&self) -> Option<f32> {
        self.arch
            .scale_embeddings
            .then(|| self.arch.embedding_scale())
    }
}
