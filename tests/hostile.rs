//! The hostile-input suite, issue 27: one test per item of its list, named
//! `itemNN_…` (items 1, 4, 7, 8, 9, 12 and 13 in `hostile_models.rs`; 2, 3, 5,
//! 6, 10 and 14 in `hostile_outputs.rs`; 11 here), and one per row of issue
//! 15's table, named `rowNN_…` (`hardening.rs`, `build_hostile.rs`,
//! `replay.rs`). The first test below fails when any of them is renamed away
//! or deleted.

use crate::hostile_support::*;

/// Every item of issue 27 and every row of issue 15 keeps a test named after it.
#[test]
fn every_hostile_case_keeps_its_named_test() {
    let sources: String = [
        "tests/hostile.rs",
        "tests/hostile_models.rs",
        "tests/hostile_outputs.rs",
        "tests/hardening.rs",
        "tests/build_hostile.rs",
        "tests/replay.rs",
    ]
    .iter()
    .map(|f| std::fs::read_to_string(repo(f)).expect("test source"))
    .collect();
    // Rows 3 and 4 (concurrent builds, concurrent deploys) share one test.
    let missing: Vec<String> = (1..=14)
        .map(|i| format!("item{i:02}_"))
        .chain((1..=15).map(|i| match i {
            3 | 4 => "row03_row04_".to_string(),
            i => format!("row{i:02}_"),
        }))
        .filter(|name| !sources.contains(&format!("#[test]\nfn {name}")))
        .collect();
    assert!(missing.is_empty(), "no test named {missing:?}");
}

/// Item 11: lesson lookup was quadratic (80k lessons: 102 s; 200k: timed out)
/// and a 1.66M-entry build timed out where 332k took 33 s. Now the build is
/// linear in entries and lessons: ten times the entries of a lesson-heavy
/// trajectory (every step fails and teaches a lesson) cost about ten times the
/// CPU time. Quadratic work would cost a hundred times; the bound of 30 leaves
/// room for noise and fixed costs. CPU time, not wall time: the machine may be
/// shared. The 100k and 1M rows are `skillc bench build` (README).
#[test]
fn item11_build_time_is_linear_in_entries_and_lessons() {
    let output = skillc_in(
        &repo(""),
        &[
            "bench",
            "build",
            "--sizes",
            "4000,40000",
            "--failing",
            "100",
            "--runs",
            "2",
            "--json",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    let rows = json["rows"].as_array().expect("rows");
    let lessons = rows.last().expect("the 40k row")["lessons"]
        .as_u64()
        .expect("lessons");
    assert!(lessons > 5000, "lesson-heavy: {lessons} lessons");
    let ratio = json["scaling"][0]["cpu_ratio"].as_f64().expect("cpu ratio");
    assert!(
        ratio < 30.0,
        "10× the entries cost {ratio:.1}× the CPU time"
    );
}
