//! A GGUF file's tensors as the model's [`Weights`]: Hugging Face names map to
//! llama.cpp's (`model.layers.3.self_attn.q_proj.weight` ↔ `blk.3.attn_q.weight`),
//! shapes are checked in PyTorch order (GGUF lists dimensions fastest-first),
//! and every tensor stays in the file, packed in its stored format, until a
//! consumer asks for bf16 bits.
//!
//! llama.cpp's converter permutes the rows of `attn_q` and `attn_k` of llama
//! models (per head, the two rotary halves are interleaved); transformers
//! undoes it when loading, and so does [`unpermute_order`] here, as a row
//! order over the mapped rows rather than a copy.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{GgufError, GgufFile};
use crate::model::arch::{Architecture, Family};
use crate::model::checkpoint::WeightsError;
use crate::model::tensor::{BfTensor, PackedRows};
use crate::model::weights::{build, refuse_unused, TensorSpec, Weights};

/// The GGUF name of a Hugging Face tensor name.
pub fn gguf_name(hf: &str) -> Option<String> {
    match hf {
        "model.embed_tokens.weight" => return Some("token_embd.weight".into()),
        "model.norm.weight" => return Some("output_norm.weight".into()),
        "lm_head.weight" => return Some("output.weight".into()),
        _ => {}
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, part) = rest.split_once('.')?;
    let part = match part {
        "input_layernorm.weight" => "attn_norm.weight",
        "post_attention_layernorm.weight" => "ffn_norm.weight",
        "self_attn.q_proj.weight" => "attn_q.weight",
        "self_attn.k_proj.weight" => "attn_k.weight",
        "self_attn.v_proj.weight" => "attn_v.weight",
        "self_attn.o_proj.weight" => "attn_output.weight",
        "self_attn.q_proj.bias" => "attn_q.bias",
        "self_attn.k_proj.bias" => "attn_k.bias",
        "self_attn.v_proj.bias" => "attn_v.bias",
        "self_attn.q_norm.weight" => "attn_q_norm.weight",
        "self_attn.k_norm.weight" => "attn_k_norm.weight",
        "mlp.gate_proj.weight" => "ffn_gate.weight",
        "mlp.up_proj.weight" => "ffn_up.weight",
        "mlp.down_proj.weight" => "ffn_down.weight",
        _ => return None,
    };
    Some(format!("blk.{layer}.{part}"))
}

/// Every tensor `arch` needs, read from `file` (packed, mapped), with the
/// same non-finite check as a safetensors checkpoint.
pub fn weights(arch: &Architecture, file: &GgufFile) -> Result<Weights, WeightsError> {
    check_blocks(arch, file)?;
    let mut read = BTreeSet::new();
    let weights = build(arch, &mut |spec: &TensorSpec| {
        read.insert(gguf_name(&spec.name).unwrap_or_else(|| spec.name.clone()));
        tensor(arch, file, spec)
    })?;
    refuse_unused(&file.name, file.tensors.keys().map(String::as_str), &read)?;
    weights.check_finite()?;
    Ok(weights)
}

/// The block count the metadata declares against the blocks the tensors hold:
/// a file with `blk.29.*` declaring 20 blocks would otherwise run 20 of 30.
fn check_blocks(arch: &Architecture, file: &GgufFile) -> Result<(), WeightsError> {
    let held = file
        .tensors
        .keys()
        .filter_map(|name| {
            name.strip_prefix("blk.")?
                .split('.')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .max()
        .map_or(0, |last| last + 1);
    if held <= arch.num_layers {
        // Fewer blocks than declared: the first missing tensor is named by `build`.
        return Ok(());
    }
    let key = file.architecture().map_or_else(
        |_| "block_count".to_string(),
        |a| format!("{a}.block_count"),
    );
    Err(WeightsError::Blocks {
        file: file.name.clone(),
        key,
        declared: arch.num_layers,
        held,
    })
}

fn tensor(
    arch: &Architecture,
    file: &GgufFile,
    spec: &TensorSpec,
) -> Result<BfTensor, WeightsError> {
    let name = gguf_name(&spec.name).unwrap_or_else(|| spec.name.clone());
    let info = file
        .tensors
        .get(&name)
        .ok_or_else(|| WeightsError::MissingTensor {
            name: name.clone(),
            searched: format!("{}, for `{}`", file.name, spec.name),
        })?;
    // Compared in PyTorch order: GGUF lists the dimensions reversed.
    let shape = info.shape();
    if shape != spec.shape {
        return Err(WeightsError::Shape {
            name,
            expected: spec.shape.clone(),
            found: shape,
        });
    }
    let cols = info.dims[0] as usize;
    let rows = shape.iter().product::<usize>() / cols;
    let order = row_order(arch, &name, rows);
    let packed = PackedRows::mapped(
        info.format,
        rows,
        cols,
        file.map().clone(),
        info.start,
        order,
    );
    Ok(BfTensor::packed(
        spec.name.clone(),
        spec.shape.clone(),
        packed,
    ))
}

/// The logical → stored row order of `name`: llama's q and k are permuted.
fn row_order(arch: &Architecture, name: &str, rows: usize) -> Option<Arc<[u32]>> {
    if arch.family != Family::Llama {
        return None;
    }
    let heads = if name.ends_with(".attn_q.weight") {
        arch.num_heads
    } else if name.ends_with(".attn_k.weight") {
        arch.num_kv_heads
    } else {
        return None;
    };
    Some(unpermute_order(rows, heads).into())
}

/// llama.cpp stores head row `2i + j` what transformers has at `j·(d/2) + i`
/// (d = rows per head, j ∈ {0, 1}); this is that map, logical → stored.
pub fn unpermute_order(rows: usize, heads: usize) -> Vec<u32> {
    let per_head = rows / heads;
    let half = per_head / 2;
    (0..rows)
        .map(|r| {
            let (head, within) = (r / per_head, r % per_head);
            let (j, i) = (within / half, within % half);
            (head * per_head + 2 * i + j) as u32
        })
        .collect()
}

/// A model path that is (or holds) a GGUF file, opened.
pub fn open(path: &std::path::Path) -> Result<Option<GgufFile>, GgufError> {
    match super::find(path)? {
        Some(file) => GgufFile::open(&file).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// llama.cpp's permutation (`reshape(n_head, 2, d/2, …).swapaxes(1, 2)`)
    /// followed by this order gives back the original rows.
    #[test]
    fn unpermute_inverts_the_converters_permutation() {
        let (heads, per_head) = (3, 8);
        let rows = heads * per_head;
        let original: Vec<usize> = (0..rows).collect();
        // permute: stored[h, i, j] = original[h, j, i] for i < d/2, j < 2.
        let mut stored = vec![0; rows];
        for h in 0..heads {
            for j in 0..2 {
                for i in 0..per_head / 2 {
                    stored[h * per_head + 2 * i + j] =
                        original[h * per_head + j * per_head / 2 + i];
                }
            }
        }
        let order = unpermute_order(rows, heads);
        let restored: Vec<usize> = order.iter().map(|&s| stored[s as usize]).collect();
        assert_eq!(restored, original);
    }

    #[test]
    fn names_map_both_ways_of_a_layer() {
        assert_eq!(
            gguf_name("model.layers.12.self_attn.o_proj.weight").as_deref(),
            Some("blk.12.attn_output.weight")
        );
        assert_eq!(gguf_name("model.layers.0.mlp.fc1.weight"), None);
    }
}
