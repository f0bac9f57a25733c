//! Issue 15's table of hostile inputs, one test per row (rows 8 and 14, parameter
//! ranges, live with the typed operations): the same input as the issue, the new
//! outcome. Every command runs as a user runs it, through the `skillc` binary, in a
//! scratch directory of its own.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// A fresh directory under the test target dir, unique to this process and test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("hardening-{}", std::process::id()))
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// `skillc ARGS` run from `cwd`.
fn skillc_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skillc"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("the skillc binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Every path under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut paths: Vec<String> = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| {
            e.path()
                .strip_prefix(dir)
                .expect("under dir")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    paths.sort();
    paths
}

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
        assert_eq!(output.status.code(), Some(2), "{name:?}: {}", stderr(&output));
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

/// `skillc ARGS` from `cwd`, killed (and the test failed) after `limit`: a hang is
/// the bug some rows are about.
fn skillc_within(cwd: &Path, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillc"))
        .args(args)
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the skillc binary runs");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("`skillc {}` still running after {limit:?}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
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
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
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
    let bundle = repo("generated-skills/llama1b").to_string_lossy().into_owned();
    let limit = Duration::from_secs(60);
    let reference = skillc_within(&root, &["reference", "--model", "model"], limit);
    let deploy = skillc_within(
        &root,
        &["deploy", &bundle, "--model", "model", "--out", "out"],
        limit,
    );
    let refusal = "model.safetensors: is a FIFO (named pipe), not a regular file";
    assert_eq!(reference.status.code(), Some(2), "{}", stderr(&reference));
    assert!(stderr(&reference).contains(refusal), "{}", stderr(&reference));
    // Deploy reports it as phase 0's failed load-weights gate.
    let summary = String::from_utf8_lossy(&deploy.stdout);
    assert_eq!(deploy.status.code(), Some(1), "{}", stderr(&deploy));
    assert!(summary.contains(refusal), "{summary}");
}

/// Writes `value` over element 0 of tensor `name` in a safetensors file.
fn poke_f32(path: &Path, name: &str, value: f32) {
    let mut bytes = std::fs::read(path).expect("read");
    let header_len = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let header: serde_json::Value =
        serde_json::from_slice(&bytes[8..8 + header_len]).expect("header");
    let start = header[name]["data_offsets"][0].as_u64().expect("offsets") as usize;
    let at = 8 + header_len + start;
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    std::fs::write(path, bytes).expect("write");
}

/// Row 10: one NaN in `prefill_logits` of reference.safetensors failed `reference`
/// but passed deploy's phase 0 (`max_rel = 9.5e-7`); now both fail, and deploy
/// reports the NaN.
#[test]
fn row10_a_nan_in_the_reference_fails_the_comparison() {
    let root = scratch("row10");
    let model = root.join("model");
    tiny_model(&model, &["model.safetensors", "reference.safetensors"]);
    poke_f32(&model.join("reference.safetensors"), "prefill_logits", f32::NAN);
    let bundle = repo("generated-skills/llama1b").to_string_lossy().into_owned();
    let reference = skillc_in(&root, &["reference", "--model", "model"]);
    assert_eq!(reference.status.code(), Some(1), "{}", stderr(&reference));
    let deploy = skillc_in(
        &root,
        &["deploy", &bundle, "--model", "model", "--out", "out", "--json"],
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
    let skillc = env!("CARGO_BIN_EXE_skillc");
    let script = format!(
        "ulimit -v 8000000 && exec \"{skillc}\" reference --model \"{}\" --seed 0",
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
