//! Constraints the hardware enforces. Data-driven: every file in
//! `xdna2_constraints/` holds one launch that npu2 refuses and why; its
//! snapshot holds the refusal, which must name the constraint, the kernel and
//! the numbers. Plan-level rules (merging, layouts, launch counts) and the
//! kernels' own refusal are checked on the reference plan below.

use serde::Deserialize;
use skillc_runtime::model::config::load_config;
use skillc_runtime::xdna2::builder::plan_for;
use skillc_runtime::xdna2::constraints::Constraint;
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::kernels::{gemm, BOperand, Dtype, GemmSpec, KernelError, Precision};
use skillc_runtime::xdna2::plan::{
    Launch, Phase, Plan, PlanOptions, Step, Transform, WeightSource,
};

#[derive(Deserialize)]
struct Case {
    why: String,
    launch: Launch,
}

#[test]
fn refused_launches() {
    let device = Device::npu2();
    insta::glob!("xdna2_constraints/*.json", |path| {
        let text = std::fs::read_to_string(path).expect("case file");
        let case: Case = serde_json::from_str(&text).expect("case parses");
        let violations = case.launch.check(&device);
        assert!(!violations.is_empty(), "{}: not refused", path.display());
        let lines: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
        insta::assert_snapshot!(format!("{}\n\n{}", case.why, lines.join("\n")));
    });
}

fn llama_prefill() -> (Plan, Device) {
    let models = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/models/llama-3.2-1b"
    );
    let arch = load_config(std::path::Path::new(models)).expect("config");
    let device = Device::npu2();
    let plan = plan_for(
        "llama-3.2-1b",
        &arch,
        &device,
        Phase::Prefill,
        2048,
        &PlanOptions::reference(),
    )
    .expect("plan");
    (plan, device)
}

fn calls_mut(plan: &mut Plan) -> impl Iterator<Item = &mut skillc_runtime::xdna2::plan::Call> {
    plan.layer.iter_mut().filter_map(|s| match s {
        Step::Call(c) => Some(c),
        Step::Host(_) => None,
    })
}

fn refusal(plan: &Plan, device: &Device) -> String {
    let violations = plan.check(device).expect_err("refused");
    violations
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_reference_plan_places() {
    let (plan, device) = llama_prefill();
    assert!(plan.check(&device).is_ok());
    assert!(plan.silent_corruptions().is_empty());
    assert_eq!(plan.calls_per_layer(), 3);
}

#[test]
fn plan_with_an_l1_overflow_names_where() {
    let (mut plan, device) = llama_prefill();
    let o_ffn = calls_mut(&mut plan)
        .find(|c| c.name == "o_ffn")
        .expect("o_ffn");
    if let Launch::Gemm { spec, .. } = &mut o_ffn.launches[3] {
        spec.tile.tile_k_l1 = 128;
    }
    insta::assert_snapshot!(refusal(&plan, &device));
}

#[test]
fn flash_attention_cannot_merge_and_calls_hold_eight_launches() {
    let (mut plan, device) = llama_prefill();
    let fa = calls_mut(&mut plan)
        .find(|c| c.name == "flash_attn")
        .expect("fa")
        .clone();
    let rms = calls_mut(&mut plan)
        .find(|c| c.name == "rms_gemms_rope")
        .expect("rms");
    rms.launches.extend(fa.launches.clone());
    rms.launches.extend(fa.launches.clone());
    rms.launches.extend(fa.launches);
    rms.bindings.extend(fa.bindings);
    insta::assert_snapshot!(refusal(&plan, &device));
}

#[test]
fn a_gemm_weight_that_was_not_pre_transposed_is_refused() {
    let (mut plan, device) = llama_prefill();
    if let Some(WeightSource::Tensor { transforms, .. }) =
        plan.buffers.get_mut("wq").and_then(|b| b.source.as_mut())
    {
        transforms.retain(|t| *t != Transform::Transpose);
    }
    let violations = plan.check(&device).expect_err("refused");
    assert!(
        violations
            .iter()
            .any(|v| v.constraint == Constraint::Layout),
        "{violations:?}"
    );
    insta::assert_snapshot!(refusal(&plan, &device));
}

#[test]
fn kernels_refuse_before_running() {
    let device = Device::npu2();
    let mut spec = GemmSpec::select(&device, 256, 2048, 2048, Precision::Bf16, Dtype::Bf16);
    spec.tile.tile_k_l2 = 1024;
    let a = vec![0u16; 256 * 2048];
    let b = vec![0u16; 2048 * 2048];
    let err = gemm(&device, &spec, &a, BOperand::KxN(&b)).expect_err("refused");
    assert!(matches!(err, KernelError::Refused { .. }));
    insta::assert_snapshot!(err.to_string());
}

#[test]
fn operands_of_the_wrong_size_are_errors_not_panics() {
    let device = Device::npu2();
    let spec = GemmSpec::select(&device, 256, 2048, 512, Precision::Bf16, Dtype::Bf16);
    let err =
        gemm(&device, &spec, &[0u16; 10], BOperand::KxN(&[0u16; 10])).expect_err("wrong sizes");
    assert_eq!(
        err.to_string(),
        "gemm: operand A has 10 elements, shape needs 524288"
    );
}
