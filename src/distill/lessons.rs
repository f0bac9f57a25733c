//! Lessons of one trajectory: recorded `lesson` entries lowered to symptom → cause
//! → executable fix with their evidence and the steps their fixes change; and
//! lessons distilled from a dead end that a later action replaced without any
//! recorded lesson explaining why ("tried X; it failed with Y; Z replaced it").

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::NodeIndex;
use skillc_runtime::bundle::{Comparison, Expr, LessonKind, Provenance, Remedy, Symptom, Value};
use skillc_runtime::ops::{self, Better};

use super::checks;
use super::ir::{DeadEndIr, DeadEndOutcome, LessonIr, LessonOrigin};
use super::path::{action, Cx};
use super::{skills, values};
use crate::diag::{Code, Diagnostic};
use crate::emit::notation;
use crate::graph::{self, EdgeKind, Graph, LessonData, Node};
use crate::syntax::{self, EntryKind};

/// Actions a lesson explains: those its fixes change and those its evidence measured.
pub fn explained_actions(g: &Graph, lesson: NodeIndex) -> Vec<NodeIndex> {
    let mut actions = g.targets(lesson, EdgeKind::Changes);
    for evidence in g.targets(lesson, EdgeKind::Evidence) {
        match g.node(evidence).kind {
            EntryKind::Observation => actions.extend(g.measured_action(evidence)),
            EntryKind::Action => actions.push(evidence),
            _ => {}
        }
    }
    actions
}

fn kind_of(metrics: impl IntoIterator<Item = impl AsRef<str>>) -> LessonKind {
    if metrics
        .into_iter()
        .any(|m| skills::is_performance_metric(m.as_ref()))
    {
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
    let symptom = symptom(data.symptom.as_ref(), &values::params(&data.conditions));
    let kind = kind_of(
        data.symptom
            .iter()
            .flat_map(|s| s.predicates.iter().map(|p| p.metric.text.as_str())),
    );
    let mut changed: Vec<NodeIndex> = g.targets(index, EdgeKind::Changes);
    changed.extend(g.sources(index, EdgeKind::By));
    let guarded: BTreeSet<NodeIndex> = changed
        .into_iter()
        .filter_map(|a| cx.replacement(a))
        .collect();
    let mut phases: BTreeSet<u8> = guarded.iter().map(|a| g.node(*a).phase).collect();
    phases.insert(node.phase);
    let evidence: Vec<Provenance> = g
        .targets(index, EdgeKind::Evidence)
        .into_iter()
        .map(|e| cx.provenance(g.node(e)))
        .collect();
    let (cause, cause_condition) = match &data.cause {
        Some(c) => (
            c.text.as_ref().map(|t| t.text.clone()).unwrap_or_default(),
            c.condition.as_ref().map(graph::expr_text),
        ),
        None => (String::new(), None),
    };
    Some(LessonIr {
        id: cx.qualify(&node.id),
        kind,
        origin: LessonOrigin::Recorded,
        title: data.title.clone(),
        symptom_line: symptom_line(data.symptom.as_ref(), &symptom),
        skill: g
            .skill_of(index)
            .map(|s| s.name.clone())
            .unwrap_or_else(|| skills::lesson_skill(kind, &symptom, &fix.op)),
        symptom,
        cause,
        cause_condition,
        fix,
        then: remedies.collect(),
        phases: phases.into_iter().collect(),
        guards: guarded.iter().map(|a| cx.step_id(*a)).collect(),
        evidence_count: u32::try_from(evidence.len()).unwrap_or(u32::MAX),
        evidence,
        provenance: vec![cx.provenance(node)],
    })
}

/// Whether a predicate describes a metric on its bad side (`cosine < 0.99`,
/// `mismatches > 0`) rather than a condition that still holds (`cosine >= 0.99`).
fn describes_failure(metric: &str, comparison: Comparison) -> bool {
    let lower_is_worse = matches!(comparison, Comparison::Lt | Comparison::Le);
    match ops::metric_spec(metric).map(|m| m.better) {
        Some(Better::Higher) => lower_is_worse,
        Some(Better::Lower) => !lower_is_worse && comparison != Comparison::Eq,
        None => false,
    }
}

/// The machine-matchable symptom: failing operation, the lesson's conditions as
/// parameters, and one predicate (in the metric's canonical unit): the first that
/// describes the failure, else the first. The bundle holds one predicate; the
/// SKILL.md shows them all.
fn symptom(s: Option<&syntax::Symptom>, conditions: &BTreeMap<String, Value>) -> Symptom {
    let predicates: Vec<_> = s
        .iter()
        .flat_map(|s| s.predicates.iter())
        .filter_map(|p| values::comparison(p.op).map(|c| (p, c)))
        .collect();
    let first = predicates
        .iter()
        .find(|(p, c)| describes_failure(&p.metric.text, *c))
        .or(predicates.first())
        .copied();
    Symptom {
        op: s
            .and_then(|s| s.failing_op.as_ref())
            .map(|n| n.text.clone()),
        params: conditions.clone(),
        metric: first.map(|(p, _)| p.metric.text.clone()),
        comparison: first.map(|(_, c)| c),
        value: first.map(|(p, _)| values::canonical(&p.metric.text, &p.value)),
        text: s
            .and_then(|s| s.text.as_ref())
            .map(|t| t.text.clone())
            .unwrap_or_default(),
    }
}

/// Every predicate of the symptom, as the language writes them.
fn symptom_line(s: Option<&syntax::Symptom>, machine: &Symptom) -> String {
    let Some(s) = s else {
        return notation::symptom(machine);
    };
    let mut line = String::new();
    if let Some(op) = &machine.op {
        line.push_str(op);
        if !machine.params.is_empty() {
            line.push_str(&format!(
                "({})",
                notation::params(Some(op), &machine.params)
            ));
        }
        line.push_str(" fails");
    }
    let predicates: Vec<String> = s
        .predicates
        .iter()
        .map(|p| {
            let unit = p.value.unit.as_ref().map_or("", |u| u.text.as_str());
            format!(
                "{} {} {}",
                p.metric.text,
                p.op.symbol(),
                notation::quantity(values::number(&p.value), unit)
            )
        })
        .collect();
    if !predicates.is_empty() {
        if !line.is_empty() {
            line.push_str(" with ");
        }
        line.push_str(&predicates.join(" and "));
    }
    line
}

/// A lesson distilled from a dead end that a later action replaced and no recorded
/// lesson explains: the failed check is the symptom, the replacement's changes the fix.
pub fn from_dead_end(
    cx: &Cx,
    index: NodeIndex,
    outcome: &DeadEndOutcome,
    dead_end: &DeadEndIr,
) -> Option<LessonIr> {
    let DeadEndOutcome::Superseded { by } = outcome else {
        return None;
    };
    let g = cx.g;
    let symptom = dead_end.symptom.clone()?;
    let replacement = g.find(by)?;
    let replacement_data = action(g.node(replacement))?;
    let fix = Remedy {
        op: replacement_data.op.clone(),
        set: changed_params(
            &replacement_data.op,
            &dead_end.op,
            &dead_end.params,
            &values::params(&replacement_data.params),
        ),
    };
    let replacement_step = cx.replacement(replacement);
    let mut phases = BTreeSet::from([dead_end.phase]);
    phases.extend(replacement_step.map(|s| g.node(s).phase));
    let evidence: Vec<Provenance> = checks::failed(cx, index)
        .into_iter()
        .map(|o| cx.provenance(g.node(o)))
        .collect();
    let kind = kind_of(symptom.metric.as_deref());
    Some(LessonIr {
        id: dead_end.id.clone(),
        kind,
        origin: LessonOrigin::DeadEnd,
        title: format!(
            "tried `{}`; it failed ({}) and `{}` replaced it",
            notation::call(&dead_end.op, &dead_end.params),
            dead_end.failed_checks.join("; "),
            cx.qualify(by)
        ),
        symptom_line: notation::symptom(&symptom),
        skill: skills::lesson_skill(kind, &symptom, &fix.op),
        cause: if dead_end.reasons.is_empty() {
            "not recorded: the trajectory shows only the failed check and the replacement"
                .to_string()
        } else {
            dead_end.reasons.join("\n\n")
        },
        symptom,
        cause_condition: None,
        fix,
        then: Vec::new(),
        phases: phases.into_iter().collect(),
        guards: replacement_step
            .map(|s| cx.step_id(s))
            .into_iter()
            .collect(),
        evidence_count: u32::try_from(evidence.len()).unwrap_or(u32::MAX),
        evidence,
        provenance: dead_end.provenance.clone(),
    })
}

/// The parameters of `new` that differ from `old`, as literal assignments; list
/// parameters with named slots change slot by slot.
fn changed_params(
    new_op: &str,
    old_op: &str,
    old: &BTreeMap<String, Value>,
    new: &BTreeMap<String, Value>,
) -> BTreeMap<String, Expr> {
    let spec = ops::operation(new_op);
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
