//! Typed reads of action parameters and observation conditions (`key=value` lists
//! of the syntax tree). The checker has already validated kinds against the
//! vocabulary, so a read that finds the wrong kind reports it as a replay problem
//! rather than guessing.

use crate::syntax::{Param, ValueKind};

/// The parameters of one action or the conditions of one observation.
#[derive(Debug, Clone, Copy)]
pub struct Params<'a>(pub &'a [Param]);

impl<'a> Params<'a> {
    fn value(&self, key: &str) -> Option<&'a ValueKind> {
        self.0
            .iter()
            .find(|p| p.key.text == key)
            .map(|p| &p.value.kind)
    }

    pub fn keys(&self) -> impl Iterator<Item = &'a str> {
        self.0.iter().map(|p| p.key.text.as_str())
    }

    /// A number, whatever its unit.
    pub fn number(&self, key: &str) -> Option<f64> {
        match self.value(key)? {
            ValueKind::Number(q) => Some(q.number.as_f64()),
            _ => None,
        }
    }

    /// A non-negative integer.
    pub fn count(&self, key: &str) -> Option<usize> {
        let n = self.number(key)?;
        (n >= 0.0 && n.fract() == 0.0).then_some(n as usize)
    }

    /// A bare word (`gemm`, `seq-first`) or a string.
    pub fn word(&self, key: &str) -> Option<&'a str> {
        match self.value(key)? {
            ValueKind::Ident(w) | ValueKind::Str(w) => Some(w),
            _ => None,
        }
    }

    /// A list of non-negative integers (`[2048,2048,512]`).
    pub fn dims(&self, key: &str) -> Option<Vec<usize>> {
        match self.value(key)? {
            ValueKind::List(items) => items
                .iter()
                .map(|v| match &v.kind {
                    ValueKind::Number(q) => {
                        let n = q.number.as_f64();
                        (n >= 0.0 && n.fract() == 0.0).then_some(n as usize)
                    }
                    _ => None,
                })
                .collect(),
            _ => None,
        }
    }

    /// The value as written, for messages and table cells.
    pub fn text(&self, key: &str) -> Option<String> {
        self.value(key).map(value_text)
    }
}

/// A value in source notation.
pub fn value_text(value: &ValueKind) -> String {
    match value {
        ValueKind::Number(q) => {
            let n = match q.number {
                crate::syntax::Number::Int(i) => i.to_string(),
                crate::syntax::Number::Float(f) => f.to_string(),
            };
            match &q.unit {
                Some(unit) => format!("{n} {}", unit.text),
                None => n,
            }
        }
        ValueKind::Str(s) => format!("{s:?}"),
        ValueKind::Ident(w) => w.clone(),
        ValueKind::Bool(b) => b.to_string(),
        ValueKind::List(items) => {
            let inner: Vec<String> = items.iter().map(|v| value_text(&v.kind)).collect();
            format!("[{}]", inner.join(","))
        }
    }
}
