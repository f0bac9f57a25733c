//! A run's trajectory feeds the next build: it passes `skillc check`, and building
//! the llama1b trajectory together with it merges the lesson the run applied and
//! counts the run's failing observation as new evidence.

use crate::deploy_support;

use std::path::Path;

use deploy_support::{check, deploy, fixture, llama1b, load_bundle, repo, scratch, skillc};
use skillc::syntax::{self, SourceFile};
use skillc_runtime::exec::Fault;

/// The run's trajectory is in the printer's layout already: print → parse → print
/// gives it back (its header comment aside, which is not part of the tree).
fn assert_the_printer_writes_it_back(path: &Path) {
    let text = std::fs::read_to_string(path).expect("the run's trajectory");
    let written: String = text
        .lines()
        .skip_while(|l| l.starts_with('#') || l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let sources = [SourceFile {
        path: "00-deploy.traj".into(),
        text: written.clone(),
    }];
    let (parsed, diagnostics) = syntax::parse_sources(&sources, 0);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!(syntax::print::file(&parsed[0]), written);
}

#[test]
fn building_with_the_run_trajectory_counts_the_new_evidence() {
    let out = scratch("learning-run");
    let outcome = deploy(
        llama1b(),
        &fixture("llama32-tiny"),
        &out,
        &[Fault::GemmNNotMultiple],
    );
    assert_eq!(outcome.exit_code, 0, "{:?}", outcome.report.stop);
    let trajectory = out.join("trajectory");
    let (code, text) = check(&trajectory);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("0 errors, 0 warnings"), "{text}");
    assert_the_printer_writes_it_back(&trajectory.join("00-deploy.traj"));

    let bundle_dir = scratch("learning-bundle");
    let built = skillc()
        .arg("build")
        .arg(repo("trajectories/llama1b"))
        .arg(&trajectory)
        .arg("--out")
        .arg(&bundle_dir)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let merged = load_bundle(&bundle_dir);
    let before = &llama1b().lessons["p1.lesson.tile-n"];
    let after = merged
        .lessons
        .get("p1.lesson.tile-n")
        .expect("the reference trajectory's lesson keeps its id");
    assert_eq!(after.evidence_count, before.evidence_count + 1);
    assert!(
        after
            .evidence
            .iter()
            .any(|e| e.file.contains("00-deploy.traj")),
        "{:?}",
        after.evidence
    );
}
