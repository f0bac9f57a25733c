//! Helpers of the hostile-input suites (`hostile_*.rs`, issue 27): every case
//! runs the `skillc` binary as a user would, in a scratch directory of its own,
//! on small copies of the fixtures; large hostile files are written sparse in
//! the scratch directory, never committed.
//!
//! `SKILLC_UNDER_TEST=/path/to/an/older/skillc` runs the suites against another
//! build: on one from before issue 27, every case fails.

#![allow(dead_code)]

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

pub fn fixture(name: &str) -> PathBuf {
    crate::test_support::fixture_dir(name)
}

/// A GGUF file of the runtime's corpus (`runtime/tests/data/gguf`).
pub fn gguf(name: &str) -> PathBuf {
    repo(&format!("runtime/tests/data/gguf/{name}.gguf"))
}

/// A fresh directory under the test target dir, unique to this process and test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("hostile-{}", std::process::id()))
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The binary under test: this build's, or `SKILLC_UNDER_TEST`.
pub fn skillc_bin() -> PathBuf {
    std::env::var_os("SKILLC_UNDER_TEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_skillc")))
}

/// `skillc ARGS` from `cwd`, killed (and the test failed) after two minutes: a
/// hang is the bug some cases are about.
pub fn skillc_in(cwd: &Path, args: &[&str]) -> Output {
    skillc_within(cwd, args, Duration::from_secs(120))
}

/// `skillc ARGS` from `cwd`, killed (and the test failed) after `limit`. Its
/// output is read while it runs: a child whose output outgrows the pipe would
/// otherwise wait on a reader that only reads after it exits.
pub fn skillc_within(cwd: &Path, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(skillc_bin())
        .args(args)
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the skillc binary runs");
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    let status = wait_at_most(&mut child, args, limit);
    Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

fn drain(mut pipe: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

/// `sh -c SCRIPT` from `cwd` (for `ulimit`), where `$SKILLC` is the binary.
pub fn shell_in(cwd: &Path, script: &str) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .env("SKILLC", skillc_bin())
        .current_dir(cwd)
        .output()
        .expect("sh runs")
}

fn wait_at_most(
    child: &mut std::process::Child,
    args: &[&str],
    limit: Duration,
) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("`skillc {}` still running after {limit:?}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Asserts `output` exited with `code` and its stderr holds every one of `says`.
pub fn assert_refused(output: &Output, code: i32, says: &[&str]) {
    let text = stderr(output);
    assert_eq!(output.status.code(), Some(code), "{text}{}", stdout(output));
    for part in says {
        assert!(text.contains(part), "expected {part:?} in:\n{text}");
    }
}

/// Every path under `dir`, relative, sorted.
pub fn tree(dir: &Path) -> Vec<String> {
    let mut paths: Vec<String> = walkdir::WalkDir::new(dir)
        .min_depth(1)
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

/// Every file under `dir` with its bytes.
pub fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    tree(dir)
        .into_iter()
        .filter(|p| dir.join(p).is_file())
        .map(|p| {
            let bytes = std::fs::read(dir.join(&p)).expect("read");
            (p, bytes)
        })
        .collect()
}

/// A copy of directory `from` at `to`.
pub fn copy_dir(from: &Path, to: &Path) -> PathBuf {
    std::fs::create_dir_all(to).expect("dir");
    for path in tree(from) {
        let (source, target) = (from.join(&path), to.join(&path));
        if source.is_dir() {
            std::fs::create_dir_all(&target).expect("dir");
        } else {
            std::fs::copy(&source, &target).expect("copy");
        }
    }
    to.to_path_buf()
}

/// A copy of generated-skills/llama1b in `root`.
pub fn bundle_copy(root: &Path) -> PathBuf {
    copy_dir(&repo("generated-skills/llama1b"), &root.join("llama1b"))
}

/// A copy of fixture `name` in `root` (its files made writable).
pub fn fixture_copy(root: &Path, name: &str) -> PathBuf {
    let to = copy_dir(&fixture(name), &root.join(name));
    for path in tree(&to) {
        let file = to.join(path);
        let mut permissions = std::fs::metadata(&file).expect("stat").permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        permissions.set_readonly(false);
        std::fs::set_permissions(&file, permissions).expect("chmod");
    }
    to
}

/// qwen25-tiny with a NaN in its reference: a deploy of it fails in phase 0 at
/// once, which is all the cases about bundles and output folders need.
pub fn failing_model(root: &Path) -> PathBuf {
    let model = fixture_copy(root, "qwen25-tiny");
    let model = {
        let to = root.join("nan-model");
        std::fs::rename(&model, &to).expect("rename");
        to
    };
    poke(
        &model.join("reference.safetensors"),
        "prefill_logits",
        &f32::NAN.to_le_bytes(),
    );
    model
}

/// Writes `value` over the first bytes of tensor `name` in a safetensors file.
pub fn poke(path: &Path, name: &str, value: &[u8]) {
    let (header, mut bytes, header_len) = safetensors_parts(path);
    let start = header[name]["data_offsets"][0].as_u64().expect("offsets") as usize;
    let at = 8 + header_len + start;
    bytes[at..at + value.len()].copy_from_slice(value);
    std::fs::write(path, bytes).expect("write");
}

fn safetensors_parts(path: &Path) -> (serde_json::Value, Vec<u8>, usize) {
    let bytes = std::fs::read(path).expect("read");
    let header_len = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let header: serde_json::Value =
        serde_json::from_slice(&bytes[8..8 + header_len]).expect("header");
    (header, bytes, header_len)
}

/// Adds an F32 tensor `name` of `len` ones to a safetensors file.
pub fn add_tensor(path: &Path, name: &str, len: usize) {
    let (mut header, bytes, header_len) = safetensors_parts(path);
    let data = &bytes[8 + header_len..];
    let end = data.len();
    header[name] = serde_json::json!({
        "dtype": "F32", "shape": [len], "data_offsets": [end, end + 4 * len]
    });
    let mut text = serde_json::to_string(&header).expect("json");
    while text.len() % 8 != 0 {
        text.push(' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(data);
    for _ in 0..len {
        out.extend_from_slice(&1.0f32.to_le_bytes());
    }
    std::fs::write(path, out).expect("write");
}

#[cfg(unix)]
pub fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
}

/// The corpus' `ok-micro.gguf` with one more metadata key, `x.big`: an array
/// of `count` u8 zeros (a multiple of 32, so the data section keeps its
/// alignment), written as a hole so the file costs no disk.
pub fn gguf_with_big_array(path: &Path, count: u64) {
    assert_eq!(count % 32, 0);
    let base = std::fs::read(gguf("ok-micro")).expect("ok-micro.gguf");
    let mut header = base[..24].to_vec();
    let kv_count = u64::from_le_bytes(header[16..24].try_into().expect("8 bytes"));
    header[16..24].copy_from_slice(&(kv_count + 1).to_le_bytes());
    let key = b"x.bigarr";
    header.extend_from_slice(&(key.len() as u64).to_le_bytes());
    header.extend_from_slice(key);
    header.extend_from_slice(&9u32.to_le_bytes()); // array
    header.extend_from_slice(&0u32.to_le_bytes()); // of u8
    header.extend_from_slice(&count.to_le_bytes());
    assert_eq!((header.len() - 24) % 32, 0);
    let mut file = std::fs::File::create(path).expect("create");
    file.write_all(&header).expect("write");
    file.seek(SeekFrom::Current(count as i64)).expect("seek");
    file.write_all(&base[24..]).expect("write");
}

/// A word-level tokenizer.json of `words` tokens (`w0`, `w1`, …) with
/// `<|im_start|>` and `<|im_end|>` as special tokens after them, and a chat
/// template that wraps a user message in them (tokenizer_config.json).
pub fn write_tokenizer(dir: &Path, words: usize) {
    let mut vocab = serde_json::Map::new();
    for i in 0..words {
        vocab.insert(format!("w{i}"), i.into());
    }
    let special = |id: usize, content: &str| {
        serde_json::json!({"id": id, "content": content, "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true})
    };
    vocab.insert("<|im_start|>".into(), words.into());
    vocab.insert("<|im_end|>".into(), (words + 1).into());
    vocab.insert("[UNK]".into(), (words + 2).into());
    let tokenizer = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(words, "<|im_start|>"), special(words + 1, "<|im_end|>")],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).expect("write");
    let config = serde_json::json!({
        "chat_template": "<|im_start|>user {{ messages[0].content }}<|im_end|> <|im_start|>assistant",
        "bos_token": null, "eos_token": "<|im_end|>"
    });
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).expect("write");
}

/// Runs `skillc deploy BUNDLE --model MODEL --out OUT [extra]` from `cwd`.
pub fn deploy_in(cwd: &Path, bundle: &Path, model: &Path, out: &Path, extra: &[&str]) -> Output {
    let (bundle, model, out) = (
        bundle.to_string_lossy(),
        model.to_string_lossy(),
        out.to_string_lossy(),
    );
    let mut args = vec![
        "deploy", &bundle, "--model", &model, "--out", &out, "--quiet",
    ];
    args.extend(extra);
    skillc_in(cwd, &args)
}
