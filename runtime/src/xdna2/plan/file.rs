//! `plan.json`: a plan written as pretty JSON and read back with its position
//! on a syntax error.

use super::Plan;

#[derive(Debug, thiserror::Error)]
pub enum PlanFileError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
}

impl Plan {
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    pub fn from_json(path: &str, text: &str) -> Result<Plan, PlanFileError> {
        serde_json::from_str(text).map_err(|e| PlanFileError::Syntax {
            path: path.to_string(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })
    }

    pub fn load(path: &std::path::Path) -> Result<Plan, PlanFileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| PlanFileError::Io {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        Self::from_json(&shown, &text)
    }
}
