//! The kernel harness: the kernel configurations the cost model is calibrated on
//! (the standalone kernel points of the calibration data set) compute within their
//! registry tolerance at their validation shape, and the harness fails what it
//! must: an unwritten column block, a RoPE table from the wrong frequencies, a
//! configuration the device refuses.

use std::collections::BTreeSet;

use skillc_runtime::model::arch::Architecture;
use skillc_runtime::model::config::load_config;
use skillc_runtime::xdna2::calibration::{
    default_models_dir, load_model, DataSet, Subject, REFERENCE_MODEL,
};
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::harness::{
    tolerance_of, validation_launch, DrawnWeights, Harness, KernelRun, RunOutcome, Scale,
};
use skillc_runtime::xdna2::kernels::{rope_lut, EltwiseSpec, GemmSpec, Herd, RopeSpec};
use skillc_runtime::xdna2::plan::Launch;

fn arch() -> Architecture {
    load_model(&default_models_dir(), REFERENCE_MODEL).expect("the reference model's config")
}

fn check(
    arch: &Architecture,
    device: &Device,
    launch: &Launch,
    table: Option<&[u16]>,
) -> KernelRun {
    let weights = DrawnWeights { seed: 11 };
    let harness = Harness {
        device,
        arch,
        weights: &weights,
        rope_table: table,
        seed: 11,
    };
    harness
        .check(launch, tolerance_of(launch), Scale::Validation)
        .expect("the harness runs it")
}

/// Multiply-adds (elements for element-wise and row kernels) of the run the
/// validation shape makes.
fn work(launch: &Launch) -> usize {
    match launch {
        Launch::Gemm { spec, .. } => spec.m * spec.k * spec.n,
        Launch::Gemv { spec, .. } | Launch::GemvSwiglu { spec, .. } => spec.m * spec.k,
        Launch::LmHeadGemv { spec, .. } => spec.vocab * spec.part.k,
        Launch::FlashAttention { spec, .. } => spec.heads * spec.lq * spec.lk * spec.head_dim,
        Launch::Rmsnorm { spec, .. }
        | Launch::Layernorm { spec, .. }
        | Launch::QkRmsnorm { spec, .. }
        | Launch::Softmax { spec, .. } => spec.rows * spec.cols,
        Launch::Rope { spec, .. } => spec.rows * spec.heads * spec.head_dim,
        Launch::SiluMul { spec, .. }
        | Launch::GeluMul { spec, .. }
        | Launch::EltwiseAdd { spec, .. } => spec.n,
        Launch::KvAppend { spec, .. } => spec.context * spec.kv_width,
        Launch::DecodeAttention { spec, .. } => spec.heads * spec.head_dim * spec.context,
    }
}

/// The largest validation run CI pays for (2^28 multiply-adds; the whole data set
/// passes too, in about 40 s of CPU at the dev profile).
const WORK_BUDGET: usize = 1 << 28;

#[test]
fn the_calibrated_kernel_configurations_pass_at_their_validation_shape() {
    let (arch, device) = (arch(), Device::npu2());
    let (mut checked, mut kinds, mut over_budget) = (0, BTreeSet::new(), BTreeSet::new());
    for point in DataSet::committed().points {
        let Subject::Kernel(subject) = &point.subject else {
            continue;
        };
        let launch = subject.launch(&point.id, &device).expect("a launch");
        if work(&validation_launch(&launch, &device)) > WORK_BUDGET {
            over_budget.insert(launch.kernel().name());
            continue;
        }
        kinds.insert(launch.kernel().name());
        let run = check(&arch, &device, &launch, None);
        assert!(
            run.passed(),
            "{} ({} at {}): {:?}",
            point.id,
            run.shape,
            run.ran_shape,
            run.outcome
        );
        checked += 1;
    }
    assert!(
        checked >= 40,
        "only {checked} kernel points within the budget"
    );
    assert!(
        over_budget.is_subset(&kinds),
        "kernels with no point within the budget: {:?}",
        over_budget.difference(&kinds).collect::<Vec<_>>()
    );
}

#[test]
fn the_validation_shape_keeps_what_the_tiling_depends_on() {
    let device = Device::npu2();
    let spec = GemmSpec::select(
        &device,
        2048,
        2048,
        8192,
        Default::default(),
        Default::default(),
    );
    let launch = Launch::Gemm {
        a: "a".into(),
        b: "b".into(),
        out: "c".into(),
        spec,
    };
    let Launch::Gemm { spec: small, .. } = validation_launch(&launch, &device) else {
        unreachable!("a GEMM stays a GEMM");
    };
    assert_eq!(small.m, spec.tile.tile_m * spec.herd.cols());
    assert_eq!(
        (small.k, small.n, small.tile, small.herd),
        (spec.k, spec.n, spec.tile, spec.herd)
    );
}

#[test]
fn an_unwritten_column_block_fails_and_is_not_refused() {
    let (arch, device) = (arch(), Device::npu2());
    let mut spec = GemmSpec::select(
        &device,
        256,
        896,
        896,
        Default::default(),
        Default::default(),
    );
    let gemm = |spec| Launch::Gemm {
        a: "a".into(),
        b: "b".into(),
        out: "c".into(),
        spec,
    };
    assert!(check(&arch, &device, &gemm(spec), None).passed());
    spec.tile.tile_n = 128;
    assert_eq!(spec.unwritten_columns(), 384);
    let run = check(&arch, &device, &gemm(spec), None);
    let mismatches = run.comparison().expect("it runs").mismatches;
    // 384 of 896 columns are never written; nearly every element of them is off.
    assert!(mismatches > 256 * 384 * 9 / 10, "{mismatches}");
}

#[test]
fn a_rope_table_from_other_frequencies_fails() {
    let (arch, device) = (arch(), Device::npu2());
    let spec = RopeSpec {
        rows: 2048,
        heads: 1,
        head_dim: arch.head_dim,
        herd: Herd::ROW,
        rotary_dim: None,
    };
    let launch = Launch::Rope {
        x: "x".into(),
        lut: "lut".into(),
        out: "y".into(),
        spec,
    };
    assert!(check(&arch, &device, &launch, None).passed());
    // Llama-3.2's table without its llama3 frequency scaling: right at short
    // positions, wrong at the long ones.
    let unscaled = Architecture {
        rope_scaling: skillc_runtime::model::arch::RopeScaling::Default,
        ..arch.clone()
    };
    let inv_freq = skillc_runtime::model::oracle::blocks::inv_freq(&unscaled);
    let table = rope_lut(&inv_freq, spec.rows);
    let run = check(&arch, &device, &launch, Some(&table));
    let mismatches = run.comparison().expect("it runs").mismatches;
    assert!(mismatches > 0, "{:?}", run.outcome);
}

#[test]
fn a_configuration_the_device_refuses_is_a_refusal() {
    let (arch, device) = (arch(), Device::npu2());
    let mut spec = GemmSpec::select(
        &device,
        2048,
        2048,
        2048,
        Default::default(),
        Default::default(),
    );
    spec.tile.tile_m = 1024;
    let launch = Launch::Gemm {
        a: "a".into(),
        b: "b".into(),
        out: "c".into(),
        spec,
    };
    let run = check(&arch, &device, &launch, None);
    assert!(matches!(run.outcome, RunOutcome::Refused(ref v) if !v.is_empty()));
    assert_eq!(run.ran_shape, run.shape);
}

fn gemma3_tiny() -> Architecture {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/gemma3-tiny/config.json");
    load_config(&path).expect("gemma3-tiny's config")
}

/// Gemma's MLP at its production FFN width: `gelu_mul` passes against the
/// model's GELU-tanh; `silu_mul` in its place (planted fault `silu-for-gelu`)
/// fails, and so does `gelu_mul` judged for a SiLU model.
#[test]
fn the_gated_activation_kernel_must_be_the_models() {
    let (gemma, llama, device) = (gemma3_tiny(), arch(), Device::npu2());
    let spec = EltwiseSpec::select(&device, 2048 * gemma.intermediate_size, Herd::ROW);
    let (gate, up, out) = ("gate".to_string(), "up".to_string(), "act".to_string());
    let gelu = Launch::GeluMul {
        gate: gate.clone(),
        up: up.clone(),
        out: out.clone(),
        spec,
    };
    let silu = Launch::SiluMul {
        gate,
        up,
        out,
        spec,
    };
    let run = check(&gemma, &device, &gelu, None);
    assert!(run.passed(), "{:?}", run.outcome);
    for (arch, launch) in [(&gemma, &silu), (&llama, &gelu)] {
        let run = check(arch, &device, launch, None);
        let comparison = run.comparison().expect("it ran");
        assert!(
            !run.passed() && comparison.mismatches > 1000,
            "{:?}",
            run.outcome
        );
    }
}

/// The fused decode's two kernels: its attention within its tolerance of an
/// f64 reference and its KV append exact, at Llama-3.2-1B's shapes; the
/// attention fails an exact comparison (the check is live: the kernel rounds
/// its output to bf16) and an uneven CU split is refused.
#[test]
fn the_fused_decode_kernels_pass_and_can_fail() {
    use skillc_runtime::xdna2::kernels::{DecodeAttentionSpec, KvAppendSpec};
    use skillc_runtime::xdna2::numerics::Tolerance;
    let (arch, device) = (arch(), Device::npu2());
    let spec = DecodeAttentionSpec {
        heads: 32,
        kv_heads: 8,
        head_dim: 64,
        scale_dim: None,
        softcap: None,
        context: 2048,
        cus: 4,
    };
    let attention = Launch::DecodeAttention {
        q: "q".into(),
        cache: "kv".into(),
        out: "o".into(),
        spec,
    };
    let append = Launch::KvAppend {
        k: "k".into(),
        v: "v".into(),
        cache: "kv".into(),
        spec: KvAppendSpec {
            kv_width: 512,
            context: 2048,
        },
    };
    for launch in [&attention, &append] {
        let run = check(&arch, &device, launch, None);
        let comparison = run.comparison().expect("it ran");
        assert_eq!(comparison.mismatches, 0, "{}", launch.kernel().name());
    }
    let harness = Harness {
        device: &device,
        arch: &arch,
        weights: &DrawnWeights { seed: 11 },
        rope_table: None,
        seed: 11,
    };
    let exact = Tolerance {
        rtol: 0.0,
        atol: 0.0,
        source: "test",
    };
    let run = harness
        .check(&attention, exact, Scale::Validation)
        .expect("runs");
    assert!(run.comparison().expect("ran").mismatches > 0);
    let uneven = Launch::DecodeAttention {
        q: "q".into(),
        cache: "kv".into(),
        out: "o".into(),
        spec: DecodeAttentionSpec { cus: 3, ..spec },
    };
    let run = check(&arch, &device, &uneven, None);
    assert!(matches!(run.outcome, RunOutcome::Refused(ref v) if !v.is_empty()));
}
