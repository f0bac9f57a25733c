//! The reference trajectory stays valid, true and built: `skillc check` is clean,
//! `skillc replay --functional none` (constraint checks, plan structure and the
//! cost model on the full-size config, no numerical runs, well under a second)
//! agrees with every recorded figure but three named threshold verdicts, and the committed bundle is what
//! `skillc build` produces now. The kernel runs of the full replay take minutes
//! and stay out of CI (trajectories/llama1b/README.md has the command and result).

use std::path::PathBuf;
use std::process::Command;

use skillc::replay::{self, Functional, Outcome};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn skillc(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_skillc"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("skillc runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().expect("exit code"), text)
}

#[test]
fn the_reference_trajectory_checks_clean() {
    let (code, text) = skillc(&["check", "trajectories/llama1b"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("0 errors, 0 warnings"), "{text}");
}

/// The recorded verdicts the bounded refit (held-out 9.6 %, parameters kept to
/// the ranges their measurements allow) no longer reproduces. Each is a
/// threshold within the cost model's error of the recorded value, so the
/// modeled value lands on the other side of it:
/// - `p4.layout.time`: 1.33 s < 1.42 s, a figure an earlier emulator wrote
///   ("modeled"); the refit models 1.43 s.
/// - `p4.abl.d`: ablation cell D, 1.125 s measured < cell C's 1.212 s measured;
///   modeled D is 1.222 s (+8.6 %, a fit point).
/// - `p5.cascade.obs`: 78 ms < 91 ms measured; modeled 100.5 ms (+28.8 %; the
///   single-buffered decode GEMVs' factor binds at its lower bound 1.35,
///   pulled by this very module, `skillc calibrate` says).
///
/// They are disagreements and `skillc replay` says so (exit 1); this test fails
/// when another row disagrees or one of these agrees again.
const REFIT_DISAGREEMENTS: [(&str, &str); 3] = [
    ("p4.layout.time", "prefill_s"),
    ("p4.abl.d", "prefill_s"),
    ("p5.cascade.obs", "ms_per_token"),
];

#[test]
fn the_reference_trajectory_replays_with_only_the_known_disagreements() {
    let loaded = skillc::graph::load_dirs(&[root().join("trajectories/llama1b")]).expect("loads");
    let (_, graph) = &loaded.trajectories[0];
    let options = replay::Options {
        model_dir: root().join("../shared/models/llama-3.2-1b"),
        functional: Functional::None,
        seed: 1,
    };
    let report = replay::replay(graph, &options).expect("replays");
    let bad: Vec<(&str, &str)> = report
        .rows
        .iter()
        .filter(|r| r.outcome == Outcome::Disagree)
        .map(|r| (r.entry.as_str(), r.metric.as_str()))
        .collect();
    let reasons: Vec<String> = report
        .rows
        .iter()
        .filter(|r| r.outcome == Outcome::Disagree)
        .map(|r| format!("{} {} {}: {}", r.location, r.entry, r.metric, r.reason))
        .collect();
    assert_eq!(bad, REFIT_DISAGREEMENTS, "{}", reasons.join("\n"));
    assert!(
        reasons.iter().all(|r| r.contains("threshold")),
        "{}",
        reasons.join("\n")
    );
    // Every timing, structural and lesson row is compared here; only the kernel
    // runs and the model-level numerical runs are left for the full replay.
    assert!(report.counts.agree >= 84, "{:?}", report.counts);
}

#[test]
fn the_committed_bundle_is_up_to_date() {
    let (code, text) = skillc(&["build", "trajectories/llama1b", "--check"]);
    assert_eq!(code, 0, "{text}");
}

/// Every committed skill directory passes the public Agent Skills validator
/// (`pip install skills-ref`); skipped with a notice when it is not installed.
#[test]
fn every_committed_skill_directory_validates() {
    let works = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let validator: Vec<&str> = if works("agentskills", &["--help"]) {
        vec!["agentskills"]
    } else if works("python3", &["-m", "skills_ref.cli", "--help"]) {
        vec!["python3", "-m", "skills_ref.cli"]
    } else {
        println!("NOTICE: skipping the Agent Skills validation: pip install skills-ref");
        return;
    };
    let bundle = root().join("generated-skills/llama1b");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&bundle)
        .expect("bundle directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("SKILL.md").is_file())
        .collect();
    dirs.sort();
    let names: Vec<String> = dirs
        .iter()
        .filter_map(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    assert!(names.contains(&"deploy-new-llm".to_string()), "{names:?}");
    for phase in 0..8 {
        assert!(
            names
                .iter()
                .any(|n| n.starts_with(&format!("phase-{phase}-"))),
            "{names:?}"
        );
    }
    assert!(
        names.iter().any(|n| n.starts_with("opt-"))
            && names.iter().any(|n| n.starts_with("debug-"))
    );
    for dir in &dirs {
        let run = Command::new(validator[0])
            .args(&validator[1..])
            .arg("validate")
            .arg(dir)
            .output()
            .expect("validator runs");
        assert!(
            run.status.success(),
            "{}: {}{}",
            dir.display(),
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
    }
}
