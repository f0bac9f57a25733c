//! Literal text in Markdown. Free text from trajectories (symptoms, causes, notes,
//! string parameters) is shown exactly as written: inside a code span when it is one
//! short line, inside a fenced code block otherwise, with fences longer than any run
//! of backticks in the text. Nothing a trajectory says can open a heading, a tag, a
//! template expression or close a fence.
//!
//! The only change made to the characters: C0 control characters other than tab and
//! newline (and DEL) become their visible Unicode control pictures (U+2400…), because
//! a bare carriage return or form feed would end a line for some readers and not for
//! others.

/// Longest text put inline in a code span; longer text goes in a fenced block.
const INLINE_MAX_CHARS: usize = 160;

/// `text` as Markdown that renders to exactly `text`, placed either inline or as a
/// fenced block starting on the next line with every line indented by `indent`
/// spaces (the content column of the enclosing list item).
pub fn literal(text: &str, indent: usize) -> String {
    let text = visible_controls(text);
    if text.contains('\n') || text.chars().count() > INLINE_MAX_CHARS {
        format!("\n{}", fenced_block(&text, indent))
    } else {
        code_span(&text)
    }
}

/// Text as one line of Markdown prose that renders as written: whitespace runs become
/// one space and the characters that could open markup or an entity are escaped. For
/// titles in headings and lists, where a code span would read badly.
pub fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, word) in visible_controls(text).split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        for c in word.chars() {
            if matches!(
                c,
                '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '&' | '#'
            ) {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out
}

/// One-line text as a code span. Newlines are shown as `⏎` so the span stays on one
/// line; callers with multi-line text use [`literal`].
pub fn code_span(text: &str) -> String {
    // Most spans (ids, paths, operations) need no change at all.
    if !text.is_empty()
        && !text.starts_with(' ')
        && !text.bytes().any(|b| b == b'`' || b < 0x20 || b == 0x7f)
        && !text.contains(super::cite::MARKERS)
    {
        return format!("`{text}`");
    }
    let text = visible_controls(text).replace('\n', "\u{23CE}");
    if text.is_empty() {
        return "*(empty)*".to_string();
    }
    let fence = "`".repeat(longest_backtick_run(&text) + 1);
    // CommonMark strips one space from each side of a span when both are present,
    // and a span starting or ending with a backtick needs a separating space.
    let pad = text.starts_with('`')
        || text.ends_with('`')
        || (text.starts_with(' ') && text.ends_with(' ') && text.trim() != "");
    if pad {
        format!("{fence} {text} {fence}")
    } else {
        format!("{fence}{text}{fence}")
    }
}

/// A name inside a sentence: unchanged when it holds nothing a Markdown reader
/// treats specially (letters, digits, `-`, `.`, `+`, `/`, `:` and inner spaces),
/// otherwise a code span, so an ordinary name reads as prose and a hostile one
/// cannot open a fence, a tag or a new line.
pub fn inline_name(text: &str) -> String {
    let plain = !text.is_empty()
        && text.trim() == text
        && text.chars().count() <= INLINE_MAX_CHARS
        && text
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '.' | '+' | '/' | ':' | ' '));
    if plain {
        text.to_string()
    } else {
        code_span(text)
    }
}

/// A fenced code block (info string `text`) holding `text` verbatim.
pub fn fenced_block(text: &str, indent: usize) -> String {
    let text = visible_controls(text);
    let fence = "`".repeat((longest_backtick_run(&text) + 1).max(3));
    let pad = " ".repeat(indent);
    let mut out = format!("{pad}{fence}text\n");
    for line in text.split('\n') {
        if !line.is_empty() {
            out.push_str(&pad);
            out.push_str(line);
        }
        out.push('\n');
    }
    out.push_str(&pad);
    out.push_str(&fence);
    out
}

fn longest_backtick_run(text: &str) -> usize {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    longest
}

/// Replaces control characters other than `\t` and `\n` by their control pictures,
/// and the emitter's link markers by U+FFFD (trajectory text never becomes a link).
pub fn visible_controls(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' | '\n' => c,
            c if super::cite::MARKERS.contains(&c) => '\u{FFFD}',
            '\u{7f}' => '\u{2421}',
            c if (c as u32) < 0x20 => char::from_u32(0x2400 + c as u32).unwrap_or('\u{FFFD}'),
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Reads a code span back the way CommonMark does.
    fn read_span(span: &str) -> String {
        let fence = span.chars().take_while(|c| *c == '`').count();
        let inner = &span[fence..span.len() - fence];
        match inner.strip_prefix(' ').and_then(|i| i.strip_suffix(' ')) {
            Some(stripped) if inner.trim() != "" => stripped.to_string(),
            _ => inner.to_string(),
        }
    }

    /// Reads a fenced block back: the lines between the fences, indent removed.
    fn read_block(block: &str, indent: usize) -> String {
        let lines: Vec<&str> = block.trim_start_matches('\n').split('\n').collect();
        lines[1..lines.len() - 1]
            .iter()
            .map(|l| l.get(indent..).unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n")
    }

    proptest! {
        #[test]
        fn literal_text_reads_back_unchanged(text in "(?s).{1,300}", indent in 0usize..6) {
            let shown = literal(&text, indent);
            let read = if shown.starts_with('\n') {
                read_block(&shown, indent)
            } else {
                read_span(&shown)
            };
            prop_assert_eq!(read, visible_controls(&text));
        }

        #[test]
        fn backtick_heavy_text_reads_back_unchanged(text in "[`a ]{1,40}") {
            prop_assert_eq!(read_span(&code_span(&text)), text);
        }
    }

    #[test]
    fn code_span_outlasts_backticks_in_the_text() {
        assert_eq!(code_span("a `b` c"), "``a `b` c``");
        assert_eq!(code_span("`x`"), "`` `x` ``");
        assert_eq!(code_span("``"), "``` `` ```");
        assert_eq!(code_span(""), "*(empty)*");
    }

    #[test]
    fn long_or_multiline_text_becomes_a_fenced_block() {
        let block = literal("line 1\n```\nline 3", 2);
        assert_eq!(block, "\n  ````text\n  line 1\n  ```\n  line 3\n  ````");
        assert!(literal(&"x".repeat(200), 0).starts_with("\n```text\nxxx"));
    }

    #[test]
    fn inline_text_escapes_markup() {
        assert_eq!(inline("a <b>\n# c_d"), "a \\<b\\> \\# c\\_d");
    }

    #[test]
    fn names_stay_plain_unless_markdown_would_read_them() {
        assert_eq!(inline_name("llama1b+qwen-0.5b"), "llama1b+qwen-0.5b");
        assert_eq!(
            inline_name("a\n```\n<b>x</b>"),
            "````a\u{23CE}```\u{23CE}<b>x</b>````"
        );
        assert_eq!(inline_name("_emphasis_"), "`_emphasis_`");
        assert_eq!(inline_name(""), "*(empty)*");
    }

    #[test]
    fn control_characters_become_visible() {
        assert_eq!(visible_controls("a\rb\u{0}c\td"), "a\u{240D}b\u{2400}c\td");
    }
}
