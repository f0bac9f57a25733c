//! The model's dimensions as the kernels see them (after `pad-heads` and
//! `pad-dims`), beside the real ones, and the zero-padding levels every weight
//! transform of a padded plan is written with.

use super::super::plan::Transform;

/// Model dimensions as the kernels see them, with the real ones they pad.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dims {
    pub(super) hidden: usize,
    pub(super) real_hidden: usize,
    pub(super) ffn: usize,
    pub(super) real_ffn: usize,
    pub(super) head_dim: usize,
    pub(super) real_head_dim: usize,
    /// Query heads as the kernels see them: `kv_heads × group`.
    pub(super) heads: usize,
    /// Query heads per KV head (after `pad-heads`' phantom heads).
    pub(super) group: usize,
    /// The config's query heads.
    pub(super) real_heads: usize,
    pub(super) kv_heads: usize,
    pub(super) real_kv_heads: usize,
    pub(super) vocab: usize,
    pub(super) eps: f64,
    /// `query_pre_attn_scalar` as a whole number of dimensions.
    pub(super) attn_scalar: Option<usize>,
}

impl Dims {
    pub(super) fn q_dim(&self) -> usize {
        self.heads * self.head_dim
    }

    pub(super) fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Whether `pad-heads` put phantom heads inside the KV groups.
    pub(super) fn padded(&self) -> bool {
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
    pub(super) fn hidden_vector(&self) -> (usize, Vec<[usize; 2]>) {
        (self.hidden, self.hidden_levels())
    }

    /// A head_dim-wide vector (a Q/K norm weight).
    pub(super) fn head_vector(&self) -> (usize, Vec<[usize; 2]>) {
        (self.head_dim, self.head_dim_levels())
    }

    /// Zero-padding levels of a hidden axis.
    pub(super) fn hidden_levels(&self) -> Vec<[usize; 2]> {
        Self::level(self.real_hidden, self.hidden)
    }

    pub(super) fn ffn_levels(&self) -> Vec<[usize; 2]> {
        Self::level(self.real_ffn, self.ffn)
    }

    pub(super) fn head_dim_levels(&self) -> Vec<[usize; 2]> {
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

    pub(super) fn q_levels(&self) -> Vec<[usize; 2]> {
        self.heads_levels(self.group)
    }

    pub(super) fn kv_levels(&self) -> Vec<[usize; 2]> {
        self.heads_levels(1)
    }

    /// The real column count of a hidden-wide norm, when padded.
    pub(super) fn real_hidden_cols(&self) -> Option<usize> {
        (self.hidden != self.real_hidden).then_some(self.real_hidden)
    }

    /// The real head_dim, when the heads are padded.
    pub(super) fn real_head_dim(&self) -> Option<usize> {
        (self.head_dim != self.real_head_dim).then_some(self.real_head_dim)
    }

    /// What the attention scores are scaled by the inverse square root of, when
    /// it is not the kernels' head_dim: `query_pre_attn_scalar` (Gemma), else
    /// the real head_dim of padded heads.
    pub(super) fn scale_dim(&self) -> Option<usize> {
        match self.attn_scalar {
            Some(s) if s != self.head_dim => Some(s),
            Some(_) => None,
            None => self.real_head_dim(),
        }
    }

    /// Whether any dimension the decode cascade reads is padded: its fused
    /// RMSNorm averages over its whole K, and its K split moves with K.
    pub(super) fn cascade_padded(&self) -> bool {
        self.hidden != self.real_hidden
            || self.ffn != self.real_ffn
            || self.head_dim != self.real_head_dim
            || self.kv_heads != self.real_kv_heads
    }
}

/// A `ZeroPad` transform for these levels, if any axis is padded.
pub(super) fn zero_pad(rows: Vec<[usize; 2]>, cols: Vec<[usize; 2]>) -> Option<Transform> {
    (!rows.is_empty() || !cols.is_empty()).then_some(Transform::ZeroPad { rows, cols })
}
