//! Chat templates: the Jinja template a model ships (a GGUF file's
//! `tokenizer.chat_template`, or `chat_template` in tokenizer_config.json)
//! rendered around a user message, as transformers' `apply_chat_template`
//! does with `add_generation_prompt=True`.
//!
//! Rendered with `minijinja` (the Jinja2 implementation by the author of
//! Jinja2, maintained, no unsafe code), with `minijinja-contrib`'s Python
//! string methods (`.strip()`, `.startswith()`, …) that Hugging Face templates
//! call, and `raise_exception` as transformers defines it. Nothing in a
//! template can reach the file system or the network.

use std::path::Path;

use serde::Serialize;
use serde_json::Value as Json;
use thiserror::Error;

use super::gguf::GgufFile;

/// The GGUF key of a chat template.
pub const GGUF_KEY: &str = "tokenizer.chat_template";
/// The Hugging Face file a chat template can live in.
pub const CONFIG_FILE: &str = "tokenizer_config.json";

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChatError {
    #[error("the model has no chat template (no `{GGUF_KEY}` in the GGUF file, no `chat_template` in {CONFIG_FILE})")]
    Missing,
    #[error("{CONFIG_FILE}: {0}")]
    Config(String),
    #[error("chat template: {0}")]
    Render(String),
}

/// A model's chat template with the special tokens it refers to.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatTemplate {
    source: String,
    bos_token: String,
    eos_token: String,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'a str,
    content: &'a str,
}

impl ChatTemplate {
    pub fn new(source: String, bos_token: String, eos_token: String) -> Self {
        Self {
            source,
            bos_token,
            eos_token,
        }
    }

    /// The template of a GGUF file, its BOS/EOS token texts from the vocabulary.
    pub fn from_gguf(file: &GgufFile) -> Result<Self, ChatError> {
        let source = file
            .get(GGUF_KEY)
            .and_then(|v| v.as_str())
            .ok_or(ChatError::Missing)?;
        let token = |key: &str| -> String {
            let id = file.get(key).and_then(|v| v.as_u64());
            let tokens = file.get("tokenizer.ggml.tokens").and_then(|v| v.as_array());
            match (id, tokens) {
                (Some(id), Some(tokens)) => tokens
                    .strings()
                    .and_then(|t| t.get(id as usize))
                    .unwrap_or_default()
                    .to_string(),
                _ => String::new(),
            }
        };
        Ok(Self::new(
            source.to_string(),
            token("tokenizer.ggml.bos_token_id"),
            token("tokenizer.ggml.eos_token_id"),
        ))
    }

    /// `dir/tokenizer_config.json`'s template (a string, or the `default`
    /// entry of a list of named templates); `Ok(None)` without the file.
    pub fn from_config(dir: &Path) -> Result<Option<Self>, ChatError> {
        let path = dir.join(CONFIG_FILE);
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(None);
        }
        let text = crate::input::read_to_string_at_most(&path, 64 << 20)
            .map_err(|e| ChatError::Config(e.problem.to_string()))?;
        let config: Json =
            serde_json::from_str(&text).map_err(|e| ChatError::Config(e.to_string()))?;
        let source = match config.get("chat_template") {
            Some(Json::String(s)) => s.clone(),
            Some(Json::Array(named)) => named
                .iter()
                .find(|t| t.get("name").and_then(Json::as_str) == Some("default"))
                .and_then(|t| t.get("template"))
                .and_then(Json::as_str)
                .ok_or_else(|| ChatError::Config("`chat_template` has no `default` entry".into()))?
                .to_string(),
            Some(_) => return Err(ChatError::Config("`chat_template` is not a string".into())),
            None => return Ok(None),
        };
        let token = |key: &str| match config.get(key) {
            Some(Json::String(s)) => s.clone(),
            Some(Json::Object(o)) => o
                .get("content")
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_string(),
            _ => String::new(),
        };
        Ok(Some(Self::new(
            source,
            token("bos_token"),
            token("eos_token"),
        )))
    }

    /// The prompt text for one user message, ending with the generation prompt.
    pub fn render_user(&self, content: &str) -> Result<String, ChatError> {
        let mut env = minijinja::Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |message: String| -> Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    message,
                ))
            },
        );
        let template = env
            .template_from_str(&self.source)
            .map_err(|e| ChatError::Render(e.to_string()))?;
        let messages = [Message {
            role: "user",
            content,
        }];
        template
            .render(minijinja::context! {
                messages => messages,
                add_generation_prompt => true,
                bos_token => self.bos_token,
                eos_token => self.eos_token,
            })
            .map_err(|e| ChatError::Render(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chatml_template_wraps_the_message() {
        let template = ChatTemplate::new(
            "{% for m in messages %}<|im_start|>{{ m['role'] + '\n' + m['content'].strip() }}<|im_end|>\n{% endfor %}\
             {% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
                .into(),
            String::new(),
            String::new(),
        );
        assert_eq!(
            template.render_user("  hi ").unwrap(),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn raise_exception_is_an_error() {
        let template = ChatTemplate::new(
            "{{ raise_exception('no system role') }}".into(),
            String::new(),
            String::new(),
        );
        let err = template.render_user("x").unwrap_err();
        assert!(err.to_string().contains("no system role"), "{err}");
    }
}
