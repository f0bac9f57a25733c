//! Phase 7's evaluator is a fresh process that can fail: tampering with any artifact
//! the run wrote (the plan's tiling, a gate's verdict, the kernel registry) turns its
//! verdict into FAIL with exit code 1, while the untouched artifacts pass.

use crate::deploy_support;

use std::path::Path;

use deploy_support::{deploy, fixture, llama1b, scratch, skillc};
use serde_json::Value;

fn evaluate(out: &Path) -> (i32, Value) {
    let status = skillc()
        .arg(skillc_runtime::exec::EVALUATOR_COMMAND)
        .arg(out)
        .arg("--model")
        .arg(fixture("llama32-tiny"))
        .output()
        .expect("skillc evaluate runs");
    let text = std::fs::read_to_string(out.join("evaluation.json")).expect("evaluation.json");
    (
        status.status.code().unwrap_or(-1),
        serde_json::from_str(&text).unwrap(),
    )
}

fn failed_audits(evaluation: &Value) -> Vec<String> {
    evaluation["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["ok"] == false)
        .map(|a| a["check"].as_str().unwrap().to_string())
        .collect()
}

fn edit(path: &Path, change: impl FnOnce(&mut Value)) {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    change(&mut v);
    std::fs::write(path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// A fresh passing deployment of llama32-tiny.
fn deployed(name: &str) -> std::path::PathBuf {
    let out = scratch(name);
    let outcome = deploy(llama1b(), &fixture("llama32-tiny"), &out, &[]);
    assert_eq!(outcome.exit_code, 0, "{:?}", outcome.report.stop);
    out
}

#[test]
fn untouched_artifacts_pass_a_second_evaluation() {
    let out = deployed("eval-clean");
    let (code, e) = evaluate(&out);
    assert_eq!(code, 0, "{:?}", failed_audits(&e));
    assert!(e["launches_executed"].as_u64().unwrap() > 0);
    assert_eq!(e["launches_executed"], e["launches_expected"]);
}

#[test]
fn a_tiling_edited_into_plan_json_fails_the_evaluation() {
    let out = deployed("eval-plan");
    edit(&out.join("plan.json"), |plan| {
        let layer = plan["plans"]["prefill"]["layer"].as_array_mut().unwrap();
        let gemm = layer
            .iter_mut()
            .flat_map(|step| {
                step["call"]["launches"]
                    .as_array_mut()
                    .into_iter()
                    .flatten()
            })
            .find(|l| l["kernel"] == "gemm")
            .expect("a GEMM launch");
        gemm["spec"]["tile"]["tile_n"] = 8.into();
    });
    let (code, e) = evaluate(&out);
    assert_eq!(code, 1);
    assert_eq!(e["verdict"], "FAIL");
    let failed = failed_audits(&e);
    assert!(
        failed.contains(&"plans are what the builder makes of the recorded design".to_string()),
        "{failed:?}"
    );
    assert!(
        failed.contains(&"numerics fingerprint".to_string()),
        "{failed:?}"
    );
}

#[test]
fn a_gate_verdict_edited_into_report_json_fails_the_evaluation() {
    let out = deployed("eval-report");
    edit(&out.join("report.json"), |report| {
        let gate = report["phases"][1]["gates"][0].as_object_mut().unwrap();
        gate.insert("value".into(), 5.into());
    });
    let (code, e) = evaluate(&out);
    assert_eq!(code, 1);
    assert!(failed_audits(&e)
        .contains(&"every gate's verdict follows from its value and threshold".to_string()));
}

#[test]
fn a_kernel_registry_without_the_production_kernels_fails_the_evaluation() {
    let out = deployed("eval-registry");
    edit(&out.join("kernel-registry.json"), |registry| {
        registry["rows"]
            .as_array_mut()
            .unwrap()
            .retain(|r| r["check"]["kernel"] != "gemm");
    });
    let (code, e) = evaluate(&out);
    assert_eq!(code, 1);
    assert!(failed_audits(&e)
        .contains(&"every production kernel configuration passed validation".to_string()));
}
