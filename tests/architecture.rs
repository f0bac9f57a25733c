//! ARCHITECTURE.md stays true: every repository path it names exists, and every
//! source folder of both crates is named in it, so moving or adding a folder
//! without updating the map fails here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Top-level entries a backticked span must start with to count as a path.
const ROOTS: &[&str] = &[
    "src/",
    "runtime/",
    "grammar/",
    "tests/",
    "trajectories/",
    "generated-skills/",
    ".ci/",
];

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every backticked span of the document that names a repository path, without a
/// trailing slash.
fn named_paths(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| ROOTS.iter().any(|root| span.starts_with(root)))
        .filter(|span| !span.contains(char::is_whitespace))
        // Patterns such as `trajectories/<name>/*.traj` name no one path.
        .filter(|span| !span.contains(['<', '*']))
        .map(|span| span.trim_end_matches('/').to_string())
        .collect()
}

fn source_folders(root: &Path, under: &str, out: &mut BTreeSet<String>) {
    let dir = root.join(under);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.expect("a directory entry");
        if entry.file_type().expect("a file type").is_dir() {
            let name = format!("{under}/{}", entry.file_name().to_string_lossy());
            source_folders(root, &name, out);
            out.insert(name);
        }
    }
}

fn document() -> String {
    let path = repository().join("ARCHITECTURE.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_path_the_architecture_names_exists() {
    let root = repository();
    let named = named_paths(&document());
    assert!(
        named.len() > 50,
        "only {} paths found: is the code map still written with backticked paths?",
        named.len()
    );
    let missing: Vec<&String> = named.iter().filter(|p| !root.join(p).exists()).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
}

#[test]
fn every_source_folder_is_in_the_code_map() {
    let root = repository();
    let named = named_paths(&document());
    let mut folders = BTreeSet::new();
    source_folders(&root, "src", &mut folders);
    source_folders(&root, "runtime/src", &mut folders);
    let unnamed: Vec<&String> = folders.iter().filter(|f| !named.contains(*f)).collect();
    assert!(
        unnamed.is_empty(),
        "source folders ARCHITECTURE.md does not name: {unnamed:?}"
    );
}

#[test]
fn a_path_that_does_not_exist_is_found() {
    let named = named_paths("see `src/no-such-module/` and `runtime/src/ops/operations.rs`");
    let root = repository();
    let missing: Vec<&String> = named.iter().filter(|p| !root.join(p).exists()).collect();
    assert_eq!(missing, ["src/no-such-module"]);
}

/// `"name"` literals of operation names in `text`, before its test module.
fn operation_literals(text: &str) -> Vec<&'static str> {
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    skillc_runtime::ops::OpKind::ALL
        .iter()
        .map(|op| op.name())
        .filter(|name| code.contains(&format!("\"{name}\"")))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Operations are named once, in the table; everywhere else code matches on
/// `OpKind`/`Op`, so a renamed or added operation cannot be missed by a string.
#[test]
fn operation_names_are_spelled_only_in_the_table() {
    let root = repository();
    let table = root.join("runtime/src/ops/operations.rs");
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("runtime/src"), &mut files);
    assert!(files.len() > 100, "found {} source files", files.len());
    let spelled: Vec<String> = files
        .iter()
        .filter(|path| **path != table)
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).expect("a source file");
            operation_literals(&text)
                .into_iter()
                .map(|name| format!("{}: \"{name}\"", path.display()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        spelled.is_empty(),
        "operation names written as literals outside runtime/src/ops/operations.rs: {spelled:#?}"
    );
}

/// Metric names a gate or a stop can carry that are also ordinary words of the
/// code: `phase` is a keyword of the language and a field of several files.
const METRIC_WORDS: &[&str] = &["phase"];

/// `"name"` literals of metric names (the language's and the runtime's gates'
/// own) in `text`, before its test module. A literal directly followed by `:` is
/// the key of a JSON object (`json!({"cosine": …})`), a field name, not a metric.
fn metric_literals(text: &str) -> Vec<&'static str> {
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    skillc_runtime::ops::GateMetric::all()
        .map(|m| m.name())
        .filter(|name| !METRIC_WORDS.contains(name))
        .filter(|name| {
            let quoted = format!("\"{name}\"");
            code.match_indices(&quoted)
                .any(|(at, _)| !code[at + quoted.len()..].starts_with(':'))
        })
        .collect()
}

/// Metrics are named once, in their table (`runtime/src/metrics.rs`);
/// everywhere else code holds a `Metric` or a `GateMetric`, so a misspelled metric
/// fails to compile instead of silently getting no unit.
#[test]
fn metric_names_are_spelled_only_in_their_table() {
    let root = repository();
    let table = root.join("runtime/src/metrics.rs");
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("runtime/src"), &mut files);
    let spelled: Vec<String> = files
        .iter()
        .filter(|path| **path != table)
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).expect("a source file");
            metric_literals(&text)
                .into_iter()
                .map(|name| format!("{}: \"{name}\"", path.display()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        spelled.is_empty(),
        "metric names written as literals outside runtime/src/metrics.rs: {spelled:#?}"
    );
}

#[test]
fn a_metric_literal_is_found_outside_test_code_and_json_keys_only() {
    let text = "match m { \"ttft_s\" => 1, _ => 2 }\nlet g = \"logits_max_rel\";\njson!({\"cosine\": c});\n#[cfg(test)]\nmod tests { const X: &str = \"nan_count\"; }";
    assert_eq!(metric_literals(text), ["ttft_s", "logits_max_rel"]);
}

#[test]
fn an_operation_literal_is_found_outside_test_code_only() {
    let text =
        "let op = \"select-tiling\";\n#[cfg(test)]\nmod tests { const X: &str = \"evaluate\"; }";
    assert_eq!(operation_literals(text), ["select-tiling"]);
}
