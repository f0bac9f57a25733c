//! A file of commit messages (`=== <sha> <YYYY-MM-DD>` then the message, as
//! `git log` prints them with that format) → one session per commit, dated by the
//! commit and titled by its subject, in date order (the file's order breaks ties,
//! newest-first files read oldest first). The subject's words place the session
//! (`classify`). The message is one note (its paragraphs and list items, cited by
//! their line range), except what the Markdown rules draft on their own: tables
//! of figures as observations, and paragraphs that read like a lesson as `note
//! draft lesson` about the commit's note. A commit without a body is one note: its
//! subject. Trailer lines (`Signed-off-by:`, `Co-authored-by:`) are left out.

use skillc_runtime::phase::DeployPhase;

use super::classify::{phase_of, Evidence};
use super::document::{append, text_entry};

use super::draft::{Condition, DraftEntry, DraftSession, Placement};
use super::figures::{self, conditions_in};
use super::markdown::{blocks, Block};

/// One commit of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub sha: String,
    pub date: String,
    /// The `===` line.
    pub line: u32,
    pub subject: String,
    pub subject_line: u32,
    /// The message after the subject, with the line its first line has.
    pub body: String,
    pub body_line: u32,
}

/// Whether `text` is a commit-message file: its first non-empty line is a `===`
/// line.
pub fn is_commit_file(text: &str) -> bool {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| header(l).is_some())
}

/// `=== <sha> <date>` → (sha, date).
fn header(line: &str) -> Option<(String, String)> {
    let mut parts = line.strip_prefix("=== ")?.split_whitespace();
    let (sha, date) = (parts.next()?, parts.next()?);
    let hex = sha.len() >= 7 && sha.chars().all(|c| c.is_ascii_hexdigit());
    (hex && super::dates::is_date(date) && parts.next().is_none())
        .then(|| (sha.to_string(), date.to_string()))
}

/// The commits of the file, in file order.
pub fn parse(text: &str) -> Vec<Commit> {
    let lines: Vec<&str> = text.lines().collect();
    let starts: Vec<usize> = (0..lines.len())
        .filter(|&i| header(lines[i]).is_some())
        .collect();
    let mut out = Vec::new();
    for (k, &start) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(lines.len());
        let Some((sha, date)) = header(lines[start]) else {
            continue;
        };
        let message = &lines[start + 1..end];
        let Some(offset) = message.iter().position(|l| !l.trim().is_empty()) else {
            continue;
        };
        let body: Vec<&str> = message[offset + 1..]
            .iter()
            .map(|l| if is_trailer(l) { "" } else { l })
            .collect();
        out.push(Commit {
            sha,
            date,
            line: start as u32 + 1,
            subject: message[offset].trim().to_string(),
            subject_line: (start + offset) as u32 + 2,
            body: body.join("\n"),
            body_line: (start + offset) as u32 + 3,
        });
    }
    out
}

fn is_trailer(line: &str) -> bool {
    let line = line.trim_start().to_lowercase();
    ["signed-off-by:", "co-authored-by:", "reviewed-by:"]
        .iter()
        .any(|t| line.starts_with(t))
}

/// A commit's entries: the note of its message first, then what is drafted apart
/// (whose `about` indexes count the message's note as 0).
fn message_entries(commit: &Commit, inherited: &[(String, Condition)]) -> (Vec<DraftEntry>, usize) {
    let mut paragraphs: Vec<String> = Vec::new();
    let mut lines: Option<(u32, u32)> = None;
    let mut entries = vec![DraftEntry::note(String::new(), 0, 0, None)];
    let mut code = 0;
    for block in blocks(&commit.body, commit.body_line) {
        let (text, first, last) = match block {
            Block::Heading { text, line, .. } => (text, line, line),
            Block::Text {
                text, first, last, ..
            } => (text, first, last),
            Block::Table(table) => {
                append(&mut entries, figures::table(&table, inherited));
                continue;
            }
            Block::Code { .. } => {
                code += 1;
                continue;
            }
        };
        let mut entry = text_entry(text, first, last);
        if entry.is_draft() {
            entry.about = Some(0);
            entries.push(entry);
        } else if let super::draft::Body::Note { text, .. } = entry.body {
            keep(&mut paragraphs, &mut lines, text, first, last);
        }
    }
    let (text, (first, last)) = match lines {
        Some(lines) => (paragraphs.join("\n\n"), lines),
        None => (
            commit.subject.clone(),
            (commit.subject_line, commit.subject_line),
        ),
    };
    entries[0] = DraftEntry::note(text, first, last, None);
    (entries, code)
}

fn keep(
    paragraphs: &mut Vec<String>,
    lines: &mut Option<(u32, u32)>,
    text: String,
    first: u32,
    last: u32,
) {
    paragraphs.push(text);
    let (start, _) = lines.get_or_insert((first, last));
    *lines = Some((*start, last));
}

/// The sessions of a commit file, oldest first, and the fenced code blocks left out.
pub fn sessions(text: &str) -> (Vec<DraftSession>, usize) {
    let mut commits = parse(text);
    // Files list the newest first: at equal dates the later line is the older commit.
    commits.sort_by(|a, b| a.date.cmp(&b.date).then(b.line.cmp(&a.line)));
    let mut last_placed = DeployPhase::Reference;
    let mut code = 0;
    let mut out = Vec::new();
    for commit in commits {
        let phase = match phase_of(&commit.subject) {
            Evidence::Clear(phase) => {
                last_placed = phase;
                Placement::Clear(phase)
            }
            Evidence::None | Evidence::Conflicting => Placement::Draft(last_placed),
        };
        let (entries, skipped) = message_entries(&commit, &conditions_in(&commit.subject));
        code += skipped;
        out.push(DraftSession {
            date: commit.date,
            phase,
            title: format!("{} (commit {})", commit.subject, short(&commit.sha)),
            entries,
        });
    }
    (out, code)
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_read_oldest_first_with_their_lines() {
        let text = "=== bbbbbbb 2026-06-05\n[llms] Decode fix\n\nThe body.\n\nSigned-off-by: x\n=== aaaaaaa 2026-06-04\nSubject only\n";
        assert!(is_commit_file(text));
        let commits = parse(text);
        assert_eq!(commits[0].subject_line, 2);
        assert_eq!(commits[0].body_line, 3);
        let (sessions, _) = sessions(text);
        assert_eq!(sessions[0].date, "2026-06-04");
        assert_eq!(sessions[0].entries[0].first, 8);
        assert_eq!(sessions[1].phase, Placement::Clear(DeployPhase::Decode));
        assert_eq!(sessions[1].entries.len(), 1);
        assert_eq!(sessions[1].entries[0].first, 4);
        assert!(!is_commit_file("# README\n=== abcdefa 2026-01-01\n"));
    }
}
