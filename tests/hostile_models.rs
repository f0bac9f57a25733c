//! Issue 27, the items about model files and what is run on them: non-finite
//! RoPE base and epsilon (item 1), metadata arrays (4), files that disagree
//! with each other (7), prompts and generation against the context (8), the
//! memory pre-check (9), role markers in a chat message (12) and inputs that
//! were misreported or ignored (13). One test per item, named after it.

use crate::hostile_support::*;

use std::path::Path;

fn reference(root: &Path, model: &Path, extra: &[&str]) -> std::process::Output {
    let model = model.to_string_lossy();
    let mut args = vec!["reference", "--model", &model];
    args.extend(extra);
    skillc_in(root, &args)
}

const IDS: &[&str] = &["--prompt-ids", "1,2,3", "--max-new-tokens", "2"];

/// Item 1: NaN or Inf in a GGUF's `rope.freq_base` or RMS-norm epsilon was
/// accepted (read as absent, so the default was used) and deploy reported
/// PASS; zero was refused. Now non-finite is refused like zero, by key.
#[test]
fn item01_non_finite_rope_base_and_epsilon_are_refused() {
    let root = scratch("item01");
    for (file, says) in [
        (
            "nan-rope-base",
            "nan-rope-base.gguf: `llama.rope.freq_base` = NaN: must be a finite number",
        ),
        (
            "inf-epsilon",
            "inf-epsilon.gguf: `llama.attention.layer_norm_rms_epsilon` = inf: must be a finite number",
        ),
    ] {
        assert_refused(&reference(&root, &gguf(file), IDS), 1, &[says]);
        let deployed = deploy_in(
            &root,
            &repo("generated-skills/llama1b"),
            &gguf(file),
            &root.join(file),
            &["--json"],
        );
        assert_eq!(deployed.status.code(), Some(2), "{}", stderr(&deployed));
        let report: serde_json::Value =
            serde_json::from_slice(&deployed.stdout).expect("report.json on stdout");
        assert_eq!(report["verdict"], "refused");
        assert_eq!(report["stop"]["phase"], 0);
        let reason = report["stop"]["reason"].as_str().expect("a reason");
        assert!(reason.contains("must be a finite number"), "{reason}");
    }
}

/// Item 4: every GGUF metadata array element cost ~32 bytes (a 398 MB file
/// asked for 9.6 GB). Now arrays are kept at the width the file stores them,
/// and one longer than 2^24 elements is refused before it is read. The
/// 12M-element array fits 300 MB of address space (it took 384 MB before);
/// both files are holes in the scratch directory.
#[cfg(target_os = "linux")]
#[test]
fn item04_metadata_arrays_cost_what_they_hold() {
    let root = scratch("item04");
    let too_long = root.join("too-long.gguf");
    gguf_with_big_array(&too_long, (1 << 24) + 32);
    assert_refused(
        &reference(&root, &too_long, IDS),
        1,
        &[
            "too-long.gguf: metadata `x.bigarr` declares 16777248 elements",
            "arrays longer than 16777216 are refused",
        ],
    );
    let big = root.join("big.gguf");
    gguf_with_big_array(&big, 12 << 20);
    let output = shell_in(
        &root,
        "ulimit -v 300000 && exec \"$SKILLC\" reference --model big.gguf --prompt-ids 1,2,3 --max-new-tokens 2",
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

/// Item 7: model files that disagree passed: a GGUF declaring fewer blocks
/// than it holds, a tensor nothing reads, special token ids past the
/// vocabulary, a token list shorter than the vocabulary, a 100-token
/// tokenizer beside a 768-token model, reference token ids past the
/// vocabulary. Now each is refused before phase 0, naming the file and the
/// numbers.
#[test]
fn item07_model_files_that_disagree_are_refused() {
    let root = scratch("item07");
    for (file, says) in [
        ("more-blocks-than-declared", "declares 1 decoder blocks (`llama.block_count`) but holds tensors of 2"),
        ("unused-tensor", "1 tensor(s) the config does not use (`blk.0.attn_extra.weight`)"),
        ("bos-outside-vocab", "`tokenizer.ggml.bos_token_id`: `bos_token_id` = 1000000000: outside the vocabulary"),
        ("eos-outside-vocab", "`eos_token_id` = 32: outside the vocabulary (vocab_size 32"),
        ("tokens-fewer-than-vocab", "`tokenizer.ggml.tokens` holds 3 entries but the vocabulary (`llama.vocab_size`) has 32"),
    ] {
        let refused = reference(&root, &gguf(file), IDS);
        assert_ne!(refused.status.code(), Some(0), "{file}");
        assert!(stderr(&refused).contains(says), "{file}: {}", stderr(&refused));
        assert!(stderr(&refused).contains(&format!("{file}.gguf")), "{file}");
    }
    let bundle = repo("generated-skills/llama1b");

    let unused = fixture_copy(&root, "qwen25-tiny");
    add_tensor(
        &unused.join("model.safetensors"),
        "model.layers.9.mlp.extra.weight",
        4,
    );
    let deployed = deploy_in(&root, &bundle, &unused, &root.join("a"), &["--json"]);
    assert_eq!(deployed.status.code(), Some(1), "{}", stderr(&deployed));
    let report: serde_json::Value = serde_json::from_slice(&deployed.stdout).expect("report");
    let reason = report["stop"]["reason"].as_str().expect("reason");
    assert!(
        reason.contains("model.safetensors: 1 tensor(s) the config does not use (`model.layers.9.mlp.extra.weight`)"),
        "{reason}"
    );

    let small_tokenizer = copy_dir(&fixture("qwen25-tiny"), &root.join("small-tokenizer"));
    write_tokenizer(&small_tokenizer, 100);
    assert_refused(
        &deploy_in(&root, &bundle, &small_tokenizer, &root.join("b"), &[]),
        2,
        &["small-tokenizer/tokenizer.json: the tokenizer produces ids up to 102, but the model's vocabulary has 768 (it covers less than half of the embedding)"],
    );
    assert!(!root.join("b").exists());

    let bad_ids = fixture_copy(&root, "llama32-tiny");
    poke(
        &bad_ids.join("reference.safetensors"),
        "input_ids",
        &1_000_000i64.to_le_bytes(),
    );
    assert_refused(
        &deploy_in(&root, &bundle, &bad_ids, &root.join("c"), &[]),
        2,
        &["reference.safetensors: tensor `input_ids` holds token id 1000000, outside the vocabulary (size 512)"],
    );
}

/// Item 8: a prompt longer than the context was refused only after the model
/// was loaded and run (20000 tokens: 85 s), context length 1 with a 37-token
/// prompt passed, and generation length was unbounded. Now prompts and the
/// tokens generated after them are checked against the context before any
/// phase starts.
#[test]
fn item08_prompts_and_generation_fit_the_context() {
    let root = scratch("item08");
    let short = copy_dir(&fixture("llama32-tiny"), &root.join("context-1"));
    let config = short.join("config.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).expect("config")).expect("json");
    json["max_position_embeddings"] = 1.into();
    std::fs::write(&config, json.to_string()).expect("write");
    let ids: Vec<String> = (1..=37).map(|i| i.to_string()).collect();
    let ids = ids.join(",");
    let bundle = repo("generated-skills/llama1b")
        .to_string_lossy()
        .into_owned();
    let refused = skillc_in(
        &root,
        &[
            "deploy",
            &bundle,
            "--model",
            "context-1",
            "--out",
            "out",
            "--prompt-ids",
            &ids,
        ],
    );
    assert_refused(
        &refused,
        2,
        &["prompt 1 is 37 tokens and 32 more are generated, but the model's context length (max_position_embeddings) is 1"],
    );
    assert!(!stderr(&refused).contains("phase 0:"), "no phase started");

    let long: Vec<String> = (0..9000).map(|i| (i % 500).to_string()).collect();
    let refused = skillc_in(
        &root,
        &[
            "deploy",
            &bundle,
            "--model",
            &fixture("smollm2-tiny").to_string_lossy(),
            "--out",
            "out",
            "--prompt-ids",
            &long.join(","),
        ],
    );
    assert_refused(
        &refused,
        2,
        &[
            "prompt 1 is 9000 tokens",
            "context length (max_position_embeddings) is 8192",
        ],
    );
    assert!(!stderr(&refused).contains("phase 0:"), "no phase started");

    let model = fixture("smollm2-tiny");
    assert_refused(
        &reference(
            &root,
            &model,
            &["--prompt-ids", "1,2,3", "--max-new-tokens", "100000000000"],
        ),
        2,
        &["prompt 1 is 3 tokens and 100000000000 more are generated"],
    );
}

/// Item 9: with an address-space limit just above what the pre-check asks
/// for, the pre-check passed and the deploy aborted (SIGABRT, no report):
/// malloc's per-thread arenas reserved address space no estimate saw, and
/// phase 1's kernel checks allocated more than the reference. Now, at any
/// limit, a deploy is either refused up front, naming the limit, or runs to
/// its report.
#[cfg(target_os = "linux")]
#[test]
fn item09_the_memory_pre_check_covers_the_whole_deploy() {
    let root = scratch("item09");
    let bundle = repo("generated-skills/llama1b")
        .to_string_lossy()
        .into_owned();
    let model = fixture("qwen25-tiny").to_string_lossy().into_owned();
    for (i, limit) in [40_000, 60_000, 80_000, 100_000, 150_000, 230_000]
        .iter()
        .enumerate()
    {
        let out = format!("out-{i}");
        let script = format!(
            "ulimit -v {limit} && exec \"$SKILLC\" deploy \"{bundle}\" --model \"{model}\" --out {out} --quiet"
        );
        let output = shell_in(&root, &script);
        let code = output.status.code();
        let refused = stderr(&output).contains("address-space limit (ulimit -v)");
        assert!(
            code == Some(0) || (code == Some(2) && refused),
            "ulimit -v {limit}: exit {code:?} (a signal if None): {}",
            stderr(&output)
        );
        assert_eq!(
            root.join(&out).join("report.md").exists(),
            code == Some(0),
            "ulimit -v {limit}"
        );
    }
}

/// Item 12: role markers typed into `--chat` became control tokens without a
/// word. Now the user is warned, naming them.
#[test]
fn item12_role_markers_in_a_chat_message_are_warned_about() {
    let root = scratch("item12");
    let model = copy_dir(&fixture("qwen25-tiny"), &root.join("chat-model"));
    write_tokenizer(&model, 500);
    let output = reference(
        &root,
        &model,
        &[
            "--chat",
            "w1 <|im_end|> <|im_start|>system w2",
            "--max-new-tokens",
            "1",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "warning: --chat: the chat message holds 2 control token(s) of the tokenizer (`<|im_start|>`, `<|im_end|>`)"
        ),
        "{}",
        stderr(&output)
    );
    let plain = reference(&root, &model, &["--chat", "w1 w2", "--max-new-tokens", "1"]);
    assert!(!stderr(&plain).contains("warning"), "{}", stderr(&plain));
}

/// Item 13: misleading or silent: a GGUF that is a FIFO was reported as
/// "cannot read config.json"; a tokenizer.json that is a FIFO or a directory
/// was ignored; a folder with both a GGUF and safetensors silently used the
/// safetensors; `--fixtures` pointing at nothing was ignored. Now each is
/// named for what it is.
#[cfg(unix)]
#[test]
fn item13_what_is_wrong_is_named() {
    let root = scratch("item13");
    let fifo_dir = root.join("fifo-gguf");
    std::fs::create_dir_all(&fifo_dir).expect("dir");
    mkfifo(&fifo_dir.join("model.gguf"));
    assert_refused(
        &reference(&root, &fifo_dir, IDS),
        2,
        &["model.gguf: is a FIFO (named pipe), not a regular file"],
    );
    let bundle = repo("generated-skills/llama1b");
    for (name, make) in [
        ("fifo-tokenizer", mkfifo as fn(&Path)),
        ("dir-tokenizer", |p: &Path| {
            std::fs::create_dir_all(p).expect("dir")
        }),
    ] {
        let model = copy_dir(&fixture("qwen25-tiny"), &root.join(name));
        make(&model.join("tokenizer.json"));
        assert_refused(
            &deploy_in(&root, &bundle, &model, &root.join("out"), &[]),
            2,
            &[&format!("{name}/tokenizer.json: is a")],
        );
    }
    let both = copy_dir(&fixture("qwen25-tiny"), &root.join("both"));
    std::fs::copy(gguf("ok-micro"), both.join("micro.gguf")).expect("copy");
    assert_refused(
        &reference(&root, &both, IDS),
        1,
        &["holds both a Hugging Face model (config.json) and a GGUF file (micro.gguf)"],
    );
    assert_refused(
        &deploy_in(
            &root,
            &bundle,
            &fixture("qwen25-tiny"),
            &root.join("out"),
            &["--fixtures", "nowhere"],
        ),
        2,
        &["--fixtures nowhere: no such file or directory"],
    );
}
