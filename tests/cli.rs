//! The `skillc check` and `skillc graph` commands as users run them: exit codes,
//! output formats, and paths printed as given.

use std::process::{Command, Output};

fn skillc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skillc"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the skillc binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn check_passes_a_clean_trajectory() {
    let output = skillc(&["check", "grammar/example"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    insta::assert_snapshot!(stdout(&output));
}

#[test]
fn check_fails_with_errors_and_reports_every_directory() {
    let output = skillc(&[
        "check",
        "tests/data/valid/minimal",
        "tests/data/invalid/cycle-dir",
    ]);
    // A directory without .traj files is an I/O problem, not a checked failure.
    assert_eq!(output.status.code(), Some(2));
    let output = skillc(&["check", "tests/data/valid/minimal", "tests/data/invalid"]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(text.contains("tests/data/invalid/bad-timestamp.traj:2:9: error[E0024]"));
    assert!(text.contains("checked 2 trajectories ("));
}

#[test]
fn check_json_is_machine_readable() {
    let output = skillc(&["check", "--format", "json", "tests/data/invalid"]);
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("check --format json prints JSON");
    let errors = report["errors"].as_u64().expect("error count");
    let diagnostics = report["diagnostics"].as_array().expect("diagnostics");
    assert!(errors > 0);
    assert!(diagnostics.iter().all(|d| d["file"]
        .as_str()
        .is_some_and(|f| f.starts_with("tests/data/invalid/"))));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(skillc(&["check"]).status.code(), Some(2));
    assert_eq!(skillc(&["check", "no/such/dir"]).status.code(), Some(2));
    assert_eq!(
        skillc(&["graph", "grammar/example", "--format", "svg"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn graph_prints_dot_and_json() {
    let dot = skillc(&["graph", "grammar/example", "--format", "dot"]);
    assert_eq!(dot.status.code(), Some(0));
    assert!(stdout(&dot).starts_with("digraph \"example\" {"));
    let json = skillc(&["graph", "grammar/example", "--format", "json"]);
    let graph: serde_json::Value = serde_json::from_slice(&json.stdout).expect("graph JSON");
    assert_eq!(
        graph["nodes"][0]["at"],
        "grammar/example/00-header.traj:23:1"
    );
}

#[test]
fn graph_refuses_a_trajectory_with_errors() {
    let output = skillc(&["graph", "tests/data/invalid"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    assert!(String::from_utf8_lossy(&output.stderr).contains("no graph written"));
}
