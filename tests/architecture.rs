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
    // The table's own `#[cfg(test)]` module, kept in a file of its own by `#[path]`.
    let table_tests = root.join("runtime/src/ops/operations_tests.rs");
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("runtime/src"), &mut files);
    assert!(files.len() > 100, "found {} source files", files.len());
    let spelled: Vec<String> = files
        .iter()
        .filter(|path| **path != table && **path != table_tests)
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

/// Words of the records' prose that the importer matches, which happen to spell a
/// metric: a unit as a README writes it (`GFLOPS`) and a failure word of commit
/// messages. Listed per file, so a metric literal anywhere else still fails.
const PROSE_VOCABULARY: &[(&str, &str)] = &[
    ("src/import/figures.rs", "gflops"),
    ("src/import/classify.rs", "mismatches"),
];

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
            let relative = path.strip_prefix(&root).unwrap_or(path).to_path_buf();
            metric_literals(&text)
                .into_iter()
                .filter(move |name| {
                    !PROSE_VOCABULARY
                        .iter()
                        .any(|(file, word)| relative == std::path::Path::new(file) && word == name)
                })
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

/// The runtime's top-level modules, bottom layer first. A module imports from its
/// own layer and the layers below it, never from one above: the model and its
/// oracle know nothing of the NPU, the emulator nothing of the vocabulary, the
/// vocabulary (whose parameters are the emulator's kernels, herds and tiles, and
/// whose effects are plan changes) nothing of the bundle, and only the executor
/// sees everything.
const RUNTIME_LAYERS: &[&[&str]] = &[
    &[
        "bf16", "input", "metrics", "numbers", "phase", "rng", "threads",
    ],
    &["model"],
    &["xdna2"],
    &["ops"],
    &["bundle", "bundle_integrity"],
    &["notation"],
    &["exec"],
];

/// The compiler's top-level modules, bottom layer first: `syntax` and `diag`
/// share a layer (a diagnostic carries a span; the parser reports diagnostics),
/// `outdir` sits below `emit`, which writes through it, `import` (which drafts
/// trajectory text) beside `graph` on `syntax` alone, and `replay` above the
/// pipeline it reads trajectories with. The runtime is below all of them.
const COMPILER_LAYERS: &[&[&str]] = &[
    &["digest", "synth"],
    &["diag", "syntax"],
    &["outdir"],
    &["graph", "import"],
    &["distill"],
    &["emit"],
    &["replay"],
    &["cli"],
];

/// The files of the emulator that may call the oracle: the harness, which judges
/// a kernel against it. The execution path (the interpreter and the kernels) has
/// its own arithmetic, so a mistake in the oracle cannot agree with itself there.
const ORACLE_USERS_IN_XDNA2: &[&str] = &["xdna2/harness.rs", "xdna2/harness_packed.rs"];

/// The folders of the emulator's execution path, which must never name the oracle.
const EXECUTION_PATH: &[&str] = &["xdna2/interpreter/", "xdna2/kernels/"];

/// The files under `runtime/src` whose code (comments aside; before their test
/// module unless `with_tests`) names `model::oracle`, in any import form.
fn oracle_importers(root: &Path, with_tests: bool) -> Vec<String> {
    crate_sources(root)
        .into_iter()
        .filter(|(_, text)| {
            let code = match with_tests {
                true => text.as_str(),
                false => text.split("#[cfg(test)]").next().unwrap_or(text),
            };
            code.lines()
                .map(|l| l.split("//").next().unwrap_or(l))
                .any(|l| {
                    l.contains("model::oracle") || (l.contains("model::{") && l.contains("oracle"))
                })
        })
        .map(|(relative, _)| relative)
        .collect()
}

/// The module path of a source file relative to its crate's `src`
/// (`exec/run.rs` → `exec::run`, `exec/mod.rs` → `exec`, `lib.rs` → the root).
fn module_path(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The first segment of every path that starts right after `at` in `code`:
/// `exec::run` gives `exec`, `{bundle::Step, ops}` gives `bundle` and `ops`.
fn first_segments(code: &str, at: usize) -> Vec<String> {
    let rest = &code[at..];
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident(rest)];
    };
    let (mut depth, mut start, mut out) = (0usize, 0usize, Vec::new());
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                out.push(ident(&group[start..i]));
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(ident(&group[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// The crate's top-level modules a file's code (before its test module, comments
/// aside) names through `crate::…`, or through `super::…` climbing to the root.
fn imported_modules(relative: &str, text: &str) -> BTreeSet<String> {
    let code: String = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or(text)
        .lines()
        .map(|l| l.split("//").next().unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let depth = module_path(relative).len();
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        found.extend(first_segments(&code, at + "crate::".len()));
    }
    for (at, _) in code.match_indices("super::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let mut end = at;
        let mut climbs = 0;
        while code[end..].starts_with("super::") {
            end += "super::".len();
            climbs += 1;
        }
        if climbs >= depth {
            found.extend(first_segments(&code, end));
        }
    }
    found
}

/// Every import of a crate's source files that runs up its layers, as
/// `file: module imports module`. Names that are no top-level module (an item of
/// the root, a false match) are not judged.
fn layer_violations(files: &[(String, String)], layers: &[&[&str]]) -> Vec<String> {
    let layer_of = |module: &str| layers.iter().position(|l| l.contains(&module));
    let mut violations = Vec::new();
    for (relative, text) in files {
        let path = module_path(relative);
        let Some(own) = path.first() else { continue };
        let Some(own_layer) = layer_of(own) else {
            violations.push(format!("{relative}: module `{own}` is in no layer"));
            continue;
        };
        for imported in imported_modules(relative, text) {
            if layer_of(&imported).is_some_and(|l| l > own_layer) {
                violations.push(format!(
                    "{relative}: `{own}` imports `{imported}`, a layer above it"
                ));
            }
        }
    }
    violations
}

/// Every `.rs` file under `root`, as (path relative to `root`, text).
fn crate_sources(root: &Path) -> Vec<(String, String)> {
    let mut paths = Vec::new();
    rust_files(root, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let relative = path
                .strip_prefix(root)
                .expect("under the root")
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(&path).expect("a source file");
            (relative, text)
        })
        .collect()
}

/// ARCHITECTURE.md's layering, checked: no import in either crate runs up its
/// layers.
#[test]
fn no_import_runs_up_the_layers() {
    let root = repository();
    for (dir, layers) in [("runtime/src", RUNTIME_LAYERS), ("src", COMPILER_LAYERS)] {
        let files = crate_sources(&root.join(dir));
        assert!(files.len() > 20, "{dir}: found {} files", files.len());
        let violations = layer_violations(&files, layers);
        assert!(
            violations.is_empty(),
            "{dir}: imports against the layering of ARCHITECTURE.md: {violations:#?}"
        );
    }
}

/// The emulator calls the oracle only where it is listed: the harness that judges
/// against it. A listed file that no longer calls it leaves the list.
#[test]
fn the_emulator_calls_the_oracle_only_where_listed() {
    let callers: Vec<String> = oracle_importers(&repository().join("runtime/src"), false)
        .into_iter()
        .filter(|relative| relative.starts_with("xdna2/"))
        .collect();
    assert_eq!(callers, ORACLE_USERS_IN_XDNA2);
}

/// No file of the emulator's execution path, test modules included, imports the
/// oracle: the interpreter's host operations and the kernels compute with their
/// own code, to the NPU kernels' numerics (issue 26).
#[test]
fn the_emulator_execution_path_never_imports_the_oracle() {
    let importers: Vec<String> = oracle_importers(&repository().join("runtime/src"), true)
        .into_iter()
        .filter(|relative| EXECUTION_PATH.iter().any(|dir| relative.starts_with(dir)))
        .collect();
    assert!(
        importers.is_empty(),
        "the emulator's execution path imports the oracle: {importers:?}"
    );
}

#[test]
fn an_import_up_the_layers_is_found() {
    let files = [
        (
            "ops/effect.rs",
            "use crate::exec::run::Run;\nuse crate::xdna2::Device;",
        ),
        ("ops/mod.rs", "use crate::{metrics::Unit, bundle::Step};"),
        (
            "xdna2/plan/mod.rs",
            "fn f() { super::super::ops::Op::Merge }",
        ),
        (
            "xdna2/plan/fit.rs",
            "use super::super::Device; // crate::exec in a comment",
        ),
        (
            "exec/run.rs",
            "use crate::ops::Op;\n#[cfg(test)]\nmod tests { use crate::notation; }",
        ),
        (
            "model/oracle.rs",
            "//! Judged by `crate::xdna2::harness`.\nuse crate::bf16;",
        ),
    ]
    .map(|(p, t)| (p.to_string(), t.to_string()));
    assert_eq!(
        layer_violations(&files, RUNTIME_LAYERS),
        [
            "ops/effect.rs: `ops` imports `exec`, a layer above it",
            "ops/mod.rs: `ops` imports `bundle`, a layer above it",
            "xdna2/plan/mod.rs: `xdna2` imports `ops`, a layer above it",
        ]
    );
    let stray = [("newmod/x.rs".to_string(), String::new())];
    assert_eq!(
        layer_violations(&stray, RUNTIME_LAYERS),
        ["newmod/x.rs: module `newmod` is in no layer"]
    );
}
