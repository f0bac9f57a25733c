//! Seeded random weights with 4-bit projections (`skillc deploy --seeded-weights
//! q4_1`): the config-only model's seeded values, each decoder projection (q, k,
//! v, o, gate, up, down) quantized in memory to llama.cpp's Q4_1 or Q4_0 blocks of
//! 32 weights along its input dimension, every other tensor left as drawn. The
//! blocks are held as a GGUF model's are, so the 4-bit weight path, the packing
//! decision and the oracle's exact dequantized values apply unchanged; it is how a
//! model without a 4-bit file gets 4-bit weights to deploy and time.
//!
//! Q4_1: `d = (max − min) / 15`, `m = min` (both rounded to f16), `q =
//! round((w − m) / d)` clamped to 0..=15. Q4_0: `d = v / −8` for the value `v` of
//! largest magnitude, `q = round(w / d + 8)` clamped. Low nibbles hold weights
//! 0–15 of a block, high nibbles 16–31 (`quant`'s layout).

use rayon::prelude::*;

use super::quant::{WeightFormat, BLOCK};
use super::tensor::{BfTensor, PackedRows};
use super::weights::Weights;

/// Why a tensor cannot be quantized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SeededQuantError {
    #[error("{0} is not a 4-bit block format (seeded weights take q4_0 or q4_1)")]
    NotFourBit(&'static str),
    #[error("{tensor}: rows of {cols} weights are not whole blocks of {BLOCK}")]
    PartialBlock { tensor: String, cols: usize },
}

/// `weights` with every decoder projection quantized to `format`.
pub fn quantize_projections(
    weights: &Weights,
    format: WeightFormat,
) -> Result<Weights, SeededQuantError> {
    if !matches!(format, WeightFormat::Q4_0 | WeightFormat::Q4_1) {
        return Err(SeededQuantError::NotFourBit(format.name()));
    }
    let mut out = weights.clone();
    for layer in &mut out.layers {
        for tensor in [
            &mut layer.q_proj,
            &mut layer.k_proj,
            &mut layer.v_proj,
            &mut layer.o_proj,
            &mut layer.gate_proj,
            &mut layer.up_proj,
            &mut layer.down_proj,
        ] {
            *tensor = quantize(tensor, format)?;
        }
    }
    Ok(out)
}

/// One `[rows, cols]` tensor as 4-bit blocks along its rows.
fn quantize(tensor: &BfTensor, format: WeightFormat) -> Result<BfTensor, SeededQuantError> {
    let (rows, cols) = (tensor.rows(), tensor.cols());
    if cols % BLOCK != 0 {
        return Err(SeededQuantError::PartialBlock {
            tensor: tensor.name().to_string(),
            cols,
        });
    }
    let row_bytes = (cols / BLOCK) * format.block_bytes();
    let mut bytes = vec![0u8; rows * row_bytes];
    bytes
        .par_chunks_mut(row_bytes)
        .enumerate()
        .for_each(|(r, out)| {
            let mut values = vec![0.0f32; cols];
            tensor.row_values(r, &mut values);
            for (block, dst) in values
                .chunks_exact(BLOCK)
                .zip(out.chunks_exact_mut(format.block_bytes()))
            {
                encode(format, block, dst);
            }
        });
    Ok(BfTensor::packed(
        tensor.name(),
        tensor.shape().to_vec(),
        PackedRows::owned(format, rows, cols, bytes),
    ))
}

fn f16(v: f32) -> (f32, [u8; 2]) {
    let h = half::f16::from_f32(v);
    (h.to_f32(), h.to_bits().to_le_bytes())
}

/// One block of 32 weights into `dst` (`format.block_bytes()` bytes).
fn encode(format: WeightFormat, block: &[f32], dst: &mut [u8]) {
    let mut q = [0u8; BLOCK];
    let nibbles = match format {
        WeightFormat::Q4_1 => {
            let min = block.iter().copied().fold(f32::INFINITY, f32::min);
            let max = block.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let (d, d_bits) = f16((max - min) / 15.0);
            let (m, m_bits) = f16(min);
            for (slot, &w) in q.iter_mut().zip(block) {
                *slot = if d > 0.0 {
                    ((w - m) / d).round().clamp(0.0, 15.0) as u8
                } else {
                    0
                };
            }
            dst[..2].copy_from_slice(&d_bits);
            dst[2..4].copy_from_slice(&m_bits);
            &mut dst[4..]
        }
        _ => {
            let extreme = block
                .iter()
                .copied()
                .fold(0.0f32, |a, v| if v.abs() > a.abs() { v } else { a });
            let (d, d_bits) = f16(extreme / -8.0);
            for (slot, &w) in q.iter_mut().zip(block) {
                *slot = if d != 0.0 {
                    (w / d + 8.0).round().clamp(0.0, 15.0) as u8
                } else {
                    8
                };
            }
            dst[..2].copy_from_slice(&d_bits);
            &mut dst[2..]
        }
    };
    for (j, byte) in nibbles.iter_mut().enumerate() {
        *byte = q[j] | (q[j + BLOCK / 2] << 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks decode back within a step of each weight (a step is at most 0.8
    /// over 8 here), and the formats' layouts are the ones `quant` reads.
    #[test]
    fn blocks_decode_to_the_values_within_a_step() {
        let values: Vec<f32> = (0..64)
            .map(|i| ((i * 37 % 64) as f32 - 31.5) / 40.0)
            .collect();
        for format in [WeightFormat::Q4_1, WeightFormat::Q4_0] {
            let mut bytes = vec![0u8; 2 * format.block_bytes()];
            for (block, dst) in values
                .chunks_exact(BLOCK)
                .zip(bytes.chunks_exact_mut(format.block_bytes()))
            {
                encode(format, block, dst);
            }
            let mut back = vec![0.0f32; 64];
            format.dequantize(&bytes, &mut back);
            let worst = values
                .iter()
                .zip(&back)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(worst <= 0.8 / 8.0, "{format:?}: {worst}");
            assert!(worst > 0.0, "{format:?}: a 4-bit copy is not exact");
        }
    }

    #[test]
    fn only_four_bit_formats_are_taken() {
        let weights = crate::model::random::random_weights(
            &crate::model::config::load_config(std::path::Path::new(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../shared/fixtures/llama32-tiny/config.json"
            )))
            .expect("fixture config"),
            0,
        );
        assert!(quantize_projections(&weights, WeightFormat::Q8_0).is_err());
        let packed = quantize_projections(&weights, WeightFormat::Q4_1).expect("quantizes");
        assert_eq!(packed.layers[0].q_proj.format(), WeightFormat::Q4_1);
        let norm = packed.layers[0].input_norm.weight.as_ref();
        assert_eq!(norm.map(|w| w.format()), Some(WeightFormat::Bf16));
        assert_eq!(packed.embed_tokens.format(), WeightFormat::Bf16);
    }
}
