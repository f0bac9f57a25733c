//! The one model with trained weights, SmolLM2-135M-Instruct as a Q4_1 GGUF,
//! deployed with the reference bundle on the bf16 NPU path and on the packed
//! 4-bit path (`--weights packed`).
//!
//! With the chat message of its transformers reference it passes all eight
//! phases with a plain PASS, and report.md shows the text the CPU oracle and
//! the NPU path produce side by side. Without prompts the deployment verifies on
//! the reference's own two prompts (plain and chat), not on drawn token ids.
//!
//! Without prompts it passes too, within the decode gates' limits derived from
//! its bf16-storage floor, and the planted decode faults are still caught.
//!
//! All are ignored in the default run (CI's budget is the tiny fixtures); the README's
//! real-model command and `--ignored` in release run them.

use crate::deploy_support;

use deploy_support::{deploy, deploy_cli, llama1b, repo, scratch, summary};
use skillc_runtime::exec::artifacts::record::PhaseStatus;
use skillc_runtime::exec::{Fault, Verdict};
use skillc_runtime::model::oracle::compare::ReferenceTensors;

const SMOLLM2: &str = "../shared/models/smollm2-135m-instruct-q4_1";
const ANSWER: &str = "The capital of France is Paris.";

#[cfg(feature = "tokenizer")]
#[test]
#[ignore = "a 135M-parameter deploy: ~60 s in release, minutes in the test profile; run with `cargo test --release --test integration deploy_real_model:: -- --ignored`"]
fn the_real_gguf_model_deploys_with_a_plain_pass_on_its_chat_prompt() {
    let out = scratch("smollm2-135m-chat");
    let run = deploy_cli(
        &repo(SMOLLM2),
        &out,
        &[
            "--weights",
            "bf16",
            "--chat",
            "What is the capital of France?",
        ],
    );
    let md = passing_report(&run, &out);
    assert!(md.contains("| GEMV reads |"), "the weight path is named");
    assert!(!md.contains("| packed q4_1 |"), "{md}");
}

#[cfg(feature = "tokenizer")]
#[test]
#[ignore = "a 135M-parameter deploy: ~60 s in release, minutes in the test profile; run with `cargo test --release --test integration deploy_real_model:: -- --ignored`"]
fn the_real_gguf_model_deploys_on_the_packed_4_bit_path() {
    let out = scratch("smollm2-135m-q4");
    let run = deploy_cli(
        &repo(SMOLLM2),
        &out,
        &[
            "--weights",
            "packed",
            "--chat",
            "What is the capital of France?",
        ],
    );
    let md = passing_report(&run, &out);
    // The seven decode projections of every layer read their Q4_1 blocks.
    for buffer in ["wq", "wk", "wv", "wo", "wg", "wu", "wd"] {
        assert!(
            md.lines()
                .any(|l| l.starts_with(&format!("| {buffer} |")) && l.contains("| packed q4_1 |")),
            "{buffer}: {md}"
        );
    }
    // The tied Q8_0 embedding serves as LM head, read as bf16 by its NPU GEMV.
    assert!(
        md.lines()
            .any(|l| l.starts_with("| lm_head | 49152x576 (8 NPU GEMV parts")
                && l.contains("| Q8_0 | bf16 |")
                && l.contains("(no Q8_0 kernel)")),
        "{md}"
    );
    assert!(md.contains("| prefill GEMMs | 210 tensors |"), "{md}");
}

/// The report of a run that printed PASS, with the prompt's text row showing
/// the answer from the oracle and from the NPU path.
fn passing_report(run: &std::process::Output, out: &std::path::Path) -> String {
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("smollm2-135m-instruct-q4_1: PASS\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "  text, prompt 1 (final plan, free-running): {ANSWER} (the CPU oracle's too)\n"
        )),
        "{stdout}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(md.contains("Verdict: **PASS**"), "{md}");
    // The text row: prompt, oracle, NPU path.
    assert!(
        md.contains(&format!(
            "<\\|im_start\\|>assistant⏎ | {ANSWER} | {ANSWER} |"
        )),
        "{md}"
    );
    md
}

#[cfg(feature = "tokenizer")]
#[test]
#[ignore = "a 135M-parameter deploy: ~60 s in release, minutes in the test profile; run with `cargo test --release --test integration deploy_real_model:: -- --ignored`"]
fn without_prompts_the_real_model_is_verified_on_its_reference_prompts() {
    let model = repo(SMOLLM2);
    let out = scratch("smollm2-135m-default");
    let r = deploy(llama1b(), &model, &out, &[]).report;
    let reference = ReferenceTensors::read(&model.join("reference.safetensors")).unwrap();
    let ids: Vec<Vec<u32>> = reference
        .prompts()
        .iter()
        .map(|p| {
            reference
                .token_ids(&ReferenceTensors::key(p, "input_ids"))
                .unwrap()
        })
        .collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(r.prompts, ids, "{}", summary(&r));
    let texts: Vec<(&str, &str)> = r
        .texts
        .iter()
        .map(|t| (t.oracle_text.as_str(), t.npu_text.as_str()))
        .collect();
    assert_eq!(texts.len(), 2, "{}", summary(&r));
    assert_eq!(texts[0], (ANSWER, ANSWER));
    assert!(r.texts[1].prompt_text == "The capital of France is");
    // The plain prompt's massive activation costs the bf16-storage floor more
    // than half the fixed KV limit (README, real-model section): the derived
    // limit is wider, measured in phase 0, and the NPU path passes within it.
    let floor = r
        .decode_limits
        .as_ref()
        .expect("phase 0 measured the floor");
    println!("{} ({:.1} s)", floor.limits.note(), floor.wall_s);
    assert!(floor.limits.kv_decode.widened(), "{:?}", floor.limits);
    assert_eq!(r.verdict, Verdict::Pass, "{}", summary(&r));
    assert!(r.phases.iter().all(|p| p.status == PhaseStatus::Passed));
}

/// The planted decode faults on the real model and both reference prompts,
/// with the limits derived from its floor: each caught in the phase that
/// catches it on the fixtures (phase 3's teacher-forced gates; the dropped
/// LM-head partition by phase 5's probe), the figure printed beside its limit.
#[cfg(feature = "tokenizer")]
#[test]
#[ignore = "five 135M-parameter deploys: ~5 min in release; run with `cargo test --release --test integration deploy_real_model:: -- --ignored`"]
fn planted_decode_faults_are_caught_on_the_real_model_within_the_derived_limits() {
    let model = repo(SMOLLM2);
    let faults = [
        (Fault::DecodeRopeOffByOne, 3),
        (Fault::KvWrongSlot, 3),
        (Fault::StaleKv, 3),
        (Fault::GqaMapping, 3),
        (Fault::DropLmHeadPartition, 5),
    ];
    for (fault, phase) in faults {
        let out = scratch(&format!("smollm2-135m-{fault}"));
        let r = deploy(llama1b(), &model, &out, &[fault]).report;
        let failed: Vec<(u8, String)> = r
            .gates()
            .filter(|(_, g)| !g.passed && g.metric.name().ends_with("_max_rel"))
            .map(|(p, g)| (p.index(), format!("{}: {}", g.name, g.summary())))
            .collect();
        println!("{fault}: {failed:?}");
        assert!(
            !failed.is_empty() && failed.iter().all(|(p, _)| *p == phase),
            "{fault}: {failed:?}\n{}",
            summary(&r)
        );
    }
}
