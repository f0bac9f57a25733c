//! Prompts as a user gives them — token ids, raw text, or a chat message put
//! through the model's chat template — turned into token ids, and generated
//! ids turned back into text. The tokenizer and the template come from the
//! model source ([`ModelText::for_model`]): tokenizer.json /
//! tokenizer_config.json beside the weights, else the GGUF file's own
//! vocabulary and template.

use std::path::Path;

use serde::Serialize;
use thiserror::Error;

use super::chat::{ChatError, ChatTemplate};
use super::gguf::GgufFile;
use super::tokenizer::{TextTokenizer, TokenizerError};

/// A prompt as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptInput {
    Ids(Vec<u32>),
    /// Text tokenized as it stands (special tokens in it are recognized).
    Text(String),
    /// A user message, wrapped by the chat template with the generation prompt.
    Chat(String),
}

/// A prompt ready to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EncodedPrompt {
    pub ids: Vec<u32>,
    /// The text the ids encode (after the chat template), when given as text.
    pub text: Option<String>,
    /// `ids`, `text` or `chat`.
    pub kind: &'static str,
    /// What the user should know about how the prompt was read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PromptError {
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    #[error(transparent)]
    Chat(#[from] ChatError),
}

/// A model's text side.
#[derive(Debug)]
pub struct ModelText {
    tokenizer: Result<TextTokenizer, TokenizerError>,
    chat: Result<ChatTemplate, ChatError>,
}

impl ModelText {
    /// The tokenizer and chat template of the model at `path` (a directory,
    /// or a GGUF file whose directory holds the companions).
    pub fn for_model(path: &Path, gguf: Option<&GgufFile>) -> Self {
        let dir = super::companion_dir(path);
        let tokenizer = TextTokenizer::for_model(&dir, gguf);
        let chat = match ChatTemplate::from_config(&dir) {
            Ok(Some(template)) => Ok(template),
            Ok(None) => gguf.map_or(Err(ChatError::Missing), ChatTemplate::from_gguf),
            Err(e) => Err(e),
        };
        Self { tokenizer, chat }
    }

    pub fn tokenizer(&self) -> Option<&TextTokenizer> {
        self.tokenizer.as_ref().ok()
    }

    /// Why a tokenizer.json that is there could not be read (a FIFO, a
    /// directory, not a tokenizer); `None` when there is none or it loaded. A
    /// GGUF file without a usable vocabulary simply has no tokenizer: its
    /// vocabulary's counts are checked with its metadata.
    pub fn tokenizer_problem(&self) -> Option<&str> {
        match &self.tokenizer {
            Err(TokenizerError::Invalid(why)) => Some(why),
            _ => None,
        }
    }

    pub fn encode(&self, input: &PromptInput) -> Result<EncodedPrompt, PromptError> {
        let (text, kind) = match input {
            PromptInput::Ids(ids) => {
                return Ok(EncodedPrompt {
                    ids: ids.clone(),
                    text: self.decode_with_special(ids),
                    kind: "ids",
                    warnings: Vec::new(),
                })
            }
            PromptInput::Text(text) => (text.clone(), "text"),
            PromptInput::Chat(message) => (self.chat.clone()?.render_user(message)?, "chat"),
        };
        let tokenizer = self.tokenizer.as_ref().map_err(Clone::clone)?;
        let warnings = match input {
            PromptInput::Chat(message) => markers_warning(tokenizer, message),
            PromptInput::Ids(_) | PromptInput::Text(_) => Vec::new(),
        };
        Ok(EncodedPrompt {
            ids: tokenizer.encode(&text, true)?,
            text: Some(text),
            kind,
            warnings,
        })
    }

    /// Text of generated ids, special tokens skipped; `None` without a
    /// tokenizer.
    pub fn decode(&self, ids: &[u32]) -> Option<String> {
        self.tokenizer().and_then(|t| t.decode(ids).ok())
    }

    /// Text of ids with special tokens kept (how a prompt reads).
    pub fn decode_with_special(&self, ids: &[u32]) -> Option<String> {
        self.tokenizer()
            .and_then(|t| t.decode_with_special(ids).ok())
    }
}

/// A chat message is the user's words: a control token typed into it (a role
/// marker such as `<|im_end|>`) still becomes that token, which ends the turn
/// or starts another role's, so the user is told.
fn markers_warning(tokenizer: &TextTokenizer, message: &str) -> Vec<String> {
    let found = tokenizer.special_tokens_in(message);
    if found.is_empty() {
        return Vec::new();
    }
    let shown: Vec<String> = found
        .iter()
        .take(5)
        .map(|t| format!("`{}`", crate::input::capped(t, 40)))
        .collect();
    vec![format!(
        "the chat message holds {} control token(s) of the tokenizer ({}), which become \
         control tokens, not text: role markers in it end or start turns",
        found.len(),
        shown.join(", ")
    )]
}
