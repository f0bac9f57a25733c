//! The modeled timeline and roofline of a small plan, snapshotted: tracks per
//! call group and host op, launches nested in their calls, every figure
//! labelled modeled with the calibration note.

use std::path::PathBuf;

use skillc_runtime::model::config::load_config;
use skillc_runtime::xdna2::builder::plan_for;
use skillc_runtime::xdna2::cost::time_plan;
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::fit::{committed_params, FittedFile};
use skillc_runtime::xdna2::plan::{Phase, PlanOptions};
use skillc_runtime::xdna2::roofline::{roofline, Bound};
use skillc_runtime::xdna2::trace::chrome_trace;

fn tiny() -> skillc_runtime::model::arch::Architecture {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/llama32-tiny"
    ));
    load_config(&dir).expect("config")
}

#[test]
fn trace_of_a_tiny_prefill_and_decode() {
    let (arch, device, params) = (tiny(), Device::npu2(), committed_params());
    let prefill = time_plan(
        &plan_for(
            "llama32-tiny",
            &arch,
            &device,
            Phase::Prefill,
            128,
            &PlanOptions::reference(),
        )
        .expect("plan"),
        &device,
        &params,
    );
    let decode = time_plan(
        &plan_for(
            "llama32-tiny",
            &arch,
            &device,
            Phase::Decode,
            128,
            &PlanOptions::reference(),
        )
        .expect("plan"),
        &device,
        &params,
    );
    let trace = chrome_trace(
        &[("prefill", &prefill), ("decode", &decode)],
        &FittedFile::committed().note(),
    );
    let events = trace["traceEvents"].as_array().expect("events");
    // Calls and launches tile the timeline without gaps: the last event ends
    // at prefill + decode totals.
    let end = events
        .iter()
        .filter_map(|e| Some(e["ts"].as_f64()? + e["dur"].as_f64()?))
        .fold(0.0, f64::max);
    assert!(
        (end - (prefill.total_s + decode.total_s) * 1e6).abs() < 0.01,
        "{end}"
    );
    assert_eq!(trace["otherData"]["modeled"], true);
    insta::assert_json_snapshot!(trace);
}

#[test]
fn roofline_of_the_llama_prefill() {
    let models = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/models/llama-3.2-1b"
    ));
    let arch = load_config(&models).expect("config");
    let (device, params) = (Device::npu2(), committed_params());
    let plan = plan_for(
        "llama-3.2-1b",
        &arch,
        &device,
        Phase::Prefill,
        2048,
        &PlanOptions::reference(),
    )
    .expect("plan");
    let summary = roofline(
        &time_plan(&plan, &device, &params),
        &params,
        "prefill, modeled",
    );
    let gemm = &summary.rows[0];
    assert_eq!(gemm.kernel.name(), "gemm");
    assert_eq!(gemm.bound, Bound::Compute);
    assert!(gemm.compute_fraction() < 1.0 && gemm.bandwidth_fraction() < 1.0);
    insta::assert_snapshot!(summary.to_string());
}
