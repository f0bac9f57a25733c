//! A Markdown record → sessions. Each heading opens a session titled by it; its
//! phase is the one the heading's words name, else its parent heading's (rules in
//! `classify`); without one the session is a draft, placed provisionally at the
//! phase of the session before it. Inside a session, tables draft observations
//! (`figures`), and list items and paragraphs draft notes, as `note draft lesson`
//! when they read like a lesson. Fenced code is not drafted; it is counted.

use skillc_runtime::phase::DeployPhase;

use super::classify::{phase_of, Evidence, LessonWords};
use super::draft::{Condition, DraftEntry, DraftSession, Placement};
use super::figures;
use super::markdown::{blocks, Block};
use crate::syntax::EntryKind;

/// What one text drafts, and what it left out.
#[derive(Debug, Default)]
pub struct Drafted {
    pub sessions: Vec<DraftSession>,
    /// Fenced code blocks, not drafted.
    pub code_blocks: usize,
}

/// The sessions of a Markdown file. `title` names the session of whatever comes
/// before the first heading; `first_phase` is that session's phase evidence.
pub fn markdown(text: &str, date: &str, title: &str, first_phase: Evidence) -> Drafted {
    let mut doc = Document {
        date: date.to_string(),
        last_placed: DeployPhase::Reference,
        stack: Vec::new(),
        drafted: Drafted::default(),
        current: None,
    };
    doc.open(title, resolve(first_phase, None));
    for block in blocks(text, 1) {
        match block {
            Block::Heading { level, text, .. } => doc.heading(level, &text),
            Block::Text {
                text, first, last, ..
            } => doc.push(vec![text_entry(text, first, last)]),
            Block::Table(table) => {
                let entries = figures::table(&table, &doc.conditions());
                doc.push(entries);
            }
            Block::Code { .. } => doc.drafted.code_blocks += 1,
        }
    }
    doc.close();
    doc.drafted
}

/// A list item or paragraph: a note, or a draft lesson when it reads like one.
pub fn text_entry(text: String, first: u32, last: u32) -> DraftEntry {
    let draft = LessonWords::of(&text)
        .is_lesson()
        .then_some(Some(EntryKind::Lesson));
    DraftEntry::note(text, first, last, draft)
}

/// Appends entries whose `about` indexes count from their own first one.
pub fn append(entries: &mut Vec<DraftEntry>, more: Vec<DraftEntry>) {
    let base = entries.len();
    entries.extend(more.into_iter().map(|mut e| {
        e.about = e.about.map(|i| base + i);
        e
    }));
}

/// A phase from evidence and the parent's phase: clear evidence wins, no evidence
/// inherits, conflicting evidence places nothing.
fn resolve(evidence: Evidence, parent: Option<DeployPhase>) -> Option<DeployPhase> {
    match evidence {
        Evidence::Clear(phase) => Some(phase),
        Evidence::None => parent,
        Evidence::Conflicting => None,
    }
}

struct Heading {
    level: usize,
    phase: Option<DeployPhase>,
    conditions: Vec<(String, Condition)>,
}

struct Document {
    date: String,
    /// The phase of the latest placed session: a draft session's provisional one.
    last_placed: DeployPhase,
    stack: Vec<Heading>,
    drafted: Drafted,
    current: Option<DraftSession>,
}

impl Document {
    fn heading(&mut self, level: usize, text: &str) {
        while self.stack.last().is_some_and(|h| h.level >= level) {
            self.stack.pop();
        }
        let parent = self.stack.last().and_then(|h| h.phase);
        let phase = resolve(phase_of(text), parent);
        self.stack.push(Heading {
            level,
            phase,
            conditions: figures::conditions_in(text),
        });
        self.close();
        self.open(text, phase);
    }

    fn conditions(&self) -> Vec<(String, Condition)> {
        let mut out: Vec<(String, Condition)> = Vec::new();
        for (key, value) in self.stack.iter().rev().flat_map(|h| h.conditions.iter()) {
            if out.iter().all(|(k, _)| k != key) {
                out.push((key.clone(), value.clone()));
            }
        }
        out
    }

    fn open(&mut self, title: &str, phase: Option<DeployPhase>) {
        let placement = match phase {
            Some(phase) => {
                self.last_placed = phase;
                Placement::Clear(phase)
            }
            None => Placement::Draft(self.last_placed),
        };
        self.current = Some(DraftSession {
            date: self.date.clone(),
            phase: placement,
            title: title.to_string(),
            entries: Vec::new(),
        });
    }

    fn push(&mut self, entries: Vec<DraftEntry>) {
        if let Some(session) = &mut self.current {
            append(&mut session.entries, entries);
        }
    }

    /// Ends the current session; one without entries is not written.
    fn close(&mut self) {
        if let Some(session) = self.current.take() {
            if !session.entries.is_empty() {
                self.drafted.sessions.push(session);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_place_sessions_or_leave_drafts() {
        let text = "# Model X on the NPU\n\nIntro.\n\n## Performance\n\n### Prefill\n\nFast.\n\n### Other\n\nText.\n\n## Verification\n\nPASS.\n";
        let drafted = markdown(text, "2026-06-28", "README.md", Evidence::None);
        let phases: Vec<(String, Placement)> = drafted
            .sessions
            .iter()
            .map(|s| (s.title.clone(), s.phase))
            .collect();
        assert_eq!(
            phases,
            vec![
                (
                    "Model X on the NPU".to_string(),
                    Placement::Draft(DeployPhase::Reference)
                ),
                (
                    "Prefill".to_string(),
                    Placement::Clear(DeployPhase::Prefill)
                ),
                ("Other".to_string(), Placement::Draft(DeployPhase::Prefill)),
                (
                    "Verification".to_string(),
                    Placement::Clear(DeployPhase::Model)
                ),
            ]
        );
    }
}
