//! One kernel launched on its own, as the registry harness timed it and the kernel
//! checks of replay and calibration run it: a kernel's spec bound to the operand
//! names every standalone launch uses. Calibration (from a published point) and
//! replay (from a recorded action) each choose the spec their own way; the launch is
//! built here only, so the two cannot name operands differently.

use super::Launch;
use crate::xdna2::kernels::{
    EltwiseSpec, FlashAttentionSpec, GemmSpec, GemvSpec, LmHeadSpec, NormSpec, RopeSpec,
};

/// A kernel's spec, ready to launch on its own.
#[derive(Debug, Clone)]
pub enum Standalone {
    Gemm(GemmSpec),
    Gemv(GemvSpec),
    /// The whole head as its partition 0 launch: `lm_head_gemv` runs every
    /// partition of the spec.
    LmHeadGemv(LmHeadSpec),
    FlashAttention(FlashAttentionSpec),
    /// A weighted RMSNorm with its epsilon.
    Rmsnorm(NormSpec, f64),
    EltwiseAdd(EltwiseSpec),
    SiluMul(EltwiseSpec),
    Rope(RopeSpec),
}

impl Standalone {
    /// The launch, its operands named as the harness binds them.
    pub fn launch(self) -> Launch {
        let name = |n: &str| n.to_string();
        match self {
            Standalone::Gemm(spec) => Launch::Gemm {
                a: name("a"),
                b: name("b"),
                out: name("c"),
                spec,
            },
            Standalone::Gemv(spec) => Launch::Gemv {
                w: name("w"),
                x: name("x"),
                out: name("y"),
                residual: None,
                spec,
            },
            Standalone::LmHeadGemv(spec) => Launch::LmHeadGemv {
                w: name("w"),
                x: name("x"),
                out: name("y"),
                spec,
                part: 0,
            },
            Standalone::FlashAttention(spec) => Launch::FlashAttention {
                q: name("q"),
                k: name("k"),
                v: name("v"),
                out: name("o"),
                spec,
            },
            Standalone::Rmsnorm(spec, eps) => Launch::Rmsnorm {
                x: name("x"),
                weight: Some(name("w")),
                out: name("y"),
                eps,
                spec,
            },
            Standalone::EltwiseAdd(spec) => Launch::EltwiseAdd {
                a: name("a"),
                b: name("b"),
                out: name("c"),
                spec,
            },
            Standalone::SiluMul(spec) => Launch::SiluMul {
                gate: name("a"),
                up: name("b"),
                out: name("c"),
                spec,
            },
            Standalone::Rope(spec) => Launch::Rope {
                x: name("x"),
                lut: name("lut"),
                out: name("y"),
                spec,
            },
        }
    }
}
