//! The reserved words of the trajectory language.

/// Keywords of the trajectory language (grammar/README.md, "Keywords"): never an
/// entry id. The parser reserves them and the executor's trajectory writer avoids
/// them when it makes ids and bare words.
pub const KEYWORDS: &[&str] = &[
    "trajectory",
    "session",
    "skill",
    "trigger",
    "phase",
    "model",
    "target",
    "baseline",
    "weights",
    "source",
    "draft",
    "action",
    "observe",
    "lesson",
    "note",
    "decision",
    "when",
    "after",
    "about",
    "evidence",
    "fixes",
    "by",
    "supersedes",
    "reverts",
    "symptom",
    "cause",
    "fix",
    "in",
    "if",
    "fails",
    "with",
    "and",
    "or",
    "not",
    "measured",
    "modeled",
    "pass",
    "fail",
    "true",
    "false",
];

/// Whether `word` is a keyword of the trajectory language.
pub fn is_keyword(word: &str) -> bool {
    KEYWORDS.contains(&word)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn keywords_are_the_ones_the_language_reference_lists() {
        let text = include_str!("../../../grammar/README.md");
        let section = text
            .split("## Keywords")
            .nth(1)
            .expect("grammar/README.md has a Keywords section");
        let listed: BTreeSet<&str> = section
            .split('`')
            .nth(1)
            .expect("the section opens with the keyword list in backquotes")
            .split_whitespace()
            .collect();
        let ours: BTreeSet<&str> = KEYWORDS.iter().copied().collect();
        assert_eq!(ours, listed);
        assert_eq!(ours.len(), KEYWORDS.len(), "no keyword twice");
    }
}
