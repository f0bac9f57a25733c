//! The long-context probes of phase 3 (`runtime/src/exec/gates/long.rs`): a
//! decode fault that starts at position 65 passes every short verification gate
//! of a tiny fixture (its prompts reach about 50 positions) and is stopped by
//! the long-context decode probe, while the same fixture unplanted passes every
//! probe with its floor-derived limits.

use crate::deploy_support;

use deploy_support::{deploy, fixture, llama1b, scratch, summary};
use skillc_runtime::exec::Fault;
use skillc_runtime::phase::DeployPhase;

#[test]
fn a_late_stale_kv_cache_passes_the_short_gates_and_is_stopped_by_the_long_probe() {
    let out = scratch("late-stale-kv-65");
    let outcome = deploy(
        llama1b(),
        &fixture("qwen25-tiny"),
        &out,
        &[Fault::LateStaleKv65],
    );
    let r = &outcome.report;
    assert_eq!(outcome.exit_code, 1, "{}", summary(r));
    let stop = r.stop.as_ref().expect("a stop record");
    assert_eq!(stop.phase, DeployPhase::Model, "{}", summary(r));
    assert!(
        stop.gate.starts_with("verify: long-context"),
        "{}",
        stop.gate
    );
    let phase3: Vec<_> = r
        .gates()
        .filter(|(p, _)| *p == DeployPhase::Model)
        .map(|(_, g)| g)
        .collect();
    // Before the probe: every short verification gate passes the fault.
    let short: Vec<_> = phase3
        .iter()
        .filter(|g| !g.name.contains("long-"))
        .collect();
    assert!(short.len() >= 5, "{}", summary(r));
    assert!(short.iter().all(|g| g.passed), "{}", summary(r));
    // The prefill is right; the decode's cache is what the probe catches.
    let failed: Vec<&str> = phase3
        .iter()
        .filter(|g| !g.passed)
        .map(|g| g.name.as_str())
        .collect();
    assert!(
        failed.contains(&"verify: long-context KV after decode"),
        "{failed:?}"
    );
    assert!(
        failed.iter().all(|n| n.starts_with("verify: long-context")),
        "{failed:?}"
    );
}

#[test]
fn unplanted_fixtures_pass_every_long_context_probe() {
    for name in ["qwen25-tiny", "gemma3-tiny"] {
        let out = scratch(&format!("long-unplanted-{name}"));
        let outcome = deploy(llama1b(), &fixture(name), &out, &[]);
        let r = &outcome.report;
        assert_eq!(outcome.exit_code, 0, "{name}: {}", summary(r));
        let long: Vec<_> = r
            .gates()
            .filter(|(_, g)| g.name.contains("long-"))
            .map(|(_, g)| g)
            .collect();
        assert!(long.len() >= 4, "{name}: {}", summary(r));
        assert!(
            long.iter().all(|g| g.passed && g.value > 0.0),
            "{name}: {}",
            summary(r)
        );
    }
}
