//! The decode plan as one dispatch per token (`PlanOptions::fused_decode`):
//! the embedding on the host, then one call per layer holding every launch of
//! the layer (input norm, Q/K/V projections, the q/k/v bias on the NPU before
//! RoPE, Q/K norms, RoPE, the KV append, attention over the device cache,
//! O+FFN with its norm, residual adds and gated activation), and one call with
//! the final norm and the LM head. All of them are one dispatch: the calls
//! are the persistent design's phases, not separate runs (`plan::fused`).
//! Every projection is a GEMV on the projection columns, on as many of the
//! projection rows as its shape places.

use super::super::kernels::{DecodeAttentionSpec, Herd, KvAppendSpec};
use super::super::plan::{
    Buffer, BufferClass, FusedLayout, FusedOptions, Launch, Step, FUSED_GROUP, FUSED_HEAD_CALL,
    FUSED_KV_CACHE as KV_CACHE, PROJ_COLUMNS, PROJ_ROWS,
};
use super::lm_head::LmHead;
use super::{Builder, Group};

impl Builder<'_> {
    /// The fused decode's options, when this is a decode plan built with them.
    pub(super) fn fused(&self) -> Option<FusedOptions> {
        self.options
            .fused_decode
            .filter(|_| self.phase == super::super::plan::Phase::Decode)
    }

    /// The fused layout of this plan, if it is one.
    pub(super) fn fused_layout(&self) -> Option<FusedLayout> {
        self.fused()
            .map(|f| FusedLayout::new(f, self.dims.kv_heads))
    }

    /// A decode projection on the projection tiles: the most rows (cascade)
    /// of the projection columns at which its GEMV places.
    pub(super) fn projection_gemv(&self, w: &str, x: &str, out: &str) -> Launch {
        let at = |rows| self.gemv(w, x, out, None, Herd([PROJ_COLUMNS, rows]));
        [PROJ_ROWS, 2]
            .into_iter()
            .map(at)
            .find(|l| l.check(self.device).is_empty())
            .unwrap_or_else(|| at(1))
    }

    pub(super) fn fused_decode(&mut self, fused: FusedOptions) {
        let d = self.dims;
        self.embed();
        let (front, [qr, kr, v]) = self.attention_front();
        let mut launches = front.launches;
        let cache = self.kv_cache();
        let layout = FusedLayout::new(fused, d.kv_heads);
        launches.push(Launch::KvAppend {
            k: kr,
            v,
            cache: cache.clone(),
            spec: KvAppendSpec {
                kv_width: d.kv_dim(),
                context: self.seq,
            },
        });
        let attn = self.act("attn", d.q_dim());
        launches.push(Launch::DecodeAttention {
            q: qr,
            cache,
            out: attn.clone(),
            spec: DecodeAttentionSpec {
                heads: d.heads,
                kv_heads: d.kv_heads,
                head_dim: d.head_dim,
                scale_dim: d.scale_dim(),
                softcap: self.arch.attn_logit_softcap.map(|cap| cap as u32),
                context: self.seq,
                cus: layout.attention_cus,
            },
        });
        let weights = self.o_ffn_weights();
        launches.extend(self.o_ffn_launches(&attn, weights));
        let layer = Group {
            name: FUSED_GROUP,
            launches,
            outputs: vec!["x".into()],
        };
        let call = self.call(&layer, 0..layer.launches.len(), FUSED_GROUP.to_string());
        self.layer.push(Step::Call(call));
        self.fused_head();
    }

    /// The end of the dispatch: the final norm on the NPU and, with the LM
    /// head on the NPU, its partitions; else the host's LM head after it.
    fn fused_head(&mut self) {
        let d = self.dims;
        let final_norm = self.final_norm(self.weight_class());
        let xf = self.act("xf", d.hidden);
        let mut launches = vec![self.norm_launch("x", &final_norm, &xf, 1)];
        let (outputs, after) = match self.lm_head(&xf) {
            LmHead::Npu(head) => {
                launches.extend(head);
                (vec!["logits".to_string()], None)
            }
            LmHead::Host(matvec) => (vec![xf], Some(matvec)),
        };
        let group = Group {
            name: FUSED_GROUP,
            launches,
            outputs,
        };
        let call = self.call(&group, 0..group.launches.len(), FUSED_HEAD_CALL.to_string());
        self.epilogue.push(Step::Call(call));
        self.epilogue.extend(after.map(Step::Host));
    }

    /// The device KV cache: one region per layer of the context's keys and
    /// values.
    fn kv_cache(&mut self) -> String {
        let elements = 2 * self.seq * self.dims.kv_dim();
        self.buffers.insert(
            KV_CACHE.to_string(),
            Buffer {
                class: BufferClass::Activation,
                dtype: super::super::kernels::Dtype::Bf16,
                elements,
                source: None,
                per_layer: true,
            },
        );
        KV_CACHE.to_string()
    }
}
