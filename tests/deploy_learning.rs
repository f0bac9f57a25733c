//! A run's trajectory feeds the next build: it passes `skillc check`, and building
//! the llama1b trajectory together with it merges the lesson the run applied and
//! counts the run's failing observation as new evidence.

use crate::deploy_support;

use deploy_support::{check, deploy, fixture, llama1b, load_bundle, repo, scratch, skillc};
use skillc_runtime::exec::Fault;

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
