//! The long-context probes (`gates::long`) as the phases run them. Phase 3
//! runs every check on the plan it verifies. A phase 4–5 change runs the
//! prefill check when it changes what prefill computes per position (attention,
//! RoPE, the KV store, the row chunking) and the decode probe when it changes
//! what decode computes per position (attention, RoPE, the KV store or append),
//! [`changed`]; any other change runs neither. The oracle's side is computed
//! once per deployment (`Loaded::long`); the NPU's prefill of the long prompt
//! runs once per prefill path, and the decode probes of later changes resume
//! from the cache it left (`Loaded::long_state`).

use std::collections::BTreeMap;

use crate::bundle::Value;
use crate::exec::design::Plans;
use crate::exec::gates::decode::{NpuDecoder, Worst};
use crate::exec::gates::floor::DerivedLimit;
use crate::exec::gates::gate::GateCheck;
use crate::exec::gates::long::{self, Checks, LongReference, PROBE_STEPS};
use crate::exec::run::Run;
use crate::exec::{DeployError, Internal};
use crate::ops::RuntimeMetric;
use crate::xdna2::interpreter::{Interpreter, NpuPath};
use crate::xdna2::plan::{HostOp, Launch, Plan, Step};

/// Every check: phase 3's.
pub(crate) const ALL: Checks = Checks {
    prefill: true,
    decode: true,
};

/// The oracle's side of the probes, computed the first time it is asked for,
/// on a long prompt as long as the plans of the run's design need.
pub(crate) fn reference<'r>(run: &'r Run<'_>) -> Result<&'r LongReference, DeployError> {
    let loaded = &run.loaded;
    if let Some(found) = loaded.long.get() {
        return Ok(found);
    }
    let (Some(prompt), Some(first)) = (run.report.prompts.first(), loaded.reference_runs.first())
    else {
        return Err(Internal::NoPromptOrReference.into());
    };
    let plans = run.plans()?;
    let start = long::reach(&plans, &run.device);
    let computed = LongReference::compute(&loaded.model, long::long_prompt(prompt, first, start))?;
    Ok(loaded.long.get_or_init(|| computed))
}

/// What of a plan's side the probes cover, as text: the NPU path and, of
/// `plan`, every step that `keep` keeps (with a GEMM reduced to its row
/// chunk), the window and the padding.
fn key(plan: &Plan, path: &NpuPath, keep: fn(&Step) -> Option<serde_json::Value>) -> String {
    let steps: std::collections::BTreeSet<String> = plan
        .sections()
        .iter()
        .flat_map(|(_, steps)| steps.iter())
        .filter_map(keep)
        .map(|v| v.to_string())
        .collect();
    serde_json::json!({
        "path": path,
        "steps": steps,
        "sliding": plan.sliding,
        "padding": plan.padding,
        "fused": plan.fused.is_some(),
    })
    .to_string()
}

fn launches(
    step: &Step,
    keep: fn(&Launch) -> Option<serde_json::Value>,
) -> Option<serde_json::Value> {
    match step {
        Step::Call(call) => {
            let kept: Vec<serde_json::Value> = call.launches.iter().filter_map(keep).collect();
            (!kept.is_empty()).then(|| serde_json::Value::Array(kept))
        }
        Step::Host(op) => matches!(
            op,
            HostOp::KvStore { .. } | HostOp::DecodeAttention { .. } | HostOp::BiasAdd { .. }
        )
        .then(|| serde_json::to_value(op).unwrap_or_default()),
    }
}

/// The prefill's per-position work: attention, RoPE, each GEMM's row chunk.
fn prefill_step(step: &Step) -> Option<serde_json::Value> {
    launches(step, |launch| match launch {
        // A GEMM's row chunk, not the GEMM: the set of chunks is what
        // [`prefill_key`] compares, so adding or dropping a GEMM with a chunk
        // the plan has already (the last-token LM head) changes nothing.
        Launch::Gemm { spec, .. } => Some(serde_json::json!({ "gemm_rows": spec.tile.tile_m })),
        Launch::FlashAttention { .. } | Launch::Rope { .. } => {
            Some(serde_json::to_value(launch).unwrap_or_default())
        }
        _ => None,
    })
}

/// Decode's per-position work: attention, RoPE, the KV append.
fn decode_step(step: &Step) -> Option<serde_json::Value> {
    launches(step, |launch| match launch {
        Launch::DecodeAttention { .. } | Launch::KvAppend { .. } | Launch::Rope { .. } => {
            Some(serde_json::to_value(launch).unwrap_or_default())
        }
        _ => None,
    })
}

/// The key of the prefill path (the saved cache is valid while it holds).
fn prefill_key(plans: &Plans, path: &NpuPath) -> String {
    key(&plans.prefill, path, prefill_step)
}

/// Which checks a change from `old` to `new` needs.
pub(crate) fn changed(old: (&Plans, &NpuPath), new: (&Plans, &NpuPath)) -> Checks {
    Checks {
        prefill: prefill_key(old.0, old.1) != prefill_key(new.0, new.1),
        decode: key(&old.0.decode, old.1, decode_step) != key(&new.0.decode, new.1, decode_step),
    }
}

/// The probes' gates for `plans` on `path` (the `checks` asked for), each
/// named by `name` from what it measures, and a note of what ran.
pub(crate) fn gates(
    run: &Run<'_>,
    plans: &Plans,
    path: &NpuPath,
    checks: Checks,
    name: &dyn Fn(&str) -> String,
) -> Result<(Vec<GateCheck>, String), DeployError> {
    let reference = reference(run)?;
    let model = &run.loaded.model;
    let bounds = long::boundaries(&plans.prefill, &run.device);
    let key = prefill_key(plans, path);
    // Phase 3 (and a change of the prefill) runs the long prefill itself;
    // a change of decode alone resumes from the cache it left.
    let saved = match checks.prefill {
        true => None,
        false => run
            .loaded
            .long_state
            .borrow()
            .as_ref()
            .filter(|(k, _)| *k == key)
            .map(|(_, state)| state.clone()),
    };
    // One NPU prefill per probe: the whole long prompt when decode needs its
    // cache (its rows cross every boundary), else one length past the
    // plan's largest boundary below it.
    let long_prefill = checks.decode && saved.is_none();
    let lengths: Vec<usize> = match (checks.prefill, long_prefill) {
        (true, false) => long::prefill_lengths(&plans.prefill, &run.device, reference.start)
            .last()
            .copied()
            .into_iter()
            .collect(),
        _ => Vec::new(),
    };
    let mut checked = lengths.clone();
    if long_prefill {
        checked.push(reference.start);
    }
    let (floor, limits) = reference.limits(model, &bounds, &checked);
    let mut npu = Interpreter::new(&run.device, &model.arch, &model.weights, *path);
    let mut decoder = NpuDecoder::new(&mut npu, plans);
    let (errors, state) = long::npu_errors(
        &mut decoder,
        reference,
        (&bounds, &lengths),
        checks,
        saved.as_ref(),
        model,
    )?;
    let prefilled_long = state.is_some();
    if let Some(state) = state {
        *run.loaded.long_state.borrow_mut() = Some((key, state));
    }
    let checked: Vec<String> = checked.iter().map(usize::to_string).collect();
    let conditions = BTreeMap::from([
        ("lengths".to_string(), Value::Text(checked.join(", "))),
        ("start".to_string(), Value::Int(reference.start as i64)),
        ("steps".to_string(), Value::Int(PROBE_STEPS as i64)),
    ]);
    let gate = |what: &str, metric: RuntimeMetric, worst: &Worst, limit: &DerivedLimit| {
        crate::exec::gates::verify::error_gate(&name(what), metric, worst, limit, &conditions)
    };
    let mut gates = Vec::new();
    if !checked.is_empty() {
        gates.push(gate(
            "long-prompt prefill logits",
            RuntimeMetric::LogitsMaxRel,
            &errors.prefill_logits,
            &limits.prefill_logits,
        ));
        gates.push(gate(
            "long-prompt prefill KV rows",
            RuntimeMetric::KvPrefillMaxRel,
            &errors.prefill_kv,
            &limits.prefill_kv,
        ));
    }
    if checks.decode {
        gates.push(gate(
            "long-context decode logits",
            RuntimeMetric::LogitsMaxRel,
            &errors.decode_logits,
            &limits.decode_logits,
        ));
        gates.push(gate(
            "long-context KV after decode",
            RuntimeMetric::KvDecodeMaxRel,
            &errors.decode_kv,
            &limits.decode_kv,
        ));
    }
    let resumed = match (checks.decode, saved.is_some()) {
        (true, true) => {
            " (decode resumed from the saved cache of this prefill path's long prefill)"
        }
        _ => "",
    };
    let measured: Vec<String> = long::summary(&errors, &limits)
        .into_iter()
        .filter(|(what, _)| gates.iter().any(|g| g.name.contains(what)))
        .map(|(what, line)| format!("{what} {line}"))
        .collect();
    let note = format!(
        "long-context probes on a synthetic prompt of {} tokens (the first prompt and its greedy continuation, repeated): prefill at length {} (K/V rows at both sides of each row boundary of the prefill plan: {}){}; {PROBE_STEPS} decode steps at positions {}..{}{resumed}; max|d|/max|ref|, limits from the bf16-storage oracle's floor on the same probe (worst: logits {}, KV {}): {}",
        reference.start,
        if checked.is_empty() { "-".to_string() } else { checked.join(", ") },
        bounds.iter().map(usize::to_string).collect::<Vec<_>>().join(", "),
        if prefilled_long || !lengths.is_empty() { "" } else { " (not run: the change leaves prefill's per-position work alone)" },
        reference.start,
        reference.start + PROBE_STEPS - 1,
        crate::exec::gates::gate::format_value(floor.decode_logits.value),
        crate::exec::gates::gate::format_value(floor.decode_kv.value),
        measured.join("; ")
    );
    Ok((gates, note))
}
