//! Padding is exact by construction: a plan padded along one dimension (hidden,
//! FFN, head_dim, KV groups with their query heads) computes, on the emulated
//! NPU (the plan interpreter), real outputs bit-identical to the unpadded plan
//! of the same model (prefill logits, every layer's residual stream on the real
//! columns, decode logits and the real elements of the KV cache), on models whose
//! unpadded plans place. The teacher-forced decode gate therefore measures the
//! same errors on both, and still catches a planted decode fault on a padded
//! plan. Padded vocabulary rows never reach the logits, so they never win an
//! argmax.

use skillc_runtime::exec::design::Plans;
use skillc_runtime::exec::gates::decode::{reference_run, teacher_forced};
use skillc_runtime::exec::gates::floor::DecodeLimits;
use skillc_runtime::exec::gates::topk::TopKGate;
use skillc_runtime::model::config::parse_config;
use skillc_runtime::model::oracle::blocks::argmax;
use skillc_runtime::model::Model;
use skillc_runtime::xdna2::builder::{padded_plan, unpadded_shape};
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::interpreter::{Defects, Interpreter, NpuPath};
use skillc_runtime::xdna2::padding::{Pad, Padding};
use skillc_runtime::xdna2::plan::{Phase, PlanOptions};

/// Prompt rows of the plans (the smallest the selected GEMM tiles divide).
const SEQ: usize = 128;
const PROMPT: [u32; 11] = [3, 141, 59, 265, 35, 89, 79, 32, 384, 2, 71];

/// A model every unpadded kernel places: hidden 128, FFN 256, 4 query heads
/// over 2 KV heads of 32; `family` picks the q/k/v bias (qwen2) or the Q/K
/// norm (qwen3).
fn model(family: &str) -> Model {
    let config = format!(
        r#"{{"model_type":"{family}","num_hidden_layers":2,"hidden_size":128,
            "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":2,
            "head_dim":32,"vocab_size":500,"tie_word_embeddings":true}}"#
    );
    Model::random(parse_config(&config).unwrap(), 5).unwrap()
}

/// The options under test: the reference plan without the decode cascade
/// (whose fused norm and K split a padded plan does not run).
fn options() -> PlanOptions {
    PlanOptions {
        cascade_ffn: false,
        ..PlanOptions::reference()
    }
}

fn plans(model: &Model, padding: Padding) -> Plans {
    let device = Device::npu2();
    let plan = |phase| {
        padded_plan(
            "padding",
            &model.arch,
            &device,
            (phase, SEQ),
            &options(),
            padding,
        )
        .expect("plan")
    };
    Plans {
        prefill: plan(Phase::Prefill),
        decode: plan(Phase::Decode),
    }
}

/// What the real rows give: prefill logits, each layer's real columns, the
/// logits of four greedy decode steps and the real KV cache of every layer.
struct Outputs {
    prefill: Vec<f32>,
    layers: Vec<Vec<f32>>,
    decode: Vec<Vec<f32>>,
    kv: Vec<(Vec<u16>, Vec<u16>)>,
}

fn run(model: &Model, padding: Padding) -> Outputs {
    let device = Device::npu2();
    let plans = plans(model, padding);
    let mut npu = Interpreter::new(&device, &model.arch, &model.weights, NpuPath::CORRECT);
    npu.capture_layers(true);
    let prefill = npu.prefill(&plans.prefill, &PROMPT).expect("prefill");
    let layers = npu.take_layer_outputs();
    npu.capture_layers(false);
    let mut decode = Vec::new();
    let mut next = argmax(&prefill) as u32;
    for _ in 0..4 {
        let logits = npu.decode(&plans.decode, next).expect("decode");
        next = argmax(&logits) as u32;
        decode.push(logits);
    }
    let kv = (0..model.arch.num_layers)
        .map(|layer| {
            let (k, v) = npu.kv(layer);
            (padding.real_kv(k), padding.real_kv(v))
        })
        .collect();
    Outputs {
        prefill,
        layers,
        decode,
        kv,
    }
}

fn unpadded(model: &Model) -> Padding {
    Padding::none(&unpadded_shape(&model.arch, &options()))
}

/// Bit-identical real outputs (compared as f32 values: a zero's sign aside,
/// equal values are equal bits).
fn assert_identical(what: &str, a: &Outputs, b: &Outputs) {
    same(&format!("{what}: prefill logits"), &a.prefill, &b.prefill);
    assert_eq!(a.layers.len(), b.layers.len(), "{what}: layers");
    for (i, (x, y)) in a.layers.iter().zip(&b.layers).enumerate() {
        same(&format!("{what}: layer {i} output"), x, y);
    }
    assert_eq!(a.decode.len(), b.decode.len(), "{what}: decode steps");
    for (i, (x, y)) in a.decode.iter().zip(&b.decode).enumerate() {
        same(&format!("{what}: decode step {i}"), x, y);
    }
    assert!(a.kv == b.kv, "{what}: the real KV cache differs");
}

fn same(what: &str, a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let differ = a.iter().zip(b).filter(|(x, y)| x != y).count();
    let first = a.iter().zip(b).position(|(x, y)| x != y);
    assert_eq!(
        differ,
        0,
        "{what}: {differ} of {} values differ, first at {first:?}: {:?}",
        a.len(),
        first.map(|i| (a[i], b[i]))
    );
}

fn pad(base: Padding, change: impl Fn(&mut Padding)) -> Padding {
    let mut p = base;
    change(&mut p);
    assert!(p.is_padded());
    p
}

/// One padding per dimension, and all of them at once.
fn cases(base: Padding) -> [(&'static str, Padding); 5] {
    [
        ("hidden 128 -> 192", pad(base, |p| p.hidden.padded = 192)),
        ("ffn 256 -> 320", pad(base, |p| p.ffn.padded = 320)),
        ("head_dim 32 -> 48", pad(base, |p| p.head_dim.padded = 48)),
        (
            "KV heads 2 -> 3 (heads 4 -> 6)",
            pad(base, |p| {
                p.kv_heads.padded = 3;
                p.heads.padded = 6;
            }),
        ),
        (
            "every dimension at once",
            Padding {
                hidden: Pad {
                    real: 128,
                    padded: 192,
                },
                ffn: Pad {
                    real: 256,
                    padded: 320,
                },
                head_dim: Pad {
                    real: 32,
                    padded: 40,
                },
                heads: Pad { real: 4, padded: 8 },
                kv_heads: Pad { real: 2, padded: 4 },
            },
        ),
    ]
}

#[test]
fn each_padded_dimension_gives_bit_identical_real_outputs() {
    for family in ["qwen2", "qwen3"] {
        let model = model(family);
        let base = unpadded(&model);
        let reference = run(&model, base);
        for (what, padding) in cases(base) {
            let padded = run(&model, padding);
            assert_identical(&format!("{family}, {what}"), &reference, &padded);
        }
    }
}

/// The decode gate compares the real elements of a padded plan's KV cache: it
/// measures on every padded plan exactly the errors of the unpadded one, and a
/// planted decode fault (the KV row written one slot late) still fails it.
#[test]
fn the_decode_gate_sees_a_padded_plan_as_the_unpadded_one() {
    let model = model("qwen3");
    let device = Device::npu2();
    let reference = reference_run(&model, &PROMPT, TopKGate::DEFAULT).expect("reference");
    let limits =
        DecodeLimits::measure(&model, &[PROMPT.to_vec()], std::slice::from_ref(&reference))
            .expect("floor");
    let forced = |padding: Padding, path: NpuPath| {
        let mut npu = Interpreter::new(&device, &model.arch, &model.weights, path);
        teacher_forced(&mut npu, &plans(&model, padding), &PROMPT, &reference).expect("runs")
    };
    let base = unpadded(&model);
    let unpadded = forced(base, NpuPath::CORRECT);
    assert!(unpadded.errors.within(&limits), "{:?}", unpadded.errors);
    let faulty = NpuPath {
        defects: Defects {
            kv_wrong_slot: true,
            ..Defects::NONE
        },
        ..NpuPath::CORRECT
    };
    for (what, padding) in cases(base) {
        let padded = forced(padding, NpuPath::CORRECT);
        assert_eq!(padded.errors, unpadded.errors, "{what}");
        let planted = forced(padding, faulty);
        assert!(
            !planted.errors.within(&limits),
            "{what}: kv-wrong-slot passes the decode gate: {:?}",
            planted.errors
        );
    }
}

/// The comparison can fail: a padded plan whose padding is not zero (here the
/// real head_dim's scale dropped, so the zero dimensions count) differs.
#[test]
fn a_padded_plan_that_breaks_exactness_is_caught() {
    let model = model("qwen3");
    let base = unpadded(&model);
    let reference = run(&model, base);
    let padding = pad(base, |p| p.head_dim.padded = 48);
    let device = Device::npu2();
    let mut prefill = plans(&model, padding).prefill;
    for step in prefill.layer.iter_mut() {
        if let skillc_runtime::xdna2::plan::Step::Call(call) = step {
            for launch in &mut call.launches {
                if let skillc_runtime::xdna2::plan::Launch::FlashAttention { spec, .. } = launch {
                    spec.scale_dim = None;
                }
            }
        }
    }
    let mut npu = Interpreter::new(&device, &model.arch, &model.weights, NpuPath::CORRECT);
    let logits = npu.prefill(&prefill, &PROMPT).expect("prefill");
    assert_ne!(logits, reference.prefill);
}

/// The LM head's partitions pad the 500-row vocabulary with zero rows; their
/// logits (0) would beat real logits that are all negative, and never appear.
#[test]
fn padded_vocabulary_rows_never_win_the_argmax() {
    let mut model = model("qwen3");
    // Logits all negative: a final norm of -1 with a positive-mean row... make
    // every embedding row the same positive direction and the norm negative.
    let h = model.arch.hidden_size;
    let positive: Vec<u16> = (0..model.arch.vocab_size * h)
        .map(|i| skillc_runtime::bf16::from_f32(0.5 + (i % 7) as f32 * 0.01))
        .collect();
    model.weights.embed_tokens = skillc_runtime::model::tensor::BfTensor::owned(
        "model.embed_tokens.weight",
        vec![model.arch.vocab_size, h],
        positive,
    );
    model.weights.final_norm.weight = Some(skillc_runtime::model::tensor::BfTensor::owned(
        "model.norm.weight",
        vec![h],
        vec![skillc_runtime::bf16::from_f32(-1.0); h],
    ));
    let base = unpadded(&model);
    let out = run(&model, base);
    assert_eq!(out.prefill.len(), 500, "logits cut to the real vocabulary");
    assert!(
        out.prefill.iter().all(|&l| l < 0.0),
        "every real logit is negative"
    );
    for logits in &out.decode {
        assert_eq!(logits.len(), 500);
        assert!(argmax(logits) < 500);
    }
}
