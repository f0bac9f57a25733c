//! The one place diagnostics become text: `file:line:col: severity[CODE]: message`,
//! the source line with a caret under the span, related locations and the hint; or a
//! JSON document for tools. Paths print as they were given, so relative stays relative.

use std::collections::HashMap;

use serde::Serialize;
use skillc_runtime::input::capped;

use crate::diag::{Diagnostic, Severity};
use crate::syntax::{FileId, LineIndex, SourceFile, Span};

/// Source text lookups for rendering, with line indexes built on first use.
pub struct Sources<'a> {
    files: &'a [SourceFile],
    indexes: HashMap<FileId, LineIndex>,
}

impl<'a> Sources<'a> {
    pub fn new(files: &'a [SourceFile]) -> Self {
        Self {
            files,
            indexes: HashMap::new(),
        }
    }

    fn file(&self, id: FileId) -> Option<&'a SourceFile> {
        self.files.get(id.0 as usize)
    }

    pub fn path(&self, id: FileId) -> &'a str {
        self.file(id).map_or("<unknown>", |f| f.path.as_str())
    }

    pub fn location(&self, span: Span) -> String {
        format!("{}:{}:{}", self.path(span.file), span.line, span.col)
    }

    /// The text of the span's first line, and the caret's offset and width in
    /// characters within it.
    fn line_of(&mut self, span: Span) -> Option<(&'a str, usize, usize)> {
        let file = self.file(span.file)?;
        let index = self
            .indexes
            .entry(span.file)
            .or_insert_with(|| LineIndex::new(&file.text));
        let range = index.line_range(&file.text, span.line);
        let line = file.text.get(range.clone())?;
        let start = (span.start as usize).clamp(range.start, range.end);
        let end = (span.end as usize).clamp(start, range.end);
        let before = file.text.get(range.start..start)?.chars().count();
        let width = file.text.get(start..end)?.chars().count();
        Some((line, before, width.max(1)))
    }
}

/// Human-readable diagnostics, each followed by a blank line.
pub fn human(diagnostics: &[Diagnostic], sources: &mut Sources<'_>) -> String {
    let mut out = String::new();
    for diagnostic in diagnostics {
        out.push_str(&format!(
            "{}: {}[{}]: {}\n",
            sources.location(diagnostic.span),
            diagnostic.severity.as_str(),
            diagnostic.code.as_str(),
            capped(&diagnostic.message, MESSAGE_MAX_CHARS)
        ));
        if let Some((line, before, width)) = sources.line_of(diagnostic.span) {
            let (line, before, width) = window(line, before, width);
            let number = diagnostic.span.line.to_string();
            let gutter = " ".repeat(number.len());
            let padding: String = line
                .chars()
                .take(before)
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            out.push_str(&format!("{gutter} |\n"));
            out.push_str(&format!("{number} | {line}\n"));
            out.push_str(&format!("{gutter} | {padding}{}\n", "^".repeat(width)));
        }
        for related in &diagnostic.related {
            out.push_str(&format!(
                "  = note: {}: {}\n",
                sources.location(related.span),
                capped(&related.message, MESSAGE_MAX_CHARS)
            ));
        }
        if let Some(hint) = &diagnostic.hint {
            out.push_str(&format!("  = hint: {}\n", capped(hint, MESSAGE_MAX_CHARS)));
        }
        out.push('\n');
    }
    out
}

/// Longest message, note or hint echoed (they may quote the input).
const MESSAGE_MAX_CHARS: usize = 400;
/// Longest part of a source line shown under a diagnostic.
const LINE_MAX_CHARS: usize = 160;
/// Characters shown before the caret when a long line is cut.
const LINE_LEAD_CHARS: usize = 60;

/// A long source line cut to a window around the caret (`…` where text was
/// left out), with the caret's offset and width inside the window: a 50 MB
/// line is never echoed whole.
fn window(line: &str, before: usize, width: usize) -> (String, usize, usize) {
    let total = line.chars().count();
    if total <= LINE_MAX_CHARS {
        return (line.to_string(), before, width);
    }
    let start = before.saturating_sub(LINE_LEAD_CHARS);
    let end = (start + LINE_MAX_CHARS).min(total);
    let mut shown: String = line.chars().skip(start).take(end - start).collect();
    let lead = usize::from(start > 0);
    if start > 0 {
        shown.insert(0, '…');
    }
    if end < total {
        shown.push('…');
    }
    let caret = before - start + lead;
    let width = width.min(end.saturating_sub(before)).max(1);
    (shown, caret, width)
}

/// `N errors, M warnings` with singulars where they belong.
pub fn summary(diagnostics: &[Diagnostic]) -> String {
    let errors = crate::diag::error_count(diagnostics);
    let warnings = diagnostics.len() - errors;
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    format!(
        "{}, {}",
        plural(errors, "error"),
        plural(warnings, "warning")
    )
}

#[derive(Serialize)]
struct JsonReport<'a> {
    errors: usize,
    warnings: usize,
    diagnostics: Vec<JsonDiagnostic<'a>>,
}

#[derive(Serialize)]
struct JsonDiagnostic<'a> {
    file: &'a str,
    line: u32,
    col: u32,
    end: u32,
    start: u32,
    severity: Severity,
    code: &'static str,
    message: &'a str,
    hint: Option<&'a str>,
    related: Vec<JsonRelated<'a>>,
}

#[derive(Serialize)]
struct JsonRelated<'a> {
    file: &'a str,
    line: u32,
    col: u32,
    message: &'a str,
}

/// Machine-readable diagnostics: byte offsets `start`/`end` and 1-based line/col.
pub fn json(diagnostics: &[Diagnostic], sources: &Sources<'_>) -> String {
    serde_json::to_string_pretty(&json_value(diagnostics, sources)).unwrap_or_default() + "\n"
}

/// [`json`] as a value, for commands that embed it in their own document.
pub fn json_value(diagnostics: &[Diagnostic], sources: &Sources<'_>) -> serde_json::Value {
    let errors = crate::diag::error_count(diagnostics);
    let report = JsonReport {
        errors,
        warnings: diagnostics.len() - errors,
        diagnostics: diagnostics
            .iter()
            .map(|d| JsonDiagnostic {
                file: sources.path(d.span.file),
                line: d.span.line,
                col: d.span.col,
                start: d.span.start,
                end: d.span.end,
                severity: d.severity,
                code: d.code.as_str(),
                message: &d.message,
                hint: d.hint.as_deref(),
                related: d
                    .related
                    .iter()
                    .map(|r| JsonRelated {
                        file: sources.path(r.span.file),
                        line: r.span.line,
                        col: r.span.col,
                        message: &r.message,
                    })
                    .collect(),
            })
            .collect(),
    };
    serde_json::to_value(&report).unwrap_or_default()
}
