//! Markdown records cut into the blocks the importer classifies, each with the
//! lines it came from: headings, pipe tables, list items and paragraphs. Fenced code
//! is recognised so that nothing inside it is read as a heading or a table, and is
//! kept only as a count. This is the subset of Markdown deployment notes use (ATX
//! headings, `|` tables, `-`/`*`/`1.` lists); anything else reads as a paragraph.

/// One block of a Markdown text. Lines are 1-based and inclusive.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Heading {
        level: usize,
        text: String,
        line: u32,
    },
    Table(Table),
    /// A list item or a paragraph, its lines joined.
    Text {
        text: String,
        first: u32,
        last: u32,
        bullet: bool,
    },
    /// A fenced code block: never read, only counted.
    Code {
        first: u32,
        last: u32,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// The header row's cells (empty when the table has no separator row).
    pub header: Vec<String>,
    pub rows: Vec<Row>,
    pub first: u32,
    pub last: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub cells: Vec<String>,
    pub line: u32,
}

/// The blocks of `text`, in order; `first_line` is the line number of its first line
/// (a commit message starts inside a larger file).
pub fn blocks(text: &str, first_line: u32) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let number = |i: usize| first_line + i as u32;
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim();
        if let Some(fence) = fence(trimmed) {
            let start = i;
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with(fence) {
                i += 1;
            }
            let end = i.min(lines.len() - 1);
            out.push(Block::Code {
                first: number(start),
                last: number(end),
            });
            i += 1;
        } else if trimmed.is_empty() || is_rule(trimmed) {
            i += 1;
        } else if let Some((level, text)) = heading(trimmed) {
            out.push(Block::Heading {
                level,
                text,
                line: number(i),
            });
            i += 1;
        } else if trimmed.starts_with('|') {
            let start = i;
            while i < lines.len() && lines[i].trim().starts_with('|') {
                i += 1;
            }
            out.push(Block::Table(table(&lines[start..i], number(start))));
        } else {
            let bullet = bullet(line).is_some();
            let start = i;
            let mut parts = vec![if bullet { bullet_text(line) } else { trimmed }];
            i += 1;
            while i < lines.len() && continues(lines[i]) {
                parts.push(lines[i].trim());
                i += 1;
            }
            out.push(Block::Text {
                text: clean(&parts.join(" ")),
                first: number(start),
                last: number(i - 1),
                bullet,
            });
        }
    }
    out
}

/// Whether `line` continues the list item or paragraph above it.
fn continues(line: &str) -> bool {
    let trimmed = line.trim();
    !trimmed.is_empty()
        && bullet(line).is_none()
        && heading(trimmed).is_none()
        && fence(trimmed).is_none()
        && !trimmed.starts_with('|')
        && !is_rule(trimmed)
}

fn fence(trimmed: &str) -> Option<&'static str> {
    ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f))
}

fn is_rule(trimmed: &str) -> bool {
    trimmed.len() >= 3
        && ["-", "*", "_"]
            .iter()
            .any(|c| trimmed.chars().all(|x| x.to_string() == *c || x == ' '))
}

/// `## Title ##` → (2, "Title").
fn heading(trimmed: &str) -> Option<(usize, String)> {
    let level = trimmed.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &trimmed[level..];
    if !rest.is_empty() && !rest.starts_with(' ') {
        return None;
    }
    let text = rest.trim().trim_end_matches('#').trim();
    Some((level, clean(text)))
}

/// The marker of a list item (`-`, `*`, `+`, `1.`, `1)`), if `line` starts one.
fn bullet(line: &str) -> Option<usize> {
    let trimmed = line.trim_start();
    let indent = line.len() - trimmed.len();
    let marker = if trimmed.starts_with(['-', '*', '+']) {
        1
    } else {
        let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
        let closes = trimmed[digits..].starts_with(['.', ')']);
        if digits == 0 || digits > 3 || !closes {
            return None;
        }
        digits + 1
    };
    trimmed[marker..]
        .starts_with(' ')
        .then_some(indent + marker)
}

fn bullet_text(line: &str) -> &str {
    bullet(line).map_or(line, |at| line[at..].trim())
}

fn table(lines: &[&str], first: u32) -> Table {
    let rows: Vec<(Vec<String>, u32)> = lines
        .iter()
        .enumerate()
        .map(|(i, line)| (cells(line), first + i as u32))
        .collect();
    let separator = rows.get(1).is_some_and(|(cells, _)| is_separator(cells));
    let (header, body) = if separator {
        (rows[0].0.clone(), &rows[2..])
    } else {
        (Vec::new(), &rows[..])
    };
    Table {
        header,
        rows: body
            .iter()
            .filter(|(cells, _)| !is_separator(cells))
            .map(|(cells, line)| Row {
                cells: cells.clone(),
                line: *line,
            })
            .collect(),
        first,
        last: first + lines.len() as u32 - 1,
    }
}

fn is_separator(cells: &[String]) -> bool {
    !cells.is_empty()
        && cells.iter().all(|c| {
            !c.is_empty() && c.chars().all(|x| matches!(x, '-' | ':' | ' ')) && c.contains('-')
        })
}

/// The cells of a `| a | b |` line; `\|` stays inside its cell.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                current.push('|');
                chars.next();
            }
            '|' => out.push(clean(&std::mem::take(&mut current))),
            _ => current.push(c),
        }
    }
    out.push(clean(&current));
    out
}

/// Text without Markdown emphasis markers and with whitespace runs collapsed.
pub fn clean(text: &str) -> String {
    let text = text.replace("**", "").replace("__", "");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_keep_their_lines() {
        let text = "# Title\n\nA paragraph\nover two lines.\n\n- item one\n  continued\n- item two\n\n| A | B |\n|---|---|\n| x | **1.5 s** |\n\n```\n# not a heading\n```\n## Next ##\n";
        let b = blocks(text, 1);
        assert_eq!(
            b[0],
            Block::Heading {
                level: 1,
                text: "Title".into(),
                line: 1
            }
        );
        assert_eq!(
            b[1],
            Block::Text {
                text: "A paragraph over two lines.".into(),
                first: 3,
                last: 4,
                bullet: false
            }
        );
        assert_eq!(
            b[2],
            Block::Text {
                text: "item one continued".into(),
                first: 6,
                last: 7,
                bullet: true
            }
        );
        let Block::Table(table) = &b[4] else {
            panic!("{b:?}")
        };
        assert_eq!(table.header, vec!["A", "B"]);
        assert_eq!(table.rows[0].cells, vec!["x", "1.5 s"]);
        assert_eq!(table.rows[0].line, 12);
        assert_eq!(
            b[5],
            Block::Code {
                first: 14,
                last: 16
            }
        );
        assert_eq!(
            b[6],
            Block::Heading {
                level: 2,
                text: "Next".into(),
                line: 17
            }
        );
    }

    #[test]
    fn an_unclosed_fence_runs_to_the_end() {
        assert_eq!(
            blocks("text\n```\ncode", 10),
            vec![
                Block::Text {
                    text: "text".into(),
                    first: 10,
                    last: 10,
                    bullet: false
                },
                Block::Code {
                    first: 11,
                    last: 12
                }
            ]
        );
    }
}
