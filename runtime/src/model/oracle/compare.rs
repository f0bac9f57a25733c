//! Checking the reference against `reference.safetensors`, the outputs
//! Hugging Face transformers computed for a fixture (format in
//! `shared/fixtures/README.md`). The prompt is prefilled with logits for every
//! row, then the reference's own greedy tokens are fed back (teacher forcing),
//! so each decode row is compared with the row transformers computed for the
//! same input even if a token choice were to differ; token agreement is checked
//! separately and exactly.
//!
//! Each tensor's error is `max |ours − ref| / max |ref|`; it passes at or below
//! the tolerance (1e-4 by default: float32 summation noise, see the README).
//!
//! A file holds one prompt (`input_ids`, `hidden_states`, … as in the shared
//! fixtures) or several, each under a prefix (`plain.input_ids`,
//! `chat.input_ids`, … as beside the GGUF model); [`ReferenceTensors::prompts`]
//! lists them. `layer_outputs` is optional: without it the layers are compared
//! through `hidden_states`, whose last entry is after the final norm.

use std::collections::BTreeMap;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors};
use serde::Serialize;
use thiserror::Error;

use super::{blocks, LogitRows, Reference, ReferenceError};
use crate::model::Model;

/// Default bound on `max |Δ| / max |ref|`.
pub const DEFAULT_TOLERANCE: f64 = 1e-4;
/// The file a fixture's transformers outputs are stored in.
pub const REFERENCE_FILE: &str = "reference.safetensors";

#[derive(Debug, Clone, PartialEq, Error)]
pub enum CompareError {
    #[error("{file}: {message}")]
    Read { file: String, message: String },
    #[error("{file}: tensor `{name}` {problem}")]
    Tensor {
        file: String,
        name: String,
        problem: String,
    },
    #[error(transparent)]
    Reference(#[from] ReferenceError),
}

/// A tensor of the reference file.
#[derive(Debug, Clone, PartialEq)]
pub enum RefData {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RefTensor {
    pub shape: Vec<usize>,
    pub data: RefData,
}

/// The tensors of a `reference.safetensors` file, by name.
#[derive(Debug, Clone, PartialEq)]
pub struct ReferenceTensors {
    file: String,
    tensors: BTreeMap<String, RefTensor>,
}

impl ReferenceTensors {
    /// Reads a reference file (F32 and I64 tensors; others are refused).
    pub fn read(path: &Path) -> Result<Self, CompareError> {
        let file = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let read_error = |message: String| CompareError::Read {
            file: file.clone(),
            message,
        };
        let bytes = crate::input::read(path).map_err(|e| read_error(e.problem.to_string()))?;
        let st = SafeTensors::deserialize(&bytes)
            .map_err(|e| read_error(format!("not a valid safetensors file ({e:?})")))?;
        let mut tensors = BTreeMap::new();
        for (name, view) in st.tensors() {
            let raw = view.data();
            let data = match view.dtype() {
                Dtype::F32 => RefData::F32(
                    raw.chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect(),
                ),
                Dtype::I64 => RefData::I64(
                    raw.chunks_exact(8)
                        .map(|b| {
                            i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
                        })
                        .collect(),
                ),
                other => {
                    return Err(CompareError::Tensor {
                        file,
                        name,
                        problem: format!("has dtype {other:?}; expected F32 or I64"),
                    })
                }
            };
            let shape = view.shape().to_vec();
            tensors.insert(name, RefTensor { shape, data });
        }
        Ok(Self { file, tensors })
    }

    fn tensor_error(&self, name: &str, problem: String) -> CompareError {
        CompareError::Tensor {
            file: self.file.clone(),
            name: name.to_string(),
            problem,
        }
    }

    /// An F32 tensor with the expected shape.
    pub fn f32(&self, name: &str, shape: &[usize]) -> Result<&[f32], CompareError> {
        let tensor = self
            .tensors
            .get(name)
            .ok_or_else(|| self.tensor_error(name, "is missing".into()))?;
        if tensor.shape != shape {
            return Err(self.tensor_error(
                name,
                format!("has shape {:?}, expected {shape:?}", tensor.shape),
            ));
        }
        match &tensor.data {
            RefData::F32(values) => Ok(values),
            RefData::I64(_) => Err(self.tensor_error(name, "is I64, expected F32".into())),
        }
    }

    /// The prompts the file holds: `""` for the single-prompt layout, else
    /// the prefixes of every `<name>.input_ids`, sorted.
    pub fn prompts(&self) -> Vec<String> {
        if self.tensors.contains_key("input_ids") {
            return vec![String::new()];
        }
        self.tensors
            .keys()
            .filter_map(|k| k.strip_suffix(".input_ids"))
            .map(str::to_string)
            .collect()
    }

    /// The name of tensor `name` of prompt `prompt`.
    pub fn key(prompt: &str, name: &str) -> String {
        if prompt.is_empty() {
            name.to_string()
        } else {
            format!("{prompt}.{name}")
        }
    }

    fn has(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// An I64 tensor of token ids (1-D), checked to fit `u32`.
    pub fn token_ids(&self, name: &str) -> Result<Vec<u32>, CompareError> {
        let tensor = self
            .tensors
            .get(name)
            .ok_or_else(|| self.tensor_error(name, "is missing".into()))?;
        let RefData::I64(values) = &tensor.data else {
            return Err(self.tensor_error(name, "is F32, expected I64 token ids".into()));
        };
        values
            .iter()
            .map(|&v| {
                u32::try_from(v)
                    .map_err(|_| self.tensor_error(name, format!("holds {v}, not a token id")))
            })
            .collect()
    }
}

/// One compared tensor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorRow {
    pub name: String,
    pub elements: usize,
    pub max_abs_error: f32,
    pub max_abs_reference: f32,
    /// `max_abs_error / max_abs_reference`; NaN when either side holds a NaN or
    /// the lengths differ, so no bound can pass it.
    pub ratio: f64,
    /// Values on our side that are NaN or infinite.
    pub non_finite: usize,
    pub pass: bool,
}

impl ErrorRow {
    /// Compares two equally long tensors; a NaN anywhere fails.
    pub fn compare(
        name: impl Into<String>,
        ours: &[f32],
        reference: &[f32],
        tolerance: f64,
    ) -> Self {
        let mut max_err = 0.0f32;
        let mut max_ref = 0.0f32;
        let mut nan = ours.len() != reference.len();
        let non_finite = ours.iter().filter(|a| !a.is_finite()).count();
        for (&a, &b) in ours.iter().zip(reference) {
            nan |= a.is_nan() || b.is_nan();
            max_err = max_err.max((a - b).abs());
            max_ref = max_ref.max(b.abs());
        }
        let ratio = if nan {
            f64::NAN
        } else if max_ref > 0.0 {
            max_err as f64 / max_ref as f64
        } else {
            max_err as f64
        };
        Self {
            name: name.into(),
            elements: reference.len(),
            max_abs_error: max_err,
            max_abs_reference: max_ref,
            ratio,
            non_finite,
            pass: !nan && ratio <= tolerance,
        }
    }
}

/// The result of checking a model against its reference file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReferenceCheck {
    /// The prompt's name in the file (`""` for a single-prompt file).
    pub name: String,
    pub tolerance: f64,
    pub rows: Vec<ErrorRow>,
    pub prompt: Vec<u32>,
    /// Greedy tokens: the reference file's and ours.
    pub expected_tokens: Vec<u32>,
    pub tokens: Vec<u32>,
}

impl ReferenceCheck {
    pub fn tokens_match(&self) -> bool {
        self.tokens == self.expected_tokens
    }

    /// NaN or infinite values in every tensor we computed.
    pub fn non_finite(&self) -> usize {
        self.rows.iter().map(|r| r.non_finite).sum()
    }

    pub fn passed(&self) -> bool {
        self.tokens_match() && self.rows.iter().all(|r| r.pass)
    }

    /// The largest error ratio over every tensor; NaN when any tensor's is (a
    /// plain `f64::max` would drop it and let the gate pass).
    pub fn worst_ratio(&self) -> f64 {
        self.rows.iter().map(|r| r.ratio).fold(0.0, |worst, r| {
            if worst.is_nan() || r.is_nan() {
                f64::NAN
            } else {
                worst.max(r)
            }
        })
    }
}

/// What a set of prompt checks says as a whole: the worst error ratio (NaN
/// kept), the greedy tokens that differ (a length difference counts each missing
/// one), the non-finite values, and how many tensors and prompts were compared.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Agreement {
    pub worst: f64,
    pub mismatched_tokens: usize,
    pub non_finite: usize,
    pub tensors: usize,
    pub prompts: usize,
}

impl Agreement {
    pub fn of(checks: &[ReferenceCheck]) -> Self {
        let worst = checks
            .iter()
            .map(ReferenceCheck::worst_ratio)
            .fold(0.0_f64, |worst, r| {
                if worst.is_nan() || r.is_nan() {
                    f64::NAN
                } else {
                    worst.max(r)
                }
            });
        let mismatched_tokens = checks
            .iter()
            .map(|c| {
                let differ = c
                    .tokens
                    .iter()
                    .zip(&c.expected_tokens)
                    .filter(|(a, b)| a != b);
                differ.count() + c.tokens.len().abs_diff(c.expected_tokens.len())
            })
            .sum();
        Agreement {
            worst,
            mismatched_tokens,
            non_finite: checks.iter().map(ReferenceCheck::non_finite).sum(),
            tensors: checks.iter().map(|c| c.rows.len()).sum(),
            prompts: checks.len(),
        }
    }

    /// Every tensor within `tolerance`, every token equal, nothing non-finite.
    pub fn holds(&self, tolerance: f64) -> bool {
        self.worst <= tolerance && self.mismatched_tokens == 0 && self.non_finite == 0
    }
}

/// Runs `model` on the first prompt of `reference` and compares every tensor.
pub fn check_reference(
    model: &Model,
    reference: &ReferenceTensors,
    tolerance: f64,
) -> Result<ReferenceCheck, CompareError> {
    let first = reference.prompts().into_iter().next().unwrap_or_default();
    check_prompt(model, reference, &first, tolerance)
}

/// Every prompt of `reference` (one parallel task each), in
/// [`ReferenceTensors::prompts`] order.
pub fn check_all(
    model: &Model,
    reference: &ReferenceTensors,
    tolerance: f64,
) -> Result<Vec<ReferenceCheck>, CompareError> {
    use rayon::prelude::*;
    reference
        .prompts()
        .par_iter()
        .map(|p| check_prompt(model, reference, p, tolerance))
        .collect()
}

/// Runs `model` on prompt `name` of `reference` and compares every tensor.
pub fn check_prompt(
    model: &Model,
    reference: &ReferenceTensors,
    name: &str,
    tolerance: f64,
) -> Result<ReferenceCheck, CompareError> {
    let arch = &model.arch;
    let (l, h, v) = (arch.num_layers, arch.hidden_size, arch.vocab_size);
    let key = |tensor: &str| ReferenceTensors::key(name, tensor);
    let prompt = reference.token_ids(&key("input_ids"))?;
    let expected_tokens = reference.token_ids(&key("greedy_tokens"))?;
    let t = prompt.len();
    let steps = expected_tokens.len();
    let hidden_states = reference.f32(&key("hidden_states"), &[l + 1, t, h])?;
    // Without `layer_outputs`, layer i's output is hidden_states[i + 1] for
    // every layer but the last (whose output only appears after the norm).
    let (layer_outputs, compared_layers) = if reference.has(&key("layer_outputs")) {
        (reference.f32(&key("layer_outputs"), &[l, t, h])?, l)
    } else {
        (&hidden_states[t * h..l * t * h], l - 1)
    };
    let prefill_logits = reference.f32(&key("prefill_logits"), &[t, v])?;
    let decode_logits = reference.f32(&key("decode_logits"), &[steps, v])?;

    let mut oracle = Reference::new(model)?;
    let prefill = oracle.prefill(&prompt, LogitRows::All)?;
    let slab = t * h;
    let mut rows = vec![ErrorRow::compare(
        "embeddings (hidden_states[0])",
        &prefill.embeddings.data,
        &hidden_states[..slab],
        tolerance,
    )];
    for (i, ours) in prefill
        .layer_outputs
        .iter()
        .enumerate()
        .take(compared_layers)
    {
        rows.push(ErrorRow::compare(
            format!("layer_outputs[{i}]"),
            &ours.data,
            &layer_outputs[i * slab..(i + 1) * slab],
            tolerance,
        ));
    }
    rows.push(ErrorRow::compare(
        format!("final norm (hidden_states[{l}])"),
        &prefill.final_hidden.data,
        &hidden_states[l * slab..],
        tolerance,
    ));
    rows.push(ErrorRow::compare(
        "prefill_logits",
        &prefill.logits.data,
        prefill_logits,
        tolerance,
    ));

    let mut tokens = vec![blocks::argmax(prefill.logits.last_row()) as u32];
    let mut decoded = Vec::with_capacity(steps * v);
    for (k, &fed) in expected_tokens.iter().enumerate() {
        let logits = oracle.decode_step(fed)?;
        if k + 1 < steps {
            tokens.push(blocks::argmax(&logits) as u32);
        }
        decoded.extend_from_slice(&logits);
    }
    rows.push(ErrorRow::compare(
        format!("decode_logits ({steps} steps)"),
        &decoded,
        decode_logits,
        tolerance,
    ));
    Ok(ReferenceCheck {
        name: name.to_string(),
        tolerance,
        rows,
        prompt,
        expected_tokens,
        tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::ErrorRow;

    #[test]
    fn non_finite_values_on_our_side_are_counted() {
        let row = ErrorRow::compare("t", &[1.0, f32::NAN, f32::INFINITY], &[1.0, 2.0, 3.0], 1e-3);
        assert_eq!(row.non_finite, 2);
        assert!(!row.pass);
        let clean = ErrorRow::compare("t", &[1.0, 2.0], &[1.0, 2.0], 1e-3);
        assert_eq!(clean.non_finite, 0);
    }
}
