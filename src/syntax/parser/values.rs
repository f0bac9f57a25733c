//! Leaves of the parse tree: measurements, thresholds, quantities and numbers
//! (with their range diagnostics), parameters, values and text (escapes, `"""`
//! blocks).

use pest::iterators::Pair;

use super::expr::cmp_op;
use super::{inner, Builder, Rule};
use crate::diag::{Code, Diagnostic};
use crate::syntax::ast::*;
use crate::syntax::span::Span;

impl Builder<'_> {
    pub(super) fn measurement(&mut self, pair: Pair<'_, Rule>) -> Measurement {
        let span = self.spans.span(&pair);
        let mut parts = inner(pair);
        let metric = parts.next().map(|p| self.name(&p));
        let value = parts.next().map(|p| self.quantity(p));
        let threshold = parts.next().map(|p| self.threshold(p));
        Measurement {
            metric: metric.unwrap_or(Name {
                text: String::new(),
                span,
            }),
            value: value.unwrap_or_else(|| zero_quantity(span)),
            threshold,
            span,
        }
    }

    pub(super) fn threshold(&mut self, pair: Pair<'_, Rule>) -> Threshold {
        let span = self.spans.span(&pair);
        let mut parts = inner(pair);
        let op = parts.next().map_or(CmpOp::Eq, |p| cmp_op(p.as_str()));
        let value = parts
            .next()
            .map_or_else(|| zero_quantity(span), |p| self.quantity(p));
        Threshold { op, value, span }
    }

    pub(super) fn quantity(&mut self, pair: Pair<'_, Rule>) -> Quantity {
        let mut span = self.spans.span(&pair);
        let mut parts = inner(pair);
        let number = parts.next().map(|p| (self.number(&p), self.spans.span(&p)));
        let unit = parts.next().map(|p| self.name(&p));
        let number = match (number, &unit) {
            // Without a unit the quantity ends with its number, not with the
            // blank the grammar skipped looking for one.
            (Some((number, number_span)), None) => {
                span = number_span;
                number
            }
            (Some((number, _)), Some(_)) => number,
            (None, _) => Number::Int(0),
        };
        Quantity { number, unit, span }
    }

    pub(super) fn number(&mut self, pair: &Pair<'_, Rule>) -> Number {
        let text = pair.as_str();
        if !text.contains(['.', 'e', 'E']) {
            if let Ok(i) = text.parse::<i64>() {
                return Number::Int(i);
            }
            self.out_of_range(pair);
            return Number::Int(if text.starts_with('-') {
                i64::MIN
            } else {
                i64::MAX
            });
        }
        match text.parse::<f64>() {
            Ok(f) if f.is_finite() => {
                if (f == 0.0 && has_nonzero_digit(text)) || f.is_subnormal() {
                    self.underflow(pair, f);
                }
                Number::Float(f)
            }
            _ => {
                self.out_of_range(pair);
                Number::Float(0.0)
            }
        }
    }

    pub(super) fn underflow(&mut self, pair: &Pair<'_, Rule>, value: f64) {
        let became = if value == 0.0 {
            "0".to_string()
        } else {
            format!("the subnormal {value:e}, with fewer significant bits")
        };
        self.diagnostics.push(
            Diagnostic::new(
                Code::NumberUnderflow,
                self.spans.span(pair),
                format!(
                    "number `{}` underflows: it reads as {became}",
                    pair.as_str()
                ),
            )
            .with_hint("the smallest normal float is 2.2e-308; write 0 if zero is meant"),
        );
    }

    pub(super) fn out_of_range(&mut self, pair: &Pair<'_, Rule>) {
        self.diagnostics.push(
            Diagnostic::new(
                Code::NumberOutOfRange,
                self.spans.span(pair),
                format!("number `{}` is out of range", pair.as_str()),
            )
            .with_hint("integers are 64-bit signed; floats must be finite"),
        );
    }

    pub(super) fn param(&mut self, pair: Pair<'_, Rule>) -> Param {
        let missing = |span| Value {
            kind: ValueKind::Bool(false),
            span,
        };
        let (key, value, span) = self.key_value(pair, missing, Self::value);
        Param { key, value, span }
    }

    /// A `key=value` pair's key, value and span: an empty key, or `missing`'s
    /// value, where the grammar recovered from one left out.
    pub(super) fn key_value<'i, T>(
        &mut self,
        pair: Pair<'i, Rule>,
        missing: impl FnOnce(Span) -> T,
        read: impl FnOnce(&mut Self, Pair<'i, Rule>) -> T,
    ) -> (Name, T, Span) {
        let span = self.spans.span(&pair);
        let mut parts = inner(pair);
        let key = parts.next().map(|p| self.name(&p)).unwrap_or(Name {
            text: String::new(),
            span,
        });
        let value = parts
            .next()
            .map_or_else(|| missing(span), |p| read(self, p));
        (key, value, span)
    }

    pub(super) fn value(&mut self, pair: Pair<'_, Rule>) -> Value {
        let span = self.spans.span(&pair);
        let kind = match pair.as_rule() {
            Rule::list => ValueKind::List(inner(pair).map(|p| self.value(p)).collect()),
            Rule::string | Rule::triple_string => ValueKind::Str(self.text(pair).text),
            Rule::boolean => ValueKind::Bool(pair.as_str() == "true"),
            Rule::quantity => ValueKind::Number(self.quantity(pair)),
            _ => ValueKind::Ident(pair.as_str().to_string()),
        };
        Value { kind, span }
    }

    pub(super) fn text(&self, pair: Pair<'_, Rule>) -> Text {
        let span = self.spans.span(&pair);
        let rule = pair.as_rule();
        let raw = pair.into_inner().next().map_or("", |p| p.as_str());
        let text = if rule == Rule::triple_string {
            dedent(raw)
        } else {
            unescape(raw)
        };
        Text { text, span }
    }

    pub(super) fn refs<'i>(&self, parts: impl Iterator<Item = Pair<'i, Rule>>) -> Vec<Name> {
        parts.map(|p| self.name(&p)).collect()
    }
}

pub(super) fn zero_quantity(span: Span) -> Quantity {
    Quantity {
        number: Number::Int(0),
        unit: None,
        span,
    }
}

/// Resolves the escapes of a one-line string: `\"`, `\\`, `\n`, `\t`.
fn unescape(raw: &str) -> String {
    if !raw.contains('\\') {
        return raw.to_string();
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// The text of a `"""` block: a first line that is empty after the quotes and a
/// last line of only indentation are dropped, then the indentation common to all
/// non-blank lines is removed. Nothing else changes.
pub fn dedent(raw: &str) -> String {
    let raw = raw.replace("\r\n", "\n");
    let mut lines: Vec<&str> = raw.split('\n').collect();
    if lines.len() > 1 && lines.first().is_some_and(|l| l.trim().is_empty()) {
        lines.remove(0);
    }
    if lines.len() > 1 && lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start_matches([' ', '\t']).len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| {
            l.get(indent..)
                .unwrap_or_else(|| l.trim_start_matches([' ', '\t']))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a number's mantissa (the digits before any exponent) is not zero.
fn has_nonzero_digit(text: &str) -> bool {
    text.split(['e', 'E'])
        .next()
        .is_some_and(|mantissa| mantissa.chars().any(|c| matches!(c, '1'..='9')))
}
