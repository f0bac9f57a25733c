//! Text in and out: a model's `tokenizer.json`, or the vocabulary and merges
//! a GGUF file carries (`tokenizer.ggml.*`, byte-level BPE) turned into the
//! same tokenizer transformers builds from them, run by the `tokenizers`
//! crate (pure Rust: no Oniguruma, no esaxx). It sits behind the cargo
//! feature `tokenizer` (on by default; off, prompts are token ids).

use std::path::Path;

use thiserror::Error;

use super::gguf::GgufFile;

/// The file a model directory's tokenizer lives in.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// Largest tokenizer.json read (real ones: 2 to 35 MB).
const MAX_TOKENIZER_BYTES: u64 = 256 << 20;

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
    #[error("the GGUF vocabulary: {0}")]
    Gguf(#[source] VocabError),
}

/// Why a GGUF file's `tokenizer.ggml.*` keys make no tokenizer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VocabError {
    #[error("`{0}` is missing or not an array")]
    NotAnArray(String),
    #[error("`{0}` holds a non-string")]
    NotAString(String),
    #[error("`tokenizer.ggml.pre` = \"{0}\" is not known (known: gpt2, smollm, llama-bpe, qwen2); put the model's tokenizer.json beside it")]
    UnknownPreTokenizer(String),
    #[error("`tokenizer.ggml.model` is missing")]
    NoModel,
    #[error("`tokenizer.ggml.model` = \"{0}\": only byte-level BPE (gpt2) vocabularies are built from GGUF metadata; put the model's tokenizer.json beside it")]
    NotBytePairs(String),
    #[error("merge \"{0}\" is not two tokens")]
    Merge(String),
    #[error("the BOS id is outside the vocabulary")]
    BosOutside,
    /// The tokenizers crate refused the tokenizer built from the keys.
    #[error("{0}")]
    Built(String),
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
        // `symlink_metadata`: a dangling link or a FIFO is there and refused,
        // not taken for a missing tokenizer.
        if std::fs::symlink_metadata(&path).is_err() {
            return Err(TokenizerError::Missing);
        }
        let bytes = crate::input::read_at_most(&path, MAX_TOKENIZER_BYTES)
            .map_err(|e| TokenizerError::Invalid(e.problem.to_string()))?;
        Self::from_bytes(&bytes)
    }

    /// `tokenizer.json` in `dir` when there is one, else the vocabulary of
    /// `gguf` (when given), else [`TokenizerError::Missing`].
    pub fn for_model(dir: &Path, gguf: Option<&GgufFile>) -> Result<Self, TokenizerError> {
        match (Self::load(dir), gguf) {
            (Err(TokenizerError::Missing), Some(file)) => Self::from_gguf(file),
            (result, _) => result,
        }
    }

    /// The tokenizer a GGUF file's `tokenizer.ggml.*` keys describe.
    #[cfg(feature = "tokenizer")]
    pub fn from_gguf(file: &GgufFile) -> Result<Self, TokenizerError> {
        let json = gguf_vocab::tokenizer_json(file).map_err(TokenizerError::Gguf)?;
        let inner: tokenizers::Tokenizer =
            json.to_string().parse().map_err(|e: tokenizers::Error| {
                TokenizerError::Gguf(VocabError::Built(e.to_string()))
            })?;
        Ok(Self { inner })
    }

    #[cfg(not(feature = "tokenizer"))]
    pub fn from_gguf(_file: &GgufFile) -> Result<Self, TokenizerError> {
        Err(TokenizerError::NotBuilt)
    }

    #[cfg(feature = "tokenizer")]
    fn from_bytes(bytes: &[u8]) -> Result<Self, TokenizerError> {
        let inner = tokenizers::Tokenizer::from_bytes(bytes)
            .map_err(|e| TokenizerError::Invalid(e.to_string()))?;
        Ok(Self { inner })
    }

    #[cfg(not(feature = "tokenizer"))]
    fn from_bytes(_bytes: &[u8]) -> Result<Self, TokenizerError> {
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

    /// One past the largest id the tokenizer can produce (its vocabulary with
    /// the added tokens): every id it emits must be a row of the embedding.
    #[cfg(feature = "tokenizer")]
    pub fn id_limit(&self) -> usize {
        self.inner
            .get_vocab(true)
            .values()
            .max()
            .map_or(0, |&id| id as usize + 1)
    }

    #[cfg(not(feature = "tokenizer"))]
    pub fn id_limit(&self) -> usize {
        0
    }

    /// The special (control) tokens written out in `text`, in the order of
    /// their ids: what the tokenizer turns into role markers and the like.
    #[cfg(feature = "tokenizer")]
    pub fn special_tokens_in(&self, text: &str) -> Vec<String> {
        let mut found: Vec<(u32, String)> = self
            .inner
            .get_added_tokens_decoder()
            .into_iter()
            .filter(|(_, t)| t.special && !t.content.is_empty() && text.contains(&t.content))
            .map(|(id, t)| (id, t.content))
            .collect();
        found.sort();
        found.into_iter().map(|(_, content)| content).collect()
    }

    #[cfg(not(feature = "tokenizer"))]
    pub fn special_tokens_in(&self, _text: &str) -> Vec<String> {
        Vec::new()
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

    /// Text of `ids` with special tokens written out.
    #[cfg(feature = "tokenizer")]
    pub fn decode_with_special(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        self.inner
            .decode(ids, false)
            .map_err(|e| TokenizerError::Invalid(e.to_string()))
    }

    #[cfg(not(feature = "tokenizer"))]
    pub fn decode_with_special(&self, _ids: &[u32]) -> Result<String, TokenizerError> {
        Err(TokenizerError::NotBuilt)
    }
}

/// A GGUF vocabulary as a `tokenizer.json` document.
#[cfg(feature = "tokenizer")]
mod gguf_vocab {
    use serde_json::{json, Map, Value as Json};

    use super::VocabError;
    use crate::model::gguf::{GgufFile, Value};

    /// llama.cpp's token types that are added tokens: control (special) and
    /// user-defined.
    const CONTROL: u64 = 3;
    const USER_DEFINED: u64 = 4;

    fn strings<'f>(file: &'f GgufFile, key: &str) -> Result<Vec<&'f str>, VocabError> {
        let list = file
            .get(key)
            .and_then(Value::as_array)
            .ok_or_else(|| VocabError::NotAnArray(key.to_string()))?;
        match list.strings() {
            Some(strings) => Ok(strings.iter().collect()),
            None if list.is_empty() => Ok(Vec::new()),
            None => Err(VocabError::NotAString(key.to_string())),
        }
    }

    /// The pre-tokenizer of `tokenizer.ggml.pre`: GPT-2's byte-level regex,
    /// or the split regex of the Llama-3 and Qwen2 vocabularies.
    fn pre_tokenizer(pre: &str, add_prefix_space: bool) -> Result<Json, VocabError> {
        let byte_level = |use_regex: bool| {
            json!({"type": "ByteLevel", "add_prefix_space": add_prefix_space,
                   "trim_offsets": true, "use_regex": use_regex})
        };
        let split = |pattern: &str| {
            json!({"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false},
                byte_level(false)
            ]})
        };
        Ok(match pre {
            "gpt2" | "smollm" | "default" => byte_level(true),
            "llama-bpe" | "llama3" => split(
                r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
            ),
            "qwen2" => split(
                r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
            ),
            other => return Err(VocabError::UnknownPreTokenizer(other.to_string())),
        })
    }

    pub fn tokenizer_json(file: &GgufFile) -> Result<Json, VocabError> {
        let model = file
            .get("tokenizer.ggml.model")
            .and_then(Value::as_str)
            .ok_or(VocabError::NoModel)?;
        if model != "gpt2" {
            return Err(VocabError::NotBytePairs(model.to_string()));
        }
        let tokens = strings(file, "tokenizer.ggml.tokens")?;
        let merges = strings(file, "tokenizer.ggml.merges")?;
        let types: Vec<u64> = match file
            .get("tokenizer.ggml.token_type")
            .and_then(Value::as_array)
        {
            Some(list) => (0..list.len())
                .map(|i| list.u64_at(i).unwrap_or(1))
                .collect(),
            None => Vec::new(),
        };
        let flag = |key: &str| file.get(key).and_then(Value::as_bool).unwrap_or(false);
        let mut vocab = Map::new();
        let mut added = Vec::new();
        for (id, token) in tokens.iter().enumerate() {
            vocab.insert(token.to_string(), json!(id));
            let kind = types.get(id).copied().unwrap_or(1);
            if kind == CONTROL || kind == USER_DEFINED {
                added.push(json!({"id": id, "content": token, "single_word": false,
                    "lstrip": false, "rstrip": false, "normalized": false,
                    "special": kind == CONTROL}));
            }
        }
        let merges: Vec<Json> = merges
            .iter()
            .map(|m| {
                let (a, b) = m
                    .split_once(' ')
                    .ok_or_else(|| VocabError::Merge(m.to_string()))?;
                Ok(json!([a, b]))
            })
            .collect::<Result<_, VocabError>>()?;
        let pre = file
            .get("tokenizer.ggml.pre")
            .and_then(Value::as_str)
            .unwrap_or("gpt2");
        let bos = file
            .get("tokenizer.ggml.bos_token_id")
            .and_then(Value::as_u64);
        let post_processor = match bos.filter(|_| flag("tokenizer.ggml.add_bos_token")) {
            Some(id) => {
                let text = tokens.get(id as usize).ok_or(VocabError::BosOutside)?;
                let mut special = Map::new();
                special.insert(
                    text.to_string(),
                    json!({"id": text, "ids": [id], "tokens": [text]}),
                );
                json!({"type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": text, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                    "pair": [{"SpecialToken": {"id": text, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                             {"Sequence": {"id": "B", "type_id": 1}}],
                    "special_tokens": special})
            }
            None => Json::Null,
        };
        Ok(json!({
            "version": "1.0", "truncation": null, "padding": null,
            "added_tokens": added,
            "normalizer": null,
            "pre_tokenizer": pre_tokenizer(pre, flag("tokenizer.ggml.add_space_prefix"))?,
            "post_processor": post_processor,
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
            "model": {"type": "BPE", "dropout": null, "unk_token": null,
                "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false,
                "byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": merges}
        }))
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
