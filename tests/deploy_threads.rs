//! `skillc deploy --threads N` on a fixture at 1, 2 and 4 threads writes the
//! same plan, kernel registry, trace and report (wall times aside), and phase
//! 7's evaluator, a fresh process, runs on the deploy's thread count.

use std::path::Path;

use crate::deploy_support::{fixture, repo, scratch, skillc};

fn deploy(model: &Path, out: &Path, threads: &str) -> serde_json::Value {
    let run = skillc()
        .arg("deploy")
        .arg(repo("generated-skills/llama1b"))
        .arg("--model")
        .arg(model)
        .arg("--out")
        .arg(out)
        .args(["--threads", threads])
        .env_remove(skillc_runtime::threads::ENV_VAR)
        .output()
        .expect("skillc deploy runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{threads} threads: {stderr}");
    let plural = if threads == "1" { "" } else { "s" };
    assert!(
        stderr.contains(&format!("running on {threads} thread{plural} (--threads)")),
        "{stderr}"
    );
    let evaluation: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("evaluation.json")).unwrap())
            .unwrap();
    assert_eq!(
        evaluation["threads"].as_u64(),
        threads.parse().ok(),
        "the evaluator runs on the deploy's thread count"
    );
    let mut report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    report["wall_s"] = 0.into();
    report["evaluation"]["wall_s"] = 0.into();
    report["decode_limits"]["wall_s"] = 0.into();
    for p in report["phases"].as_array_mut().unwrap() {
        p["wall_s"] = 0.into();
    }
    report
}

#[test]
fn a_fixture_deploys_to_the_same_artifacts_at_1_2_and_4_threads() {
    let model = fixture("qwen25-tiny");
    let runs: Vec<_> = ["1", "2", "4"]
        .iter()
        .map(|&n| {
            let out = scratch(&format!("threads-{n}"));
            let report = deploy(&model, &out, n);
            (n, out, report)
        })
        .collect();
    let (_, first, first_report) = &runs[0];
    for (n, out, report) in &runs[1..] {
        for file in ["plan.json", "kernel-registry.json", "trace.json"] {
            assert!(
                std::fs::read(first.join(file)).unwrap() == std::fs::read(out.join(file)).unwrap(),
                "{file}: {n} threads differ from 1"
            );
        }
        assert_eq!(
            report, first_report,
            "report.json: {n} threads differ from 1"
        );
    }
}
