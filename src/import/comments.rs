//! Code comments that explain a fix → notes. A comment block is a run of
//! full-line comments (`#` in Python, `//` or `/* */` in C and C++), joined with a
//! trailing comment on the code line just above it; banners (`# ----`) are dropped
//! and licence headers skipped. A block is kept when it explains something
//! (`classify::explains`: a `NOTE`/`FIX`/`WORKAROUND` marker, or a symptom, cause
//! or fix word) and drafted as `note draft lesson` when it reads like a lesson.

use super::classify::explains;
use super::document::text_entry;
use super::draft::DraftEntry;

/// The comment syntax of a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Python,
    /// C, C++ and headers: `//` and `/* */`.
    CFamily,
}

/// A comment block with its lines (1-based, inclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub text: String,
    pub first: u32,
    pub last: u32,
}

/// Fewest words a kept comment has.
const MIN_WORDS: usize = 4;

/// The notes a source file's comments draft, and how many blocks were left out.
pub fn notes(text: &str, language: Language) -> (Vec<DraftEntry>, usize) {
    let blocks = comments(text, language);
    let mut out = Vec::new();
    let mut skipped = 0;
    for c in blocks {
        let licence = c.text.contains("Copyright") || c.text.contains("SPDX-License");
        if !licence && c.text.split_whitespace().count() >= MIN_WORDS && explains(&c.text) {
            out.push(text_entry(c.text, c.first, c.last));
        } else {
            skipped += 1;
        }
    }
    (out, skipped)
}

/// Every comment block of `text`, in order.
pub fn comments(text: &str, language: Language) -> Vec<Comment> {
    let mut out: Vec<Comment> = Vec::new();
    let mut open: Option<Comment> = None;
    let mut in_block_comment = false;
    for (i, line) in text.lines().enumerate() {
        let number = i as u32 + 1;
        let trimmed = line.trim();
        let (full, trailing) = if in_block_comment {
            let (inside, closed) = match trimmed.find("*/") {
                Some(at) => (&trimmed[..at], true),
                None => (trimmed, false),
            };
            in_block_comment = !closed;
            (Some(inside.trim_start_matches('*').trim()), None)
        } else {
            split_comment(trimmed, language, &mut in_block_comment)
        };
        match (full, trailing) {
            (Some(comment), _) => {
                let block = open.get_or_insert_with(|| Comment {
                    text: String::new(),
                    first: number,
                    last: number,
                });
                block.last = number;
                add(&mut block.text, comment);
            }
            (None, trailing) => {
                out.extend(open.take());
                if let Some(comment) = trailing {
                    let mut block = Comment {
                        text: String::new(),
                        first: number,
                        last: number,
                    };
                    add(&mut block.text, comment);
                    open = Some(block);
                }
            }
        }
    }
    out.extend(open);
    out.retain(|c| !c.text.is_empty());
    out
}

/// Adds a comment line's words; banners carry none.
fn add(text: &mut String, line: &str) {
    let banner = line
        .chars()
        .all(|c| matches!(c, '-' | '=' | '#' | '*' | '/' | '~' | ' '));
    if banner {
        return;
    }
    for word in line.split_whitespace() {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(word);
    }
}

/// A line as (a full-line comment's text, a trailing comment's text).
fn split_comment<'a>(
    trimmed: &'a str,
    language: Language,
    in_block_comment: &mut bool,
) -> (Option<&'a str>, Option<&'a str>) {
    let marker = match language {
        Language::Python => "#",
        Language::CFamily => "//",
    };
    if language == Language::Python && trimmed.starts_with("#!") {
        return (None, None);
    }
    if let Some(rest) = trimmed.strip_prefix(marker) {
        return (Some(rest.trim_start_matches(marker).trim()), None);
    }
    if language == Language::CFamily {
        if let Some(rest) = trimmed.strip_prefix("/*") {
            let (inside, closed) = match rest.find("*/") {
                Some(at) => (&rest[..at], true),
                None => (rest, false),
            };
            *in_block_comment = !closed;
            return (Some(inside.trim_start_matches('*').trim()), None);
        }
    }
    (None, trailing(trimmed, marker))
}

/// A comment after code on the same line, outside string literals.
fn trailing<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if line[i..].starts_with(marker) => {
                return Some(line[i + marker.len()..].trim());
            }
            None => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_join_runs_and_the_trailing_comment_above() {
        let text = "# ------\n# Why split? Down is NaN\n#   unless it runs first.\nx = 1\ny = (2, 2)  # m_input=2 (NOT 1):\n# the repeat count overflows\nz = \"# not a comment\"\n";
        let c = comments(text, Language::Python);
        assert_eq!(
            c,
            vec![
                Comment {
                    text: "Why split? Down is NaN unless it runs first.".into(),
                    first: 1,
                    last: 3
                },
                Comment {
                    text: "m_input=2 (NOT 1): the repeat count overflows".into(),
                    first: 5,
                    last: 6
                },
            ]
        );
    }

    #[test]
    fn c_family_block_comments() {
        let text = "int a; // NOTE: keep this aligned\nint c;\n/* first\n * second */\nint b; // see \"http://x\"\n";
        let c = comments(text, Language::CFamily);
        assert_eq!(c[0].text, "NOTE: keep this aligned");
        assert_eq!(
            (c[1].text.as_str(), c[1].first, c[1].last),
            ("first second", 3, 4)
        );
        assert_eq!(c[2].text, "see \"http://x\"");
    }
}
