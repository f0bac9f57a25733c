//! Issue 15's table of hostile inputs, one test per row (row 8 is in replay.rs,
//! row 13 in build_hostile.rs; `hostile.rs` keeps the list): the same
//! input as the issue, the new outcome. Every command runs as a user runs it,
//! through the `skillc` binary, in a scratch directory of its own.
//!
//! `SKILLC_UNDER_TEST=/path/to/an/older/skillc cargo test --test integration hardening::`
//! runs the same tests against another build: on one from before issue 15, every row fails.

use crate::deploy_support;
use crate::hostile_support::{repo, scratch, skillc_bin, skillc_in, skillc_within, stderr, tree};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Row 2: `build --name ../../evil` (or an absolute path) wrote the bundle outside
/// `generated-skills/`; now it is refused before anything is written.
#[test]
fn row02_a_bundle_name_is_not_a_path() {
    let root = scratch("row02");
    let work = root.join("a/b");
    std::fs::create_dir_all(&work).expect("work dir");
    let trajectory = repo("tests/data/valid/minimal");
    let absolute = root.join("abs").to_string_lossy().into_owned();
    for name in ["../../evil", absolute.as_str(), "..", ".hidden", "a\nb"] {
        let output = skillc_in(
            &work,
            &["build", &trajectory.to_string_lossy(), "--name", name],
        );
        assert_eq!(
            output.status.code(),
            Some(2),
            "{name:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains("--name takes a name, not a path"),
            "{name:?}: {}",
            stderr(&output)
        );
    }
    assert_eq!(tree(&root), ["a", "a/b"], "nothing written anywhere");
    let output = skillc_in(
        &work,
        &["build", &trajectory.to_string_lossy(), "--name", "fine-1.0"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(work.join("generated-skills/fine-1.0/bundle.json").is_file());
}

/// Row 14: shapes `[0,…]`, `herd=[0,0]`, `tile=[0,0,0,0]`, `rtol=-1` and `1e-400`
/// were accepted with no diagnostic; now each is an error at its value.
#[test]
fn row14_zero_sizes_and_vanishing_numbers_are_diagnosed() {
    let root = scratch("row14");
    for (file, says) in [
        (
            "parameter-out-of-range.traj",
            "parameter-out-of-range.traj:17:29: error[E0031]: `rows` = 0: must be above 0",
        ),
        (
            "number-underflow.traj",
            "number-underflow.traj:4:22: error[E0032]: number `1e-400` underflows: it reads as 0",
        ),
    ] {
        let dir = root.join(file.trim_end_matches(".traj"));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::copy(repo("tests/data/invalid").join(file), dir.join(file)).expect("copy");
        let output = skillc_in(&root, &["check", &dir.to_string_lossy()]);
        let text = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(1), "{file}: {text}");
        assert!(text.contains(says), "{text}");
    }
}

fn fixture(name: &str) -> PathBuf {
    repo(&format!("../shared/fixtures/{name}"))
}

/// A copy of the qwen25-tiny fixture's config (and `also` of its other files).
fn tiny_model(dir: &Path, also: &[&str]) {
    std::fs::create_dir_all(dir).expect("model dir");
    for file in ["config.json"].iter().chain(also) {
        std::fs::copy(fixture("qwen25-tiny").join(file), dir.join(file)).expect("copy");
    }
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
}

/// Row 9: a `model.safetensors` that is a FIFO hung `reference` and `deploy`;
/// now both refuse it by name at once.
#[cfg(unix)]
#[test]
fn row09_a_fifo_is_not_read_as_a_model() {
    let root = scratch("row09");
    let model = root.join("model");
    tiny_model(&model, &[]);
    mkfifo(&model.join("model.safetensors"));
    let bundle = repo("generated-skills/llama1b")
        .to_string_lossy()
        .into_owned();
    let limit = Duration::from_secs(60);
    let reference = skillc_within(&root, &["reference", "--model", "model"], limit);
    let deploy = skillc_within(
        &root,
        &["deploy", &bundle, "--model", "model", "--out", "out"],
        limit,
    );
    let refusal = "model.safetensors: is a FIFO (named pipe), not a regular file";
    assert_eq!(reference.status.code(), Some(2), "{}", stderr(&reference));
    assert!(
        stderr(&reference).contains(refusal),
        "{}",
        stderr(&reference)
    );
    // Deploy reports it as phase 0's failed load-weights gate.
    let summary = String::from_utf8_lossy(&deploy.stdout);
    assert_eq!(deploy.status.code(), Some(1), "{}", stderr(&deploy));
    assert!(summary.contains(refusal), "{summary}");
}

/// Writes `value` over element 0 of tensor `name` in a safetensors file.
fn poke_f32(path: &Path, name: &str, value: f32) {
    deploy_support::poke(path, name, &value.to_le_bytes());
}

/// Row 10: one NaN in `prefill_logits` of reference.safetensors failed `reference`
/// but passed deploy's phase 0 (`max_rel = 9.5e-7`); now both fail, and deploy
/// reports the NaN.
#[test]
fn row10_a_nan_in_the_reference_fails_the_comparison() {
    let root = scratch("row10");
    let model = root.join("model");
    tiny_model(&model, &["model.safetensors", "reference.safetensors"]);
    poke_f32(
        &model.join("reference.safetensors"),
        "prefill_logits",
        f32::NAN,
    );
    let bundle = repo("generated-skills/llama1b")
        .to_string_lossy()
        .into_owned();
    let reference = skillc_in(&root, &["reference", "--model", "model"]);
    assert_eq!(reference.status.code(), Some(1), "{}", stderr(&reference));
    let deploy = skillc_in(
        &root,
        &[
            "deploy", &bundle, "--model", "model", "--out", "out", "--json",
        ],
    );
    assert_eq!(deploy.status.code(), Some(1), "{}", stderr(&deploy));
    let report: serde_json::Value =
        serde_json::from_slice(&deploy.stdout).expect("report.json on stdout");
    assert_eq!(report["verdict"], "fail");
    assert_eq!(report["stop"]["phase"], 0);
    assert_eq!(report["stop"]["metric"], "max_rel");
    let markdown = std::fs::read_to_string(root.join("out/report.md")).expect("report.md");
    assert!(markdown.contains("max_rel = NaN"), "{markdown}");
}

/// Row 11: a 4.6B config under `ulimit -v 8000000` passed the memory pre-check
/// (physical RAM) and aborted after 46 s (exit 134); now it is refused at once,
/// naming the address-space limit.
#[cfg(target_os = "linux")]
#[test]
fn row11_the_memory_check_honours_the_address_space_limit() {
    let root = scratch("row11");
    let model = repo("tests/data/hardening/qwen3-4.6b");
    let script = format!(
        "ulimit -v 8000000 && exec \"{}\" reference --model \"{}\" --seed 0",
        skillc_bin().display(),
        model.display()
    );
    let started = Instant::now();
    let output = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(&root)
        .output()
        .expect("sh runs");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("left under this process's address-space limit (ulimit -v)"),
        "{}",
        stderr(&output)
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// Row 12: a `.traj` that is a symbolic link to a valid file was skipped ("1
/// files"); now it is read, and dangling links and loops are named.
#[cfg(unix)]
#[test]
fn row12_trajectory_links_are_followed_or_diagnosed() {
    use std::os::unix::fs::symlink;
    let root = scratch("row12");
    let dir = root.join("linked");
    std::fs::create_dir_all(&dir).expect("dir");
    let real = repo("tests/data/valid/multi-file");
    std::fs::copy(real.join("01-start.traj"), dir.join("01-start.traj")).expect("copy");
    symlink(real.join("02-continue.traj"), dir.join("02-continue.traj")).expect("link");
    let output = skillc_in(&root, &["check", "linked"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{text}{}", stderr(&output));
    assert!(text.contains("(2 files,"), "{text}");

    let dangling = root.join("dangling");
    std::fs::create_dir_all(&dangling).expect("dir");
    std::fs::copy(real.join("01-start.traj"), dangling.join("01-start.traj")).expect("copy");
    symlink("gone.traj", dangling.join("02-gone.traj")).expect("link");
    let output = skillc_in(&root, &["check", "dangling"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains(
            "dangling/02-gone.traj: a symbolic link to `gone.traj`, which does not exist (a dangling link)"
        ),
        "{}",
        stderr(&output)
    );

    let looped = root.join("looped");
    std::fs::create_dir_all(&looped).expect("dir");
    symlink("b.traj", looped.join("a.traj")).expect("link");
    symlink("a.traj", looped.join("b.traj")).expect("link");
    let output = skillc_in(&root, &["check", "looped"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output)
            .contains("looped/a.traj: a symbolic link to `b.traj`, which leads back to itself"),
        "{}",
        stderr(&output)
    );
}

/// `skillc build TRAJECTORY --out OUT [extra]` from `cwd`.
fn build_into(cwd: &Path, trajectory: &str, out: &Path, extra: &[&str]) -> Output {
    let trajectory = repo(trajectory).to_string_lossy().into_owned();
    let out = out.to_string_lossy().into_owned();
    let mut args = vec!["build", trajectory.as_str(), "--out", out.as_str()];
    args.extend(extra);
    skillc_in(cwd, &args)
}

/// Row 1: `--out D` where `D/bundle.json` exists (any content) plus user files:
/// `build` exited 0 and the user files were gone. Now it refuses, naming them,
/// whether bundle.json is garbage or a real bundle's; `--force` replaces.
#[test]
fn row01_build_never_replaces_user_files_without_force() {
    let root = scratch("row01");
    let real = root.join("real");
    let built = build_into(&root, "tests/data/valid/minimal", &real, &[]);
    assert_eq!(built.status.code(), Some(0), "{}", stderr(&built));
    let real_json = std::fs::read_to_string(real.join("bundle.json")).expect("bundle.json");
    for (case, bundle_json) in [
        ("garbage", "not json at all"),
        ("copied", real_json.as_str()),
    ] {
        let out = root.join(case);
        std::fs::create_dir_all(&out).expect("dir");
        std::fs::write(out.join("bundle.json"), bundle_json).expect("write");
        std::fs::write(out.join("thesis.tex"), "two years of work").expect("write");
        let output = build_into(&root, "tests/data/valid/minimal", &out, &[]);
        assert_eq!(output.status.code(), Some(2), "{case}: {}", stderr(&output));
        assert!(
            stderr(&output).contains("refusing to replace"),
            "{case}: {}",
            stderr(&output)
        );
        assert_eq!(
            std::fs::read_to_string(out.join("thesis.tex")).expect("kept"),
            "two years of work"
        );
        let forced = build_into(&root, "tests/data/valid/minimal", &out, &["--force"]);
        assert_eq!(forced.status.code(), Some(0), "{}", stderr(&forced));
        assert!(!out.join("thesis.tex").exists());
    }
    // A bundle skillc wrote is replaced without --force, but not once a file in it
    // was edited by hand.
    let again = build_into(&root, "tests/data/valid/minimal", &real, &[]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    let skill = real.join("deploy-new-llm/SKILL.md");
    let edited = std::fs::read_to_string(&skill).expect("SKILL.md") + "my notes\n";
    std::fs::write(&skill, &edited).expect("edit");
    let refused = build_into(&root, "tests/data/valid/minimal", &real, &[]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("files changed since skillc wrote them: deploy-new-llm/SKILL.md"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(std::fs::read_to_string(&skill).expect("kept"), edited);
}

fn bundle_dir() -> String {
    repo("generated-skills/llama1b")
        .to_string_lossy()
        .into_owned()
}

/// `skillc deploy BUNDLE --model MODEL --out OUT [extra]` from `cwd`.
fn deploy_into(cwd: &Path, bundle: &str, model: &Path, out: &Path, extra: &[&str]) -> Output {
    let (model, out) = (model.to_string_lossy(), out.to_string_lossy());
    let mut args = vec!["deploy", bundle, "--model", &model, "--out", &out];
    args.extend(extra);
    skillc_in(cwd, &args)
}

/// A model whose phase 0 fails at once: qwen25-tiny with a NaN in its reference.
fn failing_model(root: &Path) -> PathBuf {
    let model = root.join("nan-model");
    tiny_model(&model, &["model.safetensors", "reference.safetensors"]);
    poke_f32(
        &model.join("reference.safetensors"),
        "prefill_logits",
        f32::NAN,
    );
    model
}

/// Row 5: a deploy that fails into the folder of an earlier run left report.json
/// saying FAIL next to the old plan.json and an evaluation.md saying PASS. Now
/// the folder holds the failed run's files only.
#[test]
fn row05_a_failed_deploy_leaves_nothing_of_an_earlier_run() {
    let root = scratch("row05");
    let out = root.join("out");
    let passed = deploy_into(&root, &bundle_dir(), &fixture("qwen25-tiny"), &out, &[]);
    assert_eq!(passed.status.code(), Some(0), "{}", stderr(&passed));
    assert!(out.join("plan.json").is_file() && out.join("evaluation.md").is_file());
    let failed = deploy_into(&root, &bundle_dir(), &failing_model(&root), &out, &[]);
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    let report = std::fs::read_to_string(out.join("report.json")).expect("report.json");
    assert!(report.contains("\"verdict\": \"fail\""));
    for stale in [
        "plan.json",
        "evaluation.md",
        "evaluation.json",
        "trace.json",
    ] {
        assert!(
            !out.join(stale).exists(),
            "{stale} of the earlier run is still there"
        );
    }
}

/// Row 6: `deploy --out` at a user folder overwrote report.md and trajectory/
/// without a word. Now it refuses like build; `--force` replaces.
#[test]
fn row06_deploy_never_replaces_user_files_without_force() {
    let root = scratch("row06");
    let out = root.join("notes");
    std::fs::create_dir_all(out.join("trajectory")).expect("dir");
    std::fs::write(out.join("report.md"), "my report").expect("write");
    std::fs::write(out.join("trajectory/mine.traj"), "# mine").expect("write");
    let model = failing_model(&root);
    let refused = deploy_into(&root, &bundle_dir(), &model, &out, &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("refusing to replace") && stderr(&refused).contains("--force"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        tree(&out),
        ["report.md", "trajectory", "trajectory/mine.traj"]
    );
    assert_eq!(
        std::fs::read_to_string(out.join("report.md")).expect("kept"),
        "my report"
    );
    let forced = deploy_into(&root, &bundle_dir(), &model, &out, &["--force"]);
    assert_eq!(forced.status.code(), Some(1), "{}", stderr(&forced));
    assert!(!out.join("trajectory/mine.traj").exists());
}

/// A copy of generated-skills/llama1b to tamper with.
fn bundle_copy(root: &Path) -> PathBuf {
    let from = repo("generated-skills/llama1b");
    let to = root.join("llama1b");
    std::fs::create_dir_all(&to).expect("dir");
    for path in tree(&from) {
        let (source, target) = (from.join(&path), to.join(&path));
        if source.is_dir() {
            std::fs::create_dir_all(&target).expect("dir");
        } else {
            std::fs::copy(&source, &target).expect("copy");
        }
    }
    to
}

/// Row 7: one byte of a SKILL.md changed, or a phase folder deleted, and deploy ran
/// it: PASS. Now it refuses (exit 1, naming the files) unless --allow-modified,
/// which the report then states.
#[test]
fn row07_deploy_verifies_the_bundle_hashes() {
    let root = scratch("row07");
    let bundle = bundle_copy(&root);
    let model = failing_model(&root);
    let shown = bundle.to_string_lossy().into_owned();
    let skill = bundle.join("phase-1-kernel-validation/SKILL.md");
    let mut bytes = std::fs::read(&skill).expect("read");
    bytes[100] ^= 0x20;
    std::fs::write(&skill, bytes).expect("write");
    std::fs::remove_dir_all(bundle.join("phase-5-decode-optimization")).expect("rm");
    let refused = deploy_into(&root, &shown, &model, &root.join("out"), &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(
        message.contains("changed: phase-1-kernel-validation/SKILL.md")
            && message.contains("missing: phase-5-decode-optimization/SKILL.md"),
        "{message}"
    );
    assert!(!root.join("out").exists(), "nothing ran");
    let allowed = deploy_into(
        &root,
        &shown,
        &model,
        &root.join("out"),
        &["--allow-modified"],
    );
    assert_eq!(allowed.status.code(), Some(1), "{}", stderr(&allowed));
    let report = std::fs::read_to_string(root.join("out/report.md")).expect("report.md");
    assert!(
        report.contains("**Bundle warning:** run with --allow-modified")
            && report.contains("changed: phase-1-kernel-validation/SKILL.md"),
        "{report}"
    );
}

/// Row 15: a 100 MB bundle.json name was copied into 100 MB report.md and
/// report.json. Now texts copied from the bundle are capped (20 MB here: the same
/// path at a fifth of the test's time).
#[test]
fn row15_bundle_text_in_reports_is_capped() {
    let root = scratch("row15");
    let bundle = bundle_copy(&root);
    let path = bundle.join("bundle.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    json["name"] = serde_json::Value::String("n".repeat(20 << 20));
    std::fs::write(&path, serde_json::to_string(&json).expect("json")).expect("write");
    let out = root.join("out");
    let output = deploy_into(
        &root,
        &bundle.to_string_lossy(),
        &failing_model(&root),
        &out,
        &["--allow-modified"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    for file in ["report.md", "report.json", "trajectory/00-deploy.traj"] {
        let size = std::fs::metadata(out.join(file)).expect("written").len();
        assert!(size < 256 << 10, "{file}: {size} bytes");
    }
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        report.contains("bundle.json `name`: a name of 20971520 characters, shortened to 200"),
        "{}",
        &report[..report.len().min(2000)]
    );
}

/// Every file under `dir` with its bytes, `.skillc-owned.json` left out.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    tree(dir)
        .into_iter()
        .filter(|p| dir.join(p).is_file() && p != ".skillc-owned.json")
        .map(|p| {
            let bytes = std::fs::read(dir.join(&p)).expect("read");
            (p, bytes)
        })
        .collect()
}

fn spawn(cwd: &Path, args: &[String]) -> std::process::Child {
    Command::new(skillc_bin())
        .args(args)
        .current_dir(cwd)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("skillc starts")
}

/// Rows 3 and 4: two builds, and two deploys, into one folder at once. Builds lost
/// files (3 runs in 100) and deploys mixed two models' files (2 in 25), both
/// exiting 0. Now the second run waits for the first, and after every round the
/// folder is exactly one run's complete output.
#[test]
fn row03_row04_concurrent_runs_never_mix_or_lose_output() {
    let root = scratch("concurrent");
    let trajectories = ["tests/data/valid/minimal", "tests/data/valid/multi-file"];
    let mut expected = Vec::new();
    for (i, trajectory) in trajectories.iter().enumerate() {
        let out = root.join(format!("alone-{i}"));
        let built = build_into(&root, trajectory, &out, &["--name", "shared"]);
        assert_eq!(built.status.code(), Some(0), "{}", stderr(&built));
        expected.push(contents(&out));
    }
    let out = root.join("shared");
    for round in 0..20 {
        let children: Vec<_> = trajectories
            .iter()
            .map(|t| {
                let args = [
                    "build",
                    &repo(t).to_string_lossy(),
                    "--out",
                    "shared",
                    "--name",
                    "shared",
                ]
                .map(String::from);
                spawn(&root, &args)
            })
            .collect();
        for child in children {
            let output = child.wait_with_output().expect("wait");
            assert_eq!(
                output.status.code(),
                Some(0),
                "round {round}: {}",
                stderr(&output)
            );
        }
        let found = contents(&out);
        assert!(
            expected.contains(&found),
            "round {round}: the bundle is neither build's: {:?}",
            found.iter().map(|(p, _)| p).collect::<Vec<_>>()
        );
    }

    let models = [fixture("qwen25-tiny"), fixture("llama32-tiny")];
    for round in 0..2 {
        let children: Vec<_> = models
            .iter()
            .map(|m| {
                let args = [
                    "deploy",
                    &bundle_dir(),
                    "--model",
                    &m.to_string_lossy(),
                    "--out",
                    "run",
                    "--quiet",
                ]
                .map(String::from);
                spawn(&root, &args)
            })
            .collect();
        for child in children {
            let output = child.wait_with_output().expect("wait");
            assert_eq!(
                output.status.code(),
                Some(0),
                "round {round}: {}",
                stderr(&output)
            );
        }
        let run = root.join("run");
        let read = |file: &str| -> serde_json::Value {
            serde_json::from_str(&std::fs::read_to_string(run.join(file)).expect(file)).expect(file)
        };
        let (report, plan, evaluation) = (
            read("report.json"),
            read("plan.json"),
            read("evaluation.json"),
        );
        let model = report["model"]["name"].clone();
        assert!(model.is_string(), "{report}");
        assert_eq!(
            plan["model"]["name"], model,
            "round {round}: plan.json of another run"
        );
        // The report copies the evaluator's wall time: a number no other run shares.
        assert_eq!(
            evaluation["wall_s"], report["evaluation"]["wall_s"],
            "round {round}: evaluation.json of another run"
        );
        let owned = read(".skillc-owned.json");
        let listed: Vec<&String> = owned["files"].as_object().expect("files").keys().collect();
        let present: Vec<String> = contents(&run).into_iter().map(|(p, _)| p).collect();
        assert_eq!(listed, present.iter().collect::<Vec<_>>(), "round {round}");
    }
}

// The first hour of a new user (the second half).

/// `build --check` from another directory resolved `generated-skills/` against the
/// current directory and called the missing bundle "stale"; now a trajectory under
/// `trajectories/` is checked against its repository's bundle, and a bundle that
/// is not there is named as missing.
#[test]
fn first_hour_build_check_runs_from_any_directory() {
    let root = scratch("check-elsewhere");
    let reference = repo("trajectories/llama1b").to_string_lossy().into_owned();
    let output = skillc_in(&root, &["build", &reference, "--check"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{text}{}", stderr(&output));
    assert!(
        text.contains("generated-skills/llama1b is up to date"),
        "{text}"
    );
    let minimal = repo("tests/data/valid/minimal")
        .to_string_lossy()
        .into_owned();
    let output = skillc_in(&root, &["build", &minimal, "--check"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("there is no bundle at generated-skills/minimal to check"),
        "{}",
        stderr(&output)
    );
    assert_eq!(tree(&root), Vec::<String>::new(), "--check wrote nothing");
}

/// `graph … | head` ended in "Broken pipe" and exit 2; now it ends quietly, exit 0.
#[test]
fn first_hour_a_closed_pipe_ends_quietly() {
    use std::io::Read;
    let mut child = Command::new(skillc_bin())
        .args(["graph", "trajectories/llama1b", "--format", "json"])
        .current_dir(repo(""))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("skillc starts");
    let mut head = [0u8; 64];
    child
        .stdout
        .take()
        .expect("stdout")
        .read_exact(&mut head)
        .expect("the graph starts");
    // The reader goes away after 64 bytes, like `head -c 64`; the graph is far
    // larger than a pipe's buffer, so skillc is still writing.
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stderr(&output), "");
}

/// A wrong path read "entity not found"; now plain words, no OS error numbers.
#[test]
fn first_hour_io_errors_read_as_sentences() {
    let root = scratch("plain-errors");
    for args in [
        vec!["check", "no-such-dir"],
        vec!["build", "no-such-dir"],
        vec!["reference", "--model", "no-such-model"],
        vec!["diff", "no-such-bundle", "other"],
    ] {
        let output = skillc_in(&root, &args);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {message}");
        assert!(
            message.contains("no such file or directory"),
            "{args:?}: {message}"
        );
        assert!(
            !message.contains("entity not found") && !message.contains("os error"),
            "{args:?}: {message}"
        );
    }
}

/// `deploy` given a trajectory folder now says to build it first.
#[test]
fn first_hour_deploy_of_a_trajectory_says_build_first() {
    let root = scratch("deploy-trajectory");
    let trajectory = repo("trajectories/llama1b").to_string_lossy().into_owned();
    let model = fixture("qwen25-tiny").to_string_lossy().into_owned();
    let output = skillc_in(&root, &["deploy", &trajectory, "--model", &model]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("a trajectory directory, not a skill bundle; run `skillc build"),
        "{}",
        stderr(&output)
    );
}

/// Deploy printed nothing for minutes when stderr was not a terminal; now it
/// prints a stamped line per phase there, and nothing with `--quiet`.
#[test]
fn first_hour_progress_reaches_a_pipe_unless_quiet() {
    let root = scratch("progress");
    let model = failing_model(&root);
    let piped = deploy_into(&root, &bundle_dir(), &model, &root.join("a"), &[]);
    assert!(
        stderr(&piped).contains("] phase 0: ") && stderr(&piped).contains("] phase 0 FAILED in"),
        "{}",
        stderr(&piped)
    );
    let quiet = deploy_into(&root, &bundle_dir(), &model, &root.join("b"), &["--quiet"]);
    assert_eq!(quiet.status.code(), Some(1));
    assert_eq!(stderr(&quiet), "");
}

/// `diff`, `build`, `reference`, `calibrate` and `bench` had no `--json`; now
/// every command that prints a result prints it as one JSON document on request.
#[test]
fn first_hour_every_result_has_json() {
    let root = scratch("json");
    let bundle = bundle_dir();
    let minimal = repo("tests/data/valid/minimal")
        .to_string_lossy()
        .into_owned();
    let model = fixture("qwen25-tiny").to_string_lossy().into_owned();
    let commands: Vec<Vec<&str>> = vec![
        vec!["build", &minimal, "--out", "built", "--json"],
        vec!["build", &minimal, "--out", "built", "--check", "--json"],
        vec!["diff", &bundle, "built", "--json"],
        vec!["reference", "--model", &model, "--json"],
        vec!["calibrate", "--json"],
        vec![
            "bench",
            "parse",
            "--sizes",
            "1000,2000",
            "--runs",
            "1",
            "--json",
        ],
    ];
    for args in commands {
        // `calibrate` refits the cost model: minutes in a debug build on a busy machine.
        let output = skillc_within(&root, &args, Duration::from_secs(900));
        assert!(
            matches!(output.status.code(), Some(0 | 1)),
            "{args:?}: {}",
            stderr(&output)
        );
        let parsed: Result<serde_json::Value, _> = serde_json::from_slice(&output.stdout);
        assert!(
            parsed.as_ref().is_ok_and(|v| v.is_object()),
            "{args:?}: stdout is not one JSON document: {}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
}
