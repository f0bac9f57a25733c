//! Shared helpers of the `deploy*` integration tests: the bundles (the committed
//! llama1b one, and llama1b built together with the test lessons of
//! tests/data/deploy/lessons), scratch output directories, running a deploy with the
//! real `skillc` binary as phase 7's fresh-process evaluator, and a structural
//! summary of a report for snapshots (verdicts, gates, step outcomes; no wall times).

#![allow(dead_code)]

use skillc_runtime::phase::DeployPhase;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use skillc_runtime::bundle::Bundle;
use skillc_runtime::exec::artifacts::record::{DeployReport, StepOutcome};
use skillc_runtime::exec::{self, DeployOptions, DeployOutcome, EvaluatorLaunch, Fault, Silent};

pub fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

pub fn fixture(name: &str) -> PathBuf {
    crate::test_support::fixture_dir(name)
}

pub fn skillc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_skillc"))
}

/// A fresh directory under the test target dir, unique to this process and call (the
/// test modules share one process, so two of them may ask for the same name at once).
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!(
            "deploy-{}-{}",
            std::process::id(),
            next_scratch_id()
        ))
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

pub fn load_bundle(path: &Path) -> Bundle {
    let text = std::fs::read_to_string(path.join("bundle.json")).expect("bundle.json");
    serde_json::from_str(&text).expect("bundle.json parses")
}

/// generated-skills/llama1b, as committed.
pub fn llama1b() -> &'static Bundle {
    static B: OnceLock<Bundle> = OnceLock::new();
    B.get_or_init(|| load_bundle(&repo("generated-skills/llama1b")))
}

/// trajectories/llama1b built together with tests/data/deploy/lessons.
pub fn with_test_lessons() -> &'static Bundle {
    static B: OnceLock<Bundle> = OnceLock::new();
    B.get_or_init(|| built_with("bundle-llama1b-test-lessons", "tests/data/deploy/lessons"))
}

/// trajectories/llama1b built together with the test trajectory `extra`.
pub fn built_with(name: &str, extra: &str) -> Bundle {
    let out = scratch(name);
    let status = skillc()
        .arg("build")
        .arg(repo("trajectories/llama1b"))
        .arg(repo(extra))
        .arg("--out")
        .arg(&out)
        .output()
        .expect("skillc build runs");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    load_bundle(&out)
}

/// Deploys `bundle` on `model` into `out` with seed 0 and a fixed session time.
pub fn deploy(bundle: &Bundle, model: &Path, out: &Path, faults: &[Fault]) -> DeployOutcome {
    deploy_seeded(bundle, model, out, faults, 0)
}

/// [`deploy`] with another seed (prompts, and the weights of a config-only model).
pub fn deploy_seeded(
    bundle: &Bundle,
    model: &Path,
    out: &Path,
    faults: &[Fault],
    seed: u64,
) -> DeployOutcome {
    deploy_with(bundle, model, out, faults, seed, Default::default())
}

/// [`deploy`] on the weight path `weights` (`--weights`).
pub fn deploy_weights(
    bundle: &Bundle,
    model: &Path,
    out: &Path,
    faults: &[Fault],
    weights: skillc_runtime::xdna2::packing::WeightPath,
) -> DeployOutcome {
    deploy_with(bundle, model, out, faults, 0, weights)
}

fn deploy_with(
    bundle: &Bundle,
    model: &Path,
    out: &Path,
    faults: &[Fault],
    seed: u64,
    weights: skillc_runtime::xdna2::packing::WeightPath,
) -> DeployOutcome {
    let options = DeployOptions {
        model_dir: model.to_path_buf(),
        out_dir: out.to_path_buf(),
        seed,
        prompts: None,
        faults: faults.to_vec(),
        started: "2026-11-30T00:00Z".to_string(),
        evaluator: EvaluatorLaunch::Process(PathBuf::from(env!("CARGO_BIN_EXE_skillc"))),
        registry: None,
        fixtures: vec![repo("../shared/fixtures"), repo("tests/data/fixtures")],
        stop_after: None,
        weights,
        seeded_quant: None,
        bundle_notes: Vec::new(),
    };
    exec::deploy(bundle, &options, &mut Silent).expect("the run gets far enough to report")
}

/// `skillc deploy generated-skills/llama1b --quiet ARGS --model MODEL --out OUT`,
/// from the repository root.
pub fn deploy_cli(model: &Path, out: &Path, args: &[&str]) -> std::process::Output {
    skillc()
        .args(["deploy", "generated-skills/llama1b", "--quiet"])
        .args(args)
        .arg("--model")
        .arg(model)
        .arg("--out")
        .arg(out)
        .current_dir(repo("."))
        .output()
        .expect("skillc deploy runs")
}

/// `skillc check` on a trajectory directory: exit code and output.
pub fn check(dir: &Path) -> (i32, String) {
    let out = skillc()
        .arg("check")
        .arg(dir)
        .output()
        .expect("skillc check runs");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// Verdict, stop, per-phase status, gates (name and verdict) and how each bundle step
/// ended: what a run did, without wall times or modeled figures.
pub fn summary(r: &DeployReport) -> String {
    let mut s = format!("verdict: {}\n", r.verdict.label());
    if let Some(stop) = &r.stop {
        let _ = writeln!(
            s,
            "stopped: phase {} `{}`: {} = {} (threshold {} {}); tried {}",
            stop.phase,
            stop.gate,
            stop.metric,
            stop.value,
            stop.comparison.symbol(),
            stop.threshold,
            stop.tried.len()
        );
    }
    for p in &r.phases {
        let _ = writeln!(s, "phase {} {:?}", p.index, p.status);
        for g in &p.gates {
            let _ = writeln!(
                s,
                "  {} {}{}",
                if g.passed { "pass" } else { "FAIL" },
                g.name,
                if g.modeled { " (modeled)" } else { "" }
            );
        }
        for a in &p.attempts {
            let _ = writeln!(
                s,
                "  lesson {} on `{}`: fixed={}",
                a.lesson, a.gate, a.fixed
            );
        }
        for k in &p.skipped {
            let _ = writeln!(
                s,
                "  lesson {} on `{}`: skipped, if {} ({})",
                k.lesson,
                k.gate,
                k.condition,
                k.values.join(", ")
            );
        }
        let mut outcomes: std::collections::BTreeMap<String, usize> = Default::default();
        for st in &p.steps {
            let kind = match &st.outcome {
                StepOutcome::AsRecorded => "as-recorded",
                StepOutcome::Rederived { .. } => "re-derived",
                StepOutcome::NotApplicable { .. } => "not-applicable",
                StepOutcome::Kept { .. } => "kept",
                StepOutcome::Covered { .. } => "covered",
                StepOutcome::Reverted { .. } => "reverted",
                StepOutcome::Failed { .. } => "failed",
            };
            *outcomes.entry(format!("{} {kind}", st.op)).or_default() += 1;
        }
        for (k, n) in outcomes {
            let _ = writeln!(s, "  step {k} x{n}");
        }
    }
    s
}

/// The first failing gate of a report: (phase, name, metric).
pub fn first_failure(r: &DeployReport) -> Option<(DeployPhase, String, String)> {
    r.gates()
        .find(|(_, g)| !g.passed && !g.modeled)
        .map(|(p, g)| (p, g.name.clone(), g.metric.to_string()))
}

/// Writes `value` over the first bytes of tensor `name` in a safetensors file.
pub fn poke(path: &Path, name: &str, value: &[u8]) {
    let mut bytes = std::fs::read(path).expect("read");
    let header_len = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let header: serde_json::Value =
        serde_json::from_slice(&bytes[8..8 + header_len]).expect("header");
    let start = header[name]["data_offsets"][0].as_u64().expect("offsets") as usize;
    let at = 8 + header_len + start;
    bytes[at..at + value.len()].copy_from_slice(value);
    std::fs::write(path, bytes).expect("write");
}

fn next_scratch_id() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
