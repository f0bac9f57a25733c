//! Phase 0's scope check through `skillc deploy`: mixture-of-experts, MLA,
//! encoder-decoder configs, a Llama config with a partial rotary factor, a
//! Mistral config relabelled `llama` (its `sliding_window` would be dropped)
//! and an unknown family are refused naming every blocking feature and what
//! would lift it, a
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
        ("mistral-as-llama", "sliding-window attention"),
        ("unknown-family", "unknown family"),
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
        assert!(stop.reason.contains("lifted by"), "{case}: {}", stop.reason);
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
fn the_command_line_exits_2_on_refusal_and_on_usage_problems() {
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
    assert_eq!(refused.status.code(), Some(2));
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

/// A refusal names every blocking feature, not the first: the relabelled
/// Llama config with a partial rotary factor and a q/k/v bias key is refused
/// for both (two blockers), the unknown family for its name and what its
/// config shows (LayerNorm), and the Mistral config relabelled `llama` for
/// its `sliding_window`, with the family that would honour it.
#[test]
fn a_refusal_names_every_blocking_feature() {
    let cases = [
        (
            "partial-rotary",
            2.0,
            vec!["partial_rotary_factor", "use_qkv_bias"],
        ),
        ("unknown-family", 2.0, vec!["model_type", "layer_norm_eps"]),
        ("mistral-as-llama", 1.0, vec!["sliding_window", "mistral"]),
    ];
    for (case, blockers, fields) in cases {
        let out = scratch(&format!("every-{case}"));
        let model = repo(&format!("tests/data/deploy/out-of-scope/{case}"));
        let stop = deploy(llama1b(), &model, &out, &[])
            .report
            .stop
            .expect("refused");
        assert_eq!(stop.value, blockers, "{case}: {}", stop.reason);
        for field in fields {
            assert!(stop.reason.contains(field), "{case}: {}", stop.reason);
        }
    }
}

/// The five families' public configs resolve (no blocker), and the same
/// Mistral config relabelled `llama` does not: the key that changes the
/// computation is never dropped silently.
#[test]
fn the_family_configs_resolve_and_a_relabelled_one_is_refused() {
    use skillc_runtime::model::config::{load_config, ConfigError};
    for name in [
        "gemma-2-2b",
        "mistral-7b-v0.1",
        "olmo-1b-hf",
        "phi-3-mini-4k-instruct",
        "stablelm-2-1.6b",
    ] {
        let arch = load_config(&repo(&format!("tests/data/models/{name}")));
        assert!(arch.is_ok(), "{name}: {arch:?}");
    }
    let relabelled = load_config(&repo("tests/data/deploy/out-of-scope/mistral-as-llama"));
    assert!(
        matches!(&relabelled, Err(ConfigError::Blocked { blockers }) if blockers[0].field == "sliding_window"),
        "{relabelled:?}"
    );
}
