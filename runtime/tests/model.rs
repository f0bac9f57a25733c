//! Model construction beyond the fixtures: the memory refusal and the KV
//! cache's consistency on seeded random models, sliding-window layers included.

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

fn small_random(extra: &str) -> Model {
    let config = format!(
        r#"{{"model_type":"qwen3","num_hidden_layers":2,"hidden_size":64,
            "intermediate_size":96,"num_attention_heads":4,"num_key_value_heads":2,
            "head_dim":32,"vocab_size":300,"tie_word_embeddings":true{extra}}}"#
    );
    Model::random(parse_config(&config).unwrap(), 11).unwrap()
}

/// A Gemma-3 layout (window 3 on every layer but each second one) with
/// seeded weights.
fn small_gemma(window: Option<u64>) -> Model {
    let sliding = match window {
        Some(w) => format!(r#","sliding_window":{w},"sliding_window_pattern":2"#),
        None => r#","sliding_window_pattern":1"#.into(),
    };
    let config = format!(
        r#"{{"model_type":"gemma3_text","num_hidden_layers":4,"hidden_size":64,
            "intermediate_size":96,"num_attention_heads":4,"num_key_value_heads":1,
            "head_dim":32,"query_pre_attn_scalar":24,"vocab_size":300,
            "rope_local_base_freq":10000,"rope_theta":1000000{sliding}}}"#
    );
    Model::random(parse_config(&config).unwrap(), 11).unwrap()
}

/// Logits of a prompt computed in one prefill equal those of prefilling the
/// first token and decoding the rest one by one through the cache.
fn assert_cached_decode_agrees_with_prefill(model: &Model, ids: &[u32]) -> Vec<Vec<f32>> {
    let all = Reference::new(model)
        .unwrap()
        .prefill(ids, LogitRows::All)
        .unwrap()
        .logits;
    let mut stepwise = Reference::new(model).unwrap();
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
    rows
}

const PROMPT: [u32; 8] = [3, 141, 59, 265, 35, 89, 79, 32];

#[test]
fn cached_decode_agrees_with_prefill() {
    assert_cached_decode_agrees_with_prefill(&small_random(""), &PROMPT);
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

/// Beyond the window, a prefill (masking inside one pass) and a cached decode
/// (dropping what slid out of the cache) attend to the same positions; and the
/// window is really applied: the same weights without it give other logits
/// once the prompt is longer than the window, and the same ones within it.
#[test]
fn sliding_window_agrees_between_prefill_and_cached_decode_beyond_the_window() {
    for model in [
        small_gemma(Some(3)),
        small_random(r#","use_sliding_window":true,"sliding_window":3,"max_window_layers":1"#),
    ] {
        let windowed = assert_cached_decode_agrees_with_prefill(&model, &PROMPT);
        // A window longer than the prompt: the same layers (and RoPE bases), no mask.
        let mut full_arch = model.arch.clone();
        if let Some(sw) = &mut full_arch.sliding_window {
            sw.window = 1 << 20;
        }
        let full = Model {
            arch: full_arch,
            ..model.clone()
        };
        let unwindowed = assert_cached_decode_agrees_with_prefill(&full, &PROMPT);
        let differs = |k: usize| {
            windowed[k]
                .iter()
                .zip(&unwindowed[k])
                .any(|(a, b)| (a - b).abs() > 1e-3)
        };
        assert!(
            !differs(0) && !differs(2),
            "{}: inside the window",
            model.arch.class_name
        );
        assert!((3..PROMPT.len()).all(differs), "beyond the window");
    }
}

/// A Gemma-3 model without any sliding layer runs too (pattern 1: all global).
#[test]
fn gemma3_without_sliding_layers_decodes_like_it_prefills() {
    let model = small_gemma(None);
    assert!(model.arch.sliding_window.is_none());
    assert_cached_decode_agrees_with_prefill(&model, &PROMPT);
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
