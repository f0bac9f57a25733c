//! One kernel launch at a time, its spec selected for the device and the
//! plan's options: norms, elementwise ops, RoPE, GEMM and GEMV, and the
//! gated activation of the model's MLP.

use super::super::kernels::{Dtype, EltwiseSpec, GemmSpec, GemvSpec, Herd, NormSpec, RopeSpec};
use super::super::plan::{HostOp, Launch, Phase};
use super::{Builder, NormBuffers};
use crate::model::arch::{Activation, NormKind};

impl Builder<'_> {
    /// A row norm of `cols` (padded) columns whose real ones are `real_cols`.
    pub(super) fn norm(&self, rows: usize, cols: usize, real_cols: Option<usize>) -> NormSpec {
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

    /// The model's norm (RMSNorm or LayerNorm) on `rows` rows of `x` into
    /// `out`, with the norm's weight and bias buffers.
    pub(super) fn norm_launch(
        &self,
        x: &str,
        norm: &NormBuffers,
        out: &str,
        rows: usize,
    ) -> Launch {
        let d = self.dims;
        let mut spec = self.norm(rows, d.hidden, d.real_hidden_cols());
        spec.weighted = norm.weight.is_some();
        let (x, out, weight) = (x.to_string(), out.to_string(), norm.weight.clone());
        match self.arch.norm_kind {
            NormKind::Rms => Launch::Rmsnorm {
                x,
                weight,
                out,
                eps: d.eps,
                spec,
            },
            NormKind::Layer => Launch::Layernorm {
                x,
                weight,
                bias: norm.bias.clone(),
                out,
                eps: d.eps,
                spec,
            },
        }
    }

    /// The model's norm on the host: of the last real row of `x` in prefill
    /// (`last_row`), else of each row. (Every RMSNorm has a weight: only
    /// OLMo's LayerNorm has none.)
    pub(super) fn host_norm(
        &self,
        x: &str,
        norm: &NormBuffers,
        out: &str,
        last_row: bool,
    ) -> HostOp {
        let d = self.dims;
        let (x, out) = (x.to_string(), out.to_string());
        match (self.arch.norm_kind, &norm.weight) {
            (NormKind::Rms, Some(weight)) => HostOp::RmsNorm {
                x,
                weight: weight.clone(),
                out,
                cols: d.hidden,
                eps: d.eps,
                last_row,
                real_cols: d.real_hidden_cols(),
            },
            _ => HostOp::LayerNorm {
                x,
                weight: norm.weight.clone(),
                bias: norm.bias.clone(),
                out,
                cols: d.hidden,
                eps: d.eps,
                last_row,
                real_cols: d.real_hidden_cols(),
            },
        }
    }

    pub(super) fn eltwise(&self, n: usize) -> EltwiseSpec {
        EltwiseSpec::select(self.device, n, Herd::ROW)
    }

    pub(super) fn rope_spec(&self, heads: usize) -> RopeSpec {
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
            rotary_dim: self.rotary_dim(),
        }
    }

    /// The dimensions of each head RoPE rotates when not all of the kernels'
    /// head_dim: the partial rotary part, or the real head_dim of padded heads.
    pub(super) fn rotary_dim(&self) -> Option<usize> {
        self.arch.partial_rotary_dim.or(self.dims.real_head_dim())
    }

    pub(super) fn gemm(&self, a: &str, b: &str, out: &str, k: usize, n: usize) -> Launch {
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

    pub(super) fn gemv_spec(&self, m: usize, k: usize, herd: Herd) -> GemvSpec {
        let mut spec = GemvSpec::select(self.device, m, k, herd);
        spec.omit_pingpong = self.options.omit_pingpong;
        spec
    }

    pub(super) fn gemv(
        &self,
        w: &str,
        x: &str,
        out: &str,
        residual: Option<&str>,
        herd: Herd,
    ) -> Launch {
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
    pub(super) fn matmul(&self, x: &str, w: &str, out: &str, k: usize, n: usize) -> Launch {
        match self.phase {
            Phase::Prefill => self.gemm(x, w, out, k, n),
            Phase::Decode if self.fused().is_some() => self.projection_gemv(w, x, out),
            Phase::Decode => self.gemv(w, x, out, None, Herd::ROW),
        }
    }

    /// The gated activation of the model's MLP on the NPU.
    pub(super) fn gated(&self, gate: String, up: String, out: String, n: usize) -> Launch {
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
}
