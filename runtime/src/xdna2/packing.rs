//! The 4-bit weight path's plan decision: which decode GEMVs read their weights
//! in the 4-bit blocks the model file stores (`kernels::gemv_packed`) instead of a
//! bf16 copy. The decision is driven by the weights as stored, per GEMV weight
//! buffer: packed when every layer's tensor of the buffer is Q4_0 or Q4_1 (one
//! format throughout), the buffer's setup leaves the data as stored (a
//! pre-transpose only: padded heads or zero rows would need a copy), and the
//! packed launch places on the device; otherwise bf16, with the reason. A model
//! with bf16, F16 or F32 weights therefore keeps the bf16 path unchanged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::device::Device;
use super::interpreter::weights::{resolve_packed, TensorIndex};
use super::kernels::PackedFormat;
use super::plan::{Launch, Phase, Plan, Step, WeightSource};
use crate::model::quant::WeightFormat;
use crate::model::weights::Weights;

/// Which weights a deployment's decode GEMVs read (`skillc deploy --weights`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightPath {
    /// Packed wherever the decision packs a buffer, bf16 elsewhere (and
    /// everywhere on a model with no 4-bit weights).
    #[default]
    Auto,
    /// Every GEMV on bf16 weights (a 4-bit model's rounded to bf16 once).
    Bf16,
    /// As `Auto`, but a model with no 4-bit weights is refused.
    Packed,
}

impl WeightPath {
    pub fn name(self) -> &'static str {
        match self {
            WeightPath::Auto => "auto",
            WeightPath::Bf16 => "bf16",
            WeightPath::Packed => "packed",
        }
    }
}

impl std::fmt::Display for WeightPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown weight path `{0}` (known: auto, bf16, packed)")]
pub struct UnknownWeightPath(pub String);

impl std::str::FromStr for WeightPath {
    type Err = UnknownWeightPath;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [WeightPath::Auto, WeightPath::Bf16, WeightPath::Packed]
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownWeightPath(s.to_string()))
    }
}

/// What the decision found for one GEMV weight buffer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackingChoice {
    pub buffer: String,
    /// `576x576`.
    pub shape: String,
    /// The packed format, or `None` for bf16.
    pub packed: Option<PackedFormat>,
    /// Why bf16 when not packed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// Decides every decode GEMV of `plan` on `weights` and packs those that can be;
/// returns one choice per GEMV weight buffer, in buffer-name order.
pub fn pack_decode_gemvs(
    plan: &mut Plan,
    weights: &Weights,
    device: &Device,
) -> Vec<PackingChoice> {
    if plan.phase != Phase::Decode {
        return Vec::new();
    }
    let index = TensorIndex::new(weights);
    let mut choices = BTreeMap::new();
    for step in plan
        .layer
        .iter()
        .chain(&plan.prologue)
        .chain(&plan.epilogue)
    {
        let Step::Call(call) = step else { continue };
        for launch in &call.launches {
            if let Launch::Gemv { w, spec, .. } = launch {
                choices
                    .entry(w.clone())
                    .or_insert_with(|| decide(plan, w, spec, &index, device));
            }
        }
    }
    let packed: BTreeMap<&str, PackedFormat> = choices
        .iter()
        .filter_map(|(name, c)| c.packed.map(|f| (name.as_str(), f)))
        .collect();
    for step in plan
        .layer
        .iter_mut()
        .chain(plan.prologue.iter_mut())
        .chain(plan.epilogue.iter_mut())
    {
        let Step::Call(call) = step else { continue };
        for launch in &mut call.launches {
            if let Launch::Gemv { w, spec, .. } = launch {
                spec.packed = packed.get(w.as_str()).copied();
            }
        }
    }
    choices.into_values().collect()
}

/// True when some tensor is stored in a 4-bit block format the packed GEMV reads.
pub fn stores_four_bit(weights: &Weights) -> bool {
    weights
        .tensors()
        .iter()
        .any(|t| PackedFormat::of(t.format()).is_some())
}

/// The format layer 0's tensor of weight buffer `buffer` is stored in.
pub fn stored_format(plan: &Plan, buffer: &str, index: &TensorIndex<'_>) -> Option<WeightFormat> {
    let Some(WeightSource::Tensor { name, .. }) = &plan.buffers.get(buffer)?.source else {
        return None;
    };
    index.get(&name.replace("{layer}", "0")).map(|t| t.format())
}

fn decide(
    plan: &Plan,
    buffer: &str,
    spec: &super::kernels::GemvSpec,
    index: &TensorIndex<'_>,
    device: &Device,
) -> PackingChoice {
    let layers = match plan.buffers.get(buffer) {
        Some(b) if b.per_layer => plan.num_layers,
        _ => 1,
    };
    let mut choice = PackingChoice {
        buffer: buffer.to_string(),
        shape: format!("{}x{}", spec.m, spec.k),
        packed: None,
        reason: String::new(),
    };
    let mut format = None;
    for layer in 0..layers {
        let rows = match resolve_packed(plan, buffer, layer, index) {
            Ok(rows) => rows,
            Err(e) => {
                choice.reason = e.to_string();
                return choice;
            }
        };
        let Some(f) = PackedFormat::of(rows.format()) else {
            choice.reason = format!("layer {layer} stores {}", rows.format());
            return choice;
        };
        if format.is_some_and(|g| g != f) {
            choice.reason = format!("layers mix {} and {f}", format.unwrap_or(f));
            return choice;
        }
        format = Some(f);
    }
    let Some(f) = format else {
        choice.reason = "no layer".into();
        return choice;
    };
    let packed = super::kernels::GemvSpec {
        packed: Some(f),
        ..*spec
    };
    match packed.check(device).first() {
        Some(v) => choice.reason = format!("packed {f} does not place: {v}"),
        None => choice.packed = Some(f),
    }
    choice
}
