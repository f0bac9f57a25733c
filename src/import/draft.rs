//! What the importer drafts, as plain data before it becomes trajectory text: per
//! record file, sessions (placed, or a draft with a provisional phase) holding notes,
//! draft notes and observations, each with the record lines it came from. The
//! readers (`markdown`, `comments`, `commits`) produce it; `write` turns it into the
//! language's syntax tree and prints it.

use skillc_runtime::ops::{Metric, Unit};
use skillc_runtime::phase::DeployPhase;

use crate::syntax::{EntryKind, Number};

/// One record file's share of the trajectory.
#[derive(Debug, Clone, PartialEq)]
pub struct DraftFile {
    /// How the record is cited, without the line (`mlir-air:…/README.md`).
    pub cite: String,
    pub sessions: Vec<DraftSession>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DraftSession {
    /// `YYYY-MM-DD`.
    pub date: String,
    pub phase: Placement,
    pub title: String,
    pub entries: Vec<DraftEntry>,
}

/// A session's phase: read from the record, or a provisional guess (a draft).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    Clear(DeployPhase),
    Draft(DeployPhase),
}

impl Placement {
    pub fn phase(self) -> DeployPhase {
        match self {
            Placement::Clear(p) | Placement::Draft(p) => p,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DraftEntry {
    /// The record lines it came from (1-based, inclusive).
    pub first: u32,
    pub last: u32,
    pub body: Body,
    /// The entry of the same session this one is about (a row's notes about the
    /// row's observation), by index.
    pub about: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Note {
        text: String,
        /// `Some` for a draft; inside, what it reads like, if anything.
        draft: Option<Option<EntryKind>>,
    },
    Observe(Observed),
}

/// A measured figure (or several, from one table cell) with its conditions.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// What the row and column say it is.
    pub label: String,
    pub figures: Vec<Figure>,
    /// `when` conditions, in the order found, keys unique.
    pub conditions: Vec<(String, Condition)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    pub metric: Metric,
    pub value: Number,
    pub unit: Option<Unit>,
}

/// A condition's value: a number or a word.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    Number(Number),
    Word(String),
}

impl DraftEntry {
    pub fn note(text: String, first: u32, last: u32, draft: Option<Option<EntryKind>>) -> Self {
        DraftEntry {
            first,
            last,
            body: Body::Note { text, draft },
            about: None,
        }
    }

    pub fn is_draft(&self) -> bool {
        matches!(self.body, Body::Note { draft: Some(_), .. })
    }
}
