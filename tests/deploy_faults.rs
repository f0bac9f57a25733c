//! Planted faults: each is caught by the gate that should catch it, then either
//! repaired by a bundle lesson or reported (exit 1) naming the phase, the gate, the
//! value, the threshold and the lessons tried. With the llama1b bundle alone only the
//! GEMM tiling has a lesson; built together with tests/data/deploy/lessons every
//! fault has one.

use crate::deploy_support;
use skillc_runtime::phase::DeployPhase;

use deploy_support::{
    deploy, deploy_seeded, fixture, llama1b, scratch, summary, with_test_lessons,
};
use skillc_runtime::bundle::Bundle;
use skillc_runtime::exec::artifacts::record::{PhaseStatus, Reversion, StepOutcome};
use skillc_runtime::exec::{Fault, Verdict};

struct Case {
    fixture: &'static str,
    fault: Fault,
    phase: u8,
    /// The gate that catches it (its name starts with this).
    gate: &'static str,
    metric: &'static str,
}

const CASES: [Case; 5] = [
    Case {
        fixture: "llama32-tiny",
        fault: Fault::GemmNNotMultiple,
        phase: 1,
        gate: "kernel gemm",
        metric: "mismatches",
    },
    Case {
        fixture: "llama32-tiny",
        fault: Fault::L1Overflow,
        phase: 1,
        gate: "placement gemm",
        metric: "violations",
    },
    Case {
        fixture: "llama32-tiny",
        fault: Fault::NoLlama3Rope,
        phase: 1,
        gate: "kernel rope",
        metric: "mismatches",
    },
    Case {
        fixture: "qwen25-tiny",
        fault: Fault::DropQkvBias,
        phase: 2,
        gate: "block cosine",
        metric: "cosine",
    },
    Case {
        fixture: "qwen3-tiny",
        fault: Fault::SkipQkNorm,
        phase: 2,
        gate: "block cosine",
        metric: "cosine",
    },
];

fn run(bundle: &Bundle, case: &Case, tag: &str) -> skillc_runtime::exec::DeployOutcome {
    let out = scratch(&format!("{tag}-{}", case.fault));
    deploy(bundle, &fixture(case.fixture), &out, &[case.fault])
}

/// The fault's gate failed, in its phase, on its metric (a transferred tiling may
/// also fail and be repaired on the way; that is not the fault).
fn assert_caught(case: &Case, r: &skillc_runtime::exec::DeployReport) {
    let caught = r.gates().any(|(p, g)| {
        !g.passed
            && p.index() == case.phase
            && g.name.starts_with(case.gate)
            && g.metric.name() == case.metric
    });
    assert!(
        caught,
        "{}: no failing `{}` gate in phase {}:\n{}",
        case.fault,
        case.gate,
        case.phase,
        summary(r)
    );
}

#[test]
fn with_the_llama1b_bundle_only_the_tiling_fault_is_repaired() {
    for case in &CASES {
        let outcome = run(llama1b(), case, "llama1b");
        let r = &outcome.report;
        assert_caught(case, r);
        let fixed: Vec<&str> = r
            .phases
            .iter()
            .flat_map(|p| &p.attempts)
            .filter(|a| a.fixed)
            .map(|a| a.lesson.as_str())
            .collect();
        if case.fault == Fault::GemmNNotMultiple {
            assert_eq!(outcome.exit_code, 0, "{:?}", r.stop);
            assert_eq!(fixed, ["p1.lesson.tile-n"]);
            continue;
        }
        assert_eq!(outcome.exit_code, 1, "{}", case.fault);
        let stop = r.stop.as_ref().expect("a stop record");
        assert_eq!(stop.phase.index(), case.phase);
        assert!(stop.gate.starts_with(case.gate), "{}", stop.gate);
        assert_eq!(stop.metric.name(), case.metric);
        insta::assert_snapshot!(format!("reported_{}", case.fault), summary(r));
    }
}

#[test]
fn with_the_test_lessons_every_fault_is_repaired_by_its_lesson() {
    let lessons = [
        (Fault::GemmNNotMultiple, "p1.lesson.tile-n"),
        (Fault::L1Overflow, "t.l9"),
        (Fault::NoLlama3Rope, "t.l3"),
        (Fault::DropQkvBias, "t.l15"),
        (Fault::SkipQkNorm, "t.l21"),
    ];
    for case in &CASES {
        let outcome = run(with_test_lessons(), case, "lessons");
        let r = &outcome.report;
        assert_eq!(outcome.exit_code, 0, "{}: {:?}", case.fault, r.stop);
        assert_caught(case, r);
        let expected = lessons
            .iter()
            .find(|(f, _)| *f == case.fault)
            .map(|(_, l)| *l);
        let fixed_first = r
            .phases
            .iter()
            .flat_map(|p| &p.attempts)
            .find(|a| a.fixed && a.gate.starts_with(case.gate))
            .map(|a| a.lesson.as_str());
        assert_eq!(fixed_first, expected, "{}", case.fault);
        insta::assert_snapshot!(format!("repaired_{}", case.fault), summary(r));
    }
}

/// Why the llama3-scaling fault is a phase-1 catch: with Llama-3.2's parameters the
/// scaling only changes frequencies whose wavelength exceeds the original context's
/// quarter, so on the short prompts of phases 2 and 3 the unscaled table moves the
/// block by less than bf16 noise. Phase 1 validates the table itself over all 2048
/// positions against the reference's frequencies, where the error is large.
#[test]
fn the_unscaled_rope_table_is_invisible_to_a_short_prompt() {
    use skillc_runtime::exec::design::Design;
    use skillc_runtime::model::oracle::{LogitRows, Reference};
    use skillc_runtime::model::Model;
    use skillc_runtime::xdna2::device::Device;
    use skillc_runtime::xdna2::interpreter::{Interpreter, RopeTable};
    use skillc_runtime::xdna2::numerics::cosine;

    let model = Model::load(&fixture("llama32-tiny"), None).unwrap();
    let prompt: Vec<u32> = (1..40).collect();
    let reference = Reference::new(&model)
        .unwrap()
        .prefill(&prompt, LogitRows::Last)
        .unwrap();
    let device = Device::npu2();
    let block = |rope| {
        let mut design = Design::baseline();
        design.path.rope = rope;
        let plans = design.plans("llama32-tiny", &model.arch, &device).unwrap();
        let mut npu = Interpreter::new(&device, &model.arch, &model.weights, design.path);
        let out = npu.prefill_layers(&plans.prefill, &prompt, 1).unwrap();
        cosine(&out[0], &reference.layer_outputs[0].data)
    };
    let (scaled, unscaled) = (block(RopeTable::Scaled), block(RopeTable::Unscaled));
    assert!(scaled > 0.999, "{scaled}");
    assert!(unscaled > 0.99, "the phase-2 gate would pass: {unscaled}");
    assert!((scaled - unscaled).abs() < 1e-3, "{scaled} vs {unscaled}");
}

/// The decode-side faults leave prefill alone, so phases 1 and 2 end passed; the
/// teacher-forced gate of phase 3 stops the deployment on every tiny fixture,
/// with the KV cache after prefill still within its limit (the fault is in the
/// decode steps, and the gate says so).
#[test]
fn decode_faults_are_stopped_by_the_teacher_forced_gate_on_every_fixture() {
    let faults = [
        Fault::DecodeRopeOffByOne,
        Fault::KvWrongSlot,
        Fault::StaleKv,
        Fault::GqaMapping,
    ];
    let fixtures = ["llama32-tiny", "qwen25-tiny", "qwen3-tiny", "smollm2-tiny"];
    for fault in faults {
        for name in fixtures {
            let out = scratch(&format!("decode-{fault}-{name}"));
            let outcome = deploy(llama1b(), &fixture(name), &out, &[fault]);
            let r = &outcome.report;
            assert_eq!(outcome.exit_code, 1, "{fault} on {name}:\n{}", summary(r));
            let stop = r.stop.as_ref().expect("a stop record");
            assert_eq!(
                (stop.phase, stop.gate.as_str()),
                (DeployPhase::Model, "verify: teacher-forced logits"),
                "{fault} on {name}"
            );
            let gate = |wanted: &str| {
                r.gates()
                    .find(|(p, g)| *p == DeployPhase::Model && g.name == wanted)
                    .map(|(_, g)| g.passed)
            };
            assert_eq!(
                gate("verify: KV cache after prefill"),
                Some(true),
                "{fault}"
            );
            assert_eq!(
                gate("verify: KV cache after decode"),
                Some(false),
                "{fault}"
            );
            for phase in [DeployPhase::Kernels, DeployPhase::Block] {
                let status = r.phases.iter().find(|p| p.index == phase).map(|p| p.status);
                assert_eq!(status, Some(PhaseStatus::Passed), "{fault} on {name}");
            }
        }
    }
}

/// The dropped LM-head partition only exists once phase 5 moves the LM head onto
/// the NPU. The numerics probe runs on that change before it is timed, so phase 5
/// sees the zero logits of the missing partition on every fixture, whether the
/// modeled time would have kept the partition or not; the change is reverted for
/// its numerics, the deployment ends without it (exit 0) and the evaluator warns.
#[test]
fn a_dropped_lm_head_partition_is_caught_by_the_phase_that_applies_it() {
    for name in ["llama32-tiny", "qwen25-tiny", "qwen3-tiny", "smollm2-tiny"] {
        let out = scratch(&format!("lm-head-{name}"));
        let outcome = deploy(
            llama1b(),
            &fixture(name),
            &out,
            &[Fault::DropLmHeadPartition],
        );
        let r = &outcome.report;
        let failed: Vec<(DeployPhase, &str, f64)> = r
            .gates()
            .filter(|(_, g)| {
                !g.passed
                    && g.metric
                        == skillc_runtime::ops::GateMetric::Runtime(
                            skillc_runtime::ops::RuntimeMetric::LogitsMaxRel,
                        )
            })
            .map(|(p, g)| (p, g.name.as_str(), g.value))
            .collect();
        assert!(
            failed.iter().any(|(p, g, v)| *p == DeployPhase::Decode
                && g.contains("partition-lm-head")
                && *v > 0.2),
            "{name}: {failed:?}\n{}",
            summary(r)
        );
        assert!(
            failed.iter().all(|(p, _, _)| *p == DeployPhase::Decode),
            "{name}: {failed:?}"
        );
        let reverted = r.phases.iter().flat_map(|p| &p.steps).any(|s| {
            s.op == "partition-lm-head"
                && matches!(
                    &s.outcome,
                    StepOutcome::Reverted {
                        why: Reversion::NumericsFailed { .. }
                    }
                )
        });
        assert!(reverted, "{name}:\n{}", summary(r));
        assert_eq!(outcome.exit_code, 0, "{name}:\n{}", summary(r));
        let warnings = &r.evaluation.as_ref().expect("phase 7 ran").warnings;
        assert!(
            warnings.iter().any(|w| w.contains("partition-lm-head")),
            "{name}: {warnings:?}"
        );
    }
}

/// The missing llama3 scaling is planted on the NPU side (its own RoPE code,
/// `interpreter/rope.rs`), not in a helper the reference shares, so a model with
/// no transformers outputs catches it too: phase 1's RoPE table check against the
/// reference's frequencies stops the config-only copy of llama32-tiny (seeded
/// random weights, no reference.safetensors). On the three fixtures without
/// llama3 scaling the fault has nothing to act on: it says so and changes nothing.
#[test]
fn missing_llama3_scaling_is_caught_without_transformers_and_inert_without_scaling() {
    let model = scratch("config-only-llama32-tiny-rope");
    std::fs::copy(
        fixture("llama32-tiny").join("config.json"),
        model.join("config.json"),
    )
    .expect("config.json copies");
    let out = scratch("rope-config-only");
    let outcome = deploy(llama1b(), &model, &out, &[Fault::NoLlama3Rope]);
    let r = &outcome.report;
    assert_eq!(outcome.exit_code, 1, "{}", summary(r));
    let stop = r.stop.as_ref().expect("a stop record");
    assert_eq!(stop.phase, DeployPhase::Kernels, "{}", summary(r));
    assert!(stop.gate.starts_with("kernel rope"), "{}", stop.gate);
    for name in ["qwen25-tiny", "qwen3-tiny", "smollm2-tiny"] {
        let out = scratch(&format!("rope-inert-{name}"));
        let outcome = deploy(llama1b(), &fixture(name), &out, &[Fault::NoLlama3Rope]);
        let r = &outcome.report;
        assert_eq!(outcome.exit_code, 0, "{name}:\n{}", summary(r));
        let notes: Vec<&String> = r.phases.iter().flat_map(|p| &p.notes).collect();
        assert!(
            notes
                .iter()
                .any(|n| n.contains("no-llama3-rope does not apply")),
            "{name}: {notes:?}"
        );
        assert!(
            r.gates()
                .all(|(_, g)| g.passed || !g.name.starts_with("kernel rope")),
            "{name}"
        );
    }
}

/// No false alarm: the four fixtures' configs with seeded random weights (no
/// checkpoint, no transformers outputs) and three seeds each deploy to the end,
/// every phase-3 gate passing. Each code path they take is proven in phase 0 by a
/// transformers fixture that takes it, so the verdict is a plain PASS.
#[test]
fn unplanted_random_weight_deployments_pass_the_decode_gates_with_three_seeds() {
    let fixtures = ["llama32-tiny", "qwen25-tiny", "qwen3-tiny", "smollm2-tiny"];
    for name in fixtures {
        let model = scratch(&format!("config-only-{name}"));
        std::fs::copy(fixture(name).join("config.json"), model.join("config.json"))
            .expect("config.json copies");
        for seed in 0..3 {
            let out = scratch(&format!("random-{name}-{seed}"));
            let outcome = deploy_seeded(llama1b(), &model, &out, &[], seed);
            let r = &outcome.report;
            assert_eq!(outcome.exit_code, 0, "{name} seed {seed}:\n{}", summary(r));
            let failed: Vec<&str> = r
                .gates()
                .filter(|(p, g)| *p == DeployPhase::Model && !g.passed)
                .map(|(_, g)| g.name.as_str())
                .collect();
            assert!(failed.is_empty(), "{name} seed {seed}: {failed:?}");
            assert!(!r.feature_proofs.is_empty(), "{name}");
            for proof in &r.feature_proofs {
                assert!(!proof.fixtures.is_empty(), "{name}: {proof:?}");
            }
            assert_eq!(
                r.verdict,
                Verdict::Pass,
                "{name} seed {seed}: {:?}",
                r.evaluation.as_ref().map(|e| &e.warnings)
            );
        }
    }
}

/// report.md of a random-weight deployment says so up front, names the bundle
/// once, has a Warnings section (empty: every path is proven by a fixture),
/// one decode baseline (phase 3's plan, which phase 5's gate uses too) and no
/// roofline row at 0 %. Wall times are masked.
#[test]
fn the_report_of_a_random_weight_deployment() {
    let model = scratch("config-only-smollm2-report");
    std::fs::copy(
        fixture("smollm2-tiny").join("config.json"),
        model.join("config.json"),
    )
    .expect("config.json copies");
    let out = scratch("report-random");
    let outcome = deploy(llama1b(), &model, &out, &[]);
    assert_eq!(outcome.exit_code, 0, "{}", summary(&outcome.report));
    let text = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    let masked: Vec<String> = text
        .lines()
        .map(
            |line| match line.strip_prefix("| ").map(|_| line.rsplit_once(" | ")) {
                Some(Some((head, tail)))
                    if tail.ends_with(" |")
                        && tail[..tail.len() - 2].parse::<f64>().is_ok()
                        && head.contains("/")
                        && line.contains("passed") =>
                {
                    format!("{head} | <wall> |")
                }
                _ => line.to_string(),
            },
        )
        .collect();
    let masked = masked.join("\n");
    assert!(!masked.contains("| 0% |"), "{masked}");
    assert!(masked.contains("**Random weights**"), "{masked}");
    insta::assert_snapshot!("report_random_weights", masked);
}

/// Gemma-3's own kernels and masks: a SiLU gate where the MLP gates with
/// GELU-tanh stops phase 1 at the gated-activation kernel check (judged against
/// the model's activation), and a sliding window one position too wide (prefill
/// mask and decode KV window) stops phase 2 at the block cosine: layer 0 is a
/// sliding layer and the 20-token prompt is longer than the window of 8. On a
/// model without them each fault has nothing to act on and changes nothing.
#[test]
fn gemma3_faults_are_caught_and_inert_elsewhere() {
    let cases = [
        (Fault::SiluForGelu, 1, "kernel silu_mul", "mismatches"),
        (Fault::WindowOffByOne, 2, "block cosine", "cosine"),
    ];
    for (fault, phase, gate, metric) in cases {
        let case = Case {
            fixture: "gemma3-tiny",
            fault,
            phase,
            gate,
            metric,
        };
        let outcome = run(llama1b(), &case, "gemma3");
        assert_caught(&case, &outcome.report);
        assert_eq!(outcome.exit_code, 1, "{fault}");
        let out = scratch(&format!("inert-{fault}"));
        let outcome = deploy(llama1b(), &fixture("llama32-tiny"), &out, &[fault]);
        let r = &outcome.report;
        assert_eq!(outcome.exit_code, 0, "{fault}:\n{}", summary(r));
        let said = r
            .phases
            .iter()
            .flat_map(|p| &p.notes)
            .any(|n| n.contains(&format!("planted fault {fault} does not apply")));
        assert!(said, "{fault}:\n{}", summary(r));
    }
}

/// The merged bundle teaches the single-dispatch fused decode, and phase 5 keeps it
/// on smollm2-tiny. Each fault planted in the fused plan alone (`Fault::FUSED`:
/// RoPE position, KV slot, stale KV, grouped-query mapping) leaves phases 1–4 as
/// they were, so only the teacher-forced probe of the fused plan can see it: the
/// probe fails, the technique is reverted and the deploy warns, never keeps it.
#[test]
fn faults_in_the_fused_decode_are_caught_by_its_phase_5_probe() {
    let bundle = deploy_support::load_bundle(&deploy_support::repo("generated-skills/npu2-llms"));
    let model = fixture("smollm2-tiny");
    let fused_step = |r: &skillc_runtime::exec::artifacts::record::DeployReport| {
        r.phases
            .iter()
            .flat_map(|p| &p.steps)
            .find(|s| s.op == "fused-decode")
            .map(|s| s.outcome.clone())
    };
    let clean = deploy(&bundle, &model, &scratch("fused-clean"), &[]);
    assert!(
        matches!(fused_step(&clean.report), Some(StepOutcome::Kept { .. })),
        "unplanted:\n{}",
        summary(&clean.report)
    );
    for fault in Fault::FUSED {
        let name = fault.name();
        let outcome = deploy(
            &bundle,
            &model,
            &scratch(&format!("fused-{name}")),
            &[fault],
        );
        let r = &outcome.report;
        assert!(
            matches!(
                fused_step(r),
                Some(StepOutcome::Reverted {
                    why: Reversion::NumericsFailed { .. }
                })
            ),
            "{name}:\n{}",
            summary(r)
        );
        let caught = r
            .gates()
            .any(|(p, g)| p == DeployPhase::Decode && !g.passed && g.name.contains("fused-decode"));
        assert!(caught, "{name}:\n{}", summary(r));
        let warnings = &r.evaluation.as_ref().expect("phase 7 ran").warnings;
        assert!(
            warnings.iter().any(|w| w.contains("fused-decode")),
            "{name}: {warnings:?}"
        );
    }
}
