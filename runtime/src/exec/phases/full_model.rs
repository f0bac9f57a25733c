//! Phase 3, the full model: every layer and the LM head on the NPU path, verified
//! over `GATE_N_TOKENS` decode steps per prompt fed the reference's greedy tokens:
//! the teacher-forced logits of every step and the KV cache of every layer after
//! prefill and after decode against the reference's (`gates::decode`), and the
//! greedy top-k set check at every step (`gates::topk`); with the per-layer cosine
//! table kept as diagnosis only, and the unoptimized plan's modeled figures as the
//! baseline phases 4 and 5 must beat.

use std::collections::BTreeMap;

use super::block::first_prompt;
use super::long_context;
use super::DeployPhase;
use crate::bundle::Value;
use crate::exec::artifacts::record::PromptVerdict;
use crate::exec::artifacts::record::{ModeledTimes, PhaseRecord, StepOutcome};
use crate::exec::artifacts::trajectory::ActionLinks;
use crate::exec::design::{self, fingerprint, modeled};
use crate::exec::fault::Fault;
use crate::exec::gates::gate::{format_value, GateCheck, ThresholdSource};
use crate::exec::gates::long::PROBE_STEPS;
use crate::exec::gates::remedy::Failure;
use crate::exec::gates::topk::{rank_words, TopKGate, GATE_K, GATE_N_TOKENS};
use crate::exec::gates::verify::{verify_gates, verify_npu, NpuVerification};
use crate::exec::run::{Attempt, Change, PhaseEnd, Run};
use crate::exec::DeployError;
use crate::ops::{Metric, OpKind};

/// Phase 3; when it passes, the modeled figures of the plan it verified: the
/// baseline phases 4 to 6 compare with.
pub(crate) fn run(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
) -> Result<Result<ModeledTimes, PhaseEnd>, DeployError> {
    plant_decode_faults(run, rec);
    run.traj.action(
        OpKind::BuildModel,
        &BTreeMap::new(),
        &ActionLinks::default(),
    );
    run.record_bundle_steps(
        rec,
        DeployPhase::Model,
        OpKind::BuildModel,
        StepOutcome::AsRecorded,
    );
    let params = BTreeMap::from([
        ("tokens".to_string(), Value::Int(GATE_N_TOKENS as i64)),
        ("top_k".to_string(), Value::Int(GATE_K as i64)),
    ]);
    let action = run
        .traj
        .action(OpKind::VerifyModel, &params, &ActionLinks::default());
    run.record_bundle_steps(
        rec,
        DeployPhase::Model,
        OpKind::VerifyModel,
        StepOutcome::AsRecorded,
    );
    run.progress.step(&format!(
        "verify-model: {GATE_N_TOKENS} teacher-forced steps x {} prompts on the NPU",
        run.report.prompts.len()
    ));
    let plans = run.plans()?;
    let verification = run_verification(run, &plans, run.design.path, true)?;
    let mut gates = run_gates(run, &verification);
    run.progress.step(&format!(
        "long-context probes: prefill past every row boundary, {PROBE_STEPS} decode steps past every window and tile"
    ));
    let (long_gates, long_note) =
        long_context::gates(run, &plans, &run.design.path, long_context::ALL, &|what| {
            format!("verify: {what}")
        })?;
    gates.extend(long_gates);
    let refs: Vec<&GateCheck> = gates.iter().collect();
    let obs = run
        .traj
        .observe(Some(VERIFY_OBSERVATION), &refs, Some(&action));
    run.report.verification = verification.prompts.clone();
    run.report.diagnosis = verification.diagnosis.clone();
    diagnosis_notes(run, rec);
    rec.notes.push(long_note);
    let failed = run.record_gates(rec, gates);
    if let Some(gate) = failed {
        let failure = Failure {
            phase: DeployPhase::Model,
            op: OpKind::VerifyModel,
            params: params.clone(),
            gate: gate.clone(),
        };
        let failing = gate.name.clone();
        let mut attempt = |run: &mut Run<'_>, changes: &[Change]| {
            let trial = run
                .with_changes(changes, None)
                .and_then(|d| Ok((run.plans_of(&d)?, d)));
            let (plans, d) = match trial {
                Ok(t) => t,
                Err(e) => return Attempt::Inapplicable(e.to_string()),
            };
            match trial_gates(run, &plans, &d.path) {
                Ok(gates) => match gates.into_iter().find(|g| g.name == failing) {
                    Some(g) => Attempt::Checked(g),
                    None => Attempt::Inapplicable("the gate disappeared".into()),
                },
                Err(e) => Attempt::Inapplicable(e.to_string()),
            }
        };
        match run.try_lessons(
            rec,
            &failure,
            &obs,
            (OpKind::VerifyModel, &params),
            &mut attempt,
        ) {
            Some(fixed) => {
                let _ = run.keep_fix(&fixed.changes, None);
            }
            None => {
                let stop = run.stop(
                    rec,
                    &failure,
                    "the NPU path does not reproduce the reference's greedy decode",
                );
                return Ok(Err(PhaseEnd::Failed(stop)));
            }
        }
    }
    let plans = run.plans()?;
    let fp = fingerprint(&plans, &run.design.path);
    run.verified.insert(
        fp,
        format!(
            "phase 3: {GATE_N_TOKENS} teacher-forced steps on {} prompts (logits and KV cache against the reference), top-{GATE_K} set check at every step; the long-context probes (prefill past every row boundary, {PROBE_STEPS} decode steps past every window and tile)",
            run.report.prompts.len()
        ),
    );
    let times = modeled(&plans, &run.device, &run.params);
    let profile = design::at_seq_len();
    let a = run
        .traj
        .action(OpKind::ProfilePrefill, &profile, &ActionLinks::default());
    let ttft = GateCheck::named("baseline TTFT", OpKind::ProfilePrefill)
        .measures(Metric::TtftS, times.ttft_s)
        .when(design::at_seq_len())
        .recorded("recorded as the baseline phase 4 must beat");
    let mpt = GateCheck::named("baseline decode", OpKind::ProfileDecode)
        .measures(Metric::MsPerToken, times.ms_per_token)
        .when(design::at_seq_len())
        .recorded("recorded as the baseline phase 5 must beat");
    run.traj.observe(None, &[&ttft, &mpt], Some(&a));
    rec.notes.push(format!(
        "baseline plan, modeled at seq {}: TTFT {:.3} s, {:.1} ms/token ({:.2} tok/s), {} / {} NPU calls per layer",
        times.seq_len,
        times.ttft_s,
        times.ms_per_token,
        times.tok_s,
        times.calls_per_layer_prefill,
        times.calls_per_layer_decode
    ));
    run.record_bundle_steps(
        rec,
        DeployPhase::Model,
        OpKind::DiagnoseLayers,
        StepOutcome::AsRecorded,
    );
    Ok(Ok(times))
}

/// Phase 3's gates on a trial design's plans (a lesson's fix): the
/// verification's and the long-context probes'.
fn trial_gates(
    run: &Run<'_>,
    plans: &design::Plans,
    path: &crate::xdna2::interpreter::NpuPath,
) -> Result<Vec<GateCheck>, DeployError> {
    let v = run_verification(run, plans, *path, false)?;
    let mut gates = run_gates(run, &v);
    let name = |what: &str| format!("verify: {what}");
    gates.extend(long_context::gates(run, plans, path, long_context::ALL, &name)?.0);
    Ok(gates)
}

/// NPU-side verification of `plans` against the cached reference runs.
pub(crate) fn run_verification(
    run: &Run<'_>,
    plans: &design::Plans,
    path: crate::xdna2::interpreter::NpuPath,
    diagnose: bool,
) -> Result<NpuVerification, DeployError> {
    let loaded = &run.loaded;
    let reference_prefill = match diagnose {
        true => Some(loaded.reference_prefill(first_prompt(run))?),
        false => None,
    };
    Ok(verify_npu(
        &run.device,
        &loaded.model,
        plans,
        path,
        &run.report.prompts,
        &loaded.reference_runs,
        reference_prefill,
    )?)
}

/// Switches on the planted decode-side defects (`--plant`) in the NPU path. They
/// leave prefill alone, so phases 1 and 2 cannot see them; the LM-head one takes
/// effect once an optimization moves the LM head onto the NPU.
fn plant_decode_faults(run: &mut Run<'_>, rec: &mut PhaseRecord) {
    let kv_heads = run.loaded.model.arch.num_kv_heads;
    let defects = &mut run.design.path.defects;
    for planted in Fault::DECODE.into_iter().chain(Fault::FUSED) {
        if !run.options.faults.contains(&planted) {
            continue;
        }
        // A fused fault is its per-call twin acting in the fused plan alone.
        if Fault::FUSED.contains(&planted) {
            defects.fused_only = true;
        }
        let fault = planted.unscoped();
        let switch = match fault {
            Fault::DecodeRopeOffByOne => &mut defects.rope_position_off_by_one,
            Fault::KvWrongSlot => &mut defects.kv_wrong_slot,
            Fault::StaleKv => &mut defects.stale_kv,
            Fault::GqaMapping if kv_heads < 2 => {
                rec.notes.push(format!(
                    "planted fault {planted} does not apply: the model has one KV head"
                ));
                continue;
            }
            Fault::GqaMapping => &mut defects.gqa_mapping,
            _ => &mut defects.drop_lm_head_partition,
        };
        *switch = true;
        rec.notes.push(format!(
            "planted fault {planted}: {}",
            planted.description()
        ));
    }
    for planted in Fault::LATE {
        let Some(from) = planted.late_position() else {
            continue;
        };
        if !run.options.faults.contains(&planted) {
            continue;
        }
        // Several planted late faults act from the earliest position.
        let earliest = defects.stale_kv_from.map_or(from, |p| p.min(from));
        defects.stale_kv_from = Some(earliest);
        rec.notes.push(format!(
            "planted fault {planted}: {}",
            planted.description()
        ));
    }
}

/// What a verification observation says it compared (trajectory and report).
pub(crate) const VERIFY_OBSERVATION: &str =
    "decode fed the reference's tokens: logits and KV cache against the reference, top-k set check at every step";

/// The verification gates of `v` (`gates::verify`), the top-k threshold's
/// source read from the bundle.
pub(crate) fn run_gates(run: &Run<'_>, v: &NpuVerification) -> Vec<GateCheck> {
    let prompts = run.report.prompts.len();
    let recorded = run
        .bundle
        .phases
        .get(3)
        .and_then(|p| p.exit_gates.iter().find(|g| g.metric == Metric::TopKAgree));
    let source = match recorded {
        Some(g) if g.threshold as usize == prompts => ThresholdSource::Bundle {
            provenance: g.provenance.clone(),
        },
        Some(g) => ThresholdSource::Rederived {
            why: format!(
                "recorded as {} of {} prompts; every one of this run's {prompts} prompts must pass",
                g.threshold, g.threshold
            ),
            provenance: g.provenance.clone(),
        },
        None => ThresholdSource::rule(
            "reference system make verify: every prompt passes the top-5 set check",
        ),
    };
    verify_gates(
        v,
        &run.loaded.decode_limits,
        TopKGate::DEFAULT,
        prompts,
        source,
    )
}

fn diagnosis_notes(run: &mut Run<'_>, rec: &mut PhaseRecord) {
    let table = &run.report.diagnosis;
    if let (Some(first), Some(last)) = (table.first(), table.last()) {
        let low = table.iter().filter(|d| d.cosine < 0.85).count();
        rec.notes.push(format!(
            "diagnosis (not a gate): per-layer cosine {:.4} at layer 0 to {:.4} at layer {}; {low} layers below 0.85",
            first.cosine, last.cosine, last.layer
        ));
    }
    rec.notes.push(run.loaded.decode_limits.note());
    for p in &run.report.verification {
        rec.notes.push(prompt_note(p));
    }
}

/// One prompt's verification in a sentence.
pub(crate) fn prompt_note(p: &PromptVerdict) -> String {
    let d = &p.decode;
    let errors = format!(
        "teacher-forced max|d|/max|ref|: logits {} ({}), KV after prefill {} ({}), after decode {} ({})",
        format_value(d.logits.value),
        d.logits.at,
        format_value(d.kv_prefill.value),
        d.kv_prefill.at,
        format_value(d.kv_decode.value),
        d.kv_decode.at
    );
    let greedy = match (p.check.first(), p.check.first_failure()) {
        (None, _) => format!("{} greedy tokens identical", p.check.agreed),
        (Some(first), None) => format!(
            "greedy tokens identical for {} steps, then {} near-tie(s) from step {}, every one inside both top-{GATE_K} sets",
            p.check.agreed,
            p.check.divergences.len(),
            first.step
        ),
        (Some(_), Some(bad)) => format!(
            "greedy step {}: reference token {} is {} on the NPU, NPU token {} is {} on the reference",
            bad.step,
            bad.reference_token,
            rank_words(bad.reference_rank_on_npu),
            bad.npu_token,
            rank_words(bad.npu_rank_on_reference)
        ),
    };
    format!("prompt {}: {errors}; {greedy}", p.prompt)
}
