//! A seeded property test of padding: random configs in scope (hidden 32–1024 in
//! steps of 8, head_dim 8–256, any GQA ratio that divides, FFN and vocabulary
//! arbitrary; Llama, Qwen2.5 with q/k/v bias, or Qwen3 with Q/K norm) deploy with
//! seeded random weights and pass phases 0–3 with the llama1b bundle: every
//! dimension no tiling divides is padded by the bundle's lesson, every kernel site
//! gets a legal, validated tiling, and the padded model verifies against the
//! CPU reference. CI runs a bounded number of cases; set `SKILLC_PADDING_CASES`
//! for more (the seed of case i is i, so a failure names the case to rerun).

use crate::deploy_support;

use deploy_support::{deploy, llama1b, scratch};
use skillc_runtime::exec::artifacts::record::PhaseStatus;
use skillc_runtime::rng::SplitMix64;

const CASES_IN_CI: u64 = 3;

/// A value in `lo..=hi`.
fn pick(rng: &mut SplitMix64, lo: u64, hi: u64) -> u64 {
    lo + rng.next_u64() % (hi - lo + 1)
}

/// The config of case `seed`.
fn random_config(seed: u64) -> String {
    let mut rng = SplitMix64::for_stream(seed, "padding-property");
    let (family, class) = [
        ("llama", "LlamaForCausalLM"),
        ("qwen2", "Qwen2ForCausalLM"),
        ("qwen3", "Qwen3ForCausalLM"),
    ][pick(&mut rng, 0, 2) as usize];
    let hidden = 8 * pick(&mut rng, 4, 128);
    let head_dim = 2 * pick(&mut rng, 4, 128);
    let kv_heads = pick(&mut rng, 1, 4);
    let group = pick(&mut rng, 1, 4);
    let ffn = pick(&mut rng, 16, 2048);
    let vocab = pick(&mut rng, 64, 3000);
    format!(
        r#"{{"architectures":["{class}"],"model_type":"{family}","num_hidden_layers":1,
  "hidden_size":{hidden},"intermediate_size":{ffn},"num_attention_heads":{heads},
  "num_key_value_heads":{kv_heads},"head_dim":{head_dim},"vocab_size":{vocab},
  "tie_word_embeddings":true,"torch_dtype":"bfloat16"}}"#,
        heads = kv_heads * group,
    )
}

#[test]
fn random_configs_in_scope_pass_phases_0_to_3() {
    let cases = std::env::var("SKILLC_PADDING_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES_IN_CI);
    for seed in 0..cases {
        let config = random_config(seed);
        let dir = scratch(&format!("property-{seed}"));
        let model = dir.join("model");
        std::fs::create_dir_all(&model).unwrap();
        std::fs::write(model.join("config.json"), &config).unwrap();
        let outcome = deploy(llama1b(), &model, &dir.join("out"), &[]);
        let r = &outcome.report;
        for phase in &r.phases[..4] {
            assert_eq!(
                phase.status,
                PhaseStatus::Passed,
                "case {seed}: phase {} {:?} ({:?})\n{config}",
                phase.index,
                phase.status,
                r.stop
            );
        }
        eprintln!(
            "case {seed}: phases 0-3 pass; padded {:?}\n{config}",
            r.padding.as_ref().map(|c| c
                .padding
                .dims()
                .iter()
                .filter(|(_, p)| p.is_padded())
                .map(|(d, p)| format!("{d} {}->{}", p.real, p.padded))
                .collect::<Vec<_>>())
        );
    }
}
