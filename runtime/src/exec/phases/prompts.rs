//! Verification prompts. The runtime has no tokenizer, so prompts are token ids:
//! the fixture's own prompt when the model directory holds a transformers
//! reference, otherwise ids drawn under the run's seed (a BOS first for Llama-family
//! models, whose prompts start with one), never a special token. Two prompts by
//! default, as the reference system's `make verify`.

use crate::model::arch::{Architecture, Family};
use crate::rng::SplitMix64;

/// Prompts verified per run unless given.
pub const DEFAULT_PROMPTS: usize = 2;
/// Lengths of the drawn prompts, in tokens.
const LENGTHS: [usize; DEFAULT_PROMPTS] = [12, 20];

/// `DEFAULT_PROMPTS` prompts under `seed`; `first` (a fixture's prompt) replaces the
/// first when given.
pub fn default_prompts(arch: &Architecture, seed: u64, first: Option<Vec<u32>>) -> Vec<Vec<u32>> {
    let mut prompts: Vec<Vec<u32>> = LENGTHS
        .iter()
        .enumerate()
        .map(|(i, &len)| drawn_prompt(arch, seed, i, len))
        .collect();
    if let Some(first) = first {
        prompts[0] = first;
    }
    prompts
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
        let a = default_prompts(&arch, 1, None);
        assert_eq!(a, default_prompts(&arch, 1, None));
        assert_ne!(a, default_prompts(&arch, 2, None));
        assert_eq!(a[0][0], 298);
        assert_eq!(a.iter().map(Vec::len).collect::<Vec<_>>(), LENGTHS.to_vec());
        assert!(a.iter().all(|p| p[1..].iter().all(|&t| t < 298)));
        assert!(check_prompts(&a, 300).is_ok());
        assert!(check_prompts(&[vec![300]], 300).is_err());
    }
}
