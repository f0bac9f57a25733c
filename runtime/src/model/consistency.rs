//! The files of a model against each other, before any work: the tokenizer's
//! ids against the embedding, the prompts and the tokens to generate against
//! the context length, and the transformers reference's token ids against the
//! vocabulary. Each file alone may be well formed; together they describe no
//! model, and a run on them would print garbage and call it a pass.
//!
//! (Counts inside one file — a GGUF's block count against its tensors, its
//! token list against its vocabulary, special token ids — are checked where
//! the file is read: `gguf::config`, `gguf::weights`, `config::architecture`.)

use thiserror::Error;

use super::arch::Architecture;
use super::oracle::compare::ReferenceTensors;
use super::prompt::ModelText;
use super::tokenizer::TOKENIZER_FILE;

/// Why a model's files do not fit together.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConsistencyError {
    #[error("{file}: {problem}")]
    Tokenizer { file: String, problem: String },
    #[error(
        "{file}: the tokenizer produces ids up to {}, but the model's vocabulary has {vocab} \
         ({}): the tokenizer belongs to another model",
        .tokenizer - 1,
        .why
    )]
    TokenizerVocabulary {
        file: String,
        tokenizer: usize,
        vocab: usize,
        why: &'static str,
    },
    #[error(
        "prompt {prompt} is {len} tokens and {generate} more are generated, but the model's \
         context length (max_position_embeddings) is {context}"
    )]
    PastContext {
        prompt: usize,
        len: usize,
        generate: usize,
        context: u64,
    },
    #[error(
        "{file}: tensor `{tensor}` holds token id {id}, outside the vocabulary (size {vocab})"
    )]
    ReferenceId {
        file: String,
        tensor: String,
        id: u32,
        vocab: usize,
    },
}

/// The tokenizer beside the model, if there is one, against the vocabulary: it
/// must load, produce no id past the embedding, and cover at least half of it
/// (real models pad their embedding by a few percent at most; a 100-token
/// tokenizer beside a 49152-row embedding is another model's).
pub fn check_tokenizer(
    text: &ModelText,
    dir: &std::path::Path,
    arch: &Architecture,
) -> Result<(), ConsistencyError> {
    let file = dir.join(TOKENIZER_FILE).display().to_string();
    if let Some(problem) = text.tokenizer_problem() {
        return Err(ConsistencyError::Tokenizer {
            file,
            problem: problem.to_string(),
        });
    }
    let Some(tokenizer) = text.tokenizer() else {
        return Ok(());
    };
    let (limit, vocab) = (tokenizer.id_limit(), arch.vocab_size);
    let why = if limit > vocab {
        "its ids would index rows the embedding does not have"
    } else if limit > 0 && limit * 2 < vocab {
        "it covers less than half of the embedding"
    } else {
        return Ok(());
    };
    Err(ConsistencyError::TokenizerVocabulary {
        file,
        tokenizer: limit,
        vocab,
        why,
    })
}

/// Each prompt with `generate` tokens after it fits the context length.
pub fn check_context(
    prompts: &[Vec<u32>],
    generate: usize,
    arch: &Architecture,
) -> Result<(), ConsistencyError> {
    let context = arch.max_position_embeddings;
    for (i, prompt) in prompts.iter().enumerate() {
        if (prompt.len() as u64).saturating_add(generate as u64) > context {
            return Err(ConsistencyError::PastContext {
                prompt: i + 1,
                len: prompt.len(),
                generate,
                context,
            });
        }
    }
    Ok(())
}

/// Every token id tensor of a transformers reference lies in the vocabulary.
pub fn check_reference_ids(
    reference: &ReferenceTensors,
    file: &std::path::Path,
    arch: &Architecture,
) -> Result<(), ConsistencyError> {
    for prompt in reference.prompts() {
        for name in ["input_ids", "greedy_tokens"] {
            let tensor = ReferenceTensors::key(&prompt, name);
            // A tensor that is missing or not ids is the comparison's to report.
            let Ok(ids) = reference.token_ids(&tensor) else {
                continue;
            };
            if let Some(&id) = ids.iter().find(|&&id| id as usize >= arch.vocab_size) {
                return Err(ConsistencyError::ReferenceId {
                    file: file.display().to_string(),
                    tensor,
                    id,
                    vocab: arch.vocab_size,
                });
            }
        }
    }
    Ok(())
}
