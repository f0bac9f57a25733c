//! `skillc deploy` on every fixture of shared/fixtures with the llama1b bundle: every
//! gate passes, phase 0 is gated against the fixture's transformers outputs, the
//! evaluator (a fresh `skillc evaluate` process) passes, the run's trajectory passes
//! `skillc check`, and a second run writes the same artifacts.

mod deploy_support;

use deploy_support::{check, deploy, fixture, llama1b, scratch, summary};
use skillc_runtime::exec::artifacts::record::{PhaseStatus, Verdict};

const FIXTURES: [&str; 4] = ["llama32-tiny", "qwen25-tiny", "qwen3-tiny", "smollm2-tiny"];

#[test]
fn every_fixture_deploys_with_phase_0_gated_against_transformers() {
    for name in FIXTURES {
        let out = scratch(&format!("fixture-{name}"));
        let outcome = deploy(llama1b(), &fixture(name), &out, &[]);
        let r = &outcome.report;
        assert_eq!(outcome.exit_code, 0, "{name}: {:?}", r.stop);
        assert!(
            matches!(r.verdict, Verdict::Pass | Verdict::PassWithWarnings),
            "{name}"
        );
        assert!(
            r.phases.iter().all(|p| p.status == PhaseStatus::Passed),
            "{name}"
        );
        let transformers: Vec<_> = r
            .gates()
            .filter(|(p, g)| *p == 0 && g.op.name() == "compare-reference")
            .collect();
        assert_eq!(
            transformers.len(),
            3,
            "{name}: error, token and non-finite gates"
        );
        assert!(transformers.iter().all(|(_, g)| g.passed), "{name}");
        let evaluation = r.evaluation.as_ref().expect("phase 7 ran");
        assert_eq!(evaluation.exit_code, 0, "{name}: {:?}", evaluation.findings);
        let (code, text) = check(&out.join("trajectory"));
        assert_eq!(code, 0, "{name}: {text}");
        assert!(text.contains("0 errors, 0 warnings"), "{name}: {text}");
        for file in [
            "plan.json",
            "report.json",
            "report.md",
            "trace.json",
            "kernel-registry.json",
            "evaluation.json",
        ] {
            assert!(out.join(file).is_file(), "{name}: {file}");
        }
        insta::assert_snapshot!(format!("fixture_{name}"), summary(r));
    }
}

#[test]
fn a_second_run_writes_the_same_artifacts() {
    let (a, b) = (scratch("same-a"), scratch("same-b"));
    let model = fixture("llama32-tiny");
    deploy(llama1b(), &model, &a, &[]);
    deploy(llama1b(), &model, &b, &[]);
    for file in [
        "plan.json",
        "kernel-registry.json",
        "trace.json",
        "trajectory/00-deploy.traj",
    ] {
        let (x, y) = (
            std::fs::read(a.join(file)).unwrap(),
            std::fs::read(b.join(file)).unwrap(),
        );
        assert!(x == y, "{file} differs between two runs");
    }
    let strip = |dir: &std::path::Path| {
        let mut r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap())
                .unwrap();
        r["wall_s"] = 0.into();
        r["evaluation"]["wall_s"] = 0.into();
        for p in r["phases"].as_array_mut().unwrap() {
            p["wall_s"] = 0.into();
        }
        r
    };
    assert_eq!(strip(&a), strip(&b));
}

/// Heads × head_dim = 896 is not 1024-aligned (Qwen2.5-0.5B's attention): the plan
/// pads 14 query heads to 16 with phantom heads inside each KV group — rows of
/// q_proj and its bias, columns of o_proj — and the run still matches the reference.
#[test]
fn non_aligned_heads_deploy_with_phantom_heads() {
    use skillc_runtime::exec::artifacts::record::StepOrigin;
    let out = scratch("padded-heads");
    let outcome = deploy(
        llama1b(),
        &deploy_support::repo("tests/data/deploy/padded-heads"),
        &out,
        &[],
    );
    assert_eq!(outcome.exit_code, 0, "{:?}", outcome.report.stop);
    let derived: Vec<&str> = outcome.report.phases[2]
        .steps
        .iter()
        .filter(|s| matches!(s.origin, StepOrigin::Derived { .. }))
        .map(|s| s.op.as_str())
        .collect();
    assert_eq!(derived, ["pad-heads", "bias-after-rope"]);
    let plan = std::fs::read_to_string(out.join("plan.json")).unwrap();
    assert!(
        plan.contains("\"padded_heads\": 16"),
        "the plan pads to 16 heads"
    );
}
