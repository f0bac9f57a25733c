//! One field at a time: a dotted path looked up in the config object, read as
//! the type it must have, and every error built with the field's path and its
//! line and column in the source text.

use serde_json::Value;

use super::{Config, ConfigError, Location};

impl Config<'_> {
    fn at(&self, field: &str) -> Option<Location> {
        locate_key(self.source, field)
    }

    /// The value at a dotted path (`rope_scaling.factor`); `null` counts as absent.
    pub(super) fn get(&self, field: &str) -> Option<&Value> {
        let mut parts = field.split('.');
        let mut current = self.obj.get(parts.next()?)?;
        for part in parts {
            current = current.as_object()?.get(part)?;
        }
        (!current.is_null()).then_some(current)
    }

    pub(super) fn wrong_type(
        &self,
        field: &str,
        expected: &'static str,
        found: &Value,
    ) -> ConfigError {
        ConfigError::WrongType {
            field: field.to_string(),
            expected,
            found: describe(found),
            at: self.at(field),
        }
    }

    pub(super) fn invalid(
        &self,
        field: &str,
        value: impl ToString,
        reason: impl ToString,
    ) -> ConfigError {
        ConfigError::Invalid {
            field: field.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
            at: self.at(field),
        }
    }

    pub(super) fn unsupported(
        &self,
        field: &str,
        value: impl ToString,
        reason: impl ToString,
    ) -> ConfigError {
        ConfigError::Unsupported {
            field: field.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
            at: self.at(field),
        }
    }

    /// A missing key points at the object that should hold it, if nested.
    pub(super) fn missing(&self, field: &str) -> ConfigError {
        ConfigError::Missing {
            field: field.to_string(),
            at: field
                .rsplit_once('.')
                .and_then(|(parent, _)| self.at(parent)),
        }
    }

    pub(super) fn opt_uint(&self, field: &str) -> Result<Option<u64>, ConfigError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.wrong_type(field, "a non-negative integer", v)),
        }
    }

    /// A size: present, a positive integer, at most `max`.
    pub(super) fn size(&self, field: &str, max: usize) -> Result<usize, ConfigError> {
        let value = self.opt_uint(field)?.ok_or_else(|| self.missing(field))?;
        self.check_size(field, value, max)
    }

    pub(super) fn opt_size(&self, field: &str, max: usize) -> Result<Option<usize>, ConfigError> {
        self.opt_uint(field)?
            .map(|v| self.check_size(field, v, max))
            .transpose()
    }

    fn check_size(&self, field: &str, value: u64, max: usize) -> Result<usize, ConfigError> {
        if value == 0 {
            return Err(self.invalid(field, value, "must be at least 1"));
        }
        if value > max as u64 {
            return Err(self.invalid(field, value, format!("exceeds the limit of {max}")));
        }
        Ok(value as usize)
    }

    pub(super) fn opt_f64(&self, field: &str) -> Result<Option<f64>, ConfigError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.wrong_type(field, "a number", v)),
        }
    }

    /// A strictly positive, finite number.
    pub(super) fn positive(&self, field: &str, value: f64) -> Result<f64, ConfigError> {
        if value.is_finite() && value > 0.0 {
            Ok(value)
        } else {
            Err(self.invalid(field, value, "must be a positive finite number"))
        }
    }

    pub(super) fn opt_bool(&self, field: &str) -> Result<Option<bool>, ConfigError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.wrong_type(field, "true or false", v)),
        }
    }

    pub(super) fn opt_str(&self, field: &str) -> Result<Option<&str>, ConfigError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| self.wrong_type(field, "a string", v)),
        }
    }

    /// True when `field` is present with a value that switches a feature on
    /// (a non-zero number, `true`, a non-empty string/object/array).
    pub(super) fn is_set(&self, field: &str) -> bool {
        match self.get(field) {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(Value::Number(n)) => n.as_f64().is_some_and(|x| x != 0.0),
            Some(Value::String(s)) => !s.is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            Some(Value::Object(o)) => !o.is_empty(),
            Some(Value::Null) => false,
        }
    }
}

pub(super) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A short rendering of a found value for messages.
fn describe(value: &Value) -> String {
    match value {
        Value::Array(_) | Value::Object(_) => json_kind(value).to_string(),
        other => other.to_string(),
    }
}

/// serde_json appends " at line L column C"; the location is reported apart.
pub(super) fn strip_serde_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// Finds a dotted key path in pretty-printed JSON text: each segment is searched
/// after the previous one, which is exact for the nested objects configs use.
pub fn locate_key(source: &str, field: &str) -> Option<Location> {
    let parts: Vec<&str> = field.split('.').collect();
    let mut offset = 0;
    for (i, part) in parts.iter().enumerate() {
        let needle = format!("\"{part}\"");
        offset += source[offset..].find(&needle)?;
        if i + 1 < parts.len() {
            offset += needle.len();
        }
    }
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(offset, |nl| offset - nl - 1) + 1;
    Some(Location { line, column })
}
