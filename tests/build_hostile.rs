//! Hostile text in a trajectory (template syntax, front-matter fences, tags,
//! backtick runs, Markdown, very long lines, control characters, non-ASCII) comes
//! out of the build literally and leaves every SKILL.md valid.
//!
//! "Literally" is checked by reading the generated Markdown back: every code span
//! and fenced block is extracted the way a CommonMark reader would, and each free
//! text of the trajectory must be one of them, character for character (control
//! characters shown as their Unicode pictures, the one documented change).

use crate::build_support;

use std::collections::BTreeSet;

use build_support::{build, repo};
use skillc::emit::markdown::visible_controls;
use skillc::graph::NodeData;

/// Code spans and fenced blocks of a Markdown document, unescaped.
fn literals(markdown: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let lines: Vec<&str> = markdown.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let fence_len = trimmed.chars().take_while(|c| *c == '`').count();
        if fence_len >= 3 && trimmed[fence_len..].starts_with("text") {
            let fence = "`".repeat(fence_len);
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && lines[i].trim() != fence {
                body.push(lines[i].get(indent..).unwrap_or(""));
                i += 1;
            }
            found.insert(body.join("\n"));
        } else {
            found.extend(code_spans(line));
        }
        i += 1;
    }
    found
}

fn code_spans(line: &str) -> Vec<String> {
    span_ranges(line)
        .into_iter()
        .map(|(text, _)| text)
        .collect()
}

/// A line with its code spans cut out.
fn outside_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut at = 0;
    for (_, range) in span_ranges(line) {
        out.extend(&chars[at..range.start]);
        at = range.end;
    }
    out.extend(&chars[at..]);
    out
}

/// Every code span of a line: its text and the character range it occupies.
fn span_ranges(line: &str) -> Vec<(String, std::ops::Range<usize>)> {
    let chars: Vec<char> = line.chars().collect();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let open = chars[i..].iter().take_while(|c| **c == '`').count();
        let start = i + open;
        let mut j = start;
        let mut closed = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let run = chars[j..].iter().take_while(|c| **c == '`').count();
                if run == open {
                    closed = Some(j);
                    break;
                }
                j += run;
            } else {
                j += 1;
            }
        }
        match closed {
            Some(end) => {
                let mut text: String = chars[start..end].iter().collect();
                if text.len() > 2
                    && text.starts_with(' ')
                    && text.ends_with(' ')
                    && text.trim() != ""
                {
                    text = text[1..text.len() - 1].to_string();
                }
                spans.push((text, i..end + open));
                i = end + open;
            }
            None => i = start,
        }
    }
    spans
}

#[test]
fn free_text_round_trips_literally() {
    let dir = repo("tests/data/build/hostile/hostile");
    let loaded = skillc::graph::load_dirs(std::slice::from_ref(&dir)).expect("load");
    let (_, graph) = &loaded.trajectories[0];
    let mut texts: Vec<String> = Vec::new();
    for (_, node) in graph.nodes() {
        match &node.data {
            NodeData::Note { text, .. } | NodeData::Decision { text } => texts.push(text.clone()),
            NodeData::Lesson(lesson) => {
                texts.push(lesson.title.clone());
                texts.extend(
                    lesson
                        .symptom
                        .iter()
                        .filter_map(|s| s.text.as_ref())
                        .map(|t| t.text.clone()),
                );
                texts.extend(
                    lesson
                        .cause
                        .iter()
                        .filter_map(|c| c.text.as_ref())
                        .map(|t| t.text.clone()),
                );
            }
            _ => {}
        }
    }
    texts.extend(graph.sessions.iter().filter_map(|s| s.title.clone()));
    texts.extend(graph.header.iter().filter_map(|h| h.model.clone()));
    assert!(
        texts.len() >= 6,
        "the hostile trajectory lost its texts: {texts:?}"
    );

    let (built, _) = build(&[dir], None);
    let mut shown = BTreeSet::new();
    for (path, content) in &built.rendered.files {
        if path.ends_with(".md") {
            shown.extend(literals(content));
        }
    }
    for text in &texts {
        assert!(
            shown.contains(&visible_controls(text)),
            "not rendered literally: {text:?}"
        );
    }
}

/// Issue 15 row 13: the header name (newline, HTML, a code fence) lands in every
/// body as a code span; before, it was written raw and a renderer read the rest of
/// the file as a code block.
#[test]
fn row13_a_hostile_header_name_is_escaped_in_every_body() {
    let dir = repo("tests/data/hardening/hostile-name");
    let (built, _) = build(&[dir], Some("hostile-name"));
    let name = visible_controls("evil\n```\n<b>bold</b> _x_").replace('\n', "\u{23CE}");
    let mut cited = 0;
    for (path, content) in &built.rendered.files {
        if !path.ends_with(".md") {
            continue;
        }
        let body = content.splitn(3, "---\n").nth(2).unwrap_or(content);
        cited += usize::from(literals(body).contains(&name));
        let mut open_fence: Option<String> = None;
        for line in body.lines() {
            let trimmed = line.trim();
            if let Some(fence) = &open_fence {
                if trimmed == fence {
                    open_fence = None;
                }
                continue;
            }
            let ticks = trimmed.chars().take_while(|c| *c == '`').count();
            if ticks >= 3 {
                assert_eq!(
                    &trimmed[ticks..],
                    "text",
                    "{path}: a fence the emitter did not write: {line}"
                );
                open_fence = Some("`".repeat(ticks));
                continue;
            }
            let prose = outside_spans(line);
            assert!(
                !prose.contains("<b>") && !prose.contains("_x_"),
                "{path}: raw header name: {line}"
            );
        }
    }
    assert!(cited >= 8, "the name is cited in {cited} bodies");
}

#[test]
fn every_skill_md_keeps_a_valid_header() {
    let (built, _) = build(&[repo("tests/data/build/hostile/hostile")], None);
    for dir in built.rendered.skill_dirs() {
        let content = &built.rendered.files[&format!("{dir}/SKILL.md")];
        let rest = content.strip_prefix("---\n").expect("opens with a fence");
        let (header, body) = rest.split_once("\n---\n").expect("closing fence");
        assert!(
            !header.contains("---"),
            "{dir}: a fence inside the front matter"
        );
        let name = header
            .lines()
            .find_map(|l| l.strip_prefix("name: \""))
            .and_then(|l| l.strip_suffix('"'))
            .expect("name");
        assert_eq!(name, dir);
        assert!(
            name.len() <= 64
                && !name.contains("--")
                && !name.starts_with('-')
                && !name.ends_with('-')
        );
        assert!(name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
        let description = header
            .lines()
            .find_map(|l| l.strip_prefix("description: "))
            .expect("description");
        assert!(
            !description.contains('<') && !description.contains('>'),
            "{dir}: {description}"
        );
        assert!(description.chars().count() <= 1024 + 2 + description.matches('\\').count() * 6);
        assert!(body.lines().count() < 500, "{dir}");
        for line in header
            .lines()
            .skip_while(|l| !l.starts_with("metadata:"))
            .skip(1)
        {
            assert!(
                line.starts_with("  ") && line.contains(": \""),
                "{dir}: metadata `{line}` is not a string"
            );
        }
    }
}
