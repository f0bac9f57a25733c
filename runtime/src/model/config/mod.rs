//! Hugging Face `config.json` → [`Architecture`], with the scope check of phase 0.
//!
//! Both layouts real checkpoints use are accepted: the classic one (`rope_theta`,
//! `rope_scaling`, `torch_dtype`) and the transformers 5 one (`rope_parameters`,
//! `dtype`, `layer_types`). Everything outside the decoder-only families the
//! runtime knows (MoE, MLA, encoder-decoder, multimodal wrappers, quantized
//! checkpoints, unknown families) and every key that would change the
//! computation in a way the family's path does not follow is refused here as
//! one [`ConfigError::Blocked`] that lists them all, each with the field, why
//! and what would lift it; sizes that are zero, absurd or inconsistent (heads
//! not dividing) are refused as the first malformed field. Every error carries
//! the dotted field path and, when the key occurs in the source text, its
//! line and column so the CLI can point at it.
//!
//! The reading is split by what it decides: `fields` reads one typed field and
//! builds the located errors, `scope` collects what blocks a config (before
//! any size is read), `architecture` assembles the [`Architecture`] and each
//! family's features, `rope` and `sliding` read the positional encoding and the
//! sliding-window layers from either layout.

mod architecture;
mod fields;
mod rope;
mod scope;
mod sliding;

use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use thiserror::Error;

use super::arch::Architecture;
pub use fields::locate_key;
use fields::{json_kind, strip_serde_position};

/// Line and column (1-based) of a key in the config text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

/// Why a config was not turned into an [`Architecture`].
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: crate::input::Problem,
    },
    #[error("not valid JSON: {message}")]
    Syntax { message: String, at: Location },
    #[error("the config must be a JSON object, found {found}")]
    NotAnObject { found: &'static str },
    #[error("`{field}` is missing")]
    Missing { field: String, at: Option<Location> },
    #[error("`{field}` must be {expected}, found {found}")]
    WrongType {
        field: String,
        expected: &'static str,
        found: String,
        at: Option<Location>,
    },
    #[error("`{field}` = {value}: {reason}")]
    Invalid {
        field: String,
        value: String,
        reason: String,
        at: Option<Location>,
    },
    #[error("`{field}` = {value} is not supported: {reason}")]
    Unsupported {
        field: String,
        value: String,
        reason: String,
        at: Option<Location>,
    },
    /// Every feature that keeps the config from running, in the order found.
    #[error("{}", Blockers(blockers))]
    Blocked { blockers: Vec<Blocker> },
}

/// One feature that keeps a config from running: where it shows, why it
/// blocks, and what would lift it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Blocker {
    pub feature: String,
    pub field: String,
    pub value: String,
    pub reason: String,
    pub lift: String,
    #[serde(skip)]
    pub at: Option<Location>,
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (`{}` = {}): {}; lifted by {}",
            self.feature, self.field, self.value, self.reason, self.lift
        )
    }
}

/// The blockers of a refusal as one text: a count, then each on its own.
struct Blockers<'a>(&'a [Blocker]);

impl fmt::Display for Blockers<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(f, "{n} blocking feature{}", if n == 1 { "" } else { "s" })?;
        for (i, b) in self.0.iter().enumerate() {
            write!(f, "{} [{}] {b}", if i == 0 { ":" } else { ";" }, i + 1)?;
        }
        Ok(())
    }
}

impl ConfigError {
    /// The dotted path of the offending field, when one is to blame.
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Missing { field, .. }
            | ConfigError::WrongType { field, .. }
            | ConfigError::Invalid { field, .. }
            | ConfigError::Unsupported { field, .. } => Some(field),
            ConfigError::Blocked { blockers } => blockers.first().map(|b| b.field.as_str()),
            ConfigError::Io { .. }
            | ConfigError::Syntax { .. }
            | ConfigError::NotAnObject { .. } => None,
        }
    }

    /// Where in the config text the error points, when known.
    pub fn location(&self) -> Option<Location> {
        match self {
            ConfigError::Syntax { at, .. } => Some(*at),
            ConfigError::Missing { at, .. }
            | ConfigError::WrongType { at, .. }
            | ConfigError::Invalid { at, .. }
            | ConfigError::Unsupported { at, .. } => *at,
            ConfigError::Blocked { blockers } => blockers.iter().find_map(|b| b.at),
            ConfigError::Io { .. } | ConfigError::NotAnObject { .. } => None,
        }
    }
}

/// Reads and parses a config. `path` is the `config.json` file or the model
/// directory holding it.
pub fn load_config(path: &Path) -> Result<Architecture, ConfigError> {
    let file = if path.is_dir() {
        path.join("config.json")
    } else {
        path.to_path_buf()
    };
    let text = crate::input::read_to_string(&file).map_err(|e| ConfigError::Io {
        path: file.clone(),
        source: e.problem,
    })?;
    parse_config(&text)
}

/// Parses the text of a `config.json` (either layout).
pub fn parse_config(json: &str) -> Result<Architecture, ConfigError> {
    let value: Value = serde_json::from_str(json).map_err(|e| ConfigError::Syntax {
        message: strip_serde_position(&e.to_string()),
        at: Location {
            line: e.line(),
            column: e.column(),
        },
    })?;
    let Value::Object(obj) = &value else {
        return Err(ConfigError::NotAnObject {
            found: json_kind(&value),
        });
    };
    let config = Config {
        obj,
        source: json,
        blockers: RefCell::new(Vec::new()),
    };
    config.check_scope();
    let arch = config.architecture();
    let blockers = config.blockers.into_inner();
    match arch {
        Err(blocked @ ConfigError::Blocked { .. }) => Err(blocked),
        _ if !blockers.is_empty() => Err(ConfigError::Blocked { blockers }),
        arch => arch,
    }
}

/// A config object with the text it was parsed from, in which each error
/// locates its field, and the blockers found so far (reading goes on past
/// a blocker, so a refusal names them all).
struct Config<'a> {
    obj: &'a Map<String, Value>,
    source: &'a str,
    blockers: RefCell<Vec<Blocker>>,
}

#[cfg(test)]
mod tests {
    use super::super::arch::{DType, RopeScaling};
    use super::*;

    #[test]
    fn locates_nested_keys() {
        let text = "{\n  \"a\": 1,\n  \"rope\": {\n    \"a\": 2\n  }\n}";
        assert_eq!(locate_key(text, "a"), Some(Location { line: 2, column: 3 }));
        assert_eq!(
            locate_key(text, "rope.a"),
            Some(Location { line: 4, column: 5 })
        );
        assert_eq!(locate_key(text, "missing"), None);
    }

    #[test]
    fn derives_head_dim_and_kv_heads() {
        let arch = parse_config(
            r#"{"model_type":"llama","num_hidden_layers":2,"hidden_size":64,
                "intermediate_size":128,"num_attention_heads":4,"vocab_size":10}"#,
        )
        .unwrap();
        assert_eq!(arch.head_dim, 16);
        assert_eq!(arch.num_kv_heads, 4);
        assert_eq!(arch.rope_scaling, RopeScaling::Default);
        assert_eq!(arch.dtype, DType::F32);
        assert!(!arch.tie_word_embeddings);
    }
}
