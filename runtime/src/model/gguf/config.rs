//! A GGUF file's metadata → [`Architecture`]. The `<arch>.*` keys of the
//! llama, qwen2 and qwen3 architectures are translated into the Hugging Face
//! config fields they stand for and handed to the config parser, so a GGUF
//! model passes the same checks (sizes, divisibility, scope) as a
//! `config.json`; an error names the GGUF key it came from.

use serde_json::{json, Map, Value as Json};

use super::{GgufError, GgufFile, Value};
use crate::model::arch::Architecture;
use crate::model::config::parse_config;

/// The architectures whose metadata is read, with their transformers names.
const FAMILIES: &[(&str, &str, &str)] = &[
    ("llama", "llama", "LlamaForCausalLM"),
    ("qwen2", "qwen2", "Qwen2ForCausalLM"),
    ("qwen3", "qwen3", "Qwen3ForCausalLM"),
];

/// The tensor llama.cpp writes for llama3-style RoPE frequency factors.
const ROPE_FREQS: &str = "rope_freqs.weight";

/// The architecture a GGUF file describes.
pub fn architecture(file: &GgufFile) -> Result<Architecture, GgufError> {
    let arch = file.architecture()?;
    let Some(&(prefix, model_type, class)) = FAMILIES.iter().find(|(name, ..)| *name == arch)
    else {
        let known: Vec<&str> = FAMILIES.iter().map(|(n, ..)| *n).collect();
        return Err(GgufError::Unsupported {
            file: file.name.clone(),
            message: format!(
                "`general.architecture` = \"{arch}\" is not supported (known: {})",
                known.join(", ")
            ),
        });
    };
    if file.tensors.contains_key(ROPE_FREQS) {
        return Err(GgufError::Unsupported {
            file: file.name.clone(),
            message: format!(
                "tensor `{ROPE_FREQS}` holds llama3-style RoPE frequency factors, which the \
                 GGUF reader does not apply yet (use the Hugging Face checkpoint)"
            ),
        });
    }
    let mut config = Translation::new(file, prefix);
    config.set("model_type", json!(model_type));
    config.set("architectures", json!([class]));
    config.set("torch_dtype", json!("bfloat16"));
    config.required("num_hidden_layers", "block_count")?;
    config.required("hidden_size", "embedding_length")?;
    config.required("intermediate_size", "feed_forward_length")?;
    config.required("num_attention_heads", "attention.head_count")?;
    config.required("rms_norm_eps", "attention.layer_norm_rms_epsilon")?;
    config.optional("num_key_value_heads", "attention.head_count_kv")?;
    config.optional("head_dim", "attention.key_length")?;
    config.optional("max_position_embeddings", "context_length")?;
    config.optional("rope_theta", "rope.freq_base")?;
    config.optional("num_local_experts", "expert_count")?;
    config.vocab_size()?;
    config.check_vocabulary_arrays()?;
    config.rope_scaling()?;
    config.token_ids()?;
    config.set(
        "tie_word_embeddings",
        json!(!file.tensors.contains_key("output.weight")),
    );
    let json = Json::Object(config.fields.clone()).to_string();
    let arch = parse_config(&json).map_err(|e| {
        let key = e
            .field()
            .and_then(|f| config.origin(f))
            .unwrap_or_else(|| "metadata".into());
        GgufError::Unsupported {
            file: file.name.clone(),
            message: format!("{key}: {e}"),
        }
    })?;
    config.check_rotary(&arch)?;
    Ok(arch)
}

/// The config being assembled, with the GGUF key behind each field.
struct Translation<'f> {
    file: &'f GgufFile,
    prefix: &'static str,
    fields: Map<String, Json>,
    origins: Vec<(String, String)>,
}

impl<'f> Translation<'f> {
    fn new(file: &'f GgufFile, prefix: &'static str) -> Self {
        Self {
            file,
            prefix,
            fields: Map::new(),
            origins: Vec::new(),
        }
    }

    fn set(&mut self, field: &str, value: Json) {
        self.fields.insert(field.into(), value);
    }

    /// The GGUF key a config field came from, in backticks.
    fn origin(&self, field: &str) -> Option<String> {
        let root = field.split('.').next().unwrap_or(field);
        self.origins
            .iter()
            .find(|(f, _)| f == root)
            .map(|(_, key)| format!("`{key}`"))
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.prefix)
    }

    fn number(&self, key: &str) -> Result<Option<Json>, GgufError> {
        let Some(value) = self.file.get(key) else {
            return Ok(None);
        };
        let number = match value {
            Value::F32(v) => self.finite(key, f64::from(*v))?,
            Value::F64(v) => self.finite(key, *v)?,
            v => match v.as_u64() {
                Some(n) => json!(n),
                None => return Err(self.file.key_type(key, "a number", v)),
            },
        };
        Ok(Some(number))
    }

    /// A float as JSON. NaN and infinity have no JSON form (serde_json writes
    /// them as null, which would read as "absent" and fall back to a default),
    /// so they are refused here, by key, as the config parser refuses zero.
    fn finite(&self, key: &str, value: f64) -> Result<Json, GgufError> {
        if value.is_finite() {
            return Ok(json!(value));
        }
        Err(GgufError::Unsupported {
            file: self.file.name.clone(),
            message: format!("`{key}` = {value}: must be a finite number"),
        })
    }

    fn optional(&mut self, field: &str, suffix: &str) -> Result<bool, GgufError> {
        let key = self.key(suffix);
        match self.number(&key)? {
            Some(value) => {
                self.set(field, value);
                self.origins.push((field.into(), key));
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn required(&mut self, field: &str, suffix: &str) -> Result<(), GgufError> {
        if self.optional(field, suffix)? {
            return Ok(());
        }
        Err(GgufError::MissingKey {
            file: self.file.name.clone(),
            key: self.key(suffix),
            hint: format!(" (it gives `{field}`)"),
        })
    }

    /// `<arch>.vocab_size`, else the tokenizer's token count, else the
    /// embedding's row count.
    fn vocab_size(&mut self) -> Result<(), GgufError> {
        if self.optional("vocab_size", "vocab_size")? {
            return Ok(());
        }
        let tokens = "tokenizer.ggml.tokens";
        if let Some(Value::Array(list)) = self.file.get(tokens) {
            self.set("vocab_size", json!(list.len()));
            self.origins.push(("vocab_size".into(), tokens.into()));
            return Ok(());
        }
        match self.file.tensors.get("token_embd.weight") {
            Some(embed) if embed.dims.len() == 2 => {
                self.set("vocab_size", json!(embed.dims[1]));
                self.origins
                    .push(("vocab_size".into(), "token_embd.weight".into()));
                Ok(())
            }
            _ => Err(GgufError::MissingKey {
                file: self.file.name.clone(),
                key: self.key("vocab_size"),
                hint: " (nor tokenizer.ggml.tokens nor token_embd.weight to count)".into(),
            }),
        }
    }

    /// The per-token arrays of the vocabulary (`tokenizer.ggml.tokens`,
    /// `token_type`, `scores`) against the vocabulary size: llama.cpp itself
    /// refuses a file whose token list is not one entry per embedding row, and a
    /// shorter list would leave generated ids without text.
    fn check_vocabulary_arrays(&self) -> Result<(), GgufError> {
        let Some(vocab) = self.fields.get("vocab_size").and_then(Json::as_u64) else {
            return Ok(());
        };
        let origin = self
            .origin("vocab_size")
            .unwrap_or_else(|| "`vocab_size`".into());
        for key in [
            "tokenizer.ggml.tokens",
            "tokenizer.ggml.token_type",
            "tokenizer.ggml.scores",
        ] {
            let Some(value) = self.file.get(key) else {
                continue;
            };
            let list = value
                .as_array()
                .ok_or_else(|| self.file.key_type(key, "an array", value))?;
            if list.len() as u64 != vocab {
                return Err(GgufError::Unsupported {
                    file: self.file.name.clone(),
                    message: format!(
                        "`{key}` holds {} entries but the vocabulary ({origin}) has {vocab}: \
                         the tokenizer and the model disagree",
                        list.len()
                    ),
                });
            }
        }
        Ok(())
    }

    /// `<arch>.rope.scaling.type` and its factor, as `rope_scaling`.
    fn rope_scaling(&mut self) -> Result<(), GgufError> {
        let type_key = self.key("rope.scaling.type");
        let Some(value) = self.file.get(&type_key) else {
            return Ok(());
        };
        let kind = value
            .as_str()
            .ok_or_else(|| self.file.key_type(&type_key, "a string", value))?;
        if kind == "none" {
            return Ok(());
        }
        let mut scaling = Map::new();
        scaling.insert("rope_type".into(), json!(kind));
        if let Some(factor) = self.number(&self.key("rope.scaling.factor"))? {
            scaling.insert("factor".into(), factor);
        }
        self.set("rope_scaling", Json::Object(scaling));
        self.origins.push(("rope_scaling".into(), type_key));
        Ok(())
    }

    fn token_ids(&mut self) -> Result<(), GgufError> {
        for (field, key) in [
            ("bos_token_id", "tokenizer.ggml.bos_token_id"),
            ("eos_token_id", "tokenizer.ggml.eos_token_id"),
        ] {
            if let Some(value) = self.file.get(key) {
                let id = value
                    .as_u64()
                    .ok_or_else(|| self.file.key_type(key, "a token id", value))?;
                self.set(field, json!(id));
                self.origins.push((field.into(), key.into()));
            }
        }
        Ok(())
    }

    /// Partial rotary embeddings (`rope.dimension_count` < head_dim) are not
    /// executed; refuse them rather than rotate the wrong dimensions.
    fn check_rotary(&self, arch: &Architecture) -> Result<(), GgufError> {
        let key = self.key("rope.dimension_count");
        let Some(value) = self.file.get(&key) else {
            return Ok(());
        };
        let dims = value
            .as_u64()
            .ok_or_else(|| self.file.key_type(&key, "an unsigned integer", value))?;
        if dims != arch.head_dim as u64 {
            return Err(GgufError::Unsupported {
                file: self.file.name.clone(),
                message: format!(
                    "`{key}` = {dims}: rotary embeddings over part of a head (head_dim {}) are \
                     not supported",
                    arch.head_dim
                ),
            });
        }
        Ok(())
    }
}
