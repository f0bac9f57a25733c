//! Helpers both packages' integration-test binaries use: `runtime/tests/integration.rs`
//! declares this module and `tests/integration.rs` includes the same file by path, so
//! the fixture list and the guard below are written once.

use std::path::{Path, PathBuf};

/// The fixtures of `shared/fixtures` that carry transformers outputs.
pub const FIXTURES: [&str; 7] = [
    "gemma3-tiny",
    "llama32-odd",
    "llama32-tiny",
    "qwen25-odd",
    "qwen25-tiny",
    "qwen3-tiny",
    "smollm2-tiny",
];

/// The model families' fixtures this repository makes itself
/// (`scripts/fixtures/make_fixture.py`), in `tests/data/fixtures`: the same
/// layout and reference tensors as `shared/fixtures`.
pub const FAMILY_FIXTURES: [&str; 5] = [
    "gemma2-tiny",
    "mistral-tiny",
    "olmo-tiny",
    "phi3-tiny",
    "stablelm-tiny",
];

/// The workspace root, found from either package's manifest directory (it
/// holds `Cargo.lock`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .unwrap_or(manifest)
        .to_path_buf()
}

/// A fixture's folder: `tests/data/fixtures/<name>` for the families'
/// fixtures, else `shared/fixtures/<name>` (the `shared/` folder beside the
/// repository).
pub fn fixture_dir(name: &str) -> PathBuf {
    let root = workspace_root();
    if FAMILY_FIXTURES.contains(&name) {
        return root.join("tests/data/fixtures").join(name);
    }
    root.join("../shared/fixtures").join(name)
}

/// Fails when a `tests/*.rs` file of this package is not a `mod <name>;` line of
/// `listed` (the text of the binary's root file): with `autotests = false` such a
/// file never runs, and a forgotten file must not pass by not running.
pub fn assert_every_test_file_listed(listed: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/ is readable") {
        let path = entry.expect("tests/ entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let is_test_file = path.extension().is_some_and(|e| e == "rs") && stem != "integration";
        if is_test_file && !listed.lines().any(|l| l == format!("mod {stem};")) {
            missing.push(stem.to_string());
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "tests/{{{}}}.rs: not a module of tests/integration.rs",
        missing.join(",")
    );
}
