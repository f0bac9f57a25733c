//! Model construction beyond the fixtures: the memory refusal, the scope
//! refusal, and the KV cache's consistency on seeded random models.

use std::path::Path;

use skillc_runtime::model::config::{load_config, parse_config};
use skillc_runtime::model::memory::{Available, Limit, MemoryEstimate};
use skillc_runtime::model::oracle::{LogitRows, Reference, ReferenceError};
use skillc_runtime::model::{check_fits, Model};

fn shared_config(model: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/models")
        .join(model)
        .join("config.json")
}

#[test]
fn a_model_that_does_not_fit_is_refused_with_the_numbers() {
    let arch = load_config(&shared_config("qwen3-4b")).unwrap();
    let estimate = MemoryEstimate::for_reference(&arch, 2048, 512);
    let machine = |bytes| {
        Some(Available {
            bytes,
            limit: Limit::Machine,
        })
    };
    let err = check_fits(estimate, machine(4 << 30)).unwrap_err();
    insta::assert_snapshot!(err.to_string());
    assert!(check_fits(estimate, machine(64 << 30)).is_ok());
}

#[test]
fn gemma3_is_classified_but_not_executed() {
    let arch = load_config(&shared_config("gemma-3-1b")).unwrap();
    let err = Model::random(arch, 1).unwrap_err();
    insta::assert_snapshot!(err.to_string());
}

fn small_random(extra: &str) -> Model {
    let config = format!(
        r#"{{"model_type":"qwen3","num_hidden_layers":2,"hidden_size":64,
            "intermediate_size":96,"num_attention_heads":4,"num_key_value_heads":2,
            "head_dim":32,"vocab_size":300,"tie_word_embeddings":true{extra}}}"#
    );
    Model::random(parse_config(&config).unwrap(), 11).unwrap()
}

/// Logits of a prompt computed in one prefill equal those of prefilling the
/// first token and decoding the rest one by one through the cache.
#[test]
fn cached_decode_agrees_with_prefill() {
    let model = small_random("");
    let ids: Vec<u32> = vec![3, 141, 59, 265, 35, 89, 79, 32];
    let all = Reference::new(&model)
        .unwrap()
        .prefill(&ids, LogitRows::All)
        .unwrap()
        .logits;
    let mut stepwise = Reference::new(&model).unwrap();
    let first = stepwise.prefill(&ids[..1], LogitRows::Last).unwrap().logits;
    let mut rows = vec![first.data];
    for &id in &ids[1..] {
        rows.push(stepwise.decode_step(id).unwrap());
    }
    for (k, row) in rows.iter().enumerate() {
        let want = all.row(k);
        let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let err = row
            .iter()
            .zip(want)
            .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(err <= 1e-5 * scale, "position {k}: {err} vs scale {scale}");
    }
    assert_eq!(stepwise.position(), ids.len());
}

#[test]
fn random_models_are_deterministic() {
    let a = Reference::new(&small_random(""))
        .unwrap()
        .greedy(&[1, 2, 3], 8)
        .unwrap();
    let b = Reference::new(&small_random(""))
        .unwrap()
        .greedy(&[1, 2, 3], 8)
        .unwrap();
    assert_eq!(a, b);
}

#[test]
fn bad_prompts_are_refused() {
    let model = small_random("");
    let mut reference = Reference::new(&model).unwrap();
    assert_eq!(
        reference.prefill(&[1, 300], LogitRows::Last).unwrap_err(),
        ReferenceError::TokenOutOfRange {
            id: 300,
            index: 1,
            vocab: 300
        }
    );
    assert_eq!(
        reference.prefill(&[], LogitRows::Last).unwrap_err(),
        ReferenceError::EmptyPrompt
    );
}

#[test]
fn sliding_window_runs_within_the_window_only() {
    let model =
        small_random(r#","use_sliding_window":true,"sliding_window":4,"max_window_layers":1"#);
    let mut reference = Reference::new(&model).unwrap();
    reference.prefill(&[1, 2, 3, 4], LogitRows::Last).unwrap();
    let err = reference.decode_step(5).unwrap_err();
    insta::assert_snapshot!(err.to_string());
}

/// F32 and F16 tensors holding bf16-exact values load to the same bits as the
/// BF16 original (the conversion rounds, it does not reinterpret).
#[test]
fn f32_and_f16_checkpoints_convert_to_the_same_bf16_bits() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/malformed");
    let bf16 = Model::load(&corpus.join("ok-micro"), None).unwrap();
    let mixed = Model::load(&corpus.join("ok-mixed-dtypes"), None).unwrap();
    let layer = &mixed.weights.layers[0];
    assert!(
        !layer.q_proj.is_mapped() && !layer.k_proj.is_mapped(),
        "converted, so owned"
    );
    for (a, b) in bf16.weights.tensors().iter().zip(mixed.weights.tensors()) {
        assert_eq!(a.name(), b.name());
        assert_eq!(a.bits(), b.bits(), "{}", a.name());
    }
}
