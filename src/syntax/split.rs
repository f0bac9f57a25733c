//! Splits a file into item pieces before pest sees it. An item starts at a line whose
//! first token is `trajectory`, `session`, `skill` or `<id> <kind>` outside a `"""` block; the
//! grammar guarantees no other line of a valid item can look like that, so a valid file
//! splits into pieces that each parse, and a broken item costs one diagnostic without
//! hiding the next ones. The scan is linear and also bounds bracket nesting, which
//! keeps the recursive tree conversion far from the stack limit.

use std::ops::Range;

/// Deepest `[`/`(` nesting accepted; real trajectories use two or three levels.
pub const MAX_NESTING: usize = 32;

/// One piece of a file to parse on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub range: Range<usize>,
    /// Byte offset of the first bracket that went deeper than [`MAX_NESTING`].
    pub too_deep_at: Option<usize>,
}

const KINDS: &[&str] = &["action", "observe", "lesson", "note", "decision"];

/// Words that can never be an entry id: the language's keywords.
pub fn is_reserved(word: &str) -> bool {
    skillc_runtime::ops::is_keyword(word)
}

pub fn split(text: &str) -> Vec<Piece> {
    let bytes = text.as_bytes();
    let mut starts = Vec::new();
    let mut in_block = false;
    let mut line_start = 0;
    while line_start < bytes.len() {
        let line_end = memchr_newline(bytes, line_start).unwrap_or(bytes.len());
        if !in_block {
            let indent = bytes[line_start..line_end]
                .iter()
                .take_while(|b| **b == b' ' || **b == b'\t')
                .count();
            if starts_item(&bytes[line_start + indent..line_end]) {
                starts.push(line_start + indent);
            }
        }
        in_block = scan_line(&bytes[line_start..line_end], in_block);
        line_start = line_end + 1;
    }

    let mut pieces = Vec::with_capacity(starts.len() + 1);
    let first = starts.first().copied().unwrap_or(bytes.len());
    if !is_trivia(&text[..first]) {
        pieces.push(0..first);
    }
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(bytes.len());
        pieces.push(start..end);
    }
    pieces
        .into_iter()
        .map(|range| Piece {
            too_deep_at: too_deep(&bytes[range.clone()]).map(|at| range.start + at),
            range,
        })
        .collect()
}

fn memchr_newline(bytes: &[u8], from: usize) -> Option<usize> {
    bytes[from..]
        .iter()
        .position(|b| *b == b'\n')
        .map(|i| from + i)
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.'
}

/// The leading word of `line` and the rest after it.
fn leading_word(line: &[u8]) -> (&[u8], &[u8]) {
    let len = line.iter().take_while(|b| is_word_byte(**b)).count();
    line.split_at(len)
}

/// What the piece starting at `text` opens: used to keep track of items that fail to
/// parse.
pub fn item_kind(text: &str) -> super::UnparsedKind {
    let bytes = text.as_bytes();
    let (word, _) = leading_word(bytes);
    if !starts_item(bytes) {
        return super::UnparsedKind::Other;
    }
    match word {
        b"trajectory" => super::UnparsedKind::Header,
        b"session" => super::UnparsedKind::Session,
        b"skill" => {
            let rest = &bytes[word.len()..];
            let spaces = rest
                .iter()
                .take_while(|b| **b == b' ' || **b == b'\t')
                .count();
            let (name, _) = leading_word(&rest[spaces..]);
            super::UnparsedKind::Skill {
                name: String::from_utf8_lossy(name).into_owned(),
            }
        }
        _ => super::UnparsedKind::Entry {
            id: String::from_utf8_lossy(word).into_owned(),
        },
    }
}

fn starts_item(line: &[u8]) -> bool {
    let (word, rest) = leading_word(line);
    if word.is_empty() || !word[0].is_ascii_alphabetic() {
        return false;
    }
    if word == b"trajectory" || word == b"session" || word == b"skill" {
        return true;
    }
    if std::str::from_utf8(word).is_ok_and(is_reserved) {
        return false;
    }
    let spaces = rest
        .iter()
        .take_while(|b| **b == b' ' || **b == b'\t')
        .count();
    if spaces == 0 {
        return false;
    }
    let (kind, _) = leading_word(&rest[spaces..]);
    KINDS.iter().any(|k| k.as_bytes() == kind)
}

/// Whether a `"""` block is still open at the end of the line.
fn scan_line(line: &[u8], mut in_block: bool) -> bool {
    let mut i = 0;
    while i < line.len() {
        if in_block {
            if line[i..].starts_with(b"\"\"\"") {
                in_block = false;
                i += 3;
            } else {
                i += 1;
            }
            continue;
        }
        match line[i] {
            b'#' => break,
            b'"' if line[i..].starts_with(b"\"\"\"") => {
                in_block = true;
                i += 3;
            }
            b'"' => i = skip_string(line, i + 1),
            _ => i += 1,
        }
    }
    in_block
}

/// Index just past the closing quote of a one-line string that opened before `i`.
fn skip_string(line: &[u8], mut i: usize) -> usize {
    while i < line.len() {
        match line[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    line.len()
}

/// Only whitespace and comments.
fn is_trivia(text: &str) -> bool {
    text.lines().all(|line| {
        let line = line.trim_start();
        line.is_empty() || line.starts_with('#')
    })
}

/// Offset of the first bracket nested deeper than [`MAX_NESTING`], ignoring strings
/// and comments.
fn too_deep(piece: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    let mut in_block = false;
    while i < piece.len() {
        let b = piece[i];
        if in_block {
            if piece[i..].starts_with(b"\"\"\"") {
                in_block = false;
                i += 3;
            } else {
                i += 1;
            }
            continue;
        }
        match b {
            b'#' => {
                i = memchr_newline(piece, i).unwrap_or(piece.len());
            }
            b'"' if piece[i..].starts_with(b"\"\"\"") => {
                in_block = true;
                i += 3;
            }
            b'"' => {
                let line_end = memchr_newline(piece, i).unwrap_or(piece.len());
                i += skip_string(&piece[i..line_end], 1);
            }
            b'[' | b'(' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(i);
                }
                i += 1;
            }
            b']' | b')' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece_texts(text: &str) -> Vec<&str> {
        split(text).into_iter().map(|p| &text[p.range]).collect()
    }

    #[test]
    fn splits_at_item_starts_only() {
        let text = "# lead\ntrajectory \"t\"\n  model \"m\"\nsession 2026-01-01 phase 0\n  a1 action check-scope\n  after a0\n  n2 note \"\"\"\nx1 action not-an-item\n\"\"\"\n";
        assert_eq!(
            piece_texts(text),
            vec![
                "trajectory \"t\"\n  model \"m\"\n",
                "session 2026-01-01 phase 0\n  ",
                "a1 action check-scope\n  after a0\n  ",
                "n2 note \"\"\"\nx1 action not-an-item\n\"\"\"\n",
            ]
        );
    }

    #[test]
    fn leading_garbage_is_its_own_piece() {
        assert_eq!(
            piece_texts("oops\na1 note \"x\""),
            vec!["oops\n", "a1 note \"x\""]
        );
    }

    #[test]
    fn deep_nesting_is_flagged() {
        let text = format!("a1 action x p={}", "[".repeat(MAX_NESTING + 1));
        let pieces = split(&text);
        assert_eq!(
            pieces[0].too_deep_at,
            Some("a1 action x p=".len() + MAX_NESTING)
        );
    }
}
