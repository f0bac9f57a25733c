//! Phases 4 and 5 keep a technique only when the modeled time strictly drops, so the
//! order of the bundle's steps matters (except between alternatives, techniques that
//! replace the same part of the plan, tried from one plan: the last test): on a model
//! with a wide LM head (tests/data/deploy/wide-lm-head), the last-token LM head loses
//! in phase 4 (one unpartitioned GEMV is slower than the prefill GEMM) and wins once
//! phase 5 has partitioned the LM head. The executor re-tries it after phase 5, keeps it, says so
//! in the report, and writes the re-try in a phase-4 session of the run's trajectory.

use crate::deploy_support;
use skillc_runtime::phase::DeployPhase;

use deploy_support::{check, deploy, llama1b, load_bundle, repo, scratch};
use skillc_runtime::exec::artifacts::record::{Reversion, StepOrigin, StepOutcome};

#[test]
fn a_prefill_step_that_lost_in_phase_4_is_kept_when_re_tried_after_phase_5() {
    let out = scratch("wide-lm-head");
    let outcome = deploy(
        llama1b(),
        &repo("tests/data/deploy/wide-lm-head"),
        &out,
        &[],
    );
    let r = &outcome.report;
    assert_eq!(outcome.exit_code, 0, "{:?}", r.stop);
    let gate = |phase: DeployPhase| {
        r.gates()
            .find(|(p, g)| *p == phase && g.name.starts_with("last-token-lm-head"))
            .map(|(_, g)| (g.passed, g.value, g.threshold))
            .expect("a last-token-lm-head gate")
    };
    let (kept_in_4, ..) = gate(DeployPhase::Prefill);
    let (kept_in_5, after, before) = gate(DeployPhase::Decode);
    assert!(!kept_in_4, "the unpartitioned GEMV loses in phase 4");
    assert!(kept_in_5 && after < before, "and wins after phase 5");

    let phase4 = r
        .phases
        .iter()
        .find(|p| p.index == DeployPhase::Prefill)
        .expect("phase 4");
    let record = phase4
        .steps
        .iter()
        .find(|s| s.op == "last-token-lm-head")
        .expect("the bundle step");
    assert!(
        matches!(&record.outcome, StepOutcome::Rederived { why } if why.contains("re-tried after phase 5 and kept")),
        "{:?}",
        record.outcome
    );
    let phase5 = r
        .phases
        .iter()
        .find(|p| p.index == DeployPhase::Decode)
        .expect("phase 5");
    assert!(phase5.steps.iter().any(|s| s.op == "last-token-lm-head"
        && matches!(s.origin, StepOrigin::Derived { .. })
        && matches!(s.outcome, StepOutcome::Kept { .. })));

    let production = &r.performance.as_ref().expect("modeled figures").production;
    assert!(production.ttft_s < before, "the production plan has it");
    let (code, text) = check(&out.join("trajectory"));
    assert_eq!(code, 0, "{text}");
}

/// The fused decode and the decode cascade replace the same part of the decode
/// plan (the fused builder ignores `cascade-ffn`). Kept greedily, a bundle that
/// listed the cascade first kept it, then the fused decode on top: the cascade
/// was reported kept though the plan no longer ran it, and its switch stayed in
/// plan.json; listed the other way round, the cascade could not be tried against
/// the fused decode at all. Phase 5 tries them as alternatives from one plan, so
/// on a config-only model where both are legal and both beat the plan reached
/// (tests/data/deploy/decode-alternatives: one layer, hidden 512, FFN 2048) the
/// merged bundle and the same bundle with the two steps swapped write the same
/// plan.json, keep the fused decode (modeled faster there) and report the cascade
/// as the alternative not kept, both listed with their figures.
#[test]
fn alternatives_keep_the_same_plan_whichever_the_bundle_lists_first() {
    let bundle = load_bundle(&repo("generated-skills/npu2-llms"));
    let steps = &bundle.phases[usize::from(DeployPhase::Decode.index())].steps;
    let at = |op: &str| {
        steps
            .iter()
            .position(|s| s.op.to_string() == op)
            .unwrap_or_else(|| panic!("the merged bundle has a `{op}` step"))
    };
    let (fused, cascade) = (at("fused-decode"), at("cascade-ffn"));
    assert!(fused < cascade, "the bundle lists the fused decode first");
    let mut swapped = bundle.clone();
    swapped.phases[usize::from(DeployPhase::Decode.index())]
        .steps
        .swap(fused, cascade);

    let model = repo("tests/data/deploy/decode-alternatives");
    let run = |bundle: &skillc_runtime::bundle::Bundle, name: &str| {
        let out = scratch(name);
        let outcome = deploy(bundle, &model, &out, &[]);
        assert_eq!(outcome.exit_code, 0, "{:?}", outcome.report.stop);
        let plan = std::fs::read_to_string(out.join("plan.json")).expect("plan.json");
        (outcome.report, plan)
    };
    let (listed, listed_plan) = run(&bundle, "alternatives-as-built");
    let (reordered, reordered_plan) = run(&swapped, "alternatives-swapped");
    assert!(
        listed_plan == reordered_plan,
        "the same plan whichever comes first"
    );

    for report in [&listed, &reordered] {
        let phase5 = report
            .phases
            .iter()
            .find(|p| p.index == DeployPhase::Decode)
            .expect("phase 5");
        let outcome = |op: &str| {
            phase5
                .steps
                .iter()
                .find(|s| s.op == op)
                .map(|s| s.outcome.clone())
                .expect("the step's record")
        };
        assert!(
            matches!(outcome("fused-decode"), StepOutcome::Kept { .. }),
            "{:?}",
            outcome("fused-decode")
        );
        assert!(
            matches!(
                outcome("cascade-ffn"),
                StepOutcome::Reverted { why: Reversion::OtherAlternative { ref kept, .. } }
                    if kept.starts_with("fused-decode ")
            ),
            "{:?}",
            outcome("cascade-ffn")
        );
        let note = phase5
            .notes
            .iter()
            .find(|n| n.starts_with("alternatives"))
            .expect("a note listing the alternatives");
        assert!(
            note.contains("fused-decode") && note.contains("cascade-ffn"),
            "{note}"
        );
    }
}
