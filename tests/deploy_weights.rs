//! The 4-bit weight path in a deployment (`skillc deploy --weights`), on the
//! GGUF corpus's Q4_1 control model (`runtime/tests/data/gguf/ok-micro.gguf`,
//! one llama layer): `auto` packs the decode GEMVs whose weights stay in their
//! blocks and passes all eight phases with the report naming each buffer's
//! path; a planted fault in the packed kernel (nibbles read in the wrong order)
//! is caught by phase 1's validation of that kernel; `bf16` keeps every GEMV
//! on bf16; `packed` on a model with no 4-bit weights is refused (exit 2).

use crate::deploy_support;

use deploy_support::{deploy, deploy_cli, fixture, llama1b, repo, scratch, summary};
use skillc_runtime::exec::artifacts::record::Verdict;
use skillc_runtime::exec::Fault;
use skillc_runtime::phase::DeployPhase;
use skillc_runtime::xdna2::kernels::PackedFormat;
use skillc_runtime::xdna2::packing::WeightPath;

const MICRO: &str = "runtime/tests/data/gguf/ok-micro.gguf";

#[test]
fn a_q4_1_model_deploys_on_the_packed_path_and_the_report_names_its_buffers() {
    let out = scratch("weights-packed");
    let r = deploy(llama1b(), &repo(MICRO), &out, &[]).report;
    assert_eq!(r.verdict, Verdict::Pass, "{}", summary(&r));
    let path = r.weight_path.as_ref().expect("a weight-path record");
    assert_eq!(path.asked, WeightPath::Auto);
    let packed: Vec<&str> = path
        .buffers
        .iter()
        .filter(|b| b.packed == Some(PackedFormat::Q4_1))
        .map(|b| b.buffer.as_str())
        .collect();
    assert_eq!(packed, ["wk", "wo", "wq", "wv"], "{:?}", path.buffers);
    for b in path
        .buffers
        .iter()
        .filter(|b| b.packed.is_none() && b.buffer != "lm_head")
    {
        assert!(b.reason.contains("transforms the data"), "{b:?}");
    }
    // Phase 1 validated each packed kernel x shape against the dequantized
    // weights, as its own registry site.
    let gates: Vec<&str> = r
        .gates()
        .filter(|(phase, g)| {
            *phase == DeployPhase::Kernels && g.passed && g.name.ends_with(" q4_1")
        })
        .map(|(_, g)| g.name.as_str())
        .collect();
    assert_eq!(
        gates,
        ["kernel gemv 32x64 q4_1", "kernel gemv 64x64 q4_1"],
        "{}",
        summary(&r)
    );
    // Both paths modeled in the run; the packed one streams fewer bytes.
    let bytes = |name: &str| {
        path.decode
            .iter()
            .find(|d| d.path == name)
            .map(|d| d.gemv_bytes_per_token)
            .expect("modeled")
    };
    assert!(bytes("packed") < bytes("bf16"), "{:?}", path.decode);
    let plan = std::fs::read_to_string(out.join("plan.json")).expect("plan.json");
    assert!(
        plan.contains("\"packed\": \"q4_1\""),
        "the decode GEMVs carry it"
    );
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(md.contains("| wq | 64x64 | Q4_1 | packed q4_1 |"), "{md}");
    // The packed GEMV's rate is calibrated on the published 4-bit decode; the
    // plan structure it runs in here is not.
    assert!(
        md.contains("packed GEMV rate calibrated on the published 4-bit fused decode: median"),
        "{md}"
    );
    assert!(md.contains("is **uncalibrated** for 4-bit weights"), "{md}");
    // The tied Q8_0 embedding serves as LM head, read as bf16, and says why.
    assert!(
        md.contains("| lm_head | 32x64 (a CPU matvec")
            && md.contains(
                "stored Q8_0: the packed GEMV reads Q4_0 and Q4_1 blocks only (no Q8_0 kernel)"
            ),
        "{md}"
    );
    let head = path
        .buffers
        .iter()
        .find(|b| b.buffer == "lm_head")
        .expect("LM head row");
    assert!(
        head.packed.is_none() && head.bytes_per_token > 0.0,
        "{head:?}"
    );
    // Prefill's decision: host-dequantized bf16 GEMMs, with the copy's size.
    let prefill = path.prefill.as_ref().expect("prefill row");
    assert!(
        prefill.bf16_bytes > prefill.stored_bytes && prefill.setup_ms > 0.0,
        "{prefill:?}"
    );
    assert!(md.contains("| prefill GEMMs | "), "{md}");
}

#[test]
fn a_packed_kernel_reading_its_nibbles_in_the_wrong_order_is_caught_in_phase_1() {
    let out = scratch("weights-packed-fault");
    let r = deploy(llama1b(), &repo(MICRO), &out, &[Fault::PackedNibbleOrder]).report;
    assert_eq!(r.verdict, Verdict::Fail, "{}", summary(&r));
    let stop = r.stop.as_ref().expect("stopped");
    assert_eq!(stop.phase, Fault::PackedNibbleOrder.catching_phase());
    assert!(
        stop.gate
            .starts_with(Fault::PackedNibbleOrder.catching_gate())
            && stop.gate.ends_with(" q4_1"),
        "{}",
        summary(&r)
    );
    assert!(stop.value > 0.0, "mismatches: {}", stop.value);
}

#[test]
fn bf16_weights_keep_every_gemv_on_bf16_and_say_what_could_be_packed() {
    let out = scratch("weights-bf16");
    let run = deploy_cli(&repo(MICRO), &out, &["--weights", "bf16"]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}");
    let plan = std::fs::read_to_string(out.join("plan.json")).expect("plan.json");
    assert!(
        !plan.contains("\"packed\""),
        "no packed GEMV on the bf16 path"
    );
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        md.contains("| wq | 64x64 | Q4_1 | bf16 | --weights bf16 (packable as q4_1) |"),
        "{md}"
    );
}

#[test]
fn packed_weights_on_a_model_without_four_bit_weights_are_refused() {
    let out = scratch("weights-refused");
    let run = deploy_cli(&fixture("smollm2-tiny"), &out, &["--weights", "packed"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--weights packed: the model stores no Q4_0 or Q4_1 weights"),
        "{stderr}"
    );
}
