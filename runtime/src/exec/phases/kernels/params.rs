//! Phase 1's parameter checks: the numbers the plans carry beside their kernel
//! configurations, read back from the plans (and the RoPE tables the NPU path
//! builds for them) and compared with what the model's config says, computed
//! here from the config and not from the plan: the norms' epsilon, the RoPE
//! frequencies (base and scaling, against the CPU reference's own formulas),
//! the attention softmax scale (`query_pre_attn_scalar`, else the real
//! head_dim), which projection feeds the gated MLP's gate and up operands, and
//! a final norm in front of the LM head. The kernel checks cannot see these:
//! the harness computes each kernel's reference with the launch's own epsilon,
//! scale and operands, so a wrong one agrees with itself there.

use std::collections::BTreeMap;

use crate::bundle::{Comparison, Value};
use crate::exec::design::Plans;
use crate::exec::gates::gate::{format_value, GateCheck, ThresholdSource};
use crate::exec::run::Run;
use crate::model::arch::{Architecture, RopeScaling};
use crate::model::oracle::blocks;
use crate::ops::{Metric, OpKind};
use crate::xdna2::interpreter::{path_table_frequencies, NpuPath};
use crate::xdna2::plan::{HostOp, Launch, Plan, Step, WeightSource};

/// Relative deviation a plan's epsilon and scale may have from the config's:
/// both are copied or computed once in f32 (a scale's rounding is below
/// 1e-7), so anything larger is a different number.
const EXACT: f64 = 1e-6;
/// Relative deviation the RoPE frequencies may have: the NPU side computes
/// them in f64 rounded once, the reference in f32 (`powf` per frequency), a
/// few f32 roundings apart.
const ROPE: f64 = 1e-4;

/// The parameter gates of `plans`, with the RoPE tables `path` builds.
pub(super) fn parameter_gates(run: &Run<'_>, plans: &Plans) -> Vec<GateCheck> {
    let arch = &run.loaded.model.arch;
    let both = [&plans.prefill, &plans.decode];
    let mut gates = vec![eps_gate(arch, &both), scale_gate(arch, &both)];
    gates.extend(rope_gates(arch, &run.design.path));
    gates.push(wiring_gate(&both));
    gates.push(final_norm_gate(&both));
    gates
}

/// A failed parameter gate in words: the parameter, the plans' value and the
/// config's (the stop's reason).
pub(super) fn mismatch(gate: &GateCheck) -> String {
    let words = |key: &str| {
        gate.conditions.get(key).map(|v| match v {
            Value::Float(x) => format_value(*x),
            Value::Int(n) => n.to_string(),
            Value::Text(t) => t.clone(),
            other => format!("{other:?}"),
        })
    };
    let plan = words("plan").or_else(|| words("plan_base").map(|b| format!("base {b}")));
    let config = words("config").or_else(|| words("config_base").map(|b| format!("base {b}")));
    match (plan, config, words("first")) {
        (Some(plan), Some(config), _) => format!(
            "{}: the plans hold {plan}, the model's config gives {config}",
            gate.name
        ),
        (_, _, Some(first)) => format!("{}: {first}", gate.name),
        _ => format!("{}: {}", gate.name, gate.summary()),
    }
}

/// `|plan − config| / |config|`.
fn relative(plan: f64, config: f64) -> f64 {
    match config == 0.0 {
        true => (plan - config).abs(),
        false => ((plan - config) / config).abs(),
    }
}

/// A gate on one parameter: the plan's value furthest from the config's.
fn deviation_gate(
    param: &str,
    values: &[f64],
    config: f64,
    tolerance: f64,
    rule: &str,
) -> GateCheck {
    let plan = values
        .iter()
        .copied()
        .max_by(|a, b| relative(*a, config).total_cmp(&relative(*b, config)))
        .unwrap_or(config);
    GateCheck::named(format!("param {param}"), OpKind::EnumerateKernels)
        .measures(Metric::MaxRel, relative(plan, config))
        .when(BTreeMap::from([
            ("plan".to_string(), Value::Float(plan)),
            ("config".to_string(), Value::Float(config)),
            ("sites".to_string(), Value::Int(values.len() as i64)),
        ]))
        .against(Comparison::Le, tolerance, ThresholdSource::rule(rule))
}

fn steps(plan: &Plan) -> impl Iterator<Item = &Step> {
    plan.prologue
        .iter()
        .chain(&plan.layer)
        .chain(&plan.epilogue)
}

fn launches(plan: &Plan) -> impl Iterator<Item = &Launch> {
    steps(plan).flat_map(|s| match s {
        Step::Call(c) => c.launches.iter().collect::<Vec<_>>(),
        Step::Host(_) => Vec::new(),
    })
}

fn host_ops(plan: &Plan) -> impl Iterator<Item = &HostOp> {
    steps(plan).filter_map(|s| match s {
        Step::Host(op) => Some(op),
        Step::Call(_) => None,
    })
}

/// Every norm's epsilon against the config's `rms_norm_eps` (LayerNorm
/// families: `layer_norm_eps`, read into the same field).
fn eps_gate(arch: &Architecture, plans: &[&Plan]) -> GateCheck {
    let mut values = Vec::new();
    for plan in plans {
        for launch in launches(plan) {
            if let Launch::Rmsnorm { eps, .. }
            | Launch::Layernorm { eps, .. }
            | Launch::QkRmsnorm { eps, .. }
            | Launch::GemvSwiglu { eps, .. } = launch
            {
                values.push(*eps);
            }
        }
        for op in host_ops(plan) {
            if let HostOp::RmsNorm { eps, .. } | HostOp::LayerNorm { eps, .. } = op {
                values.push(*eps);
            }
        }
    }
    deviation_gate(
        "rms_norm_eps",
        &values,
        arch.rms_norm_eps,
        EXACT,
        "every norm of the plans runs with the config's epsilon",
    )
}

/// Every attention's score scale against `query_pre_attn_scalar^-1/2`, else
/// the config's head_dim^-1/2 (in f64 from the config).
fn scale_gate(arch: &Architecture, plans: &[&Plan]) -> GateCheck {
    let config = arch
        .query_pre_attn_scalar
        .unwrap_or(arch.head_dim as f64)
        .powf(-0.5);
    let scale = |dim: Option<usize>, head_dim: usize| {
        1.0 / f64::from(dim.unwrap_or(head_dim) as f32).sqrt()
    };
    let mut values = Vec::new();
    for plan in plans {
        for launch in launches(plan) {
            match launch {
                Launch::FlashAttention { spec, .. } => {
                    values.push(f64::from(spec.score_scale()));
                }
                Launch::DecodeAttention { spec, .. } => {
                    values.push(scale(spec.scale_dim, spec.head_dim));
                }
                _ => {}
            }
        }
        for op in host_ops(plan) {
            if let HostOp::DecodeAttention {
                scale_dim,
                head_dim,
                ..
            } = op
            {
                values.push(scale(*scale_dim, *head_dim));
            }
        }
    }
    deviation_gate(
        "attention scale",
        &values,
        config,
        EXACT,
        "every attention scales its scores by query_pre_attn_scalar^-1/2, else the config's head_dim^-1/2",
    )
}

/// The base a table's frequencies imply: its second frequency is
/// `base^(-2/d)` (llama3 scaling keeps the high frequencies as they are).
fn implied_base(freqs: &[f32]) -> f64 {
    let d = 2.0 * freqs.len() as f64;
    freqs
        .get(1)
        .map_or(f64::NAN, |&f| f64::from(f).powf(-d / 2.0))
}

/// The RoPE tables the NPU path builds (global, and the local one of a model
/// with a local base) against the reference's frequencies from the config.
fn rope_gates(arch: &Architecture, path: &NpuPath) -> Vec<GateCheck> {
    let mut tables = vec![(
        false,
        blocks::inv_freq(arch),
        arch.rope_theta,
        &arch.rope_scaling,
    )];
    if let Some(local) = &arch.local_rope {
        let freqs = blocks::rope_inv_freq(local, arch.rotary_dim());
        tables.push((true, freqs, local.theta, &local.scaling));
    }
    tables
        .into_iter()
        .map(|(local, config, base, scaling)| {
            let plan = path_table_frequencies(arch, path, local);
            let worst = plan
                .iter()
                .zip(&config)
                .map(|(&p, &c)| relative(f64::from(p), f64::from(c)))
                .fold(
                    if plan.len() == config.len() { 0.0 } else { f64::INFINITY },
                    f64::max,
                );
            let name = match local {
                true => "param rope frequencies (local base)",
                false => "param rope frequencies",
            };
            GateCheck::named(name, OpKind::EnumerateKernels)
                .measures(Metric::MaxRel, worst)
                .when(BTreeMap::from([
                    ("plan_base".to_string(), Value::Float(implied_base(&plan))),
                    ("config_base".to_string(), Value::Float(base)),
                    ("scaling".to_string(), Value::Text(scaling_name(scaling).into())),
                ]))
                .against(
                    Comparison::Le,
                    ROPE,
                    ThresholdSource::rule("the NPU path's RoPE table holds the frequencies the config's base and scaling give (the reference's formulas)"),
                )
        })
        .collect()
}

fn scaling_name(scaling: &RopeScaling) -> &'static str {
    match scaling {
        RopeScaling::Default => "none",
        RopeScaling::Linear { .. } => "linear",
        RopeScaling::Llama3 { .. } => "llama3",
    }
}

/// The checkpoint tensor a buffer of `plan` is filled from.
fn tensor_of<'p>(plan: &'p Plan, buffer: &str) -> Option<&'p str> {
    match plan.buffers.get(buffer)?.source.as_ref()? {
        WeightSource::Tensor { name, .. } => Some(name.as_str()),
        _ => None,
    }
}

/// Which projection a tensor name is: `gate`, `up` or neither.
fn projection(tensor: &str) -> Option<&'static str> {
    if tensor.contains("mlp.gate_proj") {
        Some("gate")
    } else if tensor.contains("mlp.up_proj") {
        Some("up")
    } else {
        None
    }
}

/// The gated MLP's operands traced to the projections that produce them: the
/// gate operand must come from `mlp.gate_proj`, the up operand from
/// `mlp.up_proj`, in every launch and host op of both plans.
fn wiring_gate(plans: &[&Plan]) -> GateCheck {
    let (mut checked, mut miswired) = (0usize, Vec::new());
    for plan in plans {
        // Each activation buffer and the projection whose GEMM or GEMV writes it.
        let mut producer: BTreeMap<&str, &'static str> = BTreeMap::new();
        for launch in launches(plan) {
            let (weights, out): (Vec<&str>, &str) = match launch {
                Launch::Gemm { a, b, out, .. } => (vec![a.as_str(), b.as_str()], out.as_str()),
                Launch::Gemv { w, out, .. } => (vec![w.as_str()], out.as_str()),
                _ => continue,
            };
            if let Some(p) = weights
                .into_iter()
                .find_map(|w| tensor_of(plan, w).and_then(projection))
            {
                producer.insert(out, p);
            }
        }
        for op in host_ops(plan) {
            if let HostOp::Matvec { w, out, .. } = op {
                if let Some(p) = tensor_of(plan, w).and_then(projection) {
                    producer.insert(out.as_str(), p);
                }
            }
        }
        let mut check = |gate: &str, up: &str, direct: bool| {
            let of = |b: &str| match direct {
                true => tensor_of(plan, b).and_then(projection),
                false => producer.get(b).copied(),
            };
            for (operand, expected) in [(gate, "gate"), (up, "up")] {
                match of(operand) {
                    Some(found) if found == expected => checked += 1,
                    Some(found) => {
                        checked += 1;
                        miswired.push(format!(
                            "{:?} {expected} operand `{operand}` reads mlp.{found}_proj",
                            plan.phase
                        ));
                    }
                    None => {}
                }
            }
        };
        for launch in launches(plan) {
            match launch {
                Launch::SiluMul { gate, up, .. } | Launch::GeluMul { gate, up, .. } => {
                    check(gate, up, false)
                }
                Launch::GemvSwiglu { gate, up, .. } => check(gate, up, true),
                _ => {}
            }
        }
        for op in host_ops(plan) {
            if let HostOp::SiluMul { gate, up, .. } = op {
                check(gate, up, false);
            }
        }
    }
    let mut conditions = BTreeMap::from([("operands".to_string(), Value::Int(checked as i64))]);
    if let Some(first) = miswired.first() {
        conditions.insert("first".to_string(), Value::Text(first.clone()));
    }
    // An MLP whose operands cannot be traced at all is not checked: that counts.
    let failures = if checked == 0 { 1 } else { miswired.len() };
    GateCheck::named("param gate/up wiring", OpKind::EnumerateKernels)
        .measures(Metric::Mismatches, failures as f64)
        .when(conditions)
        .must_be_zero("the gated MLP's gate operand comes from mlp.gate_proj and its up operand from mlp.up_proj (traced through the plans)")
}

/// Each plan's epilogue normalises the last hidden state before the LM head.
fn final_norm_gate(plans: &[&Plan]) -> GateCheck {
    let missing = plans
        .iter()
        .filter(|plan| {
            let launched = plan.epilogue.iter().any(|s| match s {
                Step::Call(c) => c
                    .launches
                    .iter()
                    .any(|l| matches!(l, Launch::Rmsnorm { .. } | Launch::Layernorm { .. })),
                Step::Host(op) => matches!(op, HostOp::RmsNorm { .. } | HostOp::LayerNorm { .. }),
            });
            !launched
        })
        .count();
    GateCheck::named("param final norm", OpKind::EnumerateKernels)
        .measures(Metric::Mismatches, missing as f64)
        .must_be_zero("both plans normalise the last hidden state (the config's final norm) before the LM head")
}
