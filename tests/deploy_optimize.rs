//! Phases 4 and 5 keep a technique only when the modeled time strictly drops, so the
//! order of the bundle's steps matters: on a model with a wide LM head
//! (tests/data/deploy/wide-lm-head), the last-token LM head loses in phase 4 (one
//! unpartitioned GEMV is slower than the prefill GEMM) and wins once phase 5 has
//! partitioned the LM head. The executor re-tries it after phase 5, keeps it, says so
//! in the report, and writes the re-try in a phase-4 session of the run's trajectory.

use crate::deploy_support;
use skillc_runtime::phase::DeployPhase;

use deploy_support::{check, deploy, llama1b, repo, scratch};
use skillc_runtime::exec::artifacts::record::{StepOrigin, StepOutcome};

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
