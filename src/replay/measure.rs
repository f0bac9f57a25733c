//! Recomputes one recorded metric on the emulator, from the result of the action
//! it measures, the deployment state at that action, and the observation's
//! conditions (`when call=o_ffn`, `when cell=B scope=layers`, `when context=512`).
//!
//! Conditions either select what to measure (`seq_len`, `context`, `call`, `host`,
//! `cell`, `scope`), restate the measured action (`kernel`, `shape`, `tile`, …, which
//! must then match it), or describe a circumstance the emulator does not model
//! (anything else, e.g. `platform_profile=balanced`): such an observation is
//! reported as outside the emulator, never compared.

use skillc_runtime::ops::Metric;
use skillc_runtime::xdna2::calibration::ablation_options;
use skillc_runtime::xdna2::cost::{self, StepTiming};
use skillc_runtime::xdna2::plan::{Phase, Plan, Step};

use super::emulator::{Built, Emulator};
use super::judge::Replayed;
use super::kernel::counted_flops;
use super::params::Params;
use super::state::State;
use super::ActionResult;

/// Condition keys that choose what is measured.
const SELECTORS: &[&str] = &["seq_len", "context", "call", "host", "cell", "scope"];
/// Condition keys that restate the measured action or the run.
const RESTATED: &[&str] = &[
    "kernel", "shape", "tile", "herd", "layout", "q_heads", "kv_heads", "rtol", "atol", "layer",
    "head_dim", "prompts", "tokens", "top_k", "against", "launches", "group", "model",
];

/// The first condition the emulator cannot reproduce, as a reason.
pub fn unmodeled_condition(conditions: Params<'_>) -> Option<String> {
    for key in conditions.keys() {
        let known = SELECTORS.contains(&key) || RESTATED.contains(&key);
        let text = conditions.text(key).unwrap_or_default();
        if !known {
            return Some(format!(
                "condition {key}={text} is not something the emulator models"
            ));
        }
        if key == "scope" && !matches!(text.as_str(), "layers" | "total") {
            return Some(format!(
                "condition scope={text} is not something the emulator models"
            ));
        }
    }
    None
}

/// Conditions that restate a parameter of the measured actions must equal it.
pub fn restatement_mismatch(conditions: Params<'_>, actions: &[Params<'_>]) -> Option<String> {
    for key in conditions.keys().filter(|k| RESTATED.contains(k)) {
        let stated = conditions.text(key)?;
        let written: Vec<String> = actions.iter().filter_map(|a| a.text(key)).collect();
        if !written.is_empty() && !written.contains(&stated) {
            return Some(format!(
                "condition {key}={stated} does not match the measured action ({})",
                written.join(", ")
            ));
        }
    }
    None
}

/// A metric of a kernel choice or validation.
pub fn kernel_metric(metric: Metric, result: &ActionResult, emu: &Emulator) -> Replayed {
    let ActionResult::Kernel(run) = result else {
        return Replayed::Problem(format!("{metric} needs a kernel action"));
    };
    let launch = match &run.launch {
        Ok(launch) => launch,
        Err(why) => return Replayed::Refused(why.to_string()),
    };
    let seconds = || cost::time_standalone(launch, &emu.device, &emu.params);
    match metric {
        Metric::KernelMs => Replayed::Value(seconds() * 1e3),
        Metric::Gflops => match counted_flops(launch) {
            Some(flops) => Replayed::Value(flops / seconds() / 1e9),
            None => {
                Replayed::Problem("GFLOP/s is counted for GEMM, GEMV and attention only".into())
            }
        },
        _ => match &run.check {
            None => Replayed::NotRun(run.not_run.clone()),
            Some(Err(why)) => Replayed::Refused(why.to_string()),
            Some(Ok(check)) => {
                let c = check.comparison;
                match metric {
                    Metric::Mismatches => Replayed::Value(c.mismatches as f64),
                    Metric::MaxAbs => Replayed::Value(c.max_abs),
                    Metric::MaxRel => Replayed::Value(c.max_rel),
                    Metric::MeanRelL1 => Replayed::Value(c.mean_rel_l1),
                    Metric::NanCount => Replayed::Value(c.non_finite as f64),
                    Metric::Cosine => Replayed::Value(check.cosine),
                    other => Replayed::Problem(format!("a kernel run has no {other}")),
                }
            }
        },
    }
}

/// A metric of a profiled plan (`profile-prefill`, `profile-decode`).
pub fn profile_metric(
    metric: Metric,
    phase: Phase,
    action: Params<'_>,
    conditions: Params<'_>,
    state: &State,
    emu: &mut Emulator,
) -> Replayed {
    let cell = conditions.word("cell");
    let options = match cell.and_then(|c| c.chars().next()) {
        Some(c) => ablation_options(c.to_ascii_lowercase()),
        None => state.options(phase),
    };
    let seq_len = match phase {
        Phase::Prefill => conditions
            .count("seq_len")
            .or_else(|| action.count("seq_len"))
            .unwrap_or(2048),
        Phase::Decode => conditions
            .count("context")
            .or_else(|| action.count("seq_len"))
            .unwrap_or(emu.decode_context),
    };
    let built = match emu.plan(phase, seq_len, &options) {
        Ok(built) => built,
        Err(e) => return Replayed::Outside(e.to_string()),
    };
    if !built.violations.is_empty() {
        return Replayed::Refused(join(&built.violations));
    }
    let merged = if cell.is_some() { None } else { Some(state) };
    plan_metric(metric, conditions, built, merged)
}

fn plan_metric(
    metric: Metric,
    conditions: Params<'_>,
    built: &Built,
    state: Option<&State>,
) -> Replayed {
    let t = &built.timing;
    let per_layer = conditions.word("scope") == Some("layers");
    let whole = if per_layer { t.layers_s() } else { t.total_s };
    match metric {
        Metric::PrefillS | Metric::TtftS => Replayed::Value(whole),
        Metric::MsPerToken => Replayed::Value(whole * 1e3),
        Metric::TokS => Replayed::Value(1.0 / whole),
        Metric::CallsPerLayer => Replayed::Value(match state {
            Some(state) => calls_per_layer(&built.plan, state) as f64,
            None => built.plan.calls_per_layer() as f64,
        }),
        Metric::KernelMs => match (conditions.word("call"), conditions.word("host")) {
            (Some(call), _) => call_seconds(t, call).map_or_else(
                || Replayed::Problem(format!("the plan has no call or group named {call}")),
                |s| Replayed::Value(s * 1e3),
            ),
            (None, Some(host)) => host_seconds(t, host).map_or_else(
                || Replayed::Problem(format!("the plan has no host step {host}")),
                |s| Replayed::Value(s * 1e3),
            ),
            (None, None) => Replayed::Problem("kernel_ms of a profile needs call= or host=".into()),
        },
        other => Replayed::Problem(format!("a profile does not produce {other}")),
    }
}

/// One execution of the calls named `name` or belonging to group `name`.
fn call_seconds(t: &cost::Timing, name: &str) -> Option<f64> {
    let matching: Vec<f64> = t
        .calls()
        .filter(|c| c.name == name || c.group == name)
        .map(|c| c.total_s)
        .collect();
    (!matching.is_empty()).then(|| matching.iter().sum())
}

/// One execution of the host steps `op`.
fn host_seconds(t: &cost::Timing, op: &str) -> Option<f64> {
    let matching: Vec<f64> = t
        .steps
        .iter()
        .filter_map(|s| match s {
            StepTiming::Host(h) if h.op == op => Some(h.seconds),
            _ => None,
        })
        .collect();
    (!matching.is_empty()).then(|| matching.iter().sum())
}

/// Calls per layer when only some groups are merged: consecutive calls of the
/// unmerged plan that belong to one merged group count once.
pub fn calls_per_layer(plan: &Plan, state: &State) -> usize {
    if plan.options.merge_launches {
        return plan.calls_per_layer();
    }
    let mut count = 0;
    let mut open: Option<&str> = None;
    for step in &plan.layer {
        match step {
            Step::Call(call) => {
                let merged = state.merged.contains(&call.group);
                if !(merged && open == Some(call.group.as_str())) {
                    count += 1;
                }
                open = merged.then_some(call.group.as_str());
            }
            Step::Host(_) => open = None,
        }
    }
    count
}

pub fn join(violations: &[skillc_runtime::xdna2::constraints::ConstraintViolation]) -> String {
    violations
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use skillc_runtime::model::config::load_config;
    use skillc_runtime::xdna2::builder::plan_for;
    use skillc_runtime::xdna2::device::Device;

    use super::*;
    use crate::replay::params::param_lists;

    fn prefill_plan(state: &State) -> Plan {
        let config = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/fixtures/llama32-tiny/config.json"
        );
        let arch = load_config(Path::new(config)).expect("fixture config");
        let options = state.options(Phase::Prefill);
        plan_for(
            "tiny",
            &arch,
            &Device::npu2(),
            Phase::Prefill,
            256,
            &options,
        )
        .expect("plan")
    }

    #[test]
    fn a_partial_merge_counts_its_group_once() {
        let mut state = State::initial();
        assert_eq!(calls_per_layer(&prefill_plan(&state), &state), 15);
        state.merged.insert("rms_gemms_rope".into());
        assert_eq!(calls_per_layer(&prefill_plan(&state), &state), 10);
        state.merged.insert("o_ffn".into());
        let plan = prefill_plan(&state);
        assert!(plan.options.merge_launches);
        assert_eq!(calls_per_layer(&plan, &state), 3);
    }

    #[test]
    fn unknown_conditions_are_outside_the_emulator() {
        let lists = param_lists(
            "x1 observe kernel_ms = 1 ms when call=o_ffn platform_profile=balanced\n\
             x2 observe prefill_s = 1 s when seq_len=2048 scope=layers\n\
             x3 observe prefill_s = 1 s when scope=host-python\n",
        );
        let reason = unmodeled_condition(Params(&lists[0])).expect("outside");
        assert!(reason.contains("platform_profile=balanced"), "{reason}");
        assert_eq!(unmodeled_condition(Params(&lists[1])), None);
        assert!(unmodeled_condition(Params(&lists[2])).is_some());
    }

    #[test]
    fn a_restated_parameter_must_match_the_measured_action() {
        let lists = param_lists(
            "a1 action validate-kernel kernel=gemm shape=[64,64,64]\n\
             a2 action validate-kernel kernel=gemm shape=[32,64,64]\n\
             x1 observe mismatches = 0 == 0 when kernel=gemm shape=[64,64,64]\n",
        );
        let conditions = Params(&lists[2]);
        assert_eq!(restatement_mismatch(conditions, &[Params(&lists[0])]), None);
        let reason = restatement_mismatch(conditions, &[Params(&lists[1])]).expect("mismatch");
        assert!(reason.contains("shape=[64,64,64]"), "{reason}");
    }
}
