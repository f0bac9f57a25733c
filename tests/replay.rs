//! `skillc replay` on the llama32-tiny fixture: every directory under
//! tests/replay/ is a trajectory for that model; its replay outcomes (entry,
//! metric, recorded figure, row kind, outcome) are snapshotted, and the tampered
//! copies of the agreeing trajectory (a wrong gate verdict, a time far outside the
//! band, a fix its lesson does not compute) must disagree on exactly the tampered
//! entry and make the command exit 1. `band-edge` holds recorded times just inside
//! and just outside the stated band, and rows of the kinds the headline leaves out.

use std::path::{Path, PathBuf};
use std::process::Command;

use skillc::replay::{self, Functional, Outcome, Report, RowKind};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tiny_model() -> PathBuf {
    root().join("../shared/fixtures/llama32-tiny")
}

fn replay_dir(dir: &Path, functional: Functional) -> Report {
    let loaded = skillc::graph::load_dirs(&[dir.to_path_buf()]).expect("trajectory loads");
    assert_eq!(loaded.error_count(), 0, "{:?}", loaded.diagnostics);
    let (_, graph) = &loaded.trajectories[0];
    let options = replay::Options {
        model_dir: tiny_model(),
        functional,
        seed: 1,
    };
    replay::replay(graph, &options).expect("replay runs")
}

/// The outcome table without the modeled numbers, which move when the cost
/// model is refitted (the band absorbs that; the snapshot should not churn).
fn outcomes(report: &Report) -> String {
    let mut out = String::new();
    for r in &report.rows {
        out.push_str(&format!(
            "{:<18} {:<16} {:<22} {:<14} {}\n",
            r.entry,
            r.metric,
            r.recorded,
            r.kind.label(),
            r.outcome.label()
        ));
    }
    out.push_str(&format!("{:?}\n", report.counts));
    out
}

#[test]
fn each_case_replays_as_snapshotted() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("tests/replay"))
        .expect("case directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 3);
    for dir in dirs {
        let name = dir
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let report = replay_dir(&dir, Functional::Full);
        insta::assert_snapshot!(format!("replay_{name}"), outcomes(&report));
    }
}

#[test]
fn the_agreeing_trajectory_agrees_on_every_row() {
    let report = replay_dir(&root().join("tests/replay/agree"), Functional::Full);
    assert!(report.agrees());
    assert!(
        report.rows.iter().all(|r| r.outcome == Outcome::Agree),
        "{}",
        outcomes(&report)
    );
    assert_eq!(report.counts.agree, report.counts.compared);
}

#[test]
fn a_tampered_verdict_is_a_disagreement() {
    let report = replay_dir(&root().join("tests/replay/wrong-verdict"), Functional::Full);
    let bad: Vec<_> = report
        .rows
        .iter()
        .filter(|r| r.outcome == Outcome::Disagree)
        .collect();
    assert_eq!(bad.len(), 1, "{}", outcomes(&report));
    assert_eq!(
        (bad[0].entry.as_str(), bad[0].metric.as_str()),
        ("t1.up.bad", "mismatches")
    );
}

#[test]
fn a_time_outside_the_band_is_a_disagreement() {
    let report = replay_dir(
        &root().join("tests/replay/time-out-of-band"),
        Functional::Full,
    );
    let bad: Vec<_> = report
        .rows
        .iter()
        .filter(|r| r.outcome == Outcome::Disagree)
        .collect();
    assert_eq!(bad.len(), 1, "{}", outcomes(&report));
    assert_eq!(
        (bad[0].entry.as_str(), bad[0].metric.as_str()),
        ("t4.profile.obs", "prefill_s")
    );
    assert!(
        bad[0].reason.contains("outside its band"),
        "{}",
        bad[0].reason
    );
}

/// The band-edge rows' designed ratios, modeled / recorded.
const EDGES: [(&str, f64, Outcome); 4] = [
    ("edge.slow.in", 1.145, Outcome::Agree),
    ("edge.slow.out", 1.155, Outcome::Disagree),
    ("edge.fast.in", 1.0 / 1.145, Outcome::Agree),
    ("edge.fast.out", 1.0 / 1.155, Outcome::Disagree),
];

/// A recorded time 0.5 % inside the stated ±15 % agrees, one 0.5 % outside it
/// disagrees, on either side. The ratios are read back from the rows first, so
/// a refit that moves the modeled time fails here rather than testing
/// something else.
#[test]
fn a_time_just_outside_its_band_disagrees_and_one_just_inside_agrees() {
    let report = replay_dir(&root().join("tests/replay/band-edge"), Functional::None);
    for (entry, ratio, outcome) in EDGES {
        let row = report
            .rows
            .iter()
            .find(|r| r.entry == entry)
            .expect("the entry is compared");
        assert_eq!(row.kind, RowKind::OutOfSample, "{entry}: {row:?}");
        assert_eq!(row.band, Some(replay::kind::STATED_BAND), "{entry}");
        let off: f64 = row
            .reason
            .rsplit_once("% vs")
            .and_then(|(head, _)| head.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .expect("the reason gives the ratio");
        assert!(
            (off - (ratio - 1.0) * 100.0).abs() < 0.2,
            "{entry}: modeled/recorded is now {off:+.1} %, designed {:+.1} %: \
             re-centre tests/replay/band-edge on the modeled prefill time",
            (ratio - 1.0) * 100.0
        );
        assert_eq!(row.outcome, outcome, "{entry}: {}", row.reason);
    }
}

/// The headline counts out-of-sample rows only: the band-edge's no-op verdict
/// and emulator-written figure agree, and are counted apart.
#[test]
fn the_headline_counts_out_of_sample_rows_only() {
    let report = replay_dir(&root().join("tests/replay/band-edge"), Functional::None);
    let c = &report.counts;
    let evidence = c.of(RowKind::OutOfSample);
    assert_eq!(
        (evidence.rows, evidence.agree, evidence.disagree),
        (4, 2, 2)
    );
    assert_eq!(
        (
            c.of(RowKind::NoOpVerdict).rows,
            c.of(RowKind::NoOpVerdict).agree
        ),
        (1, 1)
    );
    assert_eq!(
        (
            c.of(RowKind::SelfProduced).rows,
            c.of(RowKind::SelfProduced).agree
        ),
        (1, 1)
    );
    assert_eq!(c.of(RowKind::FitPoint).rows, 0);
    let text = skillc::cli::replay::human(&report, false, 0.0);
    assert!(
        text.contains("out-of-sample: 2 of 4 rows agree, 2 disagree"),
        "{text}"
    );
}

#[test]
fn a_fix_the_remedy_does_not_compute_is_a_disagreement() {
    let report = replay_dir(&root().join("tests/replay/wrong-fix"), Functional::Full);
    let bad: Vec<_> = report
        .rows
        .iter()
        .filter(|r| r.outcome == Outcome::Disagree)
        .collect();
    assert_eq!(bad.len(), 1, "{}", outcomes(&report));
    assert_eq!(
        (bad[0].entry.as_str(), bad[0].metric.as_str()),
        ("t1.lesson", "fix tile_n")
    );
    assert!(bad[0].reason.contains("gives 48"), "{}", bad[0].reason);
}

#[test]
fn without_functional_runs_kernel_gates_are_not_run_rather_than_agreed() {
    let report = replay_dir(&root().join("tests/replay/agree"), Functional::None);
    let mismatches: Vec<_> = report
        .rows
        .iter()
        .filter(|r| r.metric == "mismatches")
        .collect();
    assert!(!mismatches.is_empty());
    assert!(mismatches.iter().all(|r| r.outcome == Outcome::NotRun));
    assert!(report.agrees());
}

fn skillc(args: &[&str]) -> i32 {
    let status = Command::new(env!("CARGO_BIN_EXE_skillc"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("skillc runs")
        .status;
    status.code().expect("exit code")
}

#[test]
fn the_command_exits_1_on_any_disagreement() {
    let model = tiny_model();
    let model = model.to_str().expect("utf-8 path");
    assert_eq!(
        skillc(&["replay", "tests/replay/agree", "--model", model]),
        0
    );
    assert_eq!(
        skillc(&["replay", "tests/replay/wrong-verdict", "--model", model]),
        1
    );
    assert_eq!(
        skillc(&["replay", "tests/replay/time-out-of-band", "--model", model]),
        1
    );
    assert_eq!(
        skillc(&["replay", "tests/replay/no-such-dir", "--model", model]),
        2
    );
    assert_eq!(
        skillc(&[
            "replay",
            "tests/replay/agree",
            "--model",
            "tests/replay/no-such-model"
        ]),
        2
    );
}

/// A partition count beyond the model's LM-head row blocks is refused by the
/// operation's one definition (`ops::effect`, which deploy applies too) with the
/// bound it breaks, before any plan is built; a count within it replays.
#[test]
fn row08_partitions_beyond_the_model_are_refused_with_its_bound() {
    let report = replay_dir(
        &root().join("tests/replay/parts-beyond-the-model"),
        Functional::Kernels,
    );
    let outcome = |entry: &str| {
        let row = report
            .rows
            .iter()
            .find(|r| r.entry == entry)
            .expect("the entry is compared");
        (row.outcome, row.reason.clone())
    };
    for (entry, parts) in [("t5.parts.obs", "100000"), ("t5.huge.obs", "1000000000000")] {
        let (verdict, reason) = outcome(entry);
        assert_eq!(verdict, Outcome::Disagree, "{entry}");
        assert_eq!(
            reason,
            format!("`partition-lm-head` parts={parts} exceeds the model's LM-head row blocks (4)")
        );
    }
    assert_eq!(outcome("t5.fits.obs").0, Outcome::Agree);
}
