//! Prose in a bundle diff: what a reviewer reads of an edited text (a lesson's
//! cause or fix in words, a skill's page, a note) is the sentences that changed,
//! each as a word-level diff, `[-removed-]{+added+}` inside the sentence, not the
//! two whole texts. `--full` asks for the whole texts instead.

use similar::{capture_diff_slices, Algorithm, ChangeTag, DiffOp, TextDiff};

/// One sentence's words, unchanged words as they stand, removed ones as
/// `[-…-]`, added ones as `{+…+}`.
pub fn words(old: &str, new: &str) -> String {
    let diff = TextDiff::from_words(old, new);
    let mut out = String::new();
    let mut open: Option<ChangeTag> = None;
    for change in diff.iter_all_changes() {
        let tag = change.tag();
        let value = change.value();
        if open.is_some() && open != Some(tag) {
            close(&mut out, open.take());
        }
        if tag != ChangeTag::Equal && open.is_none() {
            out.push_str(if tag == ChangeTag::Delete { "[-" } else { "{+" });
            open = Some(tag);
        }
        out.push_str(value);
    }
    close(&mut out, open);
    out
}

fn close(out: &mut String, open: Option<ChangeTag>) {
    match open {
        Some(ChangeTag::Delete) => out.push_str("-]"),
        Some(ChangeTag::Insert) => out.push_str("+}"),
        _ => {}
    }
}

/// The sentences of a text: split after `.`, `!` or `?` followed by
/// whitespace, and at line ends; blank ones dropped, inner whitespace kept.
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let bytes = line.as_bytes();
        for (i, b) in bytes.iter().enumerate() {
            let ends = matches!(b, b'.' | b'!' | b'?')
                && bytes.get(i + 1).is_some_and(u8::is_ascii_whitespace);
            if ends {
                out.push(line[start..=i].trim());
                start = i + 1;
            }
        }
        out.push(line[start..].trim());
    }
    out.retain(|s| !s.is_empty());
    out
}

/// The changed sentences of `old` → `new`: `~ ` and a word diff for a sentence
/// edited in place, `- ` and `+ ` for one removed or added.
pub fn changed_sentences(old: &str, new: &str) -> Vec<String> {
    let (o, n) = (sentences(old), sentences(new));
    let mut out = Vec::new();
    for op in capture_diff_slices(Algorithm::Myers, &o, &n) {
        match op {
            DiffOp::Equal { .. } => {}
            DiffOp::Delete {
                old_index, old_len, ..
            } => out.extend(
                o[old_index..old_index + old_len]
                    .iter()
                    .map(|s| format!("- {s}")),
            ),
            DiffOp::Insert {
                new_index, new_len, ..
            } => out.extend(
                n[new_index..new_index + new_len]
                    .iter()
                    .map(|s| format!("+ {s}")),
            ),
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                let (old_part, new_part) = (
                    &o[old_index..old_index + old_len],
                    &n[new_index..new_index + new_len],
                );
                let paired = old_len.min(new_len);
                for (a, b) in old_part.iter().zip(new_part) {
                    out.push(format!("~ {}", words(a, b)));
                }
                out.extend(old_part[paired..].iter().map(|s| format!("- {s}")));
                out.extend(new_part[paired..].iter().map(|s| format!("+ {s}")));
            }
        }
    }
    out
}

/// The whole of both texts as a line diff (`-`, `+`, and two spaces for an
/// unchanged line).
pub fn whole(old: &str, new: &str) -> Vec<String> {
    TextDiff::from_lines(old, new)
        .iter_all_changes()
        .map(|c| {
            let sign = match c.tag() {
                ChangeTag::Delete => '-',
                ChangeTag::Insert => '+',
                ChangeTag::Equal => ' ',
            };
            format!("{sign} {}", c.value().trim_end_matches('\n'))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_word_is_bracketed_inside_its_sentence() {
        assert_eq!(
            words("the tile must divide N", "the tile should divide N"),
            "the tile [-must-]{+should+} divide N"
        );
        assert_eq!(words("a b", "a b c"), "a b{+ c+}");
    }

    #[test]
    fn only_the_changed_sentences_are_shown() {
        let old = "One stays. Two changes here.\nThree goes.";
        let new = "One stays. Two changed here.\nFour comes.";
        assert_eq!(
            changed_sentences(old, new),
            [
                "~ Two [-changes-]{+changed+} here.",
                "~ [-Three-]{+Four+} [-goes.-]{+comes.+}"
            ]
        );
        assert!(changed_sentences(old, old).is_empty());
    }
}
