//! No input makes the front end panic, and every span it reports lies inside the file
//! and agrees with the line/column it carries. Property tests over random bytes,
//! random soups of the language's own tokens, and mutations of the valid inputs; the
//! case counts keep the whole file to a few seconds.

use std::path::Path;

use proptest::prelude::*;
use skillc::cli::render::{self, Sources};
use skillc::graph::{self, export};
use skillc::syntax::{self, LineIndex, SourceFile, Span};

fn assert_span_inside(span: Span, text: &str, index: &LineIndex, what: &str) {
    let (start, end) = (span.start as usize, span.end as usize);
    assert!(
        start <= end && end <= text.len(),
        "{what}: span {start}..{end} outside 0..{}",
        text.len()
    );
    assert!(
        text.is_char_boundary(start) && text.is_char_boundary(end),
        "{what}: span cuts a character"
    );
    assert_eq!(
        index.line_col(text, span.start),
        (span.line, span.col),
        "{what}: line/col disagree with the offset"
    );
}

/// Runs the whole front end and the renderers on one file.
fn check(text: &str) {
    let sources = vec![SourceFile {
        path: "fuzz.traj".into(),
        text: text.to_string(),
    }];
    let (parsed, mut diagnostics) = syntax::parse_sources(&sources, 0);
    let (graph, more) = graph::build(parsed);
    diagnostics.extend(more);
    let index = LineIndex::new(text);
    for diagnostic in &diagnostics {
        assert_span_inside(diagnostic.span, text, &index, &diagnostic.message);
        for related in &diagnostic.related {
            assert_span_inside(related.span, text, &index, &related.message);
        }
    }
    for (_, node) in graph.nodes() {
        assert_span_inside(node.span, text, &index, &node.id);
    }
    let mut rendered = Sources::new(&sources);
    let _ = render::human(&diagnostics, &mut rendered);
    let _ = render::json(&diagnostics, &rendered);
    let _ = export::to_json(&graph);
    let _ = export::to_dot(&graph);
}

fn valid_texts() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut texts = Vec::new();
    for dir in ["grammar/example", "tests/data/valid"] {
        for entry in walkdir::WalkDir::new(root.join(dir)).sort_by_file_name() {
            let entry = entry.expect("readable test data");
            if entry.path().extension().is_some_and(|e| e == "traj") {
                texts.push(std::fs::read_to_string(entry.path()).expect("utf-8 test data"));
            }
        }
    }
    texts
}

/// The language's keywords and other tokens a trajectory is made of.
fn tokens() -> Vec<&'static str> {
    skillc_runtime::ops::KEYWORDS
        .iter()
        .chain(OTHER_TOKENS)
        .copied()
        .collect()
}

/// Tokens besides the keywords of the language.
const OTHER_TOKENS: &[&str] = &[
    "a1",
    "o2",
    "l3",
    "a4",
    "select-tiling",
    "validate-kernel",
    "tile_n",
    "herd_n",
    "N",
    "kernel",
    "gemm",
    "cosine",
    "kernel_ms",
    "ms",
    "GB/s",
    "%",
    "=",
    "==",
    ">=",
    "<",
    "->",
    "[",
    "]",
    "(",
    ")",
    ",",
    "+",
    "-",
    "*",
    "/",
    "%",
    "0",
    "8",
    "1.5e-3",
    "-2",
    "99999999999999999999",
    "1e999",
    "\"text\"",
    "\"\"\"",
    "\"",
    "#",
    "2026-04-03T09:10",
    "2026-02-30",
    "divisor(",
    "min(",
    "\n",
    "\n  ",
    " ",
    "\t",
    "é",
    "\r\n",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        check(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn token_soup_never_panics(tokens in proptest::collection::vec(proptest::sample::select(tokens()), 0..120)) {
        let mut text = String::new();
        for token in tokens {
            text.push_str(token);
            text.push(' ');
        }
        check(&text);
    }

    #[test]
    fn mutated_valid_files_never_panic(
        file in any::<prop::sample::Index>(),
        mutations in proptest::collection::vec(
            (0u8..5, any::<prop::sample::Index>(), 0usize..40, proptest::sample::select(tokens())),
            1..6,
        ),
    ) {
        let texts = valid_texts();
        let mut chars: Vec<char> = file.get(&texts).chars().collect();
        for (kind, at, len, token) in mutations {
            let at = if chars.is_empty() { 0 } else { at.index(chars.len()) };
            let end = (at + len).min(chars.len());
            match kind {
                0 => { chars.drain(at..end); }
                1 => { chars.splice(at..at, token.chars()); }
                2 => { chars.splice(at..end, token.chars()); }
                3 => {
                    let copy: Vec<char> = chars[at..end].to_vec();
                    chars.splice(at..at, copy);
                }
                _ => { if at < chars.len() { chars[at] = '\n'; } }
            }
        }
        check(&chars.into_iter().collect::<String>());
    }
}

/// Inputs built to hit the limits: deep nesting, long operator chains, long prefix
/// chains and huge flat lists.
#[test]
fn pathological_inputs_are_reported_not_crashed() {
    let head =
        "trajectory \"t\" model \"m\" target npu2 baseline \"none\"\nsession 2026-04-01 phase 1\n";
    let cases = [
        format!(
            "{head}a1 action register-kernel kernel=gemm shape={}",
            "[".repeat(100_000)
        ),
        format!(
            "{head}l1 lesson \"x\" fix select-tiling tile_n=({}1)",
            "-".repeat(50_000)
        ),
        format!(
            "{head}l1 lesson \"x\" fix select-tiling tile_n=({}1)",
            "N + ".repeat(50_000)
        ),
        format!("{head}l1 lesson \"x\" cause {}N", "not ".repeat(50_000)),
        format!(
            "{head}a1 action register-kernel kernel=gemm shape=[{}1]",
            "1,".repeat(100_000)
        ),
        format!(
            "{head}a1 action register-kernel kernel=gemm shape={}",
            "(".repeat(100_000)
        ),
    ];
    for case in &cases {
        check(case);
    }
}
