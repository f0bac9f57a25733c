//! YAML front matter of a SKILL.md, written so that any text survives: the Agent
//! Skills spec wants `name` equal to the directory name (lowercase a-z0-9 and single
//! hyphens, at most 64 characters), a `description` of at most 1024 characters with
//! no `<` or `>`, and everything else under `metadata` as strings.
//!
//! Values are always double-quoted YAML scalars with escapes, so `: `, `#`, quotes,
//! braces, non-ASCII and newlines are data. Validators find the end of the front
//! matter by the first `---` after the opening one, so a run of three hyphens inside
//! a value is written with an escaped hyphen (`\x2d`), which YAML decodes back.

use std::collections::BTreeMap;

pub use crate::graph::skills::{skill_name, NAME_MAX_CHARS};

pub const DESCRIPTION_MAX_CHARS: usize = 1024;

/// The parsed form of the header, before writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontMatter {
    pub name: String,
    pub description: String,
    pub metadata: BTreeMap<String, String>,
}

impl FrontMatter {
    /// The `---`-fenced header, ending with a newline.
    pub fn render(&self) -> String {
        let mut out = String::from("---\n");
        out.push_str(&format!("name: {}\n", yaml_quoted(&self.name)));
        out.push_str(&format!(
            "description: {}\n",
            yaml_quoted(&description(&self.description))
        ));
        if !self.metadata.is_empty() {
            out.push_str("metadata:\n");
            for (key, value) in &self.metadata {
                out.push_str(&format!("  {}: {}\n", skill_name(key), yaml_quoted(value)));
            }
        }
        out.push_str("---\n");
        out
    }
}

/// A description the spec accepts, derived deterministically from any text: one
/// line (whitespace runs become one space), no `<` or `>` (comparisons as `≥`, `≤`,
/// `≠`, `→`, a lone `>` or `<` between spaces as "above" or "below", any other as a
/// parenthesis), control characters dropped, at most 1024 characters (cut with `…`).
pub fn description(raw: &str) -> String {
    let mut text = String::with_capacity(raw.len());
    for word in raw.split_whitespace() {
        if !text.is_empty() {
            text.push(' ');
        }
        let word: String = word.chars().filter(|c| !c.is_control()).collect();
        text.push_str(&without_angles(&word));
    }
    if text.is_empty() {
        return "(no description)".to_string();
    }
    if text.chars().count() > DESCRIPTION_MAX_CHARS {
        let mut cut: String = text.chars().take(DESCRIPTION_MAX_CHARS - 1).collect();
        cut.truncate(cut.trim_end().len());
        cut.push('\u{2026}');
        return cut;
    }
    text
}

/// One word with its angle brackets in words or symbols the spec accepts.
fn without_angles(word: &str) -> String {
    match word {
        ">" => return "above".to_string(),
        "<" => return "below".to_string(),
        _ => {}
    }
    word.replace(">=", "\u{2265}")
        .replace("<=", "\u{2264}")
        .replace("!=", "\u{2260}")
        .replace("->", "\u{2192}")
        .replace('<', "(")
        .replace('>', ")")
}

/// A double-quoted YAML scalar holding exactly `text`.
pub fn yaml_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    let mut hyphens = 0;
    for c in text.chars() {
        if c == '-' {
            hyphens += 1;
            if hyphens == 3 {
                out.push_str("\\x2d");
                hyphens = 0;
                continue;
            }
        } else {
            hyphens = 0;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if needs_yaml_escape(c) => {
                let code = c as u32;
                if code <= 0xff {
                    out.push_str(&format!("\\x{code:02x}"));
                } else {
                    out.push_str(&format!("\\u{code:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Characters YAML does not allow raw in a double-quoted scalar, plus the line and
/// paragraph separators some readers treat as line ends.
fn needs_yaml_escape(c: char) -> bool {
    matches!(c as u32, 0..=0x1f | 0x7f..=0x9f | 0x2028 | 0x2029 | 0xfeff | 0xfffe | 0xffff)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Decodes the escapes [`yaml_quoted`] writes, as a YAML reader would.
    fn unquote(quoted: &str) -> String {
        let inner = &quoted[1..quoted.len() - 1];
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            let hex = |chars: &mut std::str::Chars, n: usize| {
                let digits: String = chars.take(n).collect();
                char::from_u32(u32::from_str_radix(&digits, 16).expect("hex")).expect("char")
            };
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('x') => out.push(hex(&mut chars, 2)),
                Some('u') => out.push(hex(&mut chars, 4)),
                Some(other) => out.push(other),
                None => {}
            }
        }
        out
    }

    proptest! {
        #[test]
        fn quoted_scalars_read_back_unchanged(text in "(?s).{0,200}") {
            let quoted = yaml_quoted(&text);
            prop_assert!(!quoted.contains("---"));
            prop_assert!(!quoted.chars().any(|c| c.is_control()));
            prop_assert_eq!(unquote(&quoted), text);
        }

        #[test]
        fn any_text_gives_a_valid_name_and_description(text in "(?s).{0,2000}") {
            let name = skill_name(&text);
            prop_assert!(!name.is_empty() && name.len() <= NAME_MAX_CHARS);
            prop_assert!(!name.starts_with('-') && !name.ends_with('-') && !name.contains("--"));
            let description = description(&text);
            prop_assert!(description.chars().count() <= DESCRIPTION_MAX_CHARS);
            prop_assert!(!description.contains('<') && !description.contains('>'));
        }
    }

    #[test]
    fn names_are_slugs_within_the_limit() {
        assert_eq!(
            skill_name("Validate-Kernel: GEMM__tile"),
            "validate-kernel-gemm-tile"
        );
        assert_eq!(skill_name("--x--"), "x");
        assert_eq!(skill_name("ü"), "unnamed");
        let long = skill_name(&"abcdefghij-".repeat(10));
        assert!(
            long.len() <= NAME_MAX_CHARS && !long.ends_with('-'),
            "{long}"
        );
    }

    #[test]
    fn descriptions_lose_angle_brackets_and_stay_short() {
        assert_eq!(description("a <b>\n\n c"), "a (b) c");
        assert_eq!(
            description("x > 0 and y >= 1"),
            "x above 0 and y \u{2265} 1"
        );
        let long = description(&"word ".repeat(400));
        assert_eq!(long.chars().count(), DESCRIPTION_MAX_CHARS);
        assert!(long.ends_with("wor\u{2026}"));
        assert_eq!(description(" \n"), "(no description)");
    }

    #[test]
    fn quoted_scalars_never_contain_a_fence() {
        assert_eq!(yaml_quoted("a---b"), "\"a--\\x2db\"");
        assert_eq!(yaml_quoted("q\"\\\n\u{1}"), "\"q\\\"\\\\\\n\\x01\"");
        assert!(!yaml_quoted(&"-".repeat(10)).contains("---"));
    }
}
