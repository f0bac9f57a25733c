//! Text prompts through a model directory's `tokenizer.json`, with the
//! `tokenizers` crate (pure Rust: no Oniguruma, no esaxx). It sits behind the
//! default-off cargo feature `tokenizer` because it roughly doubles the
//! runtime crate's dependency build; without it, prompts are token ids.

use std::path::Path;

use thiserror::Error;

/// The file a model directory's tokenizer lives in.
pub const TOKENIZER_FILE: &str = "tokenizer.json";

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TokenizerError {
    #[error("no {TOKENIZER_FILE} in the model directory; give the prompt as token ids")]
    Missing,
    #[error(
        "this build has no tokenizer support (cargo feature `tokenizer` of skillc-runtime); \
         give the prompt as token ids"
    )]
    NotBuilt,
    #[error("{TOKENIZER_FILE}: {0}")]
    Invalid(String),
}

/// A loaded tokenizer.
#[derive(Debug)]
pub struct TextTokenizer {
    #[cfg(feature = "tokenizer")]
    inner: tokenizers::Tokenizer,
}

impl TextTokenizer {
    /// Loads `dir/tokenizer.json`.
    pub fn load(dir: &Path) -> Result<Self, TokenizerError> {
        let path = dir.join(TOKENIZER_FILE);
        if !path.is_file() {
            return Err(TokenizerError::Missing);
        }
        Self::from_file(&path)
    }

    #[cfg(feature = "tokenizer")]
    fn from_file(path: &Path) -> Result<Self, TokenizerError> {
        let inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| TokenizerError::Invalid(e.to_string()))?;
        Ok(Self { inner })
    }

    #[cfg(not(feature = "tokenizer"))]
    fn from_file(_path: &Path) -> Result<Self, TokenizerError> {
        Err(TokenizerError::NotBuilt)
    }

    /// Token ids of `text`, with the tokenizer's special tokens (e.g. BOS)
    /// when `special` is set.
    #[cfg(feature = "tokenizer")]
    pub fn encode(&self, text: &str, special: bool) -> Result<Vec<u32>, TokenizerError> {
        let encoding = self
            .inner
            .encode(text, special)
            .map_err(|e| TokenizerError::Invalid(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    #[cfg(not(feature = "tokenizer"))]
    pub fn encode(&self, _text: &str, _special: bool) -> Result<Vec<u32>, TokenizerError> {
        Err(TokenizerError::NotBuilt)
    }

    /// Text of `ids`, special tokens skipped.
    #[cfg(feature = "tokenizer")]
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        self.inner
            .decode(ids, true)
            .map_err(|e| TokenizerError::Invalid(e.to_string()))
    }

    #[cfg(not(feature = "tokenizer"))]
    pub fn decode(&self, _ids: &[u32]) -> Result<String, TokenizerError> {
        Err(TokenizerError::NotBuilt)
    }
}

#[cfg(all(test, feature = "tokenizer"))]
mod tests {
    use super::*;

    /// A word-level tokenizer written by hand: encode and decode round-trip.
    #[test]
    fn word_level_round_trip() {
        let dir = std::env::temp_dir().join(format!("skillc-tokenizer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = r#"{
          "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
          "normalizer": null,
          "pre_tokenizer": {"type": "Whitespace"},
          "post_processor": null, "decoder": null,
          "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hello": 1, "world": 2},
                    "unk_token": "[UNK]"}
        }"#;
        std::fs::write(dir.join(TOKENIZER_FILE), json).unwrap();
        let tokenizer = TextTokenizer::load(&dir).unwrap();
        assert_eq!(
            tokenizer.encode("hello world again", false).unwrap(),
            vec![1, 2, 0]
        );
        assert_eq!(tokenizer.decode(&[1, 2]).unwrap(), "hello world");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
