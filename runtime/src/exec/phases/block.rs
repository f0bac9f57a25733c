//! Phase 2, a single block: layer 0 on the emulated NPU against the reference's
//! layer 0 on the first prompt — whole-tensor cosine, the per-position minimum
//! (threshold by head_dim, as in the reference system) and NaN — after the
//! prerequisites the config triggers (GQA-aware head padding for non-aligned dims,
//! the q/k/v bias added after RoPE, the per-head Q/K norm).

use std::collections::BTreeMap;

use super::DeployPhase;
use crate::bundle::Value;
use crate::exec::artifacts::record::{PhaseRecord, StepOrigin, StepOutcome, StepRecord, Stop};
use crate::exec::artifacts::trajectory::ActionLinks;
use crate::exec::design::Design;
use crate::exec::fault::Fault;
use crate::exec::gates::block::{
    position_cosine_floor, BlockComparison, BlockThresholds, BLOCK_COSINE_MIN, BLOCK_RULE,
};
use crate::exec::gates::gate::{GateCheck, ThresholdSource};
use crate::exec::gates::remedy::Failure;
use crate::exec::run::{Attempt, Change, PhaseEnd, Run};
use crate::exec::{DeployError, Internal};
use crate::ops::{Metric, OpKind};
use crate::xdna2::interpreter::Interpreter;
use crate::xdna2::plan::{Transform, WeightSource};

/// Gate rounds: a fix may expose the next failing gate.
const MAX_ROUNDS: usize = 4;

pub(crate) fn run(run: &mut Run<'_>, rec: &mut PhaseRecord) -> Result<PhaseEnd, DeployError> {
    plant_block_faults(run, rec);
    prerequisites(run, rec)?;
    // Computed here (and kept for phase 3's diagnosis), before the rounds.
    run.loaded.reference_prefill(first_prompt(run))?;
    let build = run.traj.action(
        OpKind::BuildBlock,
        &BTreeMap::from([("layer".to_string(), Value::Int(0))]),
        &ActionLinks::default(),
    );
    for round in 0..MAX_ROUNDS {
        let thresholds = thresholds(run, rec, round == 0);
        let vparams = BTreeMap::from([
            ("layer".to_string(), Value::Int(0)),
            ("cosine_min".to_string(), Value::Float(thresholds.cosine.0)),
            (
                "position_min".to_string(),
                Value::Float(thresholds.position.0),
            ),
        ]);
        let action = run.traj.action(
            OpKind::ValidateBlock,
            &vparams,
            &ActionLinks {
                after: vec![&build],
                ..Default::default()
            },
        );
        run.progress.step("validate-block layer 0");
        let design = run.design.clone();
        let gates = block_gates(run, &design, &thresholds)?;
        let refs: Vec<&GateCheck> = gates.iter().collect();
        let obs = run.traj.observe(
            Some("layer 0 on the NPU vs the reference"),
            &refs,
            Some(&action),
        );
        let failed = run.record_gates(rec, gates);
        let Some(gate) = failed else {
            return Ok(PhaseEnd::Passed);
        };
        let failure = Failure {
            phase: DeployPhase::Block,
            op: OpKind::ValidateBlock,
            params: BTreeMap::from([("layer".to_string(), Value::Int(0))]),
            gate: gate.clone(),
        };
        let metric = gate.metric;
        let mut attempt = |run: &mut Run<'_>, changes: &[Change]| {
            let d = match run.with_changes(changes, None) {
                Ok(d) => d,
                Err(e) => return Attempt::Inapplicable(e.to_string()),
            };
            if d == run.design {
                return Attempt::Inapplicable("the fix changes nothing in this deployment".into());
            }
            match block_gates(run, &d, &thresholds) {
                Ok(gates) => match gates.into_iter().find(|g| g.metric == metric) {
                    Some(g) => Attempt::Checked(g),
                    None => Attempt::Inapplicable("the gate disappeared".into()),
                },
                Err(e) => Attempt::Inapplicable(e.to_string()),
            }
        };
        let params = failure.params.clone();
        match run.try_lessons(
            rec,
            &failure,
            &obs,
            (OpKind::ValidateBlock, &params),
            &mut attempt,
        ) {
            Some(fixed) => run.keep_fix(&fixed.changes, None)?,
            None => {
                let stop = run.stop(rec, &failure, "no lesson of the bundle fixed the block");
                return Ok(PhaseEnd::Failed(stop));
            }
        }
    }
    let tried = rec.attempts.iter().map(|a| a.lesson.clone()).collect();
    Ok(PhaseEnd::Failed(Stop::out_of_rounds(
        DeployPhase::Block,
        "block",
        MAX_ROUNDS,
        "fixes kept exposing new failures",
        tried,
    )))
}

fn plant_block_faults(run: &mut Run<'_>, rec: &mut PhaseRecord) {
    let arch = &run.loaded.model.arch;
    if run.options.faults.contains(&Fault::DropQkvBias) {
        if arch.qkv_bias {
            run.design.path.qkv_bias = false;
            rec.notes.push(
                "planted fault drop-qkv-bias: the NPU block leaves out the q/k/v bias".into(),
            );
        } else {
            rec.notes.push(
                "planted fault drop-qkv-bias does not apply: the model has no q/k/v bias".into(),
            );
        }
    }
    if run.options.faults.contains(&Fault::WindowOffByOne) {
        match Fault::WindowOffByOne.inert_on(arch) {
            None => {
                run.design.path.defects.window_off_by_one = true;
                rec.notes.push(format!(
                    "planted fault window-off-by-one: {}",
                    Fault::WindowOffByOne.description()
                ));
            }
            Some(why) => rec.notes.push(format!(
                "planted fault window-off-by-one does not apply: {why}"
            )),
        }
    }
    if run.options.faults.contains(&Fault::SkipQkNorm) {
        if arch.qk_norm {
            run.design.path.qk_norm = false;
            rec.notes.push(
                "planted fault skip-qk-norm: the NPU block skips the per-head Q/K norm".into(),
            );
        } else {
            rec.notes.push(
                "planted fault skip-qk-norm does not apply: the model has no Q/K norm".into(),
            );
        }
    }
}

/// The config-triggered steps: executed when the model needs them (and the path has
/// them), recorded against the bundle's steps of the same operation.
fn prerequisites(run: &mut Run<'_>, rec: &mut PhaseRecord) -> Result<(), DeployError> {
    let arch = run.loaded.model.arch.clone();
    let plans = run.plans()?;
    let padded = plans.prefill.buffers.values().any(|b| {
        matches!(&b.source, Some(WeightSource::Tensor { name, transforms })
            if name.contains("self_attn") && transforms.iter().any(|t| matches!(t, Transform::PadHeads { .. })))
    });
    let needs = [
        (
            OpKind::PadHeads,
            padded,
            format!(
                "heads x head_dim = {} is not a multiple of 1024: phantom heads inside each KV group",
                arch.q_dim()
            ),
            BTreeMap::from([("multiple".to_string(), Value::Int(1024))]),
        ),
        (
            OpKind::BiasAfterRope,
            arch.qkv_bias && run.design.path.qkv_bias,
            "the config has q/k/v bias: added on the host after RoPE, RoPE(q+b) = RoPE(q) + RoPE(b)".into(),
            BTreeMap::new(),
        ),
        (
            OpKind::QkNorm,
            arch.qk_norm && run.design.path.qk_norm,
            "the config has per-head Q/K RMSNorm before RoPE".into(),
            BTreeMap::new(),
        ),
    ];
    for (op, needed, why, params) in needs {
        let steps = run.bundle_steps(DeployPhase::Block, op);
        if needed {
            run.traj.action(op, &params, &ActionLinks::default());
        }
        if steps.is_empty() {
            if needed {
                rec.steps.push(StepRecord {
                    op: op.to_string(),
                    params,
                    origin: StepOrigin::Derived { why },
                    outcome: StepOutcome::AsRecorded,
                    recorded: None,
                });
            }
            continue;
        }
        for step in steps {
            let outcome = if needed {
                StepOutcome::AsRecorded
            } else {
                StepOutcome::NotApplicable {
                    why: format!("this model does not need `{op}`"),
                }
            };
            rec.steps.push(StepRecord::from_bundle(step.step, outcome));
        }
    }
    Ok(())
}

/// The run's first prompt, the one the block is checked on.
pub(crate) fn first_prompt<'r>(run: &'r Run<'_>) -> &'r [u32] {
    run.report.prompts.first().map_or(&[], Vec::as_slice)
}

/// Whole-tensor and per-position thresholds: the bundle's exit gates, with the
/// per-position floor re-derived when the bundle recorded it at another head_dim.
fn thresholds(run: &mut Run<'_>, rec: &mut PhaseRecord, note: bool) -> BlockThresholds {
    let head_dim = run.loaded.model.arch.head_dim;
    let gates = run
        .bundle
        .phases
        .get(2)
        .map(|p| p.exit_gates.clone())
        .unwrap_or_default();
    let rule = BLOCK_RULE;
    let cos = match gates.iter().find(|g| g.metric == Metric::Cosine) {
        Some(g) => (
            g.threshold,
            ThresholdSource::Bundle {
                provenance: g.provenance.clone(),
            },
        ),
        None => (BLOCK_COSINE_MIN, ThresholdSource::rule(rule)),
    };
    let floor = position_cosine_floor(head_dim);
    let pos = match gates.iter().find(|g| g.metric == Metric::PositionCosineMin) {
        Some(g) => {
            let recorded_hd = match g.conditions.get("head_dim") {
                Some(Value::Int(h)) => Some(*h as usize),
                _ => None,
            };
            match recorded_hd {
                Some(h) if position_cosine_floor(h) != floor => {
                    let why = format!(
                        "recorded {} at head_dim {h}; this model's head_dim is {head_dim}, whose floor is {floor} (bf16 noise grows with sqrt(head_dim x K))",
                        g.threshold
                    );
                    if note {
                        rec.notes
                            .push(format!("position cosine threshold re-derived: {why}"));
                    }
                    (
                        floor,
                        ThresholdSource::Rederived {
                            why,
                            provenance: g.provenance.clone(),
                        },
                    )
                }
                _ => (
                    g.threshold,
                    ThresholdSource::Bundle {
                        provenance: g.provenance.clone(),
                    },
                ),
            }
        }
        None => (floor, ThresholdSource::rule(rule)),
    };
    BlockThresholds {
        cosine: cos,
        position: pos,
    }
}

/// Runs layer 0 of `design` on the NPU and compares it with the reference.
fn block_gates(
    run: &Run<'_>,
    design: &Design,
    thresholds: &BlockThresholds,
) -> Result<Vec<GateCheck>, DeployError> {
    let (model, arch) = (&run.loaded.model, &run.loaded.model.arch);
    let prompt = first_prompt(run);
    let reference = run.loaded.reference_prefill(prompt)?;
    let plans = run.plans_of(design)?;
    let mut npu = Interpreter::new(&run.device, &model.arch, &model.weights, design.path);
    let outputs = npu.prefill_layers(&plans.prefill, prompt, 1)?;
    let ours = outputs.first().ok_or(Internal::NoBlockOutput)?;
    let theirs = &reference.layer_outputs[0].data;
    let conditions = BTreeMap::from([
        ("layer".to_string(), Value::Int(0)),
        ("head_dim".to_string(), Value::Int(arch.head_dim as i64)),
        ("prompt".to_string(), Value::Int(1)),
    ]);
    Ok(BlockComparison::of(ours, theirs, arch.hidden_size).gates(thresholds, conditions))
}
