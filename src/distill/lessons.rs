//! Lessons of one trajectory: recorded `lesson` entries lowered to symptom → cause
//! → executable fix (and the fix in words) with their evidence and the steps that
//! applied them; and lessons distilled from a dead end that a later action replaced
//! without any recorded lesson explaining why ("tried X; it failed with Y; Z
//! replaced it"). Steps and dead ends are linked to a lesson only through recorded
//! edges: `fixes … by`, `evidence`, `supersedes`.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::NodeIndex;
use skillc_runtime::bundle::{Comparison, Expr, LessonKind, Provenance, Remedy, Symptom, Value};
use skillc_runtime::ops::{Better, Metric, OpKind};
use skillc_runtime::phase::DeployPhase;

use super::ir::{DeadEndIr, DeadEndOutcome, LessonIr, LessonOrigin, PredicateIr, SymptomIr};
use super::observed;
use super::path::{action, Cx};
use super::{skills, values};
use crate::diag::{Code, Diagnostic};
use crate::graph::{EdgeKind, LessonData, Node};
use crate::syntax::{self, EntryKind};

fn kind_of(metrics: impl IntoIterator<Item = Metric>) -> LessonKind {
    if metrics.into_iter().any(skills::is_performance_metric) {
        LessonKind::Optimization
    } else {
        LessonKind::Debugging
    }
}

fn lowered_remedies(
    node: &Node,
    data: &LessonData,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Remedy> {
    let mut remedies = Vec::new();
    for fix in &data.remedies {
        let (remedy, problems) = values::remedy(fix);
        for problem in problems {
            diagnostics.push(
                Diagnostic::new(
                    Code::UnloweredFix,
                    fix.span,
                    format!(
                        "`{}` of lesson `{}` cannot go into bundle.json: {}",
                        problem.key, node.id, problem.reason
                    ),
                )
                .with_hint("the SKILL.md keeps the fix as written; the runtime will not apply this assignment"),
            );
        }
        remedies.push(remedy);
    }
    remedies
}

/// The actions that applied a lesson (`fixes … by <lesson>`).
pub fn appliers(cx: &Cx, lesson: NodeIndex) -> Vec<NodeIndex> {
    cx.g.sources(lesson, EdgeKind::By)
        .into_iter()
        .filter(|a| cx.g.node(*a).kind == EntryKind::Action)
        .collect()
}

/// A recorded lesson; `None` when it has no fix (a front-end error).
pub fn recorded(
    cx: &Cx,
    index: NodeIndex,
    data: &LessonData,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<LessonIr> {
    let g = cx.g;
    let node = g.node(index);
    let mut remedies = lowered_remedies(node, data, diagnostics).into_iter();
    let fix = remedies.next()?;
    let conditions = values::params(&data.conditions);
    let machine = machine_symptom(data.symptom.as_ref(), &conditions);
    let kind = kind_of(data.symptom.iter().flat_map(|s| {
        s.predicates
            .iter()
            .filter_map(|p| Metric::named(&p.metric.text))
    }));
    let appliers = appliers(cx, index);
    let guarded: BTreeSet<NodeIndex> = appliers.iter().filter_map(|a| cx.replacement(*a)).collect();
    let mut phases: BTreeSet<DeployPhase> =
        guarded.iter().filter_map(|a| g.node(*a).phase).collect();
    phases.extend(node.phase);
    let evidence: Vec<Provenance> = g
        .targets(index, EdgeKind::Evidence)
        .into_iter()
        .map(|e| cx.provenance(g.node(e)))
        .collect();
    let (cause, cause_condition) = match &data.cause {
        Some(c) => (
            c.text.as_ref().map(|t| t.text.clone()).unwrap_or_default(),
            c.condition.clone(),
        ),
        None => (String::new(), None),
    };
    Some(LessonIr {
        id: cx.qualify(&node.id),
        kind,
        origin: LessonOrigin::Recorded,
        title: data.title.clone(),
        symptom: whole_symptom(data.symptom.as_ref(), &machine),
        skill: g
            .skill_of(index)
            .map(|s| s.name.clone())
            .unwrap_or_else(|| skills::lesson_skill(kind, &machine, fix.op)),
        machine,
        cause,
        cause_condition,
        fix,
        then: remedies.collect(),
        fix_text: data
            .remedies
            .iter()
            .filter_map(|r| r.text.clone())
            .collect(),
        applied_by: appliers.iter().map(|a| applier_id(cx, *a)).collect(),
        diagnosis: Vec::new(),
        notes: Vec::new(),
        phases: phases.into_iter().collect(),
        guards: guarded.iter().filter_map(|a| cx.step_id(*a)).collect(),
        weights: g.weights_if_dependent(index),
        condition: data
            .condition
            .as_ref()
            .and_then(|c| values::condition(c).ok()),
        deployments: vec![cx.trajectory().to_string()],
        alternatives: Vec::new(),
        evidence_count: u32::try_from(evidence.len()).unwrap_or(u32::MAX),
        evidence,
        provenance: vec![cx.provenance(node)],
        span: node.span,
    })
}

/// A step id for an applier on the path, else its entry id.
fn applier_id(cx: &Cx, action: NodeIndex) -> String {
    match cx.step_id(action).filter(|_| cx.is_step(action)) {
        Some(id) => id,
        None => cx.qualify(&cx.g.node(action).id),
    }
}

/// Whether a predicate describes a metric on its bad side (`cosine < 0.99`,
/// `mismatches > 0`) rather than a condition that still holds (`cosine >= 0.99`).
fn describes_failure(metric: Metric, comparison: Comparison) -> bool {
    let lower_is_worse = matches!(comparison, Comparison::Lt | Comparison::Le);
    match metric.spec().better {
        Better::Higher => lower_is_worse,
        Better::Lower => !lower_is_worse && comparison != Comparison::Eq,
    }
}

/// The machine-matchable symptom: failing operation, the lesson's conditions as
/// parameters, and one predicate (in the metric's canonical unit): the first that
/// describes the failure, else the first. The bundle holds one predicate; the
/// SKILL.md shows them all.
fn machine_symptom(s: Option<&syntax::Symptom>, conditions: &BTreeMap<String, Value>) -> Symptom {
    let predicates: Vec<_> = s
        .iter()
        .flat_map(|s| s.predicates.iter())
        .filter_map(|p| Some((p, Metric::named(&p.metric.text)?, values::comparison(p.op)?)))
        .collect();
    let first = predicates
        .iter()
        .find(|(_, metric, c)| describes_failure(*metric, *c))
        .or(predicates.first())
        .copied();
    Symptom {
        op: s
            .and_then(|s| s.failing_op.as_ref())
            .and_then(|n| n.text.parse().ok()),
        params: conditions.clone(),
        metric: first.map(|(_, metric, _)| metric),
        comparison: first.map(|(_, _, c)| c),
        value: first.map(|(p, metric, _)| values::canonical(metric, &p.value)),
        text: s
            .and_then(|s| s.text.as_ref())
            .map(|t| t.text.clone())
            .unwrap_or_default(),
    }
}

/// Every predicate of the symptom, as written.
fn whole_symptom(s: Option<&syntax::Symptom>, machine: &Symptom) -> SymptomIr {
    SymptomIr {
        text: machine.text.clone(),
        op: machine.op,
        params: machine.params.clone(),
        predicates: s
            .iter()
            .flat_map(|s| s.predicates.iter())
            .filter_map(|p| {
                Some(PredicateIr {
                    metric: Metric::named(&p.metric.text)?,
                    cmp: p.op,
                    value: values::number(&p.value),
                    unit: values::unit(&p.value),
                })
            })
            .collect(),
    }
}

/// The symptom of a distilled lesson: its one machine predicate.
fn machine_only(machine: &Symptom) -> SymptomIr {
    SymptomIr {
        text: machine.text.clone(),
        op: machine.op,
        params: machine.params.clone(),
        predicates: machine
            .metric
            .iter()
            .zip(machine.comparison)
            .zip(machine.value)
            .map(|((metric, cmp), value)| PredicateIr {
                metric: *metric,
                cmp: values::cmp_op(cmp),
                value,
                unit: metric.canonical_unit(),
            })
            .collect(),
    }
}

/// A lesson distilled from a dead end that a later action replaced and no recorded
/// lesson explains: the failed check is the symptom, the replacement's changes the fix,
/// the notes that explain the dead end the cause.
pub fn from_dead_end(
    cx: &Cx,
    index: NodeIndex,
    outcome: &DeadEndOutcome,
    dead_end: &DeadEndIr,
    reasons: &[String],
) -> Option<LessonIr> {
    let DeadEndOutcome::Superseded { by } = outcome else {
        return None;
    };
    let g = cx.g;
    let symptom = dead_end.symptom.clone()?;
    let replacement = g.find(by)?;
    let replacement_data = action(g.node(replacement))?;
    let fix = Remedy {
        op: replacement_data.op,
        set: changed_params(
            replacement_data.op,
            dead_end.op,
            &dead_end.params,
            &values::params(&replacement_data.params),
        ),
    };
    let replacement_step = cx.replacement(replacement);
    let mut phases = BTreeSet::from([dead_end.phase]);
    phases.extend(replacement_step.and_then(|s| g.node(s).phase));
    let evidence: Vec<Provenance> = observed::failed(cx, index)
        .into_iter()
        .map(|o| cx.provenance(g.node(o)))
        .collect();
    let kind = kind_of(symptom.metric);
    Some(LessonIr {
        id: dead_end.id.clone(),
        kind,
        origin: LessonOrigin::DeadEnd(dead_end.id.clone()),
        title: String::new(),
        symptom: machine_only(&symptom),
        skill: skills::lesson_skill(kind, &symptom, fix.op),
        machine: symptom,
        cause: reasons.join("\n\n"),
        cause_condition: None,
        fix,
        then: Vec::new(),
        fix_text: Vec::new(),
        applied_by: replacement_step
            .and_then(|s| cx.step_id(s))
            .into_iter()
            .collect(),
        diagnosis: Vec::new(),
        notes: Vec::new(),
        phases: phases.into_iter().collect(),
        guards: replacement_step
            .and_then(|s| cx.step_id(s))
            .into_iter()
            .collect(),
        weights: g.weights_if_dependent(replacement),
        condition: None,
        deployments: vec![cx.trajectory().to_string()],
        alternatives: Vec::new(),
        evidence_count: u32::try_from(evidence.len()).unwrap_or(u32::MAX),
        evidence,
        provenance: dead_end.provenance.clone(),
        span: g.node(index).span,
    })
}

/// The parameters of `new` that differ from `old`, as literal assignments; list
/// parameters with named slots change slot by slot.
fn changed_params(
    new_op: OpKind,
    old_op: OpKind,
    old: &BTreeMap<String, Value>,
    new: &BTreeMap<String, Value>,
) -> BTreeMap<String, Expr> {
    let spec = Some(new_op.spec());
    let mut set = BTreeMap::new();
    for (key, value) in new {
        let before = (new_op == old_op).then(|| old.get(key)).flatten();
        if before == Some(value) {
            continue;
        }
        let slots = spec
            .and_then(|s| s.param(key))
            .map_or(&[][..], |p| p.components);
        match (before, value) {
            (Some(Value::IntList(a)), Value::IntList(b))
                if a.len() == b.len() && b.len() == slots.len() =>
            {
                for ((slot, x), y) in slots.iter().zip(a).zip(b) {
                    if x != y {
                        set.insert(slot.to_string(), Expr::Lit(Value::Int(*y)));
                    }
                }
            }
            _ => {
                set.insert(key.clone(), Expr::Lit(value.clone()));
            }
        }
    }
    set
}
