//! `skillc build` and `skillc diff` as a user runs them: output identical for 1 and 2
//! rayon threads, `--check` passing on a fresh bundle and failing with a diff on a
//! stale one, atomic replacement, and the semantic diff of two bundles.

use crate::build_support;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use build_support::{copy_dir, repo, scratch};
use skillc::emit::on_disk::read_tree;

fn skillc(args: &[&str], threads: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skillc"));
    command.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    if let Some(threads) = threads {
        command.env("RAYON_NUM_THREADS", threads);
    }
    command.output().expect("skillc runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn one_and_two_threads_write_identical_bundles() {
    let root = scratch("threads");
    let cases = ["grammar/example", "tests/data/build/hostile/hostile"];
    for case in cases {
        let one = root.join("one");
        let two = root.join("two");
        for (out, threads) in [(&one, "1"), (&two, "2")] {
            let run = skillc(&["build", case, "--out", path(out)], Some(threads));
            assert!(run.status.success(), "{}", text(&run.stderr));
        }
        let (a, b) = (
            read_tree(&one).expect("read"),
            read_tree(&two).expect("read"),
        );
        assert!(!a.is_empty());
        assert_eq!(a, b, "{case}");
    }
    fs::remove_dir_all(&root).ok();
}

#[test]
fn check_passes_when_fresh_and_fails_with_a_diff_when_stale() {
    let root = scratch("check");
    let out = root.join("example");
    let args = ["build", "grammar/example", "--out", path(&out)];
    assert!(skillc(&args, None).status.success());

    let fresh = skillc(&[&args[..], &["--check"]].concat(), None);
    assert_eq!(fresh.status.code(), Some(0), "{}", text(&fresh.stderr));
    assert!(text(&fresh.stdout).ends_with("is up to date\n"));

    let phase = out.join("phase-1-kernel-validation/SKILL.md");
    let edited = fs::read_to_string(&phase)
        .expect("read")
        .replace("mismatches == 0", "mismatches <= 5");
    fs::write(&phase, edited).expect("write");
    fs::write(out.join("stray.md"), "not generated\n").expect("write");
    fs::remove_file(out.join("opt-lm-head/SKILL.md")).expect("remove");

    let stale = skillc(&[&args[..], &["--check"]].concat(), None);
    assert_eq!(stale.status.code(), Some(1));
    let report = text(&stale.stdout).replace(path(&out), "OUT");
    insta::assert_snapshot!("check_stale_report", report);
    fs::remove_dir_all(&root).ok();
}

#[test]
fn a_rebuild_replaces_the_bundle_and_removes_stale_files() {
    let root = scratch("replace");
    let out = root.join("example");
    let args = ["build", "grammar/example", "--out", path(&out)];
    assert!(skillc(&args, None).status.success());
    let skills = |dir: &Path| -> Vec<String> {
        fs::read_dir(dir)
            .expect("read")
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("SKILL.md").is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    let before = skills(&out);
    // A smaller trajectory into the same folder: the skills only the first build
    // wrote go (files skillc did not write would be refused: tests/hardening.rs).
    let smaller = ["build", "tests/data/valid/minimal", "--out", path(&out)];
    let rebuilt = skillc(&smaller, None);
    assert!(rebuilt.status.success(), "{}", text(&rebuilt.stderr));
    let after = skills(&out);
    let gone: Vec<&String> = before.iter().filter(|s| !after.contains(s)).collect();
    assert!(!gone.is_empty(), "{before:?} -> {after:?}");
    assert!(after.len() < before.len());
    let siblings: Vec<_> = fs::read_dir(&root).expect("read").collect();
    assert_eq!(siblings.len(), 1, "no staging directory left behind");
    fs::remove_dir_all(&root).ok();
}

#[test]
fn trajectories_with_errors_are_not_built() {
    let root = scratch("errors");
    let traj = root.join("broken");
    fs::create_dir_all(&traj).expect("mkdir");
    fs::write(
        traj.join("00.traj"),
        "trajectory \"broken\" model \"m\" target npu2 baseline \"none\"\n\
         session 2026-05-01 phase 1\n\
         a1 action select-tiling kernel=gemmm shape=[1,2,3]\n",
    )
    .expect("write");
    let out = root.join("out");
    let run = skillc(&["build", path(&traj), "--out", path(&out)], None);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        text(&run.stderr).contains("error: not building: 1 error"),
        "{}",
        text(&run.stderr)
    );
    assert!(!out.exists());
    fs::remove_dir_all(&root).ok();
}

/// Builds the example and a variant (a lesson added, a tile changed, a gate
/// tightened), then diffs the two bundles.
#[test]
fn diff_reports_semantic_changes_with_provenance() {
    let root = scratch("diff");
    let old_dir = root.join("old/example");
    let new_dir = root.join("new/example");
    copy_dir(&repo("grammar/example"), &old_dir);
    copy_dir(&repo("grammar/example"), &new_dir);
    let kernels = new_dir.join("01-kernels.traj");
    let text_before = fs::read_to_string(&kernels).expect("read");
    let mut edited = text_before
        .replace("tile=[64,256,32,32]", "tile=[64,256,32,56]")
        .replace(
            "mismatches = 0 == 0  mean_rel_l1",
            "mismatches = 0 <= 1  mean_rel_l1",
        );
    edited.push_str(
        "\nl99 lesson \"A herd wider than the N tiles leaves columns idle\"\n    \
         symptom validate-kernel fails with mismatches > 0\n    \
         cause herd_n > N / tile_n\n    \
         fix select-tiling herd=[8, 1]\n    \
         when kernel=gemm\n    \
         evidence o13\n",
    );
    assert_ne!(edited, text_before);
    fs::write(&kernels, edited).expect("write");
    let (old_out, new_out) = (root.join("bundles/old"), root.join("bundles/new"));
    for (dir, out) in [(&old_dir, &old_out), (&new_dir, &new_out)] {
        let run = skillc(&["build", path(dir), "--out", path(out)], None);
        assert!(run.status.success(), "{}", text(&run.stderr));
    }

    let same = skillc(
        &["diff", path(&old_out), path(&old_out.join("bundle.json"))],
        None,
    );
    assert_eq!(same.status.code(), Some(0));
    assert_eq!(text(&same.stdout), "no semantic differences\n");

    let changed = skillc(&["diff", path(&old_out), path(&new_out)], None);
    assert_eq!(changed.status.code(), Some(1));
    insta::assert_snapshot!("diff_example_variant", text(&changed.stdout));

    let missing = skillc(&["diff", path(&root.join("nowhere")), path(&new_out)], None);
    assert_eq!(missing.status.code(), Some(2));
    fs::remove_dir_all(&root).ok();
}
