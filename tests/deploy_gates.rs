//! Every exit gate the llama1b bundle declares is an exit criterion the runtime
//! evaluates on another model: deployed on the Qwen2.5 fixture, each phase's run
//! records a gate with the bundle gate's operation and metric (and, for a kernel
//! gate, its kernel class). A gate on a note, an ablation cell or one call's time
//! would have no such counterpart and fails here. A phase-4 or phase-5 correctness
//! gate counts as evaluated when the run re-verified, or recorded that no step
//! changed the numerics (the executor's numerics fingerprint).

use crate::deploy_support;
use skillc_runtime::phase::DeployPhase;

use deploy_support::{deploy, fixture, llama1b, poke, scratch};
use skillc_runtime::bundle::Value;
use skillc_runtime::ops::OpKind;

#[test]
fn every_bundle_gate_is_evaluated_on_a_model_other_than_llama() {
    let out = scratch("gates-qwen25");
    let outcome = deploy(llama1b(), &fixture("qwen25-tiny"), &out, &[]);
    assert_eq!(outcome.exit_code, 0, "{:?}", outcome.report.stop);
    let evaluated: Vec<_> = outcome.report.gates().collect();
    let mut missing = Vec::new();
    for phase in &llama1b().phases {
        for gate in &phase.exit_gates {
            let kernel = gate.conditions.get("kernel");
            let found = evaluated.iter().any(|(p, g)| {
                p.index() == phase.index
                    && Some(g.op) == gate.op
                    && g.metric == gate.metric
                    && kernel.is_none_or(|k| g.conditions.get("kernel") == Some(k))
            });
            // An optimization phase re-verifies when a technique changes the
            // numerics; otherwise it records why the verified outputs still hold.
            let carried = gate.op == Some(OpKind::VerifyModel)
                && outcome.report.phases[phase.index as usize]
                    .notes
                    .iter()
                    .any(|n| n.contains("numerics fingerprint"));
            let found = found || carried;
            if !found {
                let kernel = match kernel {
                    Some(Value::Text(k)) => format!(" kernel={k}"),
                    _ => String::new(),
                };
                missing.push(format!(
                    "phase {}: {:?} {}{kernel}",
                    phase.index, gate.op, gate.metric
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "bundle gates the runtime never evaluated:\n{}",
        missing.join("\n")
    );
}

/// The weights' `nan_count` gate can fail: one bf16 NaN planted in a projection of
/// the Qwen2.5 fixture stops phase 0 on that gate.
#[test]
fn a_nan_weight_fails_phase_0_on_the_weights_gate() {
    let model = scratch("gates-nan-weight");
    for file in ["config.json", "model.safetensors"] {
        std::fs::copy(fixture("qwen25-tiny").join(file), model.join(file)).expect("copy");
    }
    // 0x7fc0 is a bf16 quiet NaN.
    poke(
        &model.join("model.safetensors"),
        "model.layers.0.mlp.down_proj.weight",
        &0x7fc0u16.to_le_bytes(),
    );
    let out = scratch("gates-nan-weight-out");
    let outcome = deploy(llama1b(), &model, &out, &[]);
    let stop = outcome.report.stop.as_ref().expect("the run stopped");
    assert_eq!(
        (stop.phase, stop.metric.name()),
        (DeployPhase::Reference, "nan_count")
    );
}
