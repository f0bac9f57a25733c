//! What the observations of a trajectory say: each phase's exit gates (per key, the
//! strictest check that passed on the effective path), its performance targets (the
//! last figure per metric and conditions), and the checks that failed after an
//! abandoned action, as text and as a machine-matchable symptom.

use std::collections::BTreeMap;

use petgraph::graph::NodeIndex;
use skillc_runtime::bundle::{Baseline, Comparison, Provenance, Symptom, Value};
use skillc_runtime::ops::{Metric, OpKind};
use skillc_runtime::phase::DeployPhase;

use super::ir::{CheckIr, DeadEndOutcome, FigureSource, GateIr, PredicateIr, TargetIr};
use super::path::{action, observation, Cx, Fate};
use super::{catalog, skills, values, IDENTITY_PARAMS};
use crate::graph::{ActionData, EdgeKind, Node, ObservationData};
use crate::syntax::{self, CmpOp, Measurement, Verdict};

/// Conditions of an observation: the measured action's identity parameters, then
/// the observation's own `when` conditions.
fn conditions(
    cx: &Cx,
    data: &ObservationData,
    measured: Option<NodeIndex>,
) -> BTreeMap<String, Value> {
    let mut conditions = BTreeMap::new();
    if let Some(act) = measured.and_then(|a| action(cx.g.node(a))) {
        for p in act
            .params
            .iter()
            .filter(|p| IDENTITY_PARAMS.contains(&p.key.text.as_str()))
        {
            conditions.insert(p.key.text.clone(), values::value(&p.value));
        }
    }
    conditions.extend(values::params(&data.conditions));
    conditions
}

fn op_of(cx: &Cx, measured: Option<NodeIndex>) -> Option<OpKind> {
    measured.and_then(|a| action(cx.g.node(a))).map(|a| a.op)
}

fn figure_source(data: &ObservationData) -> FigureSource {
    match data.provenance {
        syntax::Provenance::Measured => FigureSource::Measured,
        syntax::Provenance::Modeled => FigureSource::Modeled,
    }
}

/// Observations on the effective path of a phase, with the step they measure.
fn path_observations<'a>(
    cx: &'a Cx,
    phase: DeployPhase,
) -> impl Iterator<Item = (&'a Node, &'a ObservationData, Option<NodeIndex>)> + 'a {
    cx.observations(phase).iter().filter_map(move |&index| {
        let measured = cx.on_path(index)?;
        let node = cx.g.node(index);
        Some((node, observation(node)?, measured))
    })
}

/// Which way a comparison bounds a value; gates of one kind bound in one direction.
fn direction(c: Comparison) -> i8 {
    match c {
        Comparison::Ge | Comparison::Gt => 1,
        Comparison::Le | Comparison::Lt => -1,
        Comparison::Eq => 0,
    }
}

/// Whether check `a` is at least as strict as check `b` (same metric, same
/// direction; thresholds in canonical units).
pub fn at_least_as_strict(a: (Comparison, f64), b: (Comparison, f64)) -> bool {
    let strict = |c: Comparison| matches!(c, Comparison::Gt | Comparison::Lt);
    match direction(a.0) {
        1 => a.1 > b.1 || (a.1 == b.1 && (strict(a.0) || !strict(b.0))),
        -1 => a.1 < b.1 || (a.1 == b.1 && (strict(a.0) || !strict(b.0))),
        _ => true,
    }
}

/// The key gates are merged and compared under: operation, metric, kernel and
/// direction. Shapes are left out so a gate carries over to a new model's shapes.
pub fn gate_key(g: &GateIr) -> (Option<OpKind>, Metric, Option<String>, i8) {
    let kernel = g.conditions.get("kernel").map(values::key_text);
    (g.op, g.metric, kernel, direction(g.comparison))
}

/// Whether `gate` is one of the phase's exit criteria (see
/// [`catalog::PhaseSpec::exit_criteria`]) and measured on the whole model, not in
/// one cell of an ablation.
fn decides_the_phase(phase: DeployPhase, gate: &GateIr) -> bool {
    let criterion = catalog::phase(phase)
        .exit_criteria
        .iter()
        .any(|(op, metric)| gate.op == Some(*op) && gate.metric == *metric);
    criterion && !gate.conditions.contains_key("cell")
}

/// Per key, the strictest check that passed on the effective path of the phase
/// among its exit criteria; among equally strict ones the latest. A kernel gate
/// becomes a rule over its kernel class (see [`as_kernel_rule`]).
pub fn gates(cx: &Cx, phase: DeployPhase) -> Vec<GateIr> {
    let mut best: BTreeMap<_, (f64, GateIr)> = BTreeMap::new();
    let mut evidence: BTreeMap<_, Vec<(Provenance, FigureSource)>> = BTreeMap::new();
    for (node, data, measured) in path_observations(cx, phase) {
        if data.outcome() != Some(Verdict::Pass) {
            continue;
        }
        for m in &data.measurements {
            let Some((threshold, gate)) = gate_from(cx, node, data, measured, m) else {
                continue;
            };
            if !decides_the_phase(phase, &gate) {
                continue;
            }
            let key = gate_key(&gate);
            evidence.entry(key.clone()).or_default().extend(
                gate.provenance
                    .iter()
                    .map(|p| (p.clone(), gate.recorded_source)),
            );
            let replace = best.get(&key).is_none_or(|(current, existing)| {
                at_least_as_strict(
                    (gate.comparison, threshold),
                    (existing.comparison, *current),
                )
            });
            if replace {
                best.insert(key, (threshold, gate));
            }
        }
    }
    best.into_iter()
        .map(|(key, (_, gate))| match evidence.remove(&key) {
            Some(all) if gate.op == Some(OpKind::ValidateKernel) => as_kernel_rule(gate, all),
            _ => gate,
        })
        .collect()
}

/// A kernel's exit gate holds at every call site of its kernel class that the model
/// needs, not at the shapes one model happened to have: the recorded shapes, tiles
/// and head counts leave the gate's conditions (only `kernel` stays) and every
/// passing validation of that class becomes its evidence, measured if any was.
fn as_kernel_rule(mut gate: GateIr, evidence: Vec<(Provenance, FigureSource)>) -> GateIr {
    gate.conditions.retain(|key, _| key == "kernel");
    if evidence.iter().any(|(_, s)| *s == FigureSource::Measured) {
        gate.recorded_source = FigureSource::Measured;
    }
    let mut cited: Vec<Provenance> = evidence.into_iter().map(|(p, _)| p).collect();
    cited.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    cited.dedup();
    gate.provenance = cited;
    gate
}

/// A gate from one thresholded measurement, with its threshold in canonical units.
fn gate_from(
    cx: &Cx,
    node: &Node,
    data: &ObservationData,
    measured: Option<NodeIndex>,
    m: &Measurement,
) -> Option<(f64, GateIr)> {
    let threshold = m.threshold.as_ref()?;
    let comparison = values::comparison(threshold.op)?;
    let metric = Metric::named(&m.metric.text)?;
    let baseline = if skills::is_performance_metric(metric) {
        Baseline::PreviousPhase
    } else {
        Baseline::Absolute
    };
    // Gates hold canonical units, which is what the executor measures in.
    let canonical = values::canonical(metric, &threshold.value);
    Some((
        canonical,
        GateIr {
            recorded: Some(values::canonical(metric, &m.value)),
            threshold: canonical,
            unit: metric.canonical_unit(),
            metric,
            comparison,
            baseline,
            op: op_of(cx, measured),
            conditions: conditions(cx, data, measured),
            recorded_source: figure_source(data),
            provenance: vec![cx.provenance(node)],
        },
    ))
}

/// Performance figures at the end of the phase: per metric, operation and
/// conditions, the last value recorded on the effective path.
pub fn targets(cx: &Cx, phase: DeployPhase, model: &str) -> Vec<TargetIr> {
    let mut last: BTreeMap<(Metric, Option<OpKind>, String), TargetIr> = BTreeMap::new();
    for (node, data, measured) in path_observations(cx, phase) {
        for m in &data.measurements {
            let Some(metric) =
                Metric::named(&m.metric.text).filter(|m| skills::is_performance_metric(*m))
            else {
                continue;
            };
            let mut conditions = conditions(cx, data, measured);
            if let Some(act) = measured.and_then(|a| action(cx.g.node(a))) {
                for (k, v) in values::params(&act.params) {
                    conditions.entry(k).or_insert(v);
                }
            }
            if !model.is_empty() {
                conditions.insert("model".to_string(), Value::Text(model.to_string()));
            }
            let key = (metric, op_of(cx, measured), values::params_key(&conditions));
            last.insert(
                key,
                TargetIr {
                    metric,
                    value: values::number(&m.value),
                    unit: values::unit_of(metric, &m.value),
                    conditions,
                    source: figure_source(data),
                    provenance: vec![cx.provenance(node)],
                },
            );
        }
    }
    last.into_values().collect()
}

/// The failed observations that tell against an action: its own, or, for an action
/// a later fix replaced without it being measured itself, those that fix repairs.
fn failed_observations<'a>(
    cx: &Cx<'a>,
    action: NodeIndex,
) -> Vec<(NodeIndex, &'a ObservationData)> {
    let g = cx.g;
    let failed = |observations: Vec<NodeIndex>| -> Vec<(NodeIndex, &'a ObservationData)> {
        observations
            .into_iter()
            .filter_map(|o| {
                let data = observation(g.node(o))?;
                (data.outcome() == Some(Verdict::Fail)).then_some((o, data))
            })
            .collect()
    };
    let own = failed(g.observations_of(action));
    match cx.fate(action) {
        Fate::Dead(DeadEndOutcome::Superseded { by }) if own.is_empty() => g
            .find(by)
            .map_or_else(Vec::new, |fixer| failed(g.targets(fixer, EdgeKind::Fixes))),
        _ => own,
    }
}

/// The failed observations that tell against an action (see [`failed_observations`]).
pub fn failed(cx: &Cx, action: NodeIndex) -> Vec<NodeIndex> {
    failed_observations(cx, action)
        .into_iter()
        .map(|(o, _)| o)
        .collect()
}

/// Those failed observations as checks: the violated measurements (or all of them),
/// or the label when there is no measurement.
pub fn failed_checks(cx: &Cx, action: NodeIndex) -> Vec<CheckIr> {
    failed_observations(cx, action)
        .into_iter()
        .map(|(o, data)| failed_check(&cx.qualify(&cx.g.node(o).id), data))
        .collect()
}

fn violated(m: &Measurement) -> Option<(CmpOp, f64, f64)> {
    let t = m.threshold.as_ref()?;
    let metric = Metric::named(&m.metric.text)?;
    let value = values::canonical(metric, &m.value);
    let limit = values::canonical(metric, &t.value);
    (!t.op.holds(value, limit)).then_some((t.op, limit, value))
}

fn failed_check(entry: &str, data: &ObservationData) -> CheckIr {
    let violations: Vec<&Measurement> = data
        .measurements
        .iter()
        .filter(|m| violated(m).is_some())
        .collect();
    let shown: Vec<&Measurement> = if violations.is_empty() {
        data.measurements.iter().collect()
    } else {
        violations
    };
    CheckIr {
        entry: entry.to_string(),
        measurements: shown.iter().filter_map(|m| measurement(m)).collect(),
        label: data.label.clone().unwrap_or_default(),
    }
}

/// A measurement as written: the value, and the threshold it was held to (a graph
/// without errors knows every metric).
fn measurement(m: &Measurement) -> Option<(PredicateIr, Option<PredicateIr>)> {
    let metric = Metric::named(&m.metric.text)?;
    let predicate = |cmp: CmpOp, q: &syntax::Quantity| PredicateIr {
        metric,
        cmp,
        value: values::number(q),
        unit: values::unit(q),
    };
    Some((
        predicate(CmpOp::Eq, &m.value),
        m.threshold.as_ref().map(|t| predicate(t.op, &t.value)),
    ))
}

/// The first failed check of an abandoned action as a symptom: the action's
/// operation (and kernel) failing with the comparison that held instead of the
/// threshold.
pub fn dead_end_symptom(cx: &Cx, index: NodeIndex, data: &ActionData) -> Option<Symptom> {
    failed_observations(cx, index)
        .into_iter()
        .flat_map(|(_, d)| d.measurements.iter())
        .find_map(|m| {
            let (op, limit, value) = violated(m)?;
            let (comparison, limit) = negate(op, limit, value);
            Some(Symptom {
                op: Some(data.op),
                params: kernel_only(&values::params(&data.params)),
                metric: Metric::named(&m.metric.text),
                comparison: Some(comparison),
                value: Some(limit),
                text: String::new(),
            })
        })
}

pub fn kernel_only(params: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    params
        .iter()
        .filter(|(k, _)| k.as_str() == "kernel")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The comparison that held instead of `op limit` when `value` failed it.
fn negate(op: CmpOp, limit: f64, value: f64) -> (Comparison, f64) {
    match op {
        CmpOp::Ge => (Comparison::Lt, limit),
        CmpOp::Gt => (Comparison::Le, limit),
        CmpOp::Le => (Comparison::Gt, limit),
        CmpOp::Lt => (Comparison::Ge, limit),
        CmpOp::Eq if value > limit => (Comparison::Gt, limit),
        CmpOp::Eq => (Comparison::Lt, limit),
        CmpOp::Ne => (Comparison::Eq, limit),
    }
}
