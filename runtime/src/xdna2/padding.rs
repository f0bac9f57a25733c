//! Padding as a plan decision: a model dimension that no legal tiling of some
//! kernel divides (hidden, FFN, head_dim, query heads, KV heads) is padded
//! with zeros to the nearest size at which every kernel the plans run on it has
//! a legal tiling, searched over the device constraints (`tiling.rs` for GEMM;
//! each kernel's own selection and constraint check otherwise). The vocabulary
//! is padded by the LM-head partitions themselves (`builder`), whose padded
//! rows are never read back: logits are cut to the real vocabulary before any
//! argmax or top-k, so a padded row can never win.
//!
//! # Why padding is exact
//!
//! Every padded weight is zero and every padded activation channel is zero,
//! and stays zero through the layer:
//! - hidden: the embedding's padded columns are zero; RMSNorm takes the mean
//!   over the real columns only (`NormSpec::real_cols`) and multiplies a zero
//!   channel by its (zero) weight; o_proj's and down_proj's padded output rows
//!   are zero, so the residual adds 0 + 0; the projections that read hidden
//!   have zero columns there, so each sum gains exact zeros.
//! - FFN: gate and up have zero rows, so act(0) · 0 = 0 (SiLU and GELU both
//!   map 0 to 0), and down's padded columns are zero.
//! - head_dim: zeros are appended to each head (q, k, v, their norms and
//!   biases, o_proj's columns); RoPE rotates the real `rotary_dim` dimensions
//!   and passes the zeros through; Q/K norm averages over the real ones; the
//!   attention scores keep the real head_dim's scale (`scale_dim`); a zero
//!   value dimension yields a zero output dimension, which o_proj ignores.
//! - KV heads: whole KV groups are appended, phantom query heads with them, so
//!   every real query head keeps its KV head (h / group is unchanged) and a
//!   phantom query head only ever reads a phantom (zero) KV head; its output
//!   (the mean of zero values) meets o_proj's zero columns.
//! - vocabulary: zero rows of the LM head give logits of 0 that are cut off.
//!
//! Every padding appends zeros after the real elements of its axis (or of each
//! head), so each real element keeps its index in every reduction: lane sums,
//! K blocks and GEMV segments see the same real terms in the same order plus
//! exact zeros, and the real outputs are bit-identical to the unpadded plan's
//! wherever that plan places (`tests/padding.rs` checks one dimension at a
//! time). The one reduction padding can regroup is a GEMV whose K is split over
//! cascade rows (the split point moves with K); the fused cascade then sums the
//! same real terms in another f32 association.
//!
//! The intra-group phantom heads of `pad-heads` (the published rule for
//! heads × head_dim not 1024-aligned) are applied before this search and are
//! not what it adds.

use serde::{Deserialize, Serialize};

use super::constraints::ConstraintViolation;
use super::device::Device;
use super::kernels::{
    Dtype, EltwiseSpec, FlashAttentionSpec, GemmSpec, GemvSpec, Herd, Kernel, NormSpec, Precision,
    RopeSpec,
};
use super::tiling::gemm_tilings;

/// A model dimension as the config has it and as the kernels see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Pad {
    pub real: usize,
    pub padded: usize,
}

impl Pad {
    pub fn exact(size: usize) -> Self {
        Pad {
            real: size,
            padded: size,
        }
    }

    pub fn is_padded(&self) -> bool {
        self.padded != self.real
    }

    /// Padded elements as a fraction of the real size.
    pub fn overhead(&self) -> f64 {
        (self.padded as f64 - self.real as f64) / self.real.max(1) as f64
    }
}

/// The padded sizes of one plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Padding {
    pub hidden: Pad,
    pub ffn: Pad,
    pub head_dim: Pad,
    /// Query heads: real heads (after any intra-group phantom heads of
    /// `pad-heads`) and the heads of the appended KV groups.
    pub heads: Pad,
    pub kv_heads: Pad,
}

impl Padding {
    /// No padding: every dimension as the plans run it unpadded.
    pub fn none(shape: &Shape) -> Self {
        Padding {
            hidden: Pad::exact(shape.hidden),
            ffn: Pad::exact(shape.ffn),
            head_dim: Pad::exact(shape.head_dim),
            heads: Pad::exact(shape.heads),
            kv_heads: Pad::exact(shape.kv_heads),
        }
    }

    pub fn is_padded(&self) -> bool {
        self.dims().iter().any(|(_, p)| p.is_padded())
    }

    /// The dimensions by name, in report order.
    pub fn dims(&self) -> [(&'static str, Pad); 5] {
        [
            ("hidden", self.hidden),
            ("ffn", self.ffn),
            ("head_dim", self.head_dim),
            ("heads", self.heads),
            ("kv_heads", self.kv_heads),
        ]
    }

    /// Query heads per KV head (the same before and after padding).
    pub fn group(&self) -> usize {
        self.heads.real / self.kv_heads.real.max(1)
    }

    /// The real elements of a KV cache laid out `[slots, kv_heads, head_dim]` at
    /// the padded sizes, as the unpadded plan's `[slots, kv_heads, head_dim]`:
    /// the appended KV groups and each head's appended dimensions dropped.
    pub fn real_kv(&self, cache: &[u16]) -> Vec<u16> {
        let (hd, kv) = (self.head_dim, self.kv_heads);
        let padded_width = (kv.padded * hd.padded).max(1);
        if !hd.is_padded() && !kv.is_padded() {
            return cache.to_vec();
        }
        cache
            .chunks(padded_width)
            .flat_map(|slot| slot.chunks(hd.padded.max(1)).take(kv.real))
            .flat_map(|head| &head[..hd.real.min(head.len())])
            .copied()
            .collect()
    }
}

/// A kernel use of a dimension the search must satisfy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A prefill projection's reduction (K of a GEMM over the prompt rows).
    GemmK,
    /// A prefill projection's output width (N of a GEMM).
    GemmN,
    /// A decode projection's reduction (K of a GEMV).
    GemvK,
    /// A decode projection's output rows (M of a GEMV).
    GemvM,
    /// A decode element-wise op over the row (residual add, gated activation).
    Eltwise,
    /// A row RMSNorm's width.
    NormCols,
    /// Flash attention's head_dim.
    Attention,
    /// RoPE's head_dim.
    Rope,
}

impl Role {
    pub fn label(self) -> &'static str {
        match self {
            Role::GemmK => "GEMM K",
            Role::GemmN => "GEMM N",
            Role::GemvK => "GEMV K",
            Role::GemvM => "GEMV M",
            Role::Eltwise => "element-wise",
            Role::NormCols => "RMSNorm width",
            Role::Attention => "flash-attention head_dim",
            Role::Rope => "RoPE head_dim",
        }
    }
}

/// The sizes the other dimension of a probed kernel takes: one every kernel
/// accepts (a multiple of every tile edge and of the GEMV K granularity).
const PROBE: usize = 2048;

/// Prompt rows (GEMM M, attention length) the roles are probed at: the plans'
/// production length, so one padding serves every plan of a deployment.
const PROBE_ROWS: usize = 2048;

/// Why the device refuses `value` in `role`, empty when it accepts it.
pub fn refusals(device: &Device, role: Role, value: usize) -> Vec<ConstraintViolation> {
    let seq = PROBE_ROWS;
    let gemm = |k: usize, n: usize| {
        let spec = GemmSpec::select(device, seq, k, n, Precision::Bf16, Dtype::Bf16);
        if gemm_tilings(device, &spec).is_empty() {
            let mut found = spec.check(device);
            if found.is_empty() {
                // The selected tiles place but leave columns unwritten.
                found = vec![ConstraintViolation {
                    constraint: super::constraints::Constraint::Alignment,
                    kernel: Kernel::Gemm,
                    location: String::new(),
                    detail: format!(
                        "N {n} over {} herd rows leaves no multiple of the 8-wide MMA",
                        spec.herd.rows()
                    ),
                }];
            }
            found
        } else {
            Vec::new()
        }
    };
    match role {
        Role::GemmK => gemm(value, PROBE),
        Role::GemmN => gemm(PROBE, value),
        Role::GemvK => GemvSpec::select(device, PROBE, value, Herd::ROW).check(device),
        Role::GemvM => GemvSpec::select(device, value, PROBE, Herd::ROW).check(device),
        Role::Eltwise => {
            EltwiseSpec::select(device, value, Herd::ROW).check(device, Kernel::EltwiseAdd)
        }
        Role::NormCols => NormSpec {
            rows: 1,
            cols: value,
            herd: Herd::SINGLE,
            weighted: true,
            real_cols: None,
        }
        .check(device, Kernel::Rmsnorm),
        Role::Attention => FlashAttentionSpec::select(seq, seq, 2, 1, value, true).check(device),
        Role::Rope => RopeSpec {
            rows: seq,
            heads: 1,
            head_dim: value,
            herd: Herd::SINGLE,
            rotary_dim: None,
        }
        .check(device),
    }
}

/// A dimension the device refused at its real size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub dim: String,
    pub size: usize,
    pub role: String,
    /// The first violation, as the device words it.
    pub detail: String,
}

/// What the search found: the padding, and why each padded dimension needed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaddingChoice {
    pub padding: Padding,
    pub refusals: Vec<Refusal>,
}

/// Why no padding was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no size up to {limit} makes {dim} ({size}) placeable: {detail}")]
pub struct PaddingError {
    pub dim: &'static str,
    pub size: usize,
    pub limit: usize,
    pub detail: String,
}

/// The model's dimensions as the plans run them before padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub hidden: usize,
    pub ffn: usize,
    pub head_dim: usize,
    /// Query heads after `pad-heads` (intra-group phantom heads), if applied.
    pub heads: usize,
    pub kv_heads: usize,
    pub qk_norm: bool,
}

const HIDDEN_ROLES: &[Role] = &[
    Role::GemmK,
    Role::GemmN,
    Role::GemvK,
    Role::GemvM,
    Role::Eltwise,
    Role::NormCols,
];
const FFN_ROLES: &[Role] = &[
    Role::GemmK,
    Role::GemmN,
    Role::GemvK,
    Role::GemvM,
    Role::Eltwise,
];
const Q_ROLES: &[Role] = &[Role::GemmN, Role::GemmK, Role::GemvM, Role::GemvK];
const KV_ROLES: &[Role] = &[Role::GemmN, Role::GemvM];

/// Memoised role checks of one search.
struct Probe<'d> {
    device: &'d Device,
    seen: std::collections::HashMap<(usize, usize), bool>,
}

impl Probe<'_> {
    fn accepts(&mut self, roles: &[Role], value: usize) -> bool {
        roles.iter().all(|&role| {
            let key = (role as usize, value);
            if let Some(&ok) = self.seen.get(&key) {
                return ok;
            }
            let ok = refusals(self.device, role, value).is_empty();
            self.seen.insert(key, ok);
            ok
        })
    }

    /// Every role that refuses `value`, with its first violation, for the report.
    fn refusals_of(&self, dim: &str, roles: &[Role], value: usize) -> Vec<Refusal> {
        roles
            .iter()
            .filter_map(|&role| {
                refusals(self.device, role, value).first().map(|v| Refusal {
                    dim: dim.to_string(),
                    size: value,
                    role: role.label().to_string(),
                    detail: v.to_string(),
                })
            })
            .collect()
    }

    fn first_refusal(&self, dim: &str, roles: &[Role], value: usize) -> Option<Refusal> {
        self.refusals_of(dim, roles, value).into_iter().next()
    }

    /// The smallest size from `real` upwards every role accepts.
    fn nearest(
        &mut self,
        dim: &'static str,
        roles: &[Role],
        real: usize,
    ) -> Result<Pad, PaddingError> {
        let limit = 2 * real + 1024;
        (real..=limit)
            .find(|&s| self.accepts(roles, s))
            .map(|padded| Pad { real, padded })
            .ok_or_else(|| PaddingError {
                dim,
                size: real,
                limit,
                detail: self
                    .first_refusal(dim, roles, real)
                    .map_or_else(String::new, |r| r.detail),
            })
    }
}

/// The padding of `shape` on `device`: hidden
/// and FFN each to their nearest accepted size; head_dim, KV heads and query
/// heads jointly, as the cheapest (head_dim', KV heads') with whole KV groups
/// appended that makes q, k, v and attention place (least q + k + v width,
/// then the smaller head_dim).
pub fn search(device: &Device, shape: &Shape) -> Result<PaddingChoice, PaddingError> {
    let mut probe = Probe {
        device,
        seen: std::collections::HashMap::new(),
    };
    let hidden = probe.nearest("hidden", HIDDEN_ROLES, shape.hidden)?;
    let ffn = probe.nearest("ffn", FFN_ROLES, shape.ffn)?;
    let head_roles: &[Role] = if shape.qk_norm {
        &[Role::Attention, Role::Rope, Role::NormCols]
    } else {
        &[Role::Attention, Role::Rope]
    };
    let group = shape.heads / shape.kv_heads.max(1);
    let (hd, kv) = (shape.head_dim, shape.kv_heads.max(1));
    let mut best: Option<(usize, usize, usize)> = None;
    for hd_p in (hd..=2 * hd + 64).step_by(2) {
        if !probe.accepts(head_roles, hd_p) {
            continue;
        }
        for kv_p in kv..=8 * kv {
            let (q, k) = (kv_p * group * hd_p, kv_p * hd_p);
            let cost = q + 2 * k;
            if best.is_some_and(|(c, _, _)| cost >= c) {
                break;
            }
            if probe.accepts(Q_ROLES, q) && probe.accepts(KV_ROLES, k) {
                best = Some((cost, hd_p, kv_p));
                break;
            }
        }
    }
    let Some((_, hd_p, kv_p)) = best else {
        let detail = probe
            .first_refusal("q_dim", Q_ROLES, shape.heads * hd)
            .or_else(|| probe.first_refusal("kv_dim", KV_ROLES, kv * hd))
            .or_else(|| probe.first_refusal("head_dim", head_roles, hd))
            .map_or_else(String::new, |r| r.detail);
        return Err(PaddingError {
            dim: "heads",
            size: shape.heads,
            limit: 8 * kv * group,
            detail,
        });
    };
    let padding = Padding {
        hidden,
        ffn,
        head_dim: Pad {
            real: hd,
            padded: hd_p,
        },
        heads: Pad {
            real: shape.heads,
            padded: kv_p * group,
        },
        kv_heads: Pad {
            real: kv,
            padded: kv_p,
        },
    };
    let mut refusals = Vec::new();
    let checks: [(&str, &[Role], usize, bool); 5] = [
        ("hidden", HIDDEN_ROLES, shape.hidden, hidden.is_padded()),
        ("ffn", FFN_ROLES, shape.ffn, ffn.is_padded()),
        ("head_dim", head_roles, hd, hd_p != hd),
        ("q_dim", Q_ROLES, shape.heads * hd, hd_p != hd || kv_p != kv),
        ("kv_dim", KV_ROLES, kv * hd, hd_p != hd || kv_p != kv),
    ];
    for (dim, roles, size, padded) in checks {
        if padded {
            refusals.extend(probe.refusals_of(dim, roles, size));
        }
    }
    Ok(PaddingChoice { padding, refusals })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(hidden: usize, ffn: usize, hd: usize, heads: usize, kv: usize) -> Shape {
        Shape {
            hidden,
            ffn,
            head_dim: hd,
            heads,
            kv_heads: kv,
            qk_norm: false,
        }
    }

    #[test]
    fn aligned_dimensions_are_not_padded() {
        let choice = search(&Device::npu2(), &shape(2048, 8192, 64, 32, 8)).unwrap();
        assert!(!choice.padding.is_padded());
        assert!(choice.refusals.is_empty());
    }

    /// llama32-odd: hidden 144 (GEMV K needs a multiple of 64), FFN 400,
    /// q_dim 6 × 24 = 144 and kv_dim 2 × 24 = 48 (GEMM N needs 32 per herd).
    #[test]
    fn odd_dimensions_pad_to_the_nearest_accepted_size() {
        let choice = search(&Device::npu2(), &shape(144, 400, 24, 6, 2)).unwrap();
        let p = choice.padding;
        assert_eq!((p.hidden.padded, p.ffn.padded), (192, 448));
        let (q, kv) = (
            p.heads.padded * p.head_dim.padded,
            p.kv_heads.padded * p.head_dim.padded,
        );
        assert_eq!(q % 64, 0);
        assert_eq!(kv % 32, 0);
        assert_eq!(
            p.heads.padded / p.kv_heads.padded,
            3,
            "whole KV groups appended"
        );
        assert!(choice
            .refusals
            .iter()
            .any(|r| r.dim == "hidden" && r.role == "GEMV K"));
    }
}
