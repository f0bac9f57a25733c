//! Phase 0's scope check through `skillc deploy`: mixture-of-experts, MLA,
//! encoder-decoder and partial-rotary configs are refused with the reason, a
//! Gemma-3 attention scale the kernels cannot express is refused by name, and
//! usage problems exit 2 before any phase runs.

use crate::deploy_support;
use skillc_runtime::phase::DeployPhase;

use deploy_support::{deploy, llama1b, repo, scratch, skillc};
use skillc_runtime::exec::artifacts::record::{PhaseStatus, Verdict};

/// Each architecture outside the dense decoder-only families, refused at phase 0
/// with the feature and why (`tests/data/deploy/out-of-scope/<case>`).
#[test]
fn architectures_outside_the_families_are_refused_at_phase_0_with_the_reason() {
    let cases = [
        ("moe", "mixture of experts"),
        ("mla", "multi-head latent attention"),
        ("encoder-decoder", "encoder-decoder"),
        ("partial-rotary", "partial rotary embeddings"),
    ];
    let mut reasons = String::new();
    for (case, feature) in cases {
        let out = scratch(case);
        let model = repo(&format!("tests/data/deploy/out-of-scope/{case}"));
        let outcome = deploy(llama1b(), &model, &out, &[]);
        assert_eq!(outcome.exit_code, 1, "{case}");
        let r = &outcome.report;
        assert_eq!(r.verdict, Verdict::Refused, "{case}");
        assert_eq!(r.phases[0].status, PhaseStatus::Failed, "{case}");
        assert!(
            r.phases[1..]
                .iter()
                .all(|p| p.status == PhaseStatus::NotRun),
            "{case}"
        );
        let stop = r.stop.as_ref().expect("stop");
        assert!(stop.reason.contains(feature), "{case}: {}", stop.reason);
        assert!(
            out.join("report.md").is_file() && out.join("trajectory/00-deploy.traj").is_file(),
            "{case}"
        );
        reasons += &format!("{case}: {}\n", stop.reason);
    }
    insta::assert_snapshot!(reasons);
}

/// Gemma-3 is in scope except for what its attention kernels cannot scale by: a
/// `query_pre_attn_scalar` that is not a whole number of dimensions is refused
/// at phase 0 by name (Gemma-3-1B's own 256 deploys; the bench runs it).
#[test]
fn a_gemma_3_scale_the_kernels_cannot_express_is_refused_by_name() {
    let model = scratch("gemma-scale");
    let config = std::fs::read_to_string(repo("../shared/models/gemma-3-1b/config.json"))
        .expect("gemma-3-1b config");
    let mut config: serde_json::Value = serde_json::from_str(&config).expect("json");
    config["query_pre_attn_scalar"] = serde_json::json!(256.5);
    std::fs::write(model.join("config.json"), config.to_string()).expect("write config");
    let out = scratch("gemma-scale-out");
    let outcome = deploy(llama1b(), &model, &out, &[]);
    assert_eq!(outcome.exit_code, 1);
    let stop = outcome.report.stop.as_ref().expect("stop");
    assert_eq!(
        (stop.phase, stop.metric.name(), stop.value),
        (DeployPhase::Reference, "blockers", 1.0)
    );
    assert!(
        stop.reason.contains("query_pre_attn_scalar") && stop.reason.contains("256.5"),
        "{}",
        stop.reason
    );
}

#[test]
fn the_command_line_exits_1_on_refusal_and_2_on_usage_problems() {
    let out = scratch("cli");
    let bundle = repo("generated-skills/llama1b");
    let refused = skillc()
        .args(["deploy"])
        .arg(&bundle)
        .arg("--model")
        .arg(repo("tests/data/deploy/out-of-scope/moe"))
        .arg("--out")
        .arg(out.join("moe"))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stdout).contains("REFUSED"));
    let no_config = skillc()
        .args(["deploy"])
        .arg(&bundle)
        .arg("--model")
        .arg(out.join("nowhere"))
        .arg("--out")
        .arg(out.join("nowhere-out"))
        .output()
        .unwrap();
    assert_eq!(no_config.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_config.stderr).contains("no config.json"));
    let not_a_bundle = skillc()
        .args(["deploy"])
        .arg(repo("Cargo.toml"))
        .arg("--model")
        .arg(repo("../shared/fixtures/llama32-tiny"))
        .output()
        .unwrap();
    assert_eq!(not_a_bundle.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&not_a_bundle.stderr).contains("not a skill bundle"));
    let bad_fault = skillc()
        .args(["deploy"])
        .arg(&bundle)
        .args(["--model", "x", "--plant", "drop-everything"])
        .output()
        .unwrap();
    assert_eq!(bad_fault.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad_fault.stderr).contains("unknown fault `drop-everything`"));
}
