//! The importer's two word rules, written once and documented in grammar/README.md
//! ("Importing records"):
//!
//! - **phase**: which of the eight phases a heading, a commit subject or a code
//!   file's name speaks of. Each phase has a list of words and phrases; a text names
//!   a phase when the words of exactly one phase occur in it. No phase's words is no
//!   evidence (a heading then takes its parent heading's phase); the words of several
//!   phases are conflicting evidence. Either way without a phase, the session is a
//!   draft the user must place.
//! - **lesson**: a text reads like a lesson when it has a symptom word, a cause word
//!   and a fix word; it is then drafted as `note draft lesson`, never as a lesson,
//!   since the fix the language needs is an executable operation the text does not
//!   name.

use skillc_runtime::phase::DeployPhase;

/// Words and phrases (lowercase, matched on word boundaries) that name each phase.
const PHASE_WORDS: &[(DeployPhase, &[&str])] = &[
    (
        DeployPhase::Reference,
        &[
            "cpu reference",
            "reference implementation",
            "model config",
            "model configuration",
            "weight loading",
            "weights",
            "scope",
        ],
    ),
    (
        DeployPhase::Kernels,
        &[
            "kernel validation",
            "kernel registry",
            "registry",
            "tiling",
            "tile config",
            "tile configs",
        ],
    ),
    (
        DeployPhase::Block,
        &[
            "single block",
            "single-block",
            "decoder block",
            "block validation",
            "kernel sequence",
            "data flow",
        ],
    ),
    (
        DeployPhase::Model,
        &[
            "verification",
            "verify",
            "correctness",
            "diagnosis",
            "full model",
            "full-model",
            "whole model",
        ],
    ),
    (
        DeployPhase::Prefill,
        &[
            "prefill",
            "ttft",
            "multi-launch",
            "merge",
            "merging",
            "stitching",
            "buffer object",
            "weight pre-loading",
            "layout",
        ],
    ),
    (
        DeployPhase::Decode,
        &[
            "decode",
            "tpot",
            "gemv",
            "lm head",
            "lm-head",
            "lm_head",
            "cascade",
            "staircase",
            "kv cache",
        ],
    ),
    (
        DeployPhase::Finalize,
        &[
            "finalize",
            "key files",
            "file map",
            "files",
            "artifacts",
            "quick start",
            "usage",
        ],
    ),
    (DeployPhase::Evaluate, &["evaluation", "evaluator"]),
];

/// The phase `text` names, when exactly one phase's words occur in it.
pub fn phase_of(text: &str) -> Evidence {
    let words = words(text);
    let named: Vec<DeployPhase> = PHASE_WORDS
        .iter()
        .filter(|(_, phrases)| phrases.iter().any(|p| has_phrase(&words, p)))
        .map(|(phase, _)| *phase)
        .collect();
    match named.as_slice() {
        [] => Evidence::None,
        [one] => Evidence::Clear(*one),
        _ => Evidence::Conflicting,
    }
}

/// The phase a code file's name names: its stem's words, `_` and `-` separating
/// them (`qwen25_0_5b_decode.py` names decode).
pub fn phase_of_file(name: &str) -> Evidence {
    let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    phase_of(&stem.replace(['_', '-'], " "))
}

/// What a text says about its phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    Clear(DeployPhase),
    /// No phase's words: a heading takes its parent's phase.
    None,
    /// Several phases' words.
    Conflicting,
}

const SYMPTOM_WORDS: &[&str] = &[
    "nan",
    "nans",
    "hang",
    "hangs",
    "hung",
    "timeout",
    "deadlock",
    "overflow",
    "overflows",
    "overflowed",
    "exceeds",
    "exceeded",
    "crash",
    "crashes",
    "corrupt",
    "corrupts",
    "corrupted",
    "corruption",
    "garbage",
    "wrong",
    "mismatch",
    "mismatches",
    "fails",
    "failed",
    "failure",
    "error",
    "broken",
    "unroutable",
    "diverge",
    "diverges",
    "diverged",
    "stale",
    "incorrect",
    "regression",
];

const CAUSE_WORDS: &[&str] = &[
    "because", "due", "caused", "cause", "causes", "root", "since", "why", "tied",
];

const FIX_WORDS: &[&str] = &[
    "fix",
    "fixes",
    "fixed",
    "workaround",
    "remedy",
    "instead",
    "avoid",
    "avoids",
    "avoided",
    "solution",
    "resolved",
    "resolves",
    "repair",
    "repairs",
    "repaired",
];

/// Markers a code comment uses to flag an explanation, matched in upper case.
const MARKERS: &[&str] = &["FIX", "FIXME", "NOTE", "WORKAROUND", "HACK", "BUG", "XXX"];

/// Which of the symptom, cause and fix word classes `text` has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LessonWords {
    pub symptom: bool,
    pub cause: bool,
    pub fix: bool,
}

impl LessonWords {
    pub fn of(text: &str) -> Self {
        let words = words(text);
        let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
        LessonWords {
            symptom: has(SYMPTOM_WORDS),
            cause: has(CAUSE_WORDS),
            fix: has(FIX_WORDS),
        }
    }

    /// All three: the text reads like a lesson.
    pub fn is_lesson(self) -> bool {
        self.symptom && self.cause && self.fix
    }

    pub fn any(self) -> bool {
        self.symptom || self.cause || self.fix
    }
}

/// Whether a code comment explains something worth keeping: a marker (`NOTE:`,
/// `FIX`, …) or a word of the lesson classes.
pub fn explains(comment: &str) -> bool {
    let marked = comment
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| MARKERS.contains(&w));
    marked || LessonWords::of(comment).any()
}

/// Lowercase words: letters, digits and `_`; everything else separates.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether `phrase` (split the way [`words`] splits) occurs as consecutive words.
pub fn has_phrase(words: &[String], phrase: &str) -> bool {
    let phrase = self::words(phrase);
    !phrase.is_empty() && words.windows(phrase.len()).any(|w| w == phrase.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_phase_named_is_clear_several_conflict() {
        assert_eq!(
            phase_of("### Prefill"),
            Evidence::Clear(DeployPhase::Prefill)
        );
        assert_eq!(
            phase_of("Decode staircase (opt-in)"),
            Evidence::Clear(DeployPhase::Decode)
        );
        assert_eq!(
            phase_of("Evaluation Report: SmolLM2"),
            Evidence::Clear(DeployPhase::Evaluate)
        );
        assert_eq!(phase_of("Performance"), Evidence::None);
        assert_eq!(
            phase_of("Add Qwen2.5-7B (prefill + fused decode)"),
            Evidence::Conflicting
        );
        // Words, not substrings: "prefilled" is not "prefill".
        assert_eq!(phase_of("prefilled"), Evidence::None);
        assert_eq!(
            phase_of_file("qwen25_0_5b_decode.py"),
            Evidence::Clear(DeployPhase::Decode)
        );
        assert_eq!(phase_of_file("qwen25_0_5b_inference.py"), Evidence::None);
    }

    #[test]
    fn lessons_need_all_three_word_classes() {
        let text = "The Down GEMM produces all-NaN unless it is launch 0, because of state a previous launch leaves; the remedy is its own call.";
        assert!(LessonWords::of(text).is_lesson());
        assert!(!LessonWords::of("NaN because of the layout").is_lesson());
        assert!(explains("NOTE: order matters here"));
        assert!(!explains("load the weights into per-layer buffers"));
    }
}
