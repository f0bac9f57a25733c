//! `skillc reference` end to end: PASS (exit 0) on a fixture, FAIL (exit 1)
//! when the tolerance is tighter than float32 noise, and a config error
//! rendered with file:line:col, the source line and a caret.

use std::process::Command;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures");
const MALFORMED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/runtime/tests/data/malformed");

fn skillc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_skillc"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `skillc reference` on a fixture through one of its config files: PASS with
/// 16/16 greedy tokens; returns the output.
fn passes(fixture: &str, config: &str) -> String {
    let dir = format!("{FIXTURES}/{fixture}");
    let config = format!("{dir}/{config}");
    let (code, out, err) = skillc(&["reference", "--model", &dir, "--config", &config]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("greedy tokens                             16 16/16 equal"),
        "{out}"
    );
    assert!(out.contains("\nPASS: worst ratio"), "{out}");
    out
}

#[test]
fn fixture_passes_through_the_newer_config_layout() {
    passes("qwen25-tiny", "config.transformers5.json");
}

/// Gemma 3 (sandwich and (1 + w) norms, scaled embeddings, q/k norm, local and
/// global RoPE, a window of 8 under a 20-token prompt) in both config layouts.
#[test]
fn gemma3_passes_in_both_config_layouts() {
    for config in ["config.json", "config.transformers5.json"] {
        let out = passes("gemma3-tiny", config);
        assert!(out.contains("sliding-window attention (window 8) on 5 of 6 layers"));
    }
}

#[test]
fn a_tolerance_below_float_noise_fails() {
    let dir = format!("{FIXTURES}/smollm2-tiny");
    let (code, out, _) = skillc(&["reference", "--model", &dir, "--tolerance", "1e-9"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("\nFAIL: worst ratio"), "{out}");
}

#[test]
fn random_weights_from_a_config_alone() {
    let dir = format!("{MALFORMED}/weights-none");
    let (code, out, err) = skillc(&[
        "reference",
        "--model",
        &dir,
        "--seed",
        "5",
        "--prompt-ids",
        "1,2,3",
        "--max-new-tokens",
        "4",
        "--ignore-eos",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("weights: random bf16 weights, seed 5"),
        "{out}"
    );
    assert!(out.contains("greedy (4 tokens): "), "{out}");
    let (code, _, err) = skillc(&["reference", "--model", &dir, "--prompt-ids", "1"]);
    assert_eq!(code, 2, "no weights and no seed is a usage error: {err}");
}

#[test]
fn config_errors_point_at_the_field() {
    let (code, _, err) = skillc(&[
        "reference",
        "--model",
        "runtime/tests/data/malformed/config-heads-not-dividing",
    ]);
    assert_eq!(code, 1);
    insta::assert_snapshot!(err);
}

/// A text prompt through `tokenizer.json` (only with the `tokenizer` feature:
/// `cargo test --features tokenizer --test integration cli_reference::`).
#[cfg(feature = "tokenizer")]
#[test]
fn text_prompt_through_tokenizer_json() {
    let dir = std::env::temp_dir().join(format!("skillc-cli-tokenizer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["config.json", "model.safetensors"] {
        std::fs::copy(format!("{MALFORMED}/ok-micro/{file}"), dir.join(file)).unwrap();
    }
    let tokenizer = r#"{
      "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
      "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
      "post_processor": null, "decoder": null,
      "model": {"type": "WordLevel", "unk_token": "unk",
                "vocab": {"unk": 0, "hello": 1, "world": 2, "a": 3, "b": 4, "c": 5, "d": 6,
                          "e": 7, "f": 8, "g": 9, "h": 10, "i": 11, "j": 12, "k": 13,
                          "l": 14, "m": 15}}
    }"#;
    std::fs::write(dir.join("tokenizer.json"), tokenizer).unwrap();
    let model = dir.to_string_lossy().into_owned();
    let (code, out, err) = skillc(&["reference", "--model", &model, "--prompt", "hello world"]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("prompt (2 tokens, as text): 1,2"), "{out}");
    assert!(out.contains("output:\n"), "{out}");
}

const SMOLLM2: &str = "../shared/models/smollm2-135m-instruct-q4_1";

/// The headline command: a chat message to the real GGUF model answers in
/// text, and the oracle passes against transformers on both prompts.
#[cfg(feature = "tokenizer")]
#[test]
fn chat_with_the_real_gguf_model() {
    let (code, out, err) = skillc(&[
        "reference",
        "--model",
        SMOLLM2,
        "--chat",
        "What is the capital of France?",
    ]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(
        out.contains("stopped at end-of-sequence): 504,3575,282,4649,314,7042,30,2\noutput:\nThe capital of France is Paris.\n"),
        "{out}"
    );
    assert_eq!(out.matches("PASS: worst ratio").count(), 2, "{out}");
}

/// Every malformed GGUF file is refused through the CLI with exit 1 (bad
/// data) and a message, never a panic.
#[test]
fn malformed_gguf_files_exit_with_a_message() {
    let dir = "runtime/tests/data/gguf";
    let mut cases = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".gguf") || name.starts_with("ok-") {
            continue;
        }
        let (code, _, err) = skillc(&[
            "reference",
            "--model",
            &path.to_string_lossy(),
            "--prompt-ids",
            "1",
        ]);
        assert_eq!(code, 1, "{name}: {err}");
        assert!(err.starts_with("error: "), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        cases += 1;
    }
    assert!(cases >= 15, "{cases}");
    let (code, _, err) = skillc(&[
        "reference",
        "--model",
        "runtime/tests/data/gguf/absent.gguf",
    ]);
    assert_eq!(code, 2, "a missing file is a usage error: {err}");
}
