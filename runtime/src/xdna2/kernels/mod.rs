//! The kernel library: what each npu2 kernel computes, with the hardware
//! path's numerics (bf16 storage between kernels, f32 accumulation inside,
//! optional BFP16 operand blocks for GEMM), and the configuration (shape,
//! herd, tiling) whose constraints are checked before it runs.
//!
//! Every kernel is callable on its own (`gemm`, `gemv`, `rms_norm`, …) so a
//! caller can compose a layer by hand; plans call the same functions through
//! `exec`. Inputs and outputs are bf16 bits (`u16`) unless said otherwise.

use serde::{Deserialize, Serialize};

use super::constraints::ConstraintViolation;

pub mod attention;
pub mod decode_attention;
pub mod elementwise;
pub mod gemm;
pub mod gemv;
pub mod gemv_packed;

pub use attention::{flash_attention, FlashAttentionSpec, FlashTile, QkvLayout};
pub use decode_attention::{append_rows, decode_attention, DecodeAttentionSpec, KvAppendSpec};
pub use elementwise::{
    eltwise_add, embedding, gelu_mul, layer_norm, qk_rms_norm, rms_norm, rope, rope_lut, silu_mul,
    softmax, EltwiseSpec, NormSpec, RopeSpec, RowTile,
};
pub use gemm::{gemm, gemm_f32, gemm_into, BOperand, Epilogue, GemmSpec, GemmTile};
pub use gemv::{
    gemv, gemv_swiglu, lm_head_gemv, lm_head_partition, GemvSpec, GemvTile, LmHeadSpec,
};
pub use gemv_packed::PackedFormat;

/// Kernel names, spelled in `ops::words` (`ops::KERNELS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kernel {
    Gemm,
    Gemv,
    GemvSwiglu,
    Rmsnorm,
    /// LayerNorm with an optional weight and bias (StableLM, OLMo).
    Layernorm,
    QkRmsnorm,
    Rope,
    SiluMul,
    GeluMul,
    EltwiseAdd,
    Softmax,
    FlashAttention,
    Embedding,
    LmHeadGemv,
    DecodeAttention,
    KvAppend,
}

impl Kernel {
    pub const ALL: [Kernel; 16] = [
        Kernel::Gemm,
        Kernel::Gemv,
        Kernel::GemvSwiglu,
        Kernel::Rmsnorm,
        Kernel::Layernorm,
        Kernel::QkRmsnorm,
        Kernel::Rope,
        Kernel::SiluMul,
        Kernel::GeluMul,
        Kernel::EltwiseAdd,
        Kernel::Softmax,
        Kernel::FlashAttention,
        Kernel::Embedding,
        Kernel::LmHeadGemv,
        Kernel::DecodeAttention,
        Kernel::KvAppend,
    ];

    /// The kernel's name in the trajectory language (`ops::words` spells it).
    pub fn name(self) -> &'static str {
        self.word()
    }

    pub fn from_name(name: &str) -> Option<Kernel> {
        name.parse().ok()
    }
}

/// Operand precision of the matrix unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// bf16 operands, exact products, f32 accumulation.
    #[default]
    Bf16,
    /// Operands rounded to BFP16 blocks (8 values sharing an 8-bit exponent)
    /// before the MMA, as npu2's bf16 GEMM path does.
    Bfp16,
}

/// Element type of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dtype {
    #[default]
    Bf16,
    F32,
}

impl Dtype {
    pub fn bytes(self) -> usize {
        match self {
            Dtype::Bf16 => 2,
            Dtype::F32 => 4,
        }
    }
}

/// Compute-tile herd: `[columns, rows]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Herd(pub [usize; 2]);

impl Herd {
    pub const FULL: Herd = Herd([8, 4]);
    pub const ROW: Herd = Herd([8, 1]);
    pub const SINGLE: Herd = Herd([1, 1]);

    pub fn cols(self) -> usize {
        self.0[0]
    }

    pub fn rows(self) -> usize {
        self.0[1]
    }

    pub fn tiles(self) -> usize {
        self.0[0] * self.0[1]
    }
}

impl std::fmt::Display for Herd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{},{}]", self.0[0], self.0[1])
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum KernelError {
    /// The configuration breaks hardware constraints; the kernel did not run.
    #[error("{} refused: {}", .kernel.name(), join(.violations))]
    Refused {
        kernel: Kernel,
        violations: Vec<ConstraintViolation>,
    },
    /// An operand's length does not match the shape.
    #[error("{}: operand {operand} has {got} elements, shape needs {expected}", .kernel.name())]
    Operand {
        kernel: Kernel,
        operand: &'static str,
        expected: usize,
        got: usize,
    },
    /// A gather index past the table.
    #[error("{}: index {index} at position {position} is outside the table of {limit} rows", .kernel.name())]
    Index {
        kernel: Kernel,
        position: usize,
        index: usize,
        limit: usize,
    },
}

fn join(violations: &[ConstraintViolation]) -> String {
    violations
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Refuses when `violations` is not empty.
pub(crate) fn refuse_if_any(
    kernel: Kernel,
    violations: Vec<ConstraintViolation>,
) -> Result<(), KernelError> {
    if violations.is_empty() {
        Ok(())
    } else {
        Err(KernelError::Refused { kernel, violations })
    }
}

/// Checks an operand's length.
pub(crate) fn operand<T>(
    kernel: Kernel,
    name: &'static str,
    data: &[T],
    expected: usize,
) -> Result<(), KernelError> {
    if data.len() == expected {
        Ok(())
    } else {
        Err(KernelError::Operand {
            kernel,
            operand: name,
            expected,
            got: data.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_match_the_vocabulary() {
        let ours: Vec<&str> = Kernel::ALL.iter().map(|k| k.name()).collect();
        let mut vocabulary = crate::ops::KERNELS.to_vec();
        let mut sorted = ours.clone();
        sorted.sort();
        vocabulary.sort();
        assert_eq!(sorted, vocabulary);
        for k in Kernel::ALL {
            assert_eq!(Kernel::from_name(k.name()), Some(k));
            let json = serde_json::to_string(&k).expect("serialises");
            assert_eq!(json, format!("\"{}\"", k.name()));
        }
    }
}
