//! The 4-bit weight path on the emulated NPU, on the GGUF corpus's control
//! models (`tests/data/gguf/ok-*.gguf`: one llama layer, Q4_1 or Q4_0 matrices
//! read through the real loader, llama.cpp's Q/K row order undone in place):
//! the decision packs the decode GEMVs whose weights are stored in 4-bit blocks
//! and keeps bf16 where they are not (with the reason), and the packed decode
//! computes the logits of the bf16 decode on the bf16 rounding of the same
//! weights, bit for bit, while streaming the stored bytes.

use std::path::Path;

use skillc_runtime::exec::design::Design;
use skillc_runtime::model::Model;
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::interpreter::{Interpreter, NpuPath};
use skillc_runtime::xdna2::kernels::PackedFormat;
use skillc_runtime::xdna2::packing::pack_decode_gemvs;
use skillc_runtime::xdna2::plan::{Launch, Plan, Step};

fn corpus(name: &str) -> Model {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/gguf/{name}.gguf"));
    Model::open(&path, None).expect("control model loads")
}

fn gemv_bytes(plan: &Plan) -> f64 {
    plan.layer
        .iter()
        .filter_map(|s| match s {
            Step::Call(c) => Some(&c.launches),
            Step::Host(_) => None,
        })
        .flatten()
        .filter_map(|l| match l {
            Launch::Gemv { spec, .. } => Some(spec.weight_bytes()),
            _ => None,
        })
        .sum()
}

/// Prefill of a short prompt, then `steps` decode steps fed fixed tokens;
/// every step's logits.
fn decode_logits(model: &Model, prefill: &Plan, decode: &Plan, steps: usize) -> Vec<Vec<f32>> {
    let device = Device::npu2();
    let mut npu = Interpreter::new(&device, &model.arch, &model.weights, NpuPath::CORRECT);
    let mut all = vec![npu.prefill(prefill, &[1, 5, 9]).expect("prefill runs")];
    for t in 0..steps {
        all.push(npu.decode(decode, 3 + t as u32).expect("decode runs"));
    }
    all
}

#[test]
fn four_bit_weights_are_packed_and_decode_as_their_bf16_rounding() {
    let device = Device::npu2();
    for (name, format) in [
        ("ok-micro", PackedFormat::Q4_1),
        ("ok-q4_0", PackedFormat::Q4_0),
    ] {
        let model = corpus(name);
        let plans = Design::baseline()
            .plans(name, &model.arch, &device)
            .expect("plans build");
        let mut packed = plans.decode.clone();
        let choices = pack_decode_gemvs(&mut packed, &model.weights, &device);
        assert!(!choices.is_empty(), "{name}: the decode plan has GEMVs");
        let packed_buffers: Vec<&str> = choices
            .iter()
            .filter(|c| c.packed == Some(format))
            .map(|c| c.buffer.as_str())
            .collect();
        assert!(!packed_buffers.is_empty(), "{name}: {choices:?}");
        for c in choices.iter().filter(|c| c.packed.is_none()) {
            assert!(!c.reason.is_empty(), "{name}: {c:?}");
        }
        assert!(packed.check(&device).is_ok(), "{name}: packed plan places");
        // The packed plan streams fewer weight bytes: 20 (Q4_1) or 18 (Q4_0)
        // per 32 weights instead of 64.
        assert!(gemv_bytes(&packed) < gemv_bytes(&plans.decode), "{name}");

        let bf16 = decode_logits(&model, &plans.prefill, &plans.decode, 4);
        let four_bit = decode_logits(&model, &plans.prefill, &packed, 4);
        assert_eq!(
            bf16, four_bit,
            "{name}: packed decode = bf16 decode of the rounding"
        );
    }
}

#[test]
fn weights_not_stored_in_four_bit_blocks_keep_the_bf16_path() {
    let device = Device::npu2();
    let model = corpus("ok-bf16");
    let plans = Design::baseline()
        .plans("ok-bf16", &model.arch, &device)
        .expect("plans build");
    let mut decode = plans.decode.clone();
    let choices = pack_decode_gemvs(&mut decode, &model.weights, &device);
    assert!(!choices.is_empty());
    for c in &choices {
        assert_eq!(c.packed, None, "{c:?}");
        assert!(
            c.reason.contains("BF16") || c.reason.contains("transforms"),
            "{c:?}"
        );
    }
    assert_eq!(decode, plans.decode, "nothing changed");
}
