//! `skillc import`: drafts a trajectory from a deployment's records — Markdown
//! notes and reports, the comments of Python and C/C++ code, and commit-message
//! files — so that a person (or an agent) finishes it instead of writing it from
//! nothing. Every drafted entry cites the record line it came from (`source "…"`);
//! what the importer cannot classify or place is marked `draft`, which `skillc
//! check` reports (W0061) and `skillc build` refuses (E0102) until someone decides.
//!
//! The pipeline: [`records`] reads the inputs (the only I/O here) → per record,
//! [`document`] (Markdown, with [`markdown`] and [`figures`]), [`comments`] or
//! [`commits`] drafts sessions of notes and observations ([`draft`], word rules in
//! [`classify`]) → [`write`] prints them through the language's printer. Output is
//! deterministic: records in citation order, ids from file and line.

pub mod classify;
pub mod comments;
pub mod commits;
pub mod dates;
pub mod document;
pub mod draft;
pub mod figures;
pub mod markdown;
pub mod records;
pub mod write;

use std::collections::BTreeMap;

use serde::Serialize;
use thiserror::Error;

use comments::Language;
use draft::{Body, DraftFile, Placement};

/// What kind of record a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Code(Language),
    Commits,
}

/// One record file, read.
#[derive(Debug, Clone)]
pub struct Record {
    /// How it is cited, without a line: `mlir-air:programming_examples/…/README.md`.
    pub cite: String,
    pub text: String,
    pub format: Format,
}

pub struct Options<'a> {
    /// The trajectory's name (its directory's).
    pub name: &'a str,
    pub model: &'a str,
    pub baseline: &'a str,
    /// The date of sessions whose records carry none; else the latest date found.
    pub date: Option<&'a str>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ImportError {
    #[error("no record to import")]
    NoRecords,
    #[error("the records hold no date (YYYY-MM-DD) to date their sessions; pass --date")]
    NoDate,
    #[error("`{0}` is not a date (YYYY-MM-DD)")]
    BadDate(String),
}

/// The drafted trajectory: file name → text, and what was drafted from what.
#[derive(Debug)]
pub struct Imported {
    pub files: BTreeMap<String, String>,
    pub summary: Vec<RecordSummary>,
}

/// What one record drafted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RecordSummary {
    pub record: String,
    /// The trajectory file it became.
    pub file: String,
    pub sessions: usize,
    pub draft_sessions: usize,
    /// Entries of draft sessions: placed only provisionally.
    pub in_draft_sessions: usize,
    pub observations: usize,
    pub notes: usize,
    /// Draft notes by what they read like (`lesson`, `observe`, or `unclassified`).
    pub drafts: BTreeMap<String, usize>,
    /// Fenced code blocks and code comments that explain nothing, not drafted.
    pub left_out: usize,
}

impl RecordSummary {
    /// Draft notes and draft sessions: what `skillc check` reports as W0061.
    pub fn draft_count(&self) -> usize {
        self.draft_sessions + self.drafts.values().sum::<usize>()
    }

    pub fn entries(&self) -> usize {
        self.observations + self.notes + self.drafts.values().sum::<usize>()
    }
}

/// The file holding the trajectory header.
pub const HEADER_FILE: &str = "00-header.traj";

/// Drafts a trajectory from `records`.
pub fn import(records: &[Record], options: &Options) -> Result<Imported, ImportError> {
    if records.is_empty() {
        return Err(ImportError::NoRecords);
    }
    let date = session_date(records, options.date)?;
    let mut records: Vec<&Record> = records.iter().collect();
    records.sort_by(|a, b| a.cite.cmp(&b.cite));
    let slugs = records::slugs(records.iter().map(|r| r.cite.as_str()));
    let width = records.len().to_string().len().max(2);
    let mut files = BTreeMap::new();
    files.insert(
        HEADER_FILE.to_string(),
        write::header(&write::HeaderFields {
            name: options.name,
            model: options.model,
            baseline: options.baseline,
        }),
    );
    let mut summary = Vec::new();
    for (k, (record, slug)) in records.iter().zip(&slugs).enumerate() {
        let (drafted, left_out) = draft_record(record, &date);
        let file_name = format!("{:0width$}-{slug}.traj", k + 1);
        let mut counts = count(&drafted);
        counts.record = record.cite.clone();
        counts.left_out = left_out;
        if drafted.sessions.is_empty() {
            counts.file = String::new();
        } else {
            counts.file = file_name.clone();
            files.insert(file_name, write::file(&drafted, slug));
        }
        summary.push(counts);
    }
    Ok(Imported { files, summary })
}

/// `--date`, else the latest date in the Markdown and code records, else in the
/// commit files.
fn session_date(records: &[Record], given: Option<&str>) -> Result<String, ImportError> {
    if let Some(date) = given {
        return if dates::is_date(date) {
            Ok(date.to_string())
        } else {
            Err(ImportError::BadDate(date.to_string()))
        };
    }
    let latest = |commits: bool| {
        records
            .iter()
            .filter(|r| (r.format == Format::Commits) == commits)
            .filter_map(|r| dates::latest(&r.text))
            .max()
    };
    latest(false)
        .or_else(|| latest(true))
        .ok_or(ImportError::NoDate)
}

fn draft_record(record: &Record, date: &str) -> (DraftFile, usize) {
    let file_name = record
        .cite
        .rsplit(['/', ':'])
        .next()
        .unwrap_or(&record.cite);
    let (sessions, left_out) = match record.format {
        Format::Markdown => {
            let first = classify::phase_of(file_name);
            let drafted = document::markdown(&record.text, date, file_name, first);
            (drafted.sessions, drafted.code_blocks)
        }
        Format::Commits => commits::sessions(&record.text),
        Format::Code(language) => {
            let (entries, skipped) = comments::notes(&record.text, language);
            let phase = match classify::phase_of_file(file_name) {
                classify::Evidence::Clear(phase) => Placement::Clear(phase),
                _ => Placement::Draft(skillc_runtime::phase::DeployPhase::Reference),
            };
            let sessions = if entries.is_empty() {
                Vec::new()
            } else {
                vec![draft::DraftSession {
                    date: date.to_string(),
                    phase,
                    title: format!("comments of {file_name}"),
                    entries,
                }]
            };
            (sessions, skipped)
        }
    };
    (
        DraftFile {
            cite: record.cite.clone(),
            sessions,
        },
        left_out,
    )
}

fn count(file: &DraftFile) -> RecordSummary {
    let mut s = RecordSummary::default();
    for session in &file.sessions {
        s.sessions += 1;
        if matches!(session.phase, Placement::Draft(_)) {
            s.draft_sessions += 1;
            s.in_draft_sessions += session.entries.len();
        }
        for entry in &session.entries {
            match &entry.body {
                Body::Observe(_) => s.observations += 1,
                Body::Note { draft: None, .. } => s.notes += 1,
                Body::Note {
                    draft: Some(kind), ..
                } => {
                    let key = kind.map_or("unclassified", |k| k.keyword());
                    *s.drafts.entry(key.to_string()).or_default() += 1;
                }
            }
        }
    }
    s
}
