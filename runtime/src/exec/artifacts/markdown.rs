//! Text from a bundle or a model file in report.md, shown as written and
//! nothing more: a name made of plain characters reads as prose, anything else
//! becomes a code span whose fence outlasts every backtick run in it, with line
//! breaks and control characters shown as visible pictures. A trajectory named
//! "x\n# Heading" or "```" cannot open a heading, a tag or a fence that
//! swallows the rest of the report.

/// Longest name shown inline; longer ones are code spans anyway.
const PLAIN_MAX_CHARS: usize = 160;

/// `text` unchanged when it holds only letters, digits, spaces inside and
/// `-._+/:(),`, otherwise a code span.
pub fn name(text: &str) -> String {
    let plain = !text.is_empty()
        && text.trim() == text
        && text.chars().count() <= PLAIN_MAX_CHARS
        && text.chars().all(|c| {
            c.is_alphanumeric()
                || matches!(c, '-' | '.' | '_' | '+' | '/' | ':' | ' ' | '(' | ')' | ',')
        });
    if plain {
        text.to_string()
    } else {
        code_span(text)
    }
}

/// `text` as one code span on one line.
pub fn code_span(text: &str) -> String {
    let text: String = text
        .chars()
        .map(|c| match c {
            '\n' => '\u{23CE}',
            '\u{7f}' => '\u{2421}',
            c if (c as u32) < 0x20 => char::from_u32(0x2400 + c as u32).unwrap_or('\u{FFFD}'),
            c => c,
        })
        .collect();
    if text.is_empty() {
        return "*(empty)*".to_string();
    }
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    // A span starting or ending with a backtick (or with spaces at both ends,
    // which CommonMark strips) needs a space inside each fence.
    let pad = text.starts_with('`')
        || text.ends_with('`')
        || (text.starts_with(' ') && text.ends_with(' '));
    if pad {
        format!("{fence} {text} {fence}")
    } else {
        format!("{fence}{text}{fence}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_stay_and_hostile_ones_become_one_line_spans() {
        assert_eq!(name("llama1b (Llama-3.2-1B)"), "llama1b (Llama-3.2-1B)");
        assert_eq!(name("a\n# Heading"), "`a⏎# Heading`");
        assert_eq!(name("<b>x</b>"), "`<b>x</b>`");
        assert_eq!(name("```"), "```` ``` ````");
        assert_eq!(code_span("a `b` c"), "``a `b` c``");
        assert_eq!(code_span(""), "*(empty)*");
        assert!(!name(&format!("x\n{}", "`".repeat(5))).contains('\n'));
    }
}
