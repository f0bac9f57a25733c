//! What `skillc import` adds to an entry: the `source` clause citing the record line
//! it was drafted from (its form checked: `[name:]path:line` or `path:first-last`),
//! and the `draft` marker of a note no one has reviewed yet, reported until a person
//! or an agent turns the note into an action, lesson, decision or plain note.

use skillc_runtime::notation;

use super::Checker;
use crate::diag::{Code, Diagnostic};
use crate::syntax::{Draft, EntryKind, Session, Text};

/// Longest citation accepted: a path and a line range, not a paragraph.
const MAX_CITATION_CHARS: usize = 1000;

/// Why `citation` is not `[name:]path:line[-line]`, if it is not.
pub fn citation_problem(citation: &str) -> Option<&'static str> {
    if citation.chars().count() > MAX_CITATION_CHARS {
        return Some("it is longer than a citation can be");
    }
    if citation.chars().any(char::is_control) {
        return Some("it holds a control character (a newline or a tab)");
    }
    let Some((path, lines)) = citation.rsplit_once(':') else {
        return Some("it names no line: write `path:line`");
    };
    if path.trim().is_empty() {
        return Some("it names no file before the line");
    }
    let line = |text: &str| text.parse::<u32>().ok().filter(|n| *n >= 1);
    match lines.split_once('-') {
        None if line(lines).is_some() => None,
        None => Some("the line after the last `:` is not a number from 1 up"),
        Some((first, last)) => match (line(first), line(last)) {
            (Some(first), Some(last)) if first <= last => None,
            (Some(_), Some(_)) => Some("the range ends before it starts"),
            _ => Some("the line range is not `first-last` with numbers from 1 up"),
        },
    }
}

/// W0061 for a session `skillc import` could not place: its phase is a guess.
pub fn draft_session(session: &Session) -> Option<Diagnostic> {
    let at = session.draft.as_ref()?.span;
    let title = session
        .title
        .as_ref()
        .map_or(String::new(), |t| format!(" {}", notation::quoted(&t.text)));
    Diagnostic::new(
        Code::Draft,
        at,
        format!(
            "session{title} is a draft: the importer could not tell its phase, phase {} is provisional",
            session.phase
        ),
    )
    .with_hint("set the phase its entries belong to (move entries into other sessions where they differ) and remove `draft`")
    .into()
}

impl Checker {
    /// Reports a `source` citation that does not name a file and a line.
    pub(super) fn source(&mut self, citation: &Text) {
        if let Some(problem) = citation_problem(&citation.text) {
            self.push(
                Diagnostic::new(
                    Code::BadSource,
                    citation.span,
                    format!("this source is not a record line: {problem}"),
                )
                .with_hint("cite the record line the entry rests on: `source \"mlir-air:programming_examples/llms/qwen25_0_5b/README.md:42\"` or `source \"notes/log.md:10-14\"`"),
            );
        }
    }

    /// Reports a draft note: unreviewed imported text that the bundle must not carry
    /// as it is.
    pub(super) fn draft_note(&mut self, id: &str, draft: &Draft, source: Option<&str>) {
        let from = source.map_or(String::new(), |s| format!(" (from {s})"));
        let hint = match draft.suggested {
            Some(EntryKind::Lesson) => "it reads like a lesson (symptom, cause and fix words): write it as a `lesson` with a symptom, a cause and an executable `fix`, or as a plain note",
            Some(EntryKind::Observation) => "it holds a figure the importer could not map to a metric: write an `observe` entry with the metric and unit, or keep the text as a plain note",
            Some(EntryKind::Action) => "it reads like a step: write it as an `action` of the operation table, or as a plain note",
            Some(EntryKind::Decision) => "it reads like a choice: write it as a `decision`, or as a plain note",
            _ => "rewrite it in your own words as an action, lesson, decision or plain note, and remove `draft`",
        };
        self.push(
            Diagnostic::new(
                Code::Draft,
                draft.span,
                format!("`{id}` is a draft note{from}, not reviewed yet"),
            )
            .with_hint(hint),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::citation_problem;

    #[test]
    fn citations_name_a_file_and_a_line() {
        for good in [
            "mlir-air:programming_examples/llms/qwen25_0_5b/README.md:42",
            "notes/log.md:10-14",
            "commits.txt:1-1",
            "a b/c.md:3",
        ] {
            assert_eq!(citation_problem(good), None, "{good}");
        }
        for bad in [
            "README.md",
            "README.md:0",
            "README.md:x",
            ":12",
            "README.md:14-10",
            "README.md:3-",
            "README.md:\n3",
        ] {
            assert!(citation_problem(bad).is_some(), "{bad}");
        }
    }
}
