//! The single-dispatch fused decode as a plan: it places on the fixtures and
//! the real configs, its numerics are the per-call decode's kernels (so the
//! decode gates judge it the same way), it is timed as one dispatch per token
//! with attention growing with the context, and the hardware's refusals of it
//! (shim channels, tiles, a projection off its columns, a layer's weights
//! beyond one buffer object) each fail the check.

use std::path::PathBuf;

use skillc_runtime::model::arch::Architecture;
use skillc_runtime::model::config::load_config;
use skillc_runtime::model::Model;
use skillc_runtime::xdna2::builder::plan_for;
use skillc_runtime::xdna2::constraints::Constraint;
use skillc_runtime::xdna2::cost::{time_plan, Params};
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::fit::committed_params;
use skillc_runtime::xdna2::interpreter::{Defects, Interpreter, NpuPath};
use skillc_runtime::xdna2::kernels::{Herd, PackedFormat};
use skillc_runtime::xdna2::packed_cost::{pack_every_gemv, PackedParams};
use skillc_runtime::xdna2::plan::{
    FusedKv, FusedOptions, Launch, Phase, Plan, PlanOptions, Step, FUSED_HEAD_CALL,
};

fn shared(path: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared")).join(path)
}

fn config(model: &str) -> Architecture {
    load_config(&shared(&format!("models/{model}/config.json"))).expect("config loads")
}

fn fused(kv: FusedKv, weight_channels: usize) -> PlanOptions {
    PlanOptions {
        fused_decode: Some(FusedOptions {
            kv,
            weight_channels,
        }),
        ..PlanOptions::reference()
    }
}

fn decode(name: &str, arch: &Architecture, options: &PlanOptions, context: usize) -> Plan {
    plan_for(name, arch, &Device::npu2(), Phase::Decode, context, options).expect("plan builds")
}

/// The fixtures whose decode GEMVs place as they are (qwen25-tiny's K=352
/// down projection needs `pad-dims`, below).
const FIXTURES: [&str; 4] = ["llama32-tiny", "qwen3-tiny", "smollm2-tiny", "gemma3-tiny"];

/// Every step's logits of a prefill and `steps` decode steps on fixed tokens.
fn logits(model: &Model, decode: &Plan, path: NpuPath, steps: usize) -> Vec<Vec<f32>> {
    let device = Device::npu2();
    let prefill = plan_for(
        "m",
        &model.arch,
        &device,
        Phase::Prefill,
        128,
        &PlanOptions::reference(),
    )
    .expect("prefill plan");
    let mut npu = Interpreter::new(&device, &model.arch, &model.weights, path);
    let mut all = vec![npu.prefill(&prefill, &[1, 5, 9, 2]).expect("prefill runs")];
    for t in 0..steps {
        all.push(npu.decode(decode, 3 + t as u32).expect("decode runs"));
    }
    all
}

fn worst_relative(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let top = y.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            x.iter()
                .zip(y)
                .fold(0.0f32, |m, (p, q)| m.max((p - q).abs()))
                / top.max(1e-30)
        })
        .fold(0.0, f32::max)
}

#[test]
fn the_fused_plan_places_as_one_call_per_layer_with_attention_on_the_npu() {
    let device = Device::npu2();
    for name in FIXTURES {
        let arch = load_config(&shared(&format!("fixtures/{name}/config.json"))).expect("config");
        let plan = decode(name, &arch, &fused(FusedKv::Append, 2), 128);
        assert_eq!(plan.check(&device), Ok(()), "{name}");
        assert_eq!(plan.calls_per_layer(), 1, "{name}");
        assert!(
            plan.layer.iter().all(|s| matches!(s, Step::Call(_))),
            "{name}: no host step inside the dispatch"
        );
        let kernels: Vec<_> = plan
            .calls()
            .flat_map(|(_, c)| c.launches.iter().map(Launch::kernel))
            .map(|k| k.name())
            .collect();
        for k in ["kv_append", "decode_attention", "rmsnorm", "lm_head_gemv"] {
            assert!(kernels.contains(&k), "{name}: {k} in {kernels:?}");
        }
        assert_eq!(
            time_plan(&plan, &device, &committed_params()).npu_calls,
            1,
            "{name}: one dispatch per token"
        );
    }
    for model in ["llama-3.2-1b", "qwen2.5-3b", "qwen3-4b", "smollm2-1.7b"] {
        let plan = decode(model, &config(model), &fused(FusedKv::Append, 2), 2048);
        assert_eq!(plan.check(&device), Ok(()), "{model}");
    }
}

/// The fused plan runs the per-call decode's kernels: the attention and the
/// KV store are the same functions, the projections the same GEMV on other
/// herds, the bias and the final norm on the NPU. On seeded weights its
/// logits stay within the decode gate's fixed limit of the per-call plan's.
#[test]
fn the_fused_decode_computes_what_the_per_call_decode_does() {
    for name in FIXTURES {
        let arch = load_config(&shared(&format!("fixtures/{name}/config.json"))).expect("config");
        let model = Model::random(arch, 1).expect("random weights");
        let per_call = decode(name, &model.arch, &PlanOptions::reference(), 128);
        let fused_plan = decode(name, &model.arch, &fused(FusedKv::Append, 2), 128);
        let a = logits(&model, &per_call, NpuPath::CORRECT, 6);
        let b = logits(&model, &fused_plan, NpuPath::CORRECT, 6);
        let worst = worst_relative(&b, &a);
        assert!(worst < 0.05, "{name}: fused vs per-call logits {worst}");
        // The KV cache's home changes the traffic, not the numbers.
        let upload = decode(name, &model.arch, &fused(FusedKv::Upload, 2), 128);
        assert_eq!(
            logits(&model, &upload, NpuPath::CORRECT, 3),
            b[..4].to_vec(),
            "{name}"
        );
    }
}

/// A decode defect scoped to the fused plan changes the fused decode's
/// logits and leaves the per-call decode's bit for bit.
#[test]
fn defects_scoped_to_the_fused_plan_act_on_it_alone() {
    let arch = load_config(&shared("fixtures/llama32-tiny/config.json")).expect("config");
    let model = Model::random(arch, 0).expect("random weights");
    let per_call = decode("m", &model.arch, &PlanOptions::reference(), 128);
    let fused_plan = decode("m", &model.arch, &fused(FusedKv::Append, 2), 128);
    let mut path = NpuPath::CORRECT;
    path.defects = Defects {
        stale_kv: true,
        fused_only: true,
        ..Defects::NONE
    };
    assert_eq!(
        logits(&model, &per_call, path, 4),
        logits(&model, &per_call, NpuPath::CORRECT, 4)
    );
    let wrong = worst_relative(
        &logits(&model, &fused_plan, path, 4),
        &logits(&model, &fused_plan, NpuPath::CORRECT, 4),
    );
    assert!(
        wrong > 0.05,
        "stale K/V in the fused plan moves its logits by {wrong}"
    );
}

/// One dispatch and one launch set-up per token, not one per call and
/// launch; the attention grows linearly with the context the template reads;
/// the window upload costs host writes the device append does not.
#[test]
fn the_fused_decode_is_timed_as_one_dispatch() {
    let device = Device::npu2();
    let params = committed_params();
    let arch = config("llama-3.2-1b");
    let at = |kv, channels, context| {
        time_plan(
            &decode("m", &arch, &fused(kv, channels), context),
            &device,
            &params,
        )
    };
    let (short, long) = (at(FusedKv::Append, 2, 1024), at(FusedKv::Append, 2, 131072));
    let dispatched: f64 = short.calls().map(|c| c.dispatch_s).sum();
    assert!((dispatched - (params.dispatch_s + params.elf_launch_s)).abs() < 1e-12);
    let attention = |t: &skillc_runtime::xdna2::cost::Timing| -> f64 {
        t.calls()
            .flat_map(|c| c.launches.iter().map(move |l| (c.repeats, l)))
            .filter(|(_, l)| l.kernel.name() == "decode_attention")
            .map(|(r, l)| r as f64 * l.total_s)
            .sum()
    };
    let ratio = attention(&long) / attention(&short);
    assert!((ratio - 128.0).abs() < 1e-6, "{ratio}");
    let upload = at(FusedKv::Upload, 2, 2048);
    let append = at(FusedKv::Append, 2, 2048);
    let head = |t: &skillc_runtime::xdna2::cost::Timing| {
        t.call(FUSED_HEAD_CALL).expect("head call").write_s
    };
    // Every layer's 2048 keys and values (16 x 2 x 2048 x 512 x 2 bytes).
    let window = 16.0 * 2.0 * 2048.0 * 512.0 * 2.0;
    let extra = head(&upload) - head(&append);
    assert!(
        (extra - 16.0 * params.write_buffer_s - window / params.write_bytes_per_s).abs() < 1e-9,
        "{extra}"
    );
    // The per-call plan of the same model pays a dispatch per call; with
    // the weights packed, the fused plan is faster.
    let packed = |options: &PlanOptions| {
        let mut plan = decode("m", &arch, options, 2048);
        pack_every_gemv(&mut plan, PackedFormat::Q4_1);
        time_plan(&plan, &device, &params)
    };
    let per_call = packed(&PlanOptions::reference());
    assert!(per_call.npu_calls > 16);
    assert!(packed(&fused(FusedKv::Append, 2)).total_s < per_call.total_s);
}

/// Both shim channels of a projection column feed its packed weights faster
/// than one where one channel is the bound: tiles unpacking at the most their
/// own two input channels allow (the 4-bit rate's upper bound). At the fitted
/// rate the tiles bind first and the second channel changes nothing (the
/// published dual feed measured 1.13x on Strix, fused_decode README).
#[test]
fn a_second_weight_channel_speeds_up_a_channel_bound_decode() {
    let device = Device::npu2();
    let fitted = committed_params();
    let params = Params {
        packed: PackedParams {
            q4_tile_weights_per_s: 4e10,
            ..fitted.packed.clone()
        },
        ..fitted
    };
    let arch = config("llama-3.2-1b");
    let at = |channels| {
        let mut plan = decode("m", &arch, &fused(FusedKv::Append, channels), 1024);
        pack_every_gemv(&mut plan, PackedFormat::Q4_1);
        time_plan(&plan, &device, &params).total_s
    };
    assert!(at(2) < at(1), "{} vs {}", at(2), at(1));
}

/// A GEMV no projection tile places (qwen25-tiny's down projection, K=352)
/// refuses the fused plan, which has no host step to fall back on; padded,
/// it places.
#[test]
fn an_unplaceable_projection_refuses_the_fused_plan_until_padded() {
    let arch = load_config(&shared("fixtures/qwen25-tiny/config.json")).expect("config");
    let plain = decode("m", &arch, &fused(FusedKv::Append, 2), 128);
    assert!(
        constraints(&plain).contains(&Constraint::Alignment),
        "{:?}",
        constraints(&plain)
    );
    let padded = PlanOptions {
        pad_dims: true,
        ..fused(FusedKv::Append, 2)
    };
    let plan = decode("m", &arch, &padded, 128);
    assert_eq!(plan.check(&Device::npu2()), Ok(()));
}

fn constraints(plan: &Plan) -> Vec<Constraint> {
    match plan.check(&Device::npu2()) {
        Ok(()) => Vec::new(),
        Err(found) => found.iter().map(|v| v.constraint).collect(),
    }
}

#[test]
fn what_the_array_cannot_hold_is_refused() {
    let arch = config("llama-3.2-1b");
    // Three weight channels per column: a shim tile has two.
    let three = decode("m", &arch, &fused(FusedKv::Append, 3), 2048);
    assert!(
        constraints(&three).contains(&Constraint::DmaChannels),
        "{:?}",
        constraints(&three)
    );
    // A projection moved off the projection columns.
    let mut off = decode("m", &arch, &fused(FusedKv::Append, 2), 2048);
    for step in &mut off.layer {
        if let Step::Call(call) = step {
            if let Some(Launch::Gemv { spec, .. }) = call
                .launches
                .iter_mut()
                .find(|l| matches!(l, Launch::Gemv { .. }))
            {
                spec.herd = Herd::ROW;
            }
        }
    }
    assert!(
        constraints(&off).contains(&Constraint::Herd),
        "{:?}",
        constraints(&off)
    );
    // A host step inside the layer loop of the dispatch.
    let mut host = decode("m", &arch, &fused(FusedKv::Append, 2), 2048);
    let per_call = decode("m", &arch, &PlanOptions::reference(), 2048);
    let attention = per_call
        .layer
        .iter()
        .find(|s| matches!(s, Step::Host(_)))
        .expect("the per-call plan has host steps")
        .clone();
    host.layer.push(attention);
    assert!(
        constraints(&host).contains(&Constraint::Merge),
        "{:?}",
        constraints(&host)
    );
    // One layer's KV region beyond a buffer descriptor's reach (16 Mi positions).
    let huge = decode("m", &arch, &fused(FusedKv::Append, 2), 1 << 24);
    assert!(
        constraints(&huge).contains(&Constraint::BufferSize),
        "{:?}",
        constraints(&huge)
    );
    // Every model of the nine places at 2048 on both weight paths' layout.
    for model in [
        "qwen2.5-0.5b",
        "qwen3-0.6b",
        "qwen2.5-1.5b",
        "qwen3-1.7b",
        "llama-3.2-3b",
    ] {
        let plan = decode(model, &config(model), &fused(FusedKv::Append, 2), 2048);
        assert_eq!(plan.check(&Device::npu2()), Ok(()), "{model}");
    }
}

#[test]
fn the_head_call_ends_the_dispatch() {
    let arch = config("llama-3.2-1b");
    let plan = decode("m", &arch, &fused(FusedKv::Append, 2), 2048);
    let head = plan
        .calls()
        .find(|(_, c)| c.name == FUSED_HEAD_CALL)
        .expect("a head call");
    assert_eq!(head.1.launches[0].kernel().name(), "rmsnorm");
    assert!(plan.epilogue.iter().all(|s| matches!(s, Step::Call(_))));
    let without_npu_head = PlanOptions {
        npu_lm_head: false,
        ..fused(FusedKv::Append, 2)
    };
    let plan = decode("m", &arch, &without_npu_head, 2048);
    assert!(
        matches!(plan.epilogue.last(), Some(Step::Host(_))),
        "the CPU LM head follows the dispatch"
    );
}
