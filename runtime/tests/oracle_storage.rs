//! The bf16-storage variant of the oracle (`model::oracle::storage`): with
//! nothing stored in bf16 it is the plain oracle bit for bit; storing the
//! residual stream rounds exactly where it stores and moves the teacher-forced
//! errors by a bf16-sized amount, and storing more moves them further; the
//! decode gates' floor is measured with it.

use skillc_runtime::bf16;
use skillc_runtime::exec::gates::decode::{forced_run, reference_run};
use skillc_runtime::exec::gates::floor::{storage_errors, DecodeLimits};
use skillc_runtime::exec::gates::topk::TopKGate;
use skillc_runtime::model::oracle::storage::{Bf16Storage, StoredTensor};
use skillc_runtime::model::oracle::{LogitRows, Reference};
use skillc_runtime::model::Model;

use crate::test_support::fixture_dir;

const PROMPT: [u32; 8] = [3, 17, 29, 41, 5, 11, 7, 23];

fn fixture(name: &str) -> Model {
    Model::load(&fixture_dir(name), None).expect("fixture weights")
}

#[test]
fn with_nothing_stored_in_bf16_the_variant_is_the_plain_oracle_bit_for_bit() {
    let model = fixture("qwen3-tiny");
    let run = reference_run(&model, &PROMPT, TopKGate::DEFAULT).expect("reference");
    let mut variant = Reference::new(&model)
        .expect("reference")
        .with_storage(Bf16Storage::none());
    let forced = forced_run(&mut variant, &PROMPT, &run).expect("runs");
    assert_eq!(forced.errors.logits.value, 0.0, "{:?}", forced.errors);
    assert_eq!(forced.errors.kv_prefill.value, 0.0);
    assert_eq!(forced.errors.kv_decode.value, 0.0);
    let tokens: Vec<u32> = forced.steps.iter().map(|s| s.token).collect();
    let expected: Vec<u32> = run.steps.iter().map(|s| s.token).collect();
    assert_eq!(tokens, expected);
}

#[test]
fn storing_the_residual_stream_rounds_it_where_it_is_stored_and_costs_a_bf16_sized_error() {
    let model = fixture("llama32-tiny");
    let residual = Bf16Storage::of(&[StoredTensor::Residual]);
    let plain = Reference::new(&model)
        .expect("reference")
        .prefill(&PROMPT, LogitRows::All)
        .expect("prefill");
    let rounded = Reference::new(&model)
        .expect("reference")
        .with_storage(residual.clone())
        .prefill(&PROMPT, LogitRows::All)
        .expect("prefill");
    for (layer, out) in rounded.layer_outputs.iter().enumerate() {
        assert!(
            out.data.iter().all(|&v| v == bf16::round(v)),
            "layer {layer}'s output is stored in bf16"
        );
    }
    // Layer 0's output: two bf16 roundings of the residual stream (after the
    // attention add and after the MLP add), each at most 2^-9 relative, so a
    // few 2^-8 of the layer's scale at most, and not zero.
    let (a, b) = (&rounded.layer_outputs[0].data, &plain.layer_outputs[0].data);
    let scale = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let diff = a
        .iter()
        .zip(b)
        .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
    assert!(diff > 0.0, "rounding changed nothing");
    assert!(diff <= 4.0 * scale / 256.0, "layer 0: {diff} of {scale}");

    let prompts = vec![PROMPT.to_vec()];
    let runs = vec![reference_run(&model, &PROMPT, TopKGate::DEFAULT).expect("reference")];
    let floor = |storage: &Bf16Storage| {
        storage_errors(&model, storage, &prompts, &runs).expect("variant runs")
    };
    let (residual_only, everything) = (
        floor(&residual),
        floor(&Bf16Storage::of(&StoredTensor::ALL)),
    );
    println!("llama32-tiny, residual only: {residual_only:?}");
    println!("llama32-tiny, everything: {everything:?}");
    for e in [&residual_only, &everything] {
        for w in [&e.logits, &e.kv_prefill, &e.kv_decode] {
            assert!(w.value > 0.0 && w.value < 0.025, "{e:?}");
            assert!(w.at.starts_with("prompt 1, "), "{}", w.at);
        }
    }
    assert!(everything.logits.value > residual_only.logits.value);
}

/// The decode gates' floor on the four transformers fixtures (the deployment's
/// prompts are asserted in `tests/deploy_fixtures.rs`; here a fixed prompt):
/// below half the fixed limit, so the limit stays 0.05.
#[test]
fn the_floor_keeps_the_fixed_limit_on_every_fixture() {
    for name in ["llama32-tiny", "qwen25-tiny", "qwen3-tiny", "smollm2-tiny"] {
        let model = fixture(name);
        let prompts = vec![PROMPT.to_vec()];
        let runs = vec![reference_run(&model, &PROMPT, TopKGate::DEFAULT).expect("reference")];
        let limits = DecodeLimits::measure(&model, &prompts, &runs).expect("floor");
        println!("{name}: {}", limits.note());
        for limit in [&limits.logits, &limits.kv_prefill, &limits.kv_decode] {
            assert!(
                limit.floor > 0.0 && limit.floor < 0.025,
                "{name}: {limit:?}"
            );
            assert_eq!(limit.limit, 0.05, "{name}");
        }
    }
}
