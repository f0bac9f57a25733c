//! The weights of a model, per layer, as bf16 tensors ([`BfTensor`]), with the
//! checkpoint names and shapes every family uses. Fields are public so the
//! emulator and the executor read `weights.layers[i].q_proj.bits()` directly:
//! no copy, whether the bits are mapped from a file or generated.
//!
//! Phi-3 stores q/k/v as one `qkv_proj` and gate/up as one `gate_up_proj`;
//! they are split on load (rows copied) into tensors named as the unfused
//! layout names them (`self_attn.q_proj.weight`, `mlp.gate_proj.weight`, …),
//! so the oracle and the NPU plans read one layout whatever the family. A
//! norm may have no weight (OLMo) and a bias (StableLM): [`NormTensors`].

use std::collections::BTreeSet;

use super::arch::Architecture;
use super::checkpoint::{Checkpoint, WeightsError};
use super::tensor::BfTensor;

/// The tensors of one norm: its weight (none in OLMo's non-parametric
/// LayerNorm) and its bias (StableLM's LayerNorm).
#[derive(Debug, Clone)]
pub struct NormTensors {
    pub weight: Option<BfTensor>,
    pub bias: Option<BfTensor>,
}

impl NormTensors {
    pub fn map(&self, f: &dyn Fn(&BfTensor) -> BfTensor) -> NormTensors {
        NormTensors {
            weight: self.weight.as_ref().map(f),
            bias: self.bias.as_ref().map(f),
        }
    }

    pub fn tensors(&self) -> impl Iterator<Item = &BfTensor> {
        self.weight.iter().chain(&self.bias)
    }

    /// The weight's exact values, `None` without a weight.
    pub fn weight_values(&self) -> Option<Vec<f32>> {
        self.weight.as_ref().map(BfTensor::values)
    }

    /// The bias's exact values, `None` without a bias.
    pub fn bias_values(&self) -> Option<Vec<f32>> {
        self.bias.as_ref().map(BfTensor::values)
    }
}

/// One decoder layer. Projections are `[out, in]` as in the checkpoints.
#[derive(Debug, Clone)]
pub struct LayerWeights {
    pub input_norm: NormTensors,
    pub q_proj: BfTensor,
    pub k_proj: BfTensor,
    pub v_proj: BfTensor,
    pub o_proj: BfTensor,
    /// Present when the architecture has `qkv_bias` (Qwen2.5).
    pub q_bias: Option<BfTensor>,
    pub k_bias: Option<BfTensor>,
    pub v_bias: Option<BfTensor>,
    /// Per-head RMSNorm weights `[head_dim]`, present with `qk_norm` (Qwen3).
    pub q_norm: Option<BfTensor>,
    pub k_norm: Option<BfTensor>,
    /// The norm in front of the MLP: `post_attention_layernorm` (Llama, Qwen)
    /// or `pre_feedforward_layernorm` (Gemma 3, whose `post_attention_layernorm`
    /// is the sandwich norm on the attention output).
    pub post_attention_norm: NormTensors,
    /// Gemma's sandwich norms on the attention and MLP outputs, present with
    /// `sandwich_norms`.
    pub sandwich: Option<SandwichNorms>,
    pub gate_proj: BfTensor,
    pub up_proj: BfTensor,
    pub down_proj: BfTensor,
}

/// The norms Gemma applies to a sublayer's output before the residual add.
#[derive(Debug, Clone)]
pub struct SandwichNorms {
    /// `post_attention_layernorm`: on o_proj's output.
    pub attention_out: NormTensors,
    /// `post_feedforward_layernorm`: on down_proj's output.
    pub mlp_out: NormTensors,
}

/// All weights of a model.
#[derive(Debug, Clone)]
pub struct Weights {
    pub embed_tokens: BfTensor,
    pub layers: Vec<LayerWeights>,
    pub final_norm: NormTensors,
    /// `None` when the LM head is tied to the embeddings.
    pub lm_head: Option<BfTensor>,
}

impl Weights {
    /// The output projection `[vocab, hidden]`: `lm_head`, or the embeddings
    /// when tied.
    pub fn output_projection(&self) -> &BfTensor {
        self.lm_head.as_ref().unwrap_or(&self.embed_tokens)
    }

    /// Every tensor, in checkpoint-name order of layers.
    pub fn tensors(&self) -> Vec<&BfTensor> {
        let mut all = vec![&self.embed_tokens];
        for layer in &self.layers {
            all.extend(layer.tensors());
        }
        all.extend(self.final_norm.tensors());
        all.extend(self.lm_head.as_ref());
        all
    }

    /// Bytes of bf16 weights (the tied head counted once).
    pub fn bytes(&self) -> u64 {
        self.tensors().iter().map(|t| 2 * t.len() as u64).sum()
    }

    /// The same weights with every tensor in bf16: packed (GGUF) tensors
    /// rounded once from their exact values, bf16 tensors shared. This is
    /// what the bf16 NPU path and the bf16 oracle run on.
    pub fn rounded_to_bf16(&self) -> Weights {
        self.map(&|t| t.to_bf16())
    }

    /// Applies `f` to every tensor.
    pub fn map(&self, f: &dyn Fn(&BfTensor) -> BfTensor) -> Weights {
        Weights {
            embed_tokens: f(&self.embed_tokens),
            layers: self.layers.iter().map(|l| l.map(f)).collect(),
            final_norm: self.final_norm.map(f),
            lm_head: self.lm_head.as_ref().map(f),
        }
    }

    /// Bytes of the weights as stored (packed GGUF blocks at their size).
    pub fn stored_bytes(&self) -> u64 {
        self.tensors().iter().map(|t| t.stored_bytes()).sum()
    }

    /// Reads every tensor of `arch` from `checkpoint`, checking names, shapes,
    /// dtypes and that no value is NaN or infinite.
    pub fn from_checkpoint(
        arch: &Architecture,
        checkpoint: &Checkpoint,
    ) -> Result<Self, WeightsError> {
        let mut read = BTreeSet::new();
        let weights = build(arch, &mut |spec: &TensorSpec| {
            read.insert(spec.name.clone());
            checkpoint.tensor(&spec.name, &spec.shape)
        })?;
        refuse_unused(&checkpoint.describe(), checkpoint.names(), &read)?;
        weights.check_finite()?;
        Ok(weights)
    }

    /// Refuses the first NaN or infinite value of any tensor.
    pub fn check_finite(&self) -> Result<(), WeightsError> {
        for tensor in self.tensors() {
            if let Some((index, value)) = tensor.first_non_finite() {
                return Err(WeightsError::NonFinite {
                    name: tensor.name().to_string(),
                    index,
                    value,
                });
            }
        }
        Ok(())
    }
}

impl LayerWeights {
    /// Applies `f` to every tensor.
    pub fn map(&self, f: &dyn Fn(&BfTensor) -> BfTensor) -> LayerWeights {
        LayerWeights {
            input_norm: self.input_norm.map(f),
            q_proj: f(&self.q_proj),
            k_proj: f(&self.k_proj),
            v_proj: f(&self.v_proj),
            o_proj: f(&self.o_proj),
            q_bias: self.q_bias.as_ref().map(f),
            k_bias: self.k_bias.as_ref().map(f),
            v_bias: self.v_bias.as_ref().map(f),
            q_norm: self.q_norm.as_ref().map(f),
            k_norm: self.k_norm.as_ref().map(f),
            post_attention_norm: self.post_attention_norm.map(f),
            sandwich: self.sandwich.as_ref().map(|s| SandwichNorms {
                attention_out: s.attention_out.map(f),
                mlp_out: s.mlp_out.map(f),
            }),
            gate_proj: f(&self.gate_proj),
            up_proj: f(&self.up_proj),
            down_proj: f(&self.down_proj),
        }
    }

    pub fn tensors(&self) -> Vec<&BfTensor> {
        let mut all: Vec<&BfTensor> = self.input_norm.tensors().collect();
        all.extend(self.q_norm.iter().chain(&self.k_norm));
        all.extend([&self.q_proj, &self.k_proj, &self.v_proj]);
        all.extend(self.q_bias.iter().chain(&self.k_bias).chain(&self.v_bias));
        all.push(&self.o_proj);
        if let Some(sandwich) = &self.sandwich {
            all.extend(sandwich.attention_out.tensors());
        }
        all.extend(self.post_attention_norm.tensors());
        all.extend([&self.gate_proj, &self.up_proj, &self.down_proj]);
        if let Some(sandwich) = &self.sandwich {
            all.extend(sandwich.mlp_out.tensors());
        }
        all
    }
}

/// What a tensor is for, which decides how random weights are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorRole {
    Embedding,
    /// A projection; the payload is its fan-in.
    Projection(usize),
    Norm,
    /// The final norm, which sets the logit scale.
    FinalNorm,
    Bias,
    /// A LayerNorm's bias.
    NormBias,
}

/// A tensor the architecture needs: checkpoint name, shape, role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    pub name: String,
    pub shape: Vec<usize>,
    pub role: TensorRole,
}

/// Every tensor `arch` needs, in the order [`Weights::tensors`] lists them.
pub fn tensor_specs(arch: &Architecture) -> Vec<TensorSpec> {
    let mut specs = Vec::new();
    let listed: Result<Weights, std::convert::Infallible> = build(arch, &mut |spec| {
        specs.push(spec.clone());
        Ok(BfTensor::owned(spec.name.clone(), vec![0], Vec::new()))
    });
    drop(listed);
    specs
}

/// Assembles [`Weights`] from a tensor source, asking for each tensor by spec.
pub(crate) fn build<E>(
    arch: &Architecture,
    source: &mut dyn FnMut(&TensorSpec) -> Result<BfTensor, E>,
) -> Result<Weights, E> {
    let (h, v) = (arch.hidden_size, arch.vocab_size);
    let mut get = |name: String, shape: Vec<usize>, role: TensorRole| {
        source(&TensorSpec { name, shape, role })
    };
    let embed_tokens = get(
        "model.embed_tokens.weight".into(),
        vec![v, h],
        TensorRole::Embedding,
    )?;
    let layers = (0..arch.num_layers)
        .map(|i| layer(arch, i, &mut get))
        .collect::<Result<Vec<_>, _>>()?;
    let final_norm = norm(arch, "model.norm", TensorRole::FinalNorm, &mut get)?;
    let lm_head = if arch.tie_word_embeddings {
        None
    } else {
        Some(get(
            "lm_head.weight".into(),
            vec![v, h],
            TensorRole::Projection(h),
        )?)
    };
    Ok(Weights {
        embed_tokens,
        layers,
        final_norm,
        lm_head,
    })
}

type Getter<'a, E> = dyn FnMut(String, Vec<usize>, TensorRole) -> Result<BfTensor, E> + 'a;

/// The norm named `prefix` (`model.norm`, `model.layers.3.input_layernorm`):
/// its weight unless the family's norms have none, its bias if they have one.
fn norm<E>(
    arch: &Architecture,
    prefix: &str,
    role: TensorRole,
    get: &mut Getter<'_, E>,
) -> Result<NormTensors, E> {
    let h = arch.hidden_size;
    let weight = if arch.norm_weight.has_tensor() {
        Some(get(format!("{prefix}.weight"), vec![h], role)?)
    } else {
        None
    };
    let bias = if arch.norm_bias {
        Some(get(
            format!("{prefix}.bias"),
            vec![h],
            TensorRole::NormBias,
        )?)
    } else {
        None
    };
    Ok(NormTensors { weight, bias })
}

/// Splits a fused `[Σ rows, in]` tensor into parts of the given rows, each an
/// owned tensor under its own (unfused) name.
fn split_rows(fused: &BfTensor, parts: &[(String, usize)]) -> Vec<BfTensor> {
    let cols = fused.cols();
    let bits = fused.bits();
    let mut start = 0;
    parts
        .iter()
        .map(|(name, rows)| {
            let part = bits[start * cols..(start + rows) * cols].to_vec();
            start += rows;
            BfTensor::owned(name.clone(), vec![*rows, cols], part)
        })
        .collect()
}

/// q, k and v: three tensors, or Phi-3's `qkv_proj` split on load.
fn qkv<E>(arch: &Architecture, p: &str, get: &mut Getter<'_, E>) -> Result<[BfTensor; 3], E> {
    let (h, q, kv) = (arch.hidden_size, arch.q_dim(), arch.kv_dim());
    let proj = TensorRole::Projection(h);
    let names = ["q_proj", "k_proj", "v_proj"].map(|m| format!("{p}.self_attn.{m}.weight"));
    if !arch.fused_projections {
        let [qn, kn, vn] = names;
        return Ok([
            get(qn, vec![q, h], proj)?,
            get(kn, vec![kv, h], proj)?,
            get(vn, vec![kv, h], proj)?,
        ]);
    }
    let fused = get(
        format!("{p}.self_attn.qkv_proj.weight"),
        vec![q + 2 * kv, h],
        proj,
    )?;
    let [qn, kn, vn] = names;
    let parts = split_rows(&fused, &[(qn, q), (kn, kv), (vn, kv)]);
    let [a, b, c]: [BfTensor; 3] = parts.try_into().unwrap_or_else(|_| unreachable!());
    Ok([a, b, c])
}

/// gate and up: two tensors, or Phi-3's `gate_up_proj` (gate first) split on load.
fn gate_up<E>(arch: &Architecture, p: &str, get: &mut Getter<'_, E>) -> Result<[BfTensor; 2], E> {
    let (h, f) = (arch.hidden_size, arch.intermediate_size);
    let proj = TensorRole::Projection(h);
    let names = ["gate_proj", "up_proj"].map(|m| format!("{p}.mlp.{m}.weight"));
    if !arch.fused_projections {
        let [gn, un] = names;
        return Ok([get(gn, vec![f, h], proj)?, get(un, vec![f, h], proj)?]);
    }
    let fused = get(format!("{p}.mlp.gate_up_proj.weight"), vec![2 * f, h], proj)?;
    let [gn, un] = names;
    let parts = split_rows(&fused, &[(gn, f), (un, f)]);
    let [a, b]: [BfTensor; 2] = parts.try_into().unwrap_or_else(|_| unreachable!());
    Ok([a, b])
}

fn layer<E>(arch: &Architecture, i: usize, get: &mut Getter<'_, E>) -> Result<LayerWeights, E> {
    let (h, f) = (arch.hidden_size, arch.intermediate_size);
    let (q, kv, d) = (arch.q_dim(), arch.kv_dim(), arch.head_dim);
    let p = format!("model.layers.{i}");
    let input_norm = norm(arch, &format!("{p}.input_layernorm"), TensorRole::Norm, get)?;
    let (q_norm, k_norm) = if arch.qk_norm {
        (
            Some(get(
                format!("{p}.self_attn.q_norm.weight"),
                vec![d],
                TensorRole::Norm,
            )?),
            Some(get(
                format!("{p}.self_attn.k_norm.weight"),
                vec![d],
                TensorRole::Norm,
            )?),
        )
    } else {
        (None, None)
    };
    let proj = TensorRole::Projection;
    let [q_proj, k_proj, v_proj] = qkv(arch, &p, get)?;
    let (q_bias, k_bias, v_bias) = if arch.qkv_bias {
        (
            Some(get(
                format!("{p}.self_attn.q_proj.bias"),
                vec![q],
                TensorRole::Bias,
            )?),
            Some(get(
                format!("{p}.self_attn.k_proj.bias"),
                vec![kv],
                TensorRole::Bias,
            )?),
            Some(get(
                format!("{p}.self_attn.v_proj.bias"),
                vec![kv],
                TensorRole::Bias,
            )?),
        )
    } else {
        (None, None, None)
    };
    let o_proj = get(format!("{p}.self_attn.o_proj.weight"), vec![h, q], proj(q))?;
    let layer_norm = |get: &mut Getter<'_, E>, name: &str| {
        norm(arch, &format!("{p}.{name}"), TensorRole::Norm, get)
    };
    let attention_out = if arch.sandwich_norms {
        Some(layer_norm(get, "post_attention_layernorm")?)
    } else {
        None
    };
    let pre_mlp = if arch.sandwich_norms {
        "pre_feedforward_layernorm"
    } else {
        "post_attention_layernorm"
    };
    let post_attention_norm = layer_norm(get, pre_mlp)?;
    let [gate_proj, up_proj] = gate_up(arch, &p, get)?;
    let down_proj = get(format!("{p}.mlp.down_proj.weight"), vec![h, f], proj(f))?;
    let sandwich = match attention_out {
        Some(attention_out) => Some(SandwichNorms {
            attention_out,
            mlp_out: layer_norm(get, "post_feedforward_layernorm")?,
        }),
        None => None,
    };
    Ok(LayerWeights {
        input_norm,
        q_proj,
        k_proj,
        v_proj,
        o_proj,
        q_bias,
        k_bias,
        v_bias,
        q_norm,
        k_norm,
        post_attention_norm,
        sandwich,
        gate_proj,
        up_proj,
        down_proj,
    })
}

/// Refuses tensors a file holds that the architecture never reads: a checkpoint
/// with a layer, a bias or a head more than its config describes is another
/// model's, or a config that lost a field. The rotary tables some checkpoints
/// store (`*.rotary_emb.inv_freq`) are computed from the config, not weights.
pub fn refuse_unused<'a>(
    file: &str,
    held: impl Iterator<Item = &'a str>,
    read: &BTreeSet<String>,
) -> Result<(), WeightsError> {
    let names: Vec<String> = held
        .filter(|name| !read.contains(*name) && !name.ends_with(".rotary_emb.inv_freq"))
        .map(str::to_string)
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    Err(WeightsError::Unused {
        file: file.to_string(),
        names,
    })
}

/// Up to five names in backticks, and how many more.
pub fn shortlist(names: &[String]) -> String {
    let shown: Vec<String> = names.iter().take(5).map(|n| format!("`{n}`")).collect();
    match names.len().saturating_sub(5) {
        0 => shown.join(", "),
        more => format!("{}, and {more} more", shown.join(", ")),
    }
}
