//! Lessons that hold for some models only (issue 25, part 5): `skillc deploy` applies
//! a lesson whose `if` condition is false on the model it deploys never, says in the
//! report and in the run's trajectory which lesson it skipped and why, and names the
//! deployments a kept lesson was learnt on.

use crate::deploy_support;

use deploy_support::{check, deploy, fixture, scratch, with_test_lessons};
use skillc_runtime::bundle::Condition;
use skillc_runtime::exec::{DeployReport, Fault};
use skillc_runtime::phase::DeployPhase;

fn block(r: &DeployReport) -> &skillc_runtime::exec::artifacts::record::PhaseRecord {
    r.phases
        .iter()
        .find(|p| p.index == DeployPhase::Block)
        .expect("phase 2 ran")
}

/// qwen3-tiny normalises q and k per head and has no q/k/v bias. With Q/K-norm
/// skipped, the block fails the way both test lessons describe; the bias lesson
/// (`if qkv_bias`) is not for this model and is skipped, the Q/K-norm one (`if
/// qk_norm`) repairs it.
#[test]
fn a_lesson_for_other_models_is_skipped_and_the_report_says_why() {
    let out = scratch("conditions-skip");
    let outcome = deploy(
        with_test_lessons(),
        &fixture("qwen3-tiny"),
        &out,
        &[Fault::SkipQkNorm],
    );
    let r = &outcome.report;
    assert_eq!(outcome.exit_code, 0, "{:?}", r.stop);
    let phase = block(r);
    let skipped: Vec<(&str, &str, &[String])> = phase
        .skipped
        .iter()
        .map(|s| (s.lesson.as_str(), s.condition.as_str(), s.values.as_slice()))
        .collect();
    assert_eq!(
        skipped,
        [("t.l15", "qkv_bias", &["qkv_bias = false".to_string()][..])]
    );
    let tried: Vec<(&str, bool, &[String])> = phase
        .attempts
        .iter()
        .map(|a| (a.lesson.as_str(), a.fixed, a.deployments.as_slice()))
        .collect();
    assert_eq!(
        tried,
        [("t.l21", true, &["deploy-test-lessons".to_string()][..])]
    );

    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        report.contains("lesson `t.l15` skipped on `block cosine"),
        "{report}"
    );
    assert!(
        report.contains("its condition `if qkv_bias` is false on this model (qkv_bias = false)"),
        "{report}"
    );
    assert!(
        report.contains("lesson `t.l21` (learnt on deploy-test-lessons)"),
        "{report}"
    );

    let trajectory = out.join("trajectory");
    let text =
        std::fs::read_to_string(trajectory.join("00-deploy.traj")).expect("the run's trajectory");
    assert!(
        text.contains("lesson t.l15 (Qwen2.5's q/k/v bias must be added, after RoPE) matches this failure but is not for this model"),
        "{text}"
    );
    assert!(text.contains("    if qk_norm\n"), "{text}");
    let (code, checked) = check(&trajectory);
    assert_eq!(code, 0, "{checked}");
}

/// The same run with the repairing lesson's condition negated: the runtime applies
/// neither lesson, and the block stops the run.
#[test]
fn a_lesson_whose_condition_is_false_is_never_applied() {
    let mut bundle = with_test_lessons().clone();
    bundle
        .lessons
        .get_mut("t.l21")
        .expect("the Q/K-norm lesson")
        .condition = Some(Condition::Not(Box::new(Condition::Flag("qk_norm".into()))));
    let out = scratch("conditions-never");
    let outcome = deploy(&bundle, &fixture("qwen3-tiny"), &out, &[Fault::SkipQkNorm]);
    let r = &outcome.report;
    assert_eq!(outcome.exit_code, 1);
    let stop = r.stop.as_ref().expect("a stop record");
    assert_eq!(stop.phase, DeployPhase::Block);
    let phase = block(r);
    assert!(phase.attempts.is_empty(), "{:?}", phase.attempts);
    let skipped: Vec<(&str, &str)> = phase
        .skipped
        .iter()
        .map(|s| (s.lesson.as_str(), s.condition.as_str()))
        .collect();
    assert_eq!(skipped, [("t.l15", "qkv_bias"), ("t.l21", "not qk_norm")]);
}
