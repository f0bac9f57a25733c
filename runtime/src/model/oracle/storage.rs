//! Which tensors the f32 oracle stores in bf16 ([`Bf16Storage`]): a variant of
//! the reference that rounds chosen activations to bf16 where it stores them,
//! as the NPU keeps every tensor in bf16 between kernels, while everything
//! else (accumulation, norms, softmax, the KV cache of the tensors not named)
//! stays f32. With nothing named it is the plain oracle, bit for bit.
//!
//! It measures the error floor of bf16 storage on a model and its tokens: the
//! decode gates' limits are derived from it (`exec::gates::decode`), and
//! `skillc reference --bf16-storage-table` prints the diagnosis table of the
//! README's real-model section.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::bf16;

/// A tensor the oracle can store in bf16, at the point it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoredTensor {
    /// The residual stream: the embeddings and `x` after every residual add.
    Residual,
    /// Every RMSNorm's output: the input, post-attention and final norms and,
    /// where the model has them, the Q/K norms (before RoPE).
    NormOutputs,
    /// Queries and keys after RoPE (the keys as cached).
    QkAfterRope,
    /// The value projection (as cached).
    Values,
    /// The attention's softmax-weighted values, the o_proj input.
    AttentionContext,
    /// o_proj's output (after the sandwich norm where there is one), the
    /// value added to the residual stream.
    AttentionOutput,
    /// The MLP's gate and up projections.
    GateUp,
    /// The gated activation `act(gate) · up`, the down projection's input.
    Activation,
    /// The down projection's output (after the sandwich norm where there is
    /// one), the value added to the residual stream.
    MlpOutput,
}

impl StoredTensor {
    pub const ALL: [StoredTensor; 9] = [
        StoredTensor::Residual,
        StoredTensor::NormOutputs,
        StoredTensor::QkAfterRope,
        StoredTensor::Values,
        StoredTensor::AttentionContext,
        StoredTensor::AttentionOutput,
        StoredTensor::GateUp,
        StoredTensor::Activation,
        StoredTensor::MlpOutput,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StoredTensor::Residual => "residual",
            StoredTensor::NormOutputs => "norm-outputs",
            StoredTensor::QkAfterRope => "qk-after-rope",
            StoredTensor::Values => "values",
            StoredTensor::AttentionContext => "attention-context",
            StoredTensor::AttentionOutput => "attention-output",
            StoredTensor::GateUp => "gate-up",
            StoredTensor::Activation => "activation",
            StoredTensor::MlpOutput => "mlp-output",
        }
    }
}

impl fmt::Display for StoredTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The set of tensors the oracle rounds to bf16 when it stores them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bf16Storage(BTreeSet<StoredTensor>);

impl Bf16Storage {
    /// Nothing rounded: the plain f32 oracle.
    pub fn none() -> Self {
        Self::default()
    }

    pub fn of(tensors: &[StoredTensor]) -> Self {
        Self(tensors.iter().copied().collect())
    }

    /// The residual stream, queries and keys after RoPE and o_proj's output:
    /// the README's row 3, the variant the decode gates' floor is measured
    /// with (on SmolLM2-135M it reproduces the NPU path's error of the
    /// residual stream layer by layer).
    pub fn decode_floor() -> Self {
        Self::of(&[
            StoredTensor::Residual,
            StoredTensor::QkAfterRope,
            StoredTensor::AttentionOutput,
        ])
    }

    /// The rows of the README's diagnosis table, then everything stored in bf16.
    pub fn table_rows() -> Vec<Self> {
        use StoredTensor::*;
        vec![
            Self::none(),
            Self::of(&[Residual]),
            Self::decode_floor(),
            Self::of(&[
                Residual,
                NormOutputs,
                QkAfterRope,
                AttentionOutput,
                MlpOutput,
                GateUp,
                Activation,
            ]),
            Self::of(&StoredTensor::ALL),
        ]
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, tensor: StoredTensor) -> bool {
        self.0.contains(&tensor)
    }

    pub fn tensors(&self) -> impl Iterator<Item = StoredTensor> + '_ {
        self.0.iter().copied()
    }

    /// Rounds `data` to bf16 in place when `tensor` is stored in bf16.
    pub fn store(&self, tensor: StoredTensor, data: &mut [f32]) {
        if self.contains(tensor) {
            data.iter_mut().for_each(|v| *v = bf16::round(*v));
        }
    }
}

impl fmt::Display for Bf16Storage {
    /// `residual, qk-after-rope` or `nothing`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("nothing");
        }
        let names: Vec<&str> = self.tensors().map(StoredTensor::name).collect();
        f.write_str(&names.join(", "))
    }
}
