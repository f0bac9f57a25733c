//! Lessons across deployments (issue 25): the made-up deployments of
//! tests/data/build/deployments merge the lesson two of them met into one lesson
//! with the evidence and the name of each, keep a lesson that only MHA models need
//! with its condition, report two deployments that fix one symptom differently with
//! nothing to tell them apart (W0104); `skillc build` of several folders writes one
//! bundle that `--check` keeps fresh; `skillc bench lodo` lists what each deployment
//! alone teaches.

use crate::build_support;

use std::process::{Command, Output};

use build_support::{build, repo, scratch, subdirs};
use skillc_runtime::bundle::Condition;

fn deployments() -> Vec<std::path::PathBuf> {
    subdirs(&repo("tests/data/build/deployments"))
}

fn skillc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skillc"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("skillc runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_lesson_two_deployments_met_is_one_lesson_with_the_evidence_of_both() {
    let (built, diagnostics) = build(&deployments(), None);
    let lessons = &built.distilled.ir.lessons;
    let split = &lessons["qknorm4b.l3"];
    assert_eq!(split.deployments, ["qknorm4b", "wide8b"]);
    assert_eq!(split.evidence_count, 2);
    assert!(
        !lessons.contains_key("wide8b.l3"),
        "merged, whatever its words"
    );
    assert_eq!(
        split
            .condition
            .as_ref()
            .map(skillc_runtime::notation::condition),
        Some("intermediate_size > gemv_k_limit".to_string())
    );
    let mha = &lessons["mha1b.l10"];
    assert!(matches!(mha.condition, Some(Condition::Compare { .. })));
    assert_eq!(mha.deployments, ["mha1b"]);
    // mha1b and wide8b fix the block mismatch differently, for every model: reported
    // once, at the later deployment; qknorm4b's fix is for Q/K-norm models only.
    assert_eq!(
        diagnostics.matches("warning[W0104]").count(),
        1,
        "{diagnostics}"
    );
    assert!(
        diagnostics.contains("lesson `l15` (wide8b) and lesson `l4` (mha1b) fix the same symptom on every model differently"),
        "{diagnostics}"
    );
    assert_eq!(lessons["l4"].alternatives, ["l15", "qknorm4b.l10"]);
    assert!(lessons["mha1b.l10"].alternatives.is_empty());
}

/// Without its `if`, the Q/K-norm lesson is a third unconditional fix of the block
/// mismatch: W0104 reports it against both others.
#[test]
fn a_fix_without_its_condition_is_reported_against_every_other() {
    let root = scratch("deployments-no-condition");
    let mut dirs = Vec::new();
    for dir in deployments() {
        let copy = root.join(dir.file_name().expect("a name"));
        build_support::copy_dir(&dir, &copy);
        dirs.push(copy);
    }
    let path = root.join("qknorm4b/00-run.traj");
    let text = std::fs::read_to_string(&path).expect("read");
    std::fs::write(&path, text.replace("    if qk_norm\n", "")).expect("write");
    let (_, diagnostics) = build(&dirs, None);
    assert_eq!(
        diagnostics.matches("warning[W0104]").count(),
        3,
        "{diagnostics}"
    );
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn several_folders_build_one_bundle_that_check_keeps_fresh() {
    let out = scratch("deployments-merged");
    let bundle = out.join("npu2-test");
    let mut args = vec!["build", "trajectories/llama1b"];
    let dirs = deployments();
    let dirs: Vec<&str> = dirs
        .iter()
        .map(|d| d.to_str().expect("utf-8 path"))
        .collect();
    args.extend(&dirs);
    let out_arg = bundle.to_str().expect("utf-8 path");
    args.extend(["--out", out_arg]);
    let run = skillc(&args);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert!(text(&run.stderr).contains("warning[W0104]"));
    let json = std::fs::read_to_string(bundle.join("bundle.json")).expect("bundle.json");
    let read: skillc_runtime::bundle::Bundle = serde_json::from_str(&json).expect("parses");
    let names: Vec<&str> = read.sources.iter().map(|s| s.trajectory.as_str()).collect();
    assert_eq!(names, ["llama1b", "mha1b", "qknorm4b", "wide8b"]);
    assert_eq!(read.lessons["p1.lesson.tile-n"].deployments, ["llama1b"]);
    assert!(read.check().is_ok());

    let fresh = skillc(&[&args[..], &["--check"]].concat());
    assert_eq!(fresh.status.code(), Some(0), "{}", text(&fresh.stderr));
    let page = bundle.join("debug-gemv-k-limit/SKILL.md");
    std::fs::write(&page, "edited\n").expect("write");
    let stale = skillc(&[&args[..], &["--check"]].concat());
    assert_eq!(stale.status.code(), Some(1), "{}", text(&stale.stdout));
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn lodo_lists_what_only_one_deployment_teaches() {
    let dirs = deployments();
    let mut args: Vec<&str> = vec!["bench", "lodo"];
    args.extend(dirs.iter().map(|d| d.to_str().expect("utf-8 path")));
    let table = skillc(&args);
    assert!(table.status.success(), "{}", text(&table.stderr));
    let table = text(&table.stdout);
    assert!(
        table.contains("| qknorm4b | example/qknorm-4b | 2 | 1 | 1 |"),
        "{table}"
    );
    assert!(
        table.contains("| wide8b | example/wide-8b | 3 | 1 | 2 |"),
        "{table}"
    );
    assert!(
        table.contains("| mha1b | `mha1b.l10` | opt-fused-qkv | `n_kv_heads == n_heads` |"),
        "{table}"
    );

    args.push("--json");
    let json = skillc(&args);
    assert!(json.status.success(), "{}", text(&json.stderr));
    let document: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let new = |deployment: &str| -> Vec<String> {
        document["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .find(|r| r["deployment"] == deployment)
            .expect("the deployment's row")["new"]
            .as_array()
            .expect("new lessons")
            .iter()
            .map(|l| l["id"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(new("mha1b"), ["l4", "mha1b.l10"]);
    // The K split qknorm4b recorded is wide8b's too: new knowledge of neither.
    assert_eq!(new("qknorm4b"), ["qknorm4b.l10"]);
    assert_eq!(new("wide8b"), ["l15", "l9"]);
    assert_eq!(document["new_lessons"], 5);
}
