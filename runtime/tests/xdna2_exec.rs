//! Functional execution of whole plans on the tiny fixtures, against the CPU
//! f32 reference: the emulated NPU path (bf16 between kernels, BFP16-free
//! reference plan) must keep every layer's output close and agree on the
//! next token, prefill and decode; plans that differ only in host traffic
//! (the ablation cells) must give bit-identical logits.

use std::path::PathBuf;

use skillc_runtime::model::oracle::{blocks::argmax, LogitRows, Reference};
use skillc_runtime::model::Model;
use skillc_runtime::xdna2::builder::plan_for;
use skillc_runtime::xdna2::calibration::{ablation_options, data_dir, DataSet};
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::interpreter::{Interpreter, NpuPath};
use skillc_runtime::xdna2::numerics::cosine;
use skillc_runtime::xdna2::plan::{Launch, Phase, Plan, PlanOptions, Step, WeightSource};
use skillc_runtime::xdna2::published::checking_device;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures"
    ))
    .join(name)
}

fn prompt(name: &str) -> Vec<u32> {
    let text =
        std::fs::read_to_string(fixture(name).join("reference.json")).expect("reference.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    json["prompt_ids"]
        .as_array()
        .expect("prompt_ids")
        .iter()
        .map(|v| v.as_u64().expect("id") as u32)
        .collect()
}

const SEQ: usize = 128;

fn run_fixture(name: &str) {
    run_fixture_with(name, &PlanOptions::reference(), |_| {});
}

/// Runs the fixture's plans under `options`, each changed by `plant` first.
fn run_fixture_with(name: &str, options: &PlanOptions, plant: impl Fn(&mut Plan)) {
    let model = Model::load(&fixture(name), None).expect("fixture loads");
    run_model(name, &model, options, plant);
}

/// `model` (a fixture's weights, its architecture possibly edited: the reference
/// runs the same one) on the emulator under `options`, each plan changed by
/// `plant` first, against the reference.
fn run_model(name: &str, model: &Model, options: &PlanOptions, plant: impl Fn(&mut Plan)) {
    let npu2 = Device::npu2();
    let tokens = prompt(name);
    let mut prefill =
        plan_for(name, &model.arch, &npu2, Phase::Prefill, SEQ, options).expect("plan");
    let mut decode = plan_for(name, &model.arch, &npu2, Phase::Decode, SEQ, options).expect("plan");
    plant(&mut prefill);
    plant(&mut decode);
    // A published structure stitches more launches per call than skillc's
    // own plans are kept to; the plan's own count is its limit.
    let device = checking_device(&npu2, &prefill);

    let mut session = Interpreter::new(&device, &model.arch, &model.weights, NpuPath::CORRECT);
    session.capture_layers(true);
    let npu = session.prefill(&prefill, &tokens).expect("prefill runs");
    let mut reference = Reference::new(model).expect("reference");
    let out = reference
        .prefill(&tokens, LogitRows::Last)
        .expect("reference prefill");
    let hidden = model.arch.hidden_size;
    let layers = session.take_layer_outputs();
    assert_eq!(layers.len(), out.layer_outputs.len());
    for (layer, (emulated, expected)) in layers.iter().zip(&out.layer_outputs).enumerate() {
        assert_eq!(emulated.len(), tokens.len() * hidden, "real rows only");
        let c = cosine(emulated, &expected.data);
        assert!(c >= 0.99, "{name} layer {layer}: cosine {c}");
    }
    let c = cosine(&npu, &out.logits.data);
    assert!(c >= 0.99, "{name} prefill logits cosine {c}");
    assert_eq!(
        argmax(&npu),
        argmax(&out.logits.data),
        "{name}: next token differs"
    );

    // Teacher-forced decode: the same tokens on both sides, logits compared.
    let mut token = argmax(&out.logits.data) as u32;
    for step in 0..4 {
        let emulated = session.decode(&decode, token).expect("decode runs");
        let expected = reference.decode_step(token).expect("reference decode");
        let c = cosine(&emulated, &expected);
        assert!(c >= 0.99, "{name} decode step {step}: cosine {c}");
        token = argmax(&expected) as u32;
    }
    assert_eq!(session.position(), tokens.len() + 4);
}

#[test]
fn llama32_tiny_runs_on_the_emulator() {
    run_fixture("llama32-tiny");
}

#[test]
fn qwen25_tiny_runs_on_the_emulator() {
    run_fixture("qwen25-tiny");
}

#[test]
fn qwen3_tiny_runs_on_the_emulator() {
    run_fixture("qwen3-tiny");
}

#[test]
fn smollm2_tiny_runs_on_the_emulator() {
    run_fixture("smollm2-tiny");
}

/// The published Qwen2.5 structure computes the same model: Q/K/V bias as
/// broadcast adds on the NPU before RoPE, the O+FFN split into three calls,
/// the LM head in one call.
#[test]
fn qwen25_tiny_runs_with_the_published_structure() {
    run_fixture_with("qwen25-tiny", &published_qwen25(), |_| {});
}

/// The same checks catch a bias-add that reads the wrong bias (V's added to
/// K): the published structure's comparison can fail.
#[test]
#[should_panic(expected = "cosine")]
fn a_misplaced_npu_bias_is_caught() {
    run_fixture_with("qwen25-tiny", &published_qwen25(), |plan| {
        if let Some(WeightSource::Tensor { name, .. }) =
            plan.buffers.get_mut("bk").and_then(|b| b.source.as_mut())
        {
            *name = name.replace("k_proj", "v_proj");
        }
    });
}

fn published_qwen25() -> PlanOptions {
    let (data, _) = DataSet::load(&data_dir()).expect("data set");
    let options = data.published_plans["qwen2.5-1.5b"].options();
    assert!(options.bias_on_npu && options.o_ffn_calls.len() == 3);
    options
}

/// Gemma-3 on the NPU path: (1 + w) norms, sandwich norms, the embedding
/// scale, q/k norm, the GELU-tanh MLP, the window of 8 on five of six layers
/// (a 20-token prompt, so prefill's mask and the decode KV cache both cut
/// positions off) and their local RoPE base. The decode cascade is illegal
/// with sandwich norms, so the reference options take the host-glue decode
/// path and the unmerged ones the NPU GEMV path with RMSNorm launches.
#[test]
fn gemma3_tiny_runs_on_the_emulator() {
    let model = Model::load(&fixture("gemma3-tiny"), None).expect("fixture loads");
    for options in [PlanOptions::reference(), PlanOptions::naive()] {
        run_model("gemma3-tiny", &model, &options, |_| {});
    }
}

/// Host traffic, merging and the activation layout change time, not values.
#[test]
fn ablation_cells_and_the_naive_plan_give_bit_identical_logits() {
    let name = "llama32-tiny";
    let model = Model::load(&fixture(name), None).expect("fixture loads");
    let device = Device::npu2();
    let tokens = prompt(name);
    let options = [
        ablation_options('a'),
        ablation_options('d'),
        PlanOptions::naive(),
    ];
    let logits: Vec<Vec<f32>> = options
        .iter()
        .map(|options| {
            let plan =
                plan_for(name, &model.arch, &device, Phase::Prefill, SEQ, options).expect("plan");
            Interpreter::new(&device, &model.arch, &model.weights, NpuPath::CORRECT)
                .prefill(&plan, &tokens)
                .expect("runs")
        })
        .collect();
    assert_eq!(logits[0], logits[1]);
    assert_eq!(logits[0], logits[2]);
}

#[test]
fn a_gemm_tile_that_does_not_divide_n_corrupts_the_output_silently() {
    let name = "llama32-tiny";
    let model = Model::load(&fixture(name), None).expect("fixture loads");
    let device = Device::npu2();
    let tokens = prompt(name);
    let good = plan_for(
        name,
        &model.arch,
        &device,
        Phase::Prefill,
        SEQ,
        &PlanOptions::reference(),
    )
    .expect("plan");
    let mut bad = good.clone();
    // Q projection: N = 128 with herd rows 4; tile_n 64 leaves no full block.
    for step in &mut bad.layer {
        if let Step::Call(call) = step {
            for launch in &mut call.launches {
                if let Launch::Gemm { b, spec, .. } = launch {
                    if b == "wq" {
                        spec.tile.tile_n = 48;
                        assert!(spec.unwritten_columns() > 0);
                    }
                }
            }
        }
    }
    assert!(
        bad.check(&device).is_ok(),
        "the hardware does not refuse it"
    );
    let mut session = Interpreter::new(&device, &model.arch, &model.weights, NpuPath::CORRECT);
    let ok = session.prefill(&good, &tokens).expect("runs");
    let corrupt = session.prefill(&bad, &tokens).expect("runs, silently");
    assert!(
        cosine(&ok, &corrupt) < 0.99,
        "the corruption must be visible to a gate"
    );
}

#[test]
fn phantom_heads_pad_a_non_aligned_model_exactly() {
    // Qwen2.5-0.5B's attention (14 heads of 64 over 2 KV heads, 896 wide) in
    // one layer: the plan pads to 16 heads so q_dim is 1024-aligned.
    let models = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/models"));
    let mut arch =
        skillc_runtime::model::config::load_config(&models.join("qwen2.5-0.5b")).expect("config");
    arch.num_layers = 1;
    arch.vocab_size = 1024;
    arch.intermediate_size = 512;
    let model = Model::random(arch, 7).expect("random weights");
    let device = Device::npu2();
    let plan = plan_for(
        "qwen2.5-0.5b-1layer",
        &model.arch,
        &device,
        Phase::Prefill,
        SEQ,
        &PlanOptions::reference(),
    )
    .expect("plan");
    let fa_heads = plan
        .calls()
        .flat_map(|(_, c)| &c.launches)
        .find_map(|l| match l {
            Launch::FlashAttention { spec, .. } => Some(spec.heads),
            _ => None,
        });
    assert_eq!(fa_heads, Some(16));
    let tokens: Vec<u32> = (0..20).map(|i| (i * 37 % 1024) as u32).collect();
    let npu = Interpreter::new(&device, &model.arch, &model.weights, NpuPath::CORRECT)
        .prefill(&plan, &tokens)
        .expect("runs");
    let expected = Reference::new(&model)
        .expect("reference")
        .prefill(&tokens, LogitRows::Last)
        .expect("reference");
    let c = cosine(&npu, &expected.logits.data);
    assert!(c >= 0.99, "padded model logits cosine {c}");
}

/// Phase-1 validation of every launch of a fixture's plans passes, and the
/// silent-corruption tiling comes back with mismatches (it is not refused).
#[test]
fn phase_one_validation_sees_the_silent_corruption() {
    use skillc_runtime::xdna2::harness::{tolerance_of, DrawnWeights, Harness, Scale};
    let model = Model::load(&fixture("qwen3-tiny"), None).expect("fixture loads");
    let device = Device::npu2();
    let weights = DrawnWeights { seed: 3 };
    let harness = Harness {
        device: &device,
        arch: &model.arch,
        weights: &weights,
        rope_table: None,
        seed: 3,
    };
    let validate_launch = |launch: &Launch| {
        harness
            .check(launch, tolerance_of(launch), Scale::Production)
            .expect("the harness runs it")
    };
    for phase in [Phase::Prefill, Phase::Decode] {
        let plan = plan_for(
            "qwen3-tiny",
            &model.arch,
            &device,
            phase,
            SEQ,
            &PlanOptions::reference(),
        )
        .expect("plan");
        for (_, call) in plan.calls() {
            for launch in &call.launches {
                let v = validate_launch(launch);
                assert!(
                    v.passed(),
                    "{} {}: {:?}",
                    v.kernel.name(),
                    v.shape,
                    v.outcome
                );
            }
        }
    }
    let spec = skillc_runtime::xdna2::kernels::GemmSpec {
        n: 896,
        ..skillc_runtime::xdna2::kernels::GemmSpec::select(
            &device,
            256,
            896,
            896,
            Default::default(),
            Default::default(),
        )
    };
    let mut corrupt = spec;
    corrupt.tile.tile_n = 128;
    assert_eq!(
        (spec.unwritten_columns(), corrupt.unwritten_columns()),
        (0, 384)
    );
    let launch = |spec| Launch::Gemm {
        a: "a".into(),
        b: "b".into(),
        out: "c".into(),
        spec,
    };
    assert!(validate_launch(&launch(spec)).passed());
    let v = validate_launch(&launch(corrupt));
    let mismatches = v
        .comparison()
        .expect("the hardware does not refuse it")
        .mismatches;
    assert!(mismatches > 0, "{v:?}");
}

/// The interpreter runs a prompt's real rows only; on them it must give the bits
/// the production launches give over all the plan's rows (here a prompt padded to
/// the plan's 2048 rows with its last token, which the causal mask keeps from
/// every real row). 100 tokens span two key blocks of the trimmed attention and
/// one cascade stage (512 keys) of the production launch: the trimmed launch must
/// keep the production's stage boundaries to agree.
#[test]
fn real_rows_only_give_the_bits_of_the_full_production_launch() {
    let name = "qwen25-tiny";
    let model = Model::load(&fixture(name), None).expect("fixture loads");
    let device = Device::npu2();
    let plan = plan_for(
        name,
        &model.arch,
        &device,
        Phase::Prefill,
        2048,
        &PlanOptions::reference(),
    )
    .expect("plan");
    let base = prompt(name);
    let tokens: Vec<u32> = base.iter().cycle().take(100).copied().collect();
    let mut padded = tokens.clone();
    padded.resize(plan.seq_len, *tokens.last().expect("a token"));
    let layers = |ids: &[u32]| {
        let mut npu = Interpreter::new(&device, &model.arch, &model.weights, NpuPath::CORRECT);
        npu.capture_layers(true);
        npu.prefill(&plan, ids).expect("prefill runs");
        npu.layer_outputs().to_vec()
    };
    let (trimmed, full) = (layers(&tokens), layers(&padded));
    let real = tokens.len() * model.arch.hidden_size;
    assert_eq!(trimmed.len(), model.arch.num_layers);
    for (layer, (t, f)) in trimmed.iter().zip(&full).enumerate() {
        assert_eq!(t.len(), real);
        let differ = t.iter().zip(&f[..real]).filter(|(a, b)| a != b).count();
        assert_eq!(differ, 0, "layer {layer}: {differ} of {real} values differ");
    }
}
