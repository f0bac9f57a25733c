//! Fills a plan's weight buffers from the model's tensors: the checkpoint tensor a
//! buffer names (`{layer}` replaced by the layer index) with the buffer's setup
//! transforms applied. Phantom heads (GQA-aware padding) and LM-head partitions
//! need copies; the pre-transpose does not: the emulator's GEMM reads the
//! checkpoint's `[N, K]` order directly with the same numerics, so projections stay
//! borrowed from the loaded (often memory-mapped) weights.

use std::borrow::Cow;
use std::collections::HashMap;

use super::ExecError;
use crate::bf16;
use crate::model::tensor::{BfTensor, PackedRows};
use crate::model::weights::Weights;
use crate::xdna2::plan::{Plan, Transform, TransformError, WeightSource};

/// Checkpoint tensors by name.
pub struct TensorIndex<'m> {
    tensors: HashMap<&'m str, &'m BfTensor>,
}

impl<'m> TensorIndex<'m> {
    pub fn new(weights: &'m Weights) -> Self {
        let tensors = weights
            .tensors()
            .into_iter()
            .map(|t| (t.name(), t))
            .collect();
        Self { tensors }
    }

    pub fn get(&self, name: &str) -> Option<&'m BfTensor> {
        self.tensors.get(name).copied()
    }
}

/// A weight buffer's contents: `rows × cols` bf16 bits, row-major, in the
/// checkpoint's `[out, in]` orientation.
#[derive(Debug, Clone)]
pub struct WeightData<'m> {
    pub bits: Cow<'m, [u16]>,
    pub rows: usize,
    pub cols: usize,
}

/// The checkpoint tensor buffer `name` of `plan` names at `layer`, with that
/// tensor's name and the buffer's setup transforms.
fn checkpoint_tensor<'m, 'p>(
    plan: &'p Plan,
    name: &str,
    layer: usize,
    index: &TensorIndex<'m>,
) -> Result<(&'m BfTensor, String, &'p [Transform]), ExecError> {
    let buffer = plan
        .buffers
        .get(name)
        .ok_or_else(|| ExecError::UnknownBuffer(name.to_string()))?;
    let Some(WeightSource::Tensor {
        name: pattern,
        transforms,
    }) = &buffer.source
    else {
        return Err(ExecError::NotATensor(name.to_string()));
    };
    let tensor_name = pattern.replace("{layer}", &layer.to_string());
    let tensor = index
        .get(&tensor_name)
        .ok_or_else(|| ExecError::MissingTensor {
            buffer: name.to_string(),
            tensor: tensor_name.clone(),
        })?;
    Ok((tensor, tensor_name, transforms))
}

/// The stored 4-bit blocks buffer `name` of `plan` reads at `layer`: its
/// checkpoint tensor as the file holds it, when the buffer's setup transforms
/// leave the data as it is (a pre-transpose only) and the tensor is packed.
pub fn resolve_packed<'m>(
    plan: &Plan,
    name: &str,
    layer: usize,
    index: &TensorIndex<'m>,
) -> Result<&'m PackedRows, ExecError> {
    let (tensor, tensor_name, transforms) = checkpoint_tensor(plan, name, layer, index)?;
    let not_packed = |why: String| ExecError::NotPacked {
        buffer: name.to_string(),
        why,
    };
    if let Some(t) = transforms.iter().find(|t| **t != Transform::Transpose) {
        return Err(not_packed(format!("its setup transforms the data ({t:?})")));
    }
    tensor
        .packed_rows()
        .ok_or_else(|| not_packed(format!("`{tensor_name}` is stored as {}", tensor.format())))
}

/// Materializes buffer `name` of `plan` for `layer`.
pub fn resolve<'m>(
    plan: &Plan,
    name: &str,
    layer: usize,
    index: &TensorIndex<'m>,
) -> Result<WeightData<'m>, ExecError> {
    let (tensor, _, transforms) = checkpoint_tensor(plan, name, layer, index)?;
    // A vector (a bias) is a column: its heads run along axis 0.
    let (rows, cols) = match tensor.shape() {
        [n] => (*n, 1),
        _ => (tensor.rows(), tensor.cols()),
    };
    let mut data = WeightData {
        bits: Cow::Borrowed(tensor.bits()),
        rows,
        cols,
    };
    for t in transforms {
        data = apply(data, t).map_err(|source| ExecError::Transform {
            buffer: name.to_string(),
            source,
        })?;
    }
    Ok(data)
}

fn apply<'m>(
    data: WeightData<'m>,
    transform: &Transform,
) -> Result<WeightData<'m>, TransformError> {
    match *transform {
        // Numerically a no-op for the emulator (see the module documentation).
        Transform::Transpose => Ok(data),
        Transform::OffsetOne => Ok(WeightData {
            bits: Cow::Owned(
                data.bits
                    .iter()
                    .map(|&w| bf16::from_f32(1.0 + bf16::to_f32(w)))
                    .collect(),
            ),
            ..data
        }),
        Transform::PadHeads {
            axis,
            heads,
            padded_heads,
            kv_heads,
            head_dim,
        } => pad_heads(data, axis, heads, padded_heads, kv_heads, head_dim),
        Transform::ZeroPad { ref rows, ref cols } => {
            let (bits, new_rows, new_cols) =
                crate::xdna2::plan::zero_pad(&data.bits, (data.rows, data.cols), rows, cols)?;
            Ok(WeightData {
                bits: Cow::Owned(bits),
                rows: new_rows,
                cols: new_cols,
            })
        }
        // The real rows only, borrowed: the zero padding up to `padded_rows` is
        // implicit (kernels that read a partition accept its real rows; the
        // interpreter's GEMM treats missing rows as the zeros they are).
        Transform::Rows {
            start,
            rows,
            padded_rows,
        } => {
            let cols = data.cols;
            if start + rows > data.rows || padded_rows < rows {
                return Err(TransformError::Rows {
                    start,
                    end: start + rows,
                    len: data.rows,
                    padded_rows,
                });
            }
            let bits = match data.bits {
                Cow::Borrowed(b) => Cow::Borrowed(&b[start * cols..(start + rows) * cols]),
                Cow::Owned(v) => Cow::Owned(v[start * cols..(start + rows) * cols].to_vec()),
            };
            Ok(WeightData { bits, rows, cols })
        }
        Transform::Broadcast { rows } => {
            let row = data.bits.into_owned();
            Ok(WeightData {
                cols: row.len(),
                bits: Cow::Owned(row.repeat(rows)),
                rows,
            })
        }
    }
}

/// Inserts zero "phantom" heads at the end of each KV group along `axis` (0: rows,
/// 1: columns), so each group of `heads / kv_heads` real heads becomes
/// `padded_heads / kv_heads` heads.
fn pad_heads<'m>(
    data: WeightData<'m>,
    axis: usize,
    heads: usize,
    padded_heads: usize,
    kv_heads: usize,
    head_dim: usize,
) -> Result<WeightData<'m>, TransformError> {
    let (bits, rows, cols) = crate::xdna2::plan::pad_heads(
        &data.bits,
        data.rows,
        data.cols,
        axis,
        heads,
        padded_heads,
        kv_heads,
        head_dim,
    )?;
    Ok(WeightData {
        bits: Cow::Owned(bits),
        rows,
        cols,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phantom_heads_sit_at_the_end_of_each_kv_group() {
        // 4 heads of dim 1 in 2 KV groups, padded to 6: [h0 h1 0 | h2 h3 0].
        let data = WeightData {
            bits: Cow::Owned(vec![1, 2, 3, 4]),
            rows: 4,
            cols: 1,
        };
        let rows = pad_heads(data.clone(), 0, 4, 6, 2, 1).unwrap();
        assert_eq!(&*rows.bits, &[1, 2, 0, 3, 4, 0]);
        let cols = pad_heads(
            WeightData {
                rows: 1,
                cols: 4,
                ..data
            },
            1,
            4,
            6,
            2,
            1,
        )
        .unwrap();
        assert_eq!((&*cols.bits, cols.cols), (&[1u16, 2, 0, 3, 4, 0][..], 6));
    }
}
