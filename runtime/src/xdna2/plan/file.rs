//! `plan.json`: a plan written as pretty JSON and read back with its position
//! on a syntax error.

use serde::Serialize;

use super::Plan;

#[derive(Debug, thiserror::Error)]
pub enum PlanFileError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{}:{}: {source}", source.line(), source.column())]
    Syntax {
        path: String,
        #[source]
        source: serde_json::Error,
    },
}

impl Plan {
    pub fn to_json(&self) -> String {
        json_file(self)
    }

    pub fn from_json(path: &str, text: &str) -> Result<Plan, PlanFileError> {
        serde_json::from_str(text).map_err(|source| PlanFileError::Syntax {
            path: path.to_string(),
            source,
        })
    }

    pub fn load(path: &std::path::Path) -> Result<Plan, PlanFileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PlanFileError::Io {
            path: shown.clone(),
            source,
        })?;
        Self::from_json(&shown, &text)
    }
}

/// The text of a committed JSON file: pretty-printed, ending in a newline.
pub fn json_file(value: &impl Serialize) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}
