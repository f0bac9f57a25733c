//! Data-driven tests of the front end: every file in tests/data/invalid is a
//! trajectory on its own whose full rendered diagnostics are snapshotted; every
//! directory in tests/data/valid (and grammar/example) must check without errors
//! and has its graph JSON snapshotted.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use skillc::cli::render::{self, Sources};
use skillc::diag::{Code, Diagnostic};
use skillc::graph::{self, export};
use skillc::syntax::{self, SourceFile};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A repository path shown relative to the crate root, as users would type it.
fn relative(path: &Path) -> String {
    let path = path.strip_prefix(ROOT).unwrap_or(path);
    syntax::display_path(path)
}

fn check_single_file(path: &Path) -> (Vec<SourceFile>, Vec<Diagnostic>) {
    let text = std::fs::read_to_string(path).expect("test input is readable");
    let sources = vec![SourceFile {
        path: relative(path),
        text,
    }];
    let (parsed, mut diagnostics) = syntax::parse_sources(&sources, 0);
    let (_, more) = graph::build(parsed);
    diagnostics.extend(more);
    skillc::diag::sort(&mut diagnostics);
    (sources, diagnostics)
}

#[test]
fn invalid_inputs_report_their_diagnostics() {
    insta::glob!("data/invalid/*.traj", |path| {
        let (sources, diagnostics) = check_single_file(path);
        assert!(
            !diagnostics.is_empty(),
            "{} is meant to be invalid but checks clean",
            path.display()
        );
        let mut rendered = Sources::new(&sources);
        let report = render::human(&diagnostics, &mut rendered) + &render::summary(&diagnostics);
        insta::assert_snapshot!(report);
    });
}

/// Every code in the documented table is exercised by at least one invalid input.
#[test]
fn every_diagnostic_code_has_an_invalid_input() {
    let dir = Path::new(ROOT).join("tests/data/invalid");
    let mut seen = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("invalid inputs exist") {
        let path = entry.expect("directory entry").path();
        let (_, diagnostics) = check_single_file(&path);
        seen.extend(diagnostics.iter().map(|d| d.code.as_str()));
    }
    let missing: Vec<&str> = Code::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !seen.contains(c))
        .collect();
    assert!(
        missing.is_empty(),
        "codes without an invalid input: {missing:?}"
    );
}

/// Every code is documented in the language reference.
#[test]
fn every_diagnostic_code_is_documented() {
    let reference = std::fs::read_to_string(Path::new(ROOT).join("grammar/README.md"))
        .expect("grammar/README.md exists");
    for code in Code::ALL {
        assert!(
            reference.contains(&format!("| {} |", code.as_str())),
            "{} missing from grammar/README.md",
            code.as_str()
        );
    }
}

/// Every name a lesson's condition may read is in the language reference's
/// feature tables (the vocabulary is the runtime's; the tables are written by hand).
#[test]
fn every_condition_name_is_documented() {
    let reference = std::fs::read_to_string(Path::new(ROOT).join("grammar/README.md"))
        .expect("grammar/README.md exists");
    let tables = reference
        .split("## Model features")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("grammar/README.md has a Model features section");
    for spec in skillc_runtime::ops::conditions::vocabulary() {
        assert!(
            tables.contains(&format!("`{}`", spec.name)),
            "condition name `{}` missing from grammar/README.md's Model features",
            spec.name
        );
    }
}

fn valid_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("tests/data/valid"))
        .expect("valid inputs exist")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.push(Path::new(ROOT).join("grammar/example"));
    dirs
}

fn load_relative(dir: &Path) -> graph::Loaded {
    let relative_dir = PathBuf::from(relative(dir));
    // Integration tests run from the crate root, so the relative path resolves.
    graph::load_dirs(&[relative_dir]).expect("valid input loads")
}

#[test]
fn valid_inputs_check_clean_and_snapshot_their_graph() {
    for dir in valid_dirs() {
        let loaded = load_relative(&dir);
        let mut sources = Sources::new(&loaded.sources);
        assert!(
            loaded.diagnostics.is_empty(),
            "{} should check clean:\n{}",
            dir.display(),
            render::human(&loaded.diagnostics, &mut sources)
        );
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("dir");
        let (_, graph) = &loaded.trajectories[0];
        insta::assert_snapshot!(format!("graph_json__{name}"), export::to_json(graph));
    }
}

#[test]
fn example_graph_dot() {
    let loaded = load_relative(&Path::new(ROOT).join("grammar/example"));
    insta::assert_snapshot!(export::to_dot(&loaded.trajectories[0].1));
}

#[test]
fn json_diagnostics_carry_positions() {
    let path = Path::new(ROOT).join("tests/data/invalid/many-errors-one-file.traj");
    let (sources, diagnostics) = check_single_file(&path);
    let json = render::json(&diagnostics, &Sources::new(&sources));
    insta::assert_snapshot!(json);
}
