//! The reference trajectory stays valid, true and built: `skillc check` is clean,
//! `skillc replay --functional none` (constraint checks, plan structure and the
//! cost model on the full-size config, no numerical runs, well under a second)
//! agrees with every recorded figure but seven named ones, each within its
//! row's band, and the committed bundle is what
//! `skillc build` produces now. The kernel runs of the full replay take minutes
//! and stay out of CI (trajectories/llama1b/README.md has the command and result).

use std::path::PathBuf;
use std::process::Command;

use skillc::replay::{self, Functional, Outcome, RowKind};

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

/// The recorded figures replay does not reproduce, each row judged within its
/// own band (a calibration point's own error under the committed fit, else the
/// stated ±15 %, `replay::kind`):
/// - `p4.layout.time` (self-produced): 1.33 s < 1.42 s, a figure an earlier
///   emulator wrote; the committed fit models 1.426 s, across the threshold.
/// - `p4.abl.d` (fit point `ablation-prefill-d`): 1.125 s < cell C's 1.212 s;
///   modeled 1.219 s, +8.4 %, inside its own band but across the threshold.
/// - `p6.decode.obs` `tok_s` and `ms_per_token` (fit point `llama-3.2-1b-decode`,
///   whose own error is 0.0 %, so its band is the ±0.5 % floor): modeled
///   83.6 ms against 82 ms (+2.0 %). The point times the published final plan
///   (`xdna2::published`: only the `o_gemv_ffn` cascade single-buffered,
///   `OGF_BACKEND`); the trajectory keeps `omit-pingpong` module-wide to the end,
///   as `PlanOptions::reference()` does, so its `rms_gemv_rope` is
///   single-buffered too.
///
/// The three out-of-sample decode figures that disagreed under the earlier fit
/// (`p5.profile.obs` 92 ms, `p5.profile.lm` 13.5 ms, `p5.cascade.obs` 78 ms,
/// modeled 23-29 % slow) agree since launches inside a call and GEMV bodies
/// inside an ELF have costs of their own (`elf_launch_s`, `elf_gemv_factor`).
///
/// `skillc replay` exits 1 on them; this test fails when another row disagrees
/// or one of these agrees again.
const KNOWN_DISAGREEMENTS: [(&str, &str); 4] = [
    ("p4.layout.time", "prefill_s"),
    ("p4.abl.d", "prefill_s"),
    ("p6.decode.obs", "tok_s"),
    ("p6.decode.obs", "ms_per_token"),
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
    let disagreeing = || {
        report
            .rows
            .iter()
            .filter(|r| r.outcome == Outcome::Disagree)
    };
    let bad: Vec<(&str, &str)> = disagreeing()
        .map(|r| (r.entry.as_str(), r.metric.as_str()))
        .collect();
    let reasons: Vec<String> = disagreeing()
        .map(|r| format!("{} {} {}: {}", r.location, r.entry, r.metric, r.reason))
        .collect();
    assert_eq!(bad, KNOWN_DISAGREEMENTS, "{}", reasons.join("\n"));
    assert!(
        reasons
            .iter()
            .all(|r| r.contains("threshold") || r.contains("outside its band")),
        "{}",
        reasons.join("\n")
    );
    // Every timing, structural and lesson row is compared here; only the kernel
    // runs and the model-level numerical runs are left for the full replay.
    // About 40 timing rows are fit points and 22 verdicts restate no-op
    // actions (issue 12): they are counted apart from the evidence.
    let c = &report.counts;
    assert_eq!(c.of(RowKind::FitPoint).rows, 40, "{c:?}");
    assert_eq!(c.of(RowKind::NoOpVerdict).rows, 22, "{c:?}");
    assert!(c.of(RowKind::OutOfSample).agree >= 38, "{c:?}");
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
