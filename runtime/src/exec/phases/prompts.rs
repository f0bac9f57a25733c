//! Verification prompts, as token ids: the prompts of the transformers reference
//! when the model directory holds one (a fixture's one prompt, or the real model's
//! plain and chat prompts), and ids drawn under the run's seed for the rest (a BOS
//! first for Llama-family models, whose prompts start with one), never a special
//! token. Two prompts by default, as the reference system's `make verify`.
//!
//! A trained model is verified on its reference's text, not on drawn ids: on
//! SmolLM2-135M a drawn prompt is ill-conditioned at its second position (the
//! f32 oracle on the bf16 rounding of the weights alone is already 8% off there
//! by layer 17, against at most 0.5% on the reference's prompts), which says
//! nothing about a deployment.

use crate::model::arch::{Architecture, Family};
use crate::rng::SplitMix64;

/// Prompts verified per run unless given.
pub const DEFAULT_PROMPTS: usize = 2;
/// Lengths of the drawn prompts, in tokens.
const LENGTHS: [usize; DEFAULT_PROMPTS] = [12, 20];

/// `DEFAULT_PROMPTS` prompts under `seed`, or more when the reference has more:
/// the reference's prompts (`given`) come first, drawn ones fill the rest.
pub fn default_prompts(arch: &Architecture, seed: u64, given: Vec<Vec<u32>>) -> Vec<Vec<u32>> {
    let drawn = LENGTHS
        .iter()
        .enumerate()
        .skip(given.len())
        .map(|(i, &len)| drawn_prompt(arch, seed, i, len));
    given.into_iter().chain(drawn).collect()
}

fn drawn_prompt(arch: &Architecture, seed: u64, index: usize, len: usize) -> Vec<u32> {
    let mut rng = SplitMix64::for_stream(seed, &format!("verify-prompt-{index}"));
    let special: Vec<u64> = arch
        .bos_token_id
        .into_iter()
        .chain(arch.eos_token_ids.iter().copied())
        .collect();
    let vocab = arch.vocab_size as u64;
    let mut ids = Vec::with_capacity(len);
    if arch.family == Family::Llama {
        if let Some(bos) = arch.bos_token_id.filter(|&b| b < vocab) {
            ids.push(bos as u32);
        }
    }
    while ids.len() < len {
        let id = rng.next_u64() % vocab;
        if !special.contains(&id) {
            ids.push(id as u32);
        }
    }
    ids
}

/// Checks user-given prompts against the vocabulary.
pub fn check_prompts(prompts: &[Vec<u32>], vocab: usize) -> Result<(), String> {
    if prompts.is_empty() {
        return Err("no prompt given".into());
    }
    for (i, p) in prompts.iter().enumerate() {
        if p.is_empty() {
            return Err(format!("prompt {} is empty", i + 1));
        }
        if let Some(id) = p.iter().find(|&&id| id as usize >= vocab) {
            return Err(format!(
                "prompt {} holds token id {id}, outside the vocabulary (size {vocab})",
                i + 1
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::parse_config;

    #[test]
    fn drawn_prompts_are_deterministic_and_start_with_bos_for_llama() {
        let arch = parse_config(
            r#"{"model_type":"llama","num_hidden_layers":1,"hidden_size":32,
                "intermediate_size":64,"num_attention_heads":4,"num_key_value_heads":2,
                "vocab_size":300,"bos_token_id":298,"eos_token_id":299}"#,
        )
        .unwrap();
        let a = default_prompts(&arch, 1, Vec::new());
        assert_eq!(a, default_prompts(&arch, 1, Vec::new()));
        assert_ne!(a, default_prompts(&arch, 2, Vec::new()));
        assert_eq!(a[0][0], 298);
        assert_eq!(a.iter().map(Vec::len).collect::<Vec<_>>(), LENGTHS.to_vec());
        assert!(a.iter().all(|p| p[1..].iter().all(|&t| t < 298)));
        assert!(check_prompts(&a, 300).is_ok());
        assert!(check_prompts(&[vec![300]], 300).is_err());
    }
}
