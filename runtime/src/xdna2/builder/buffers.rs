//! The buffers a plan names: activations, and weights with the checkpoint
//! tensor each is read from and the transforms (padding, transposition,
//! `1 + w`) that shape it for its kernel.

use super::super::kernels::Dtype;
use super::super::plan::{Buffer, BufferClass, Phase, Transform, WeightSource};
use super::dims::zero_pad;
use super::{local_lut, Builder, NormBuffers, LOCAL_LUT};
use crate::model::arch::NormWeight;

impl Builder<'_> {
    pub(super) fn act(&mut self, name: &str, elements: usize) -> String {
        self.buffers.insert(
            name.to_string(),
            Buffer {
                class: BufferClass::Activation,
                dtype: Dtype::Bf16,
                elements,
                source: None,
                per_layer: false,
            },
        );
        name.to_string()
    }

    /// How weights are held: static per-layer buffers when reused, and
    /// always in the fused decode (its dispatch reads them on the device).
    pub(super) fn weight_class(&self) -> BufferClass {
        if self.options.static_weights || self.fused().is_some() {
            BufferClass::StaticWeight
        } else {
            BufferClass::Weight
        }
    }

    pub(super) fn tensor(
        &mut self,
        name: &str,
        class: BufferClass,
        tensor: String,
        elements: usize,
        transforms: Vec<Transform>,
    ) -> String {
        let per_layer = tensor.contains("{layer}");
        self.buffers.insert(
            name.to_string(),
            Buffer {
                class,
                dtype: Dtype::Bf16,
                elements,
                source: Some(WeightSource::Tensor {
                    name: tensor,
                    transforms,
                }),
                per_layer,
            },
        );
        name.to_string()
    }

    /// A layer projection `[out, in]` as the phase's kernel reads it:
    /// pre-transposed for prefill GEMMs, as stored for decode GEMVs; query
    /// heads padded where the plan pads them.
    pub(super) fn projection(
        &mut self,
        name: &str,
        module: &str,
        out: usize,
        inp: usize,
    ) -> String {
        let d = self.dims;
        let mut transforms = Vec::new();
        let pad = |axis| Transform::PadHeads {
            axis,
            heads: d.real_heads,
            padded_heads: d.heads,
            kv_heads: d.kv_heads,
            head_dim: d.head_dim,
        };
        if d.padded() && module == "self_attn.q_proj" {
            transforms.push(pad(0));
        }
        if d.padded() && module == "self_attn.o_proj" {
            transforms.push(pad(1));
        }
        let (rows, cols) = match module {
            "self_attn.q_proj" => (d.q_levels(), d.hidden_levels()),
            "self_attn.k_proj" | "self_attn.v_proj" => (d.kv_levels(), d.hidden_levels()),
            "self_attn.o_proj" => (d.hidden_levels(), d.q_levels()),
            "mlp.down_proj" => (d.hidden_levels(), d.ffn_levels()),
            _ => (d.ffn_levels(), d.hidden_levels()),
        };
        transforms.extend(zero_pad(rows, cols));
        if self.phase == Phase::Prefill {
            transforms.push(Transform::Transpose);
        }
        let class = self.weight_class();
        self.tensor(
            name,
            class,
            format!("model.layers.{{layer}}.{module}.weight"),
            out * inp,
            transforms,
        )
    }

    /// A per-layer vector (a norm weight) of `elements`, zero-padded along
    /// `levels`.
    pub(super) fn layer_vector(
        &mut self,
        name: &str,
        tensor: &str,
        (elements, levels): (usize, Vec<[usize; 2]>),
        class: BufferClass,
    ) -> String {
        let transforms = self.norm_transforms(levels);
        self.tensor(
            name,
            class,
            format!("model.layers.{{layer}}.{tensor}"),
            elements,
            transforms,
        )
    }

    /// A layer norm's buffers as `class`: `{name}` for its weight unless the
    /// model's norms have none, `{name}_b` for its bias if they have one.
    pub(super) fn layer_norm_buffers(
        &mut self,
        name: &str,
        module: &str,
        class: BufferClass,
    ) -> NormBuffers {
        let (elements, levels) = self.dims.hidden_vector();
        let weight = self.arch.norm_weight.has_tensor().then(|| {
            let transforms = self.norm_transforms(levels.clone());
            self.tensor(
                name,
                class,
                format!("model.layers.{{layer}}.{module}.weight"),
                elements,
                transforms,
            )
        });
        let bias = self.arch.norm_bias.then(|| {
            self.tensor(
                &format!("{name}_b"),
                class,
                format!("model.layers.{{layer}}.{module}.bias"),
                elements,
                zero_pad(levels, Vec::new()).into_iter().collect(),
            )
        });
        NormBuffers { weight, bias }
    }

    /// Moves a norm's buffers to `class` (the host-glue decode path).
    pub(super) fn reclass_norm(&mut self, norm: &NormBuffers, class: BufferClass) {
        for name in norm.weight.iter().chain(&norm.bias) {
            if let Some(b) = self.buffers.get_mut(name) {
                b.class = class;
            }
        }
    }

    /// A norm weight's setup: `1 + w` where the model's norms apply that
    /// (before the zero padding, so padded columns stay zero), then the padding.
    pub(super) fn norm_transforms(&self, levels: Vec<[usize; 2]>) -> Vec<Transform> {
        let mut transforms = Vec::new();
        if self.arch.norm_weight == NormWeight::OffsetOne {
            transforms.push(Transform::OffsetOne);
        }
        transforms.extend(zero_pad(levels, Vec::new()));
        transforms
    }

    /// The RoPE table: rows as wide as the rotated part (the real head_dim, or
    /// the partial rotary dimensions);
    /// with the local base's table beside it when sliding-window layers have
    /// one (`SlidingLayers::local_lut`).
    pub(super) fn lut(&mut self) -> String {
        let positions = self.seq;
        let hd = self
            .arch
            .partial_rotary_dim
            .unwrap_or(self.dims.real_head_dim);
        let has_local = local_lut(self.arch).is_some();
        for (name, local) in [("lut", false), (LOCAL_LUT, true)] {
            if local && !has_local {
                continue;
            }
            self.buffers.insert(
                name.to_string(),
                Buffer {
                    class: self.weight_class(),
                    dtype: Dtype::Bf16,
                    elements: positions * hd,
                    source: Some(WeightSource::RopeLut {
                        positions,
                        head_dim: hd,
                        local,
                    }),
                    per_layer: false,
                },
            );
        }
        "lut".to_string()
    }

    /// The embedding table on the host, its columns zero-padded to hidden.
    pub(super) fn embedding_table(&mut self) -> String {
        let d = self.dims;
        self.tensor(
            "embed",
            BufferClass::Host,
            "model.embed_tokens.weight".into(),
            d.vocab * d.hidden,
            zero_pad(Vec::new(), d.hidden_levels())
                .into_iter()
                .collect(),
        )
    }
}
