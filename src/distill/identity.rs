//! When two recorded lessons are one lesson, and when they disagree.
//!
//! A lesson met in several deployments is one lesson with evidence from each. Two
//! deployments word it differently, so identity never reads text: it is what calls
//! for the lesson (its kind, the failing operation, the conditions that say what
//! it is about and the metric, [`trigger_key`]), the model features it depends on
//! (`if …`) and the fix that answers its cause ([`lesson_key`]).
//!
//! Two deployments that answer the same trigger with different fixes are shown
//! beside each other ([`alternatives`]), each with its condition. When nothing
//! tells them apart, neither the model features nor a cause condition, the build
//! says so (W0104): an agent meeting that symptom cannot know which fix is meant.

use std::collections::BTreeMap;

use skillc_runtime::bundle::{Symptom, RECORDING_CONDITIONS};

use super::ir::{LessonIr, LessonOrigin, SkillIr};
use crate::diag::{Code, Diagnostic};

/// What calls for a lesson, its words aside: kind, failing operation, the symptom's
/// conditions that say what it is about (not where it was recorded) and its metric.
pub fn trigger_key(lesson: &LessonIr) -> String {
    let m = &lesson.machine;
    let about: BTreeMap<&String, _> = m
        .params
        .iter()
        .filter(|(k, _)| !RECORDING_CONDITIONS.contains(&k.as_str()))
        .collect();
    format!(
        "{:?}|{:?}|{}|{:?}",
        lesson.kind,
        m.op,
        serde_json::to_string(&about).unwrap_or_default(),
        m.metric
    )
}

/// The model features a lesson depends on, as the language writes them.
pub fn condition_text(lesson: &LessonIr) -> Option<String> {
    lesson
        .condition
        .as_ref()
        .map(skillc_runtime::notation::condition)
}

fn cause_text(lesson: &LessonIr) -> Option<String> {
    lesson.cause_condition.as_ref().map(crate::graph::expr_text)
}

/// The fixes, in order.
pub fn fix_key(lesson: &LessonIr) -> String {
    format!(
        "{}|{}",
        serde_json::to_string(&lesson.fix).unwrap_or_default(),
        serde_json::to_string(&lesson.then).unwrap_or_default()
    )
}

/// Identity of a lesson across deployments: what calls for it, the model features
/// it depends on and its fixes. The cause is what the fix answers; its words and
/// its condition (which a run's restatement of a bundle lesson does not carry)
/// explain the fix rather than tell two fixes apart.
pub fn lesson_key(lesson: &LessonIr) -> String {
    format!(
        "{}|{:?}|{}",
        trigger_key(lesson),
        condition_text(lesson),
        fix_key(lesson)
    )
}

/// Whether no deployment taught both.
fn disjoint(a: &LessonIr, b: &LessonIr) -> bool {
    !a.deployments.iter().any(|d| b.deployments.contains(d))
}

/// Links every pair of recorded lessons that different deployments taught for one
/// trigger with different fixes, and reports (W0104) the pairs nothing tells apart.
/// Lessons are grouped by trigger, then by the deployments that taught them: only
/// lessons of different groups are compared, so one trajectory alone compares none.
pub fn alternatives(ir: &mut SkillIr) -> Vec<Diagnostic> {
    type Taught<'l> = BTreeMap<&'l [String], Vec<(&'l LessonIr, String)>>;
    let mut by_trigger: BTreeMap<String, Taught<'_>> = BTreeMap::new();
    for lesson in ir.lessons.values() {
        if lesson.origin == LessonOrigin::Recorded && has_trigger(&lesson.machine) {
            by_trigger
                .entry(trigger_key(lesson))
                .or_default()
                .entry(&lesson.deployments)
                .or_default()
                .push((lesson, fix_key(lesson)));
        }
    }
    let mut links: Vec<(String, String)> = Vec::new();
    let mut diagnostics = Vec::new();
    for taught in by_trigger.values() {
        let groups: Vec<&Vec<(&LessonIr, String)>> = taught.values().collect();
        for (i, group) in groups.iter().enumerate() {
            for other in &groups[i + 1..] {
                for (la, fa) in group.iter() {
                    for (lb, fb) in other.iter() {
                        if fa == fb || !disjoint(la, lb) {
                            continue;
                        }
                        links.push((la.id.clone(), lb.id.clone()));
                        if condition_text(la) == condition_text(lb)
                            && cause_text(la) == cause_text(lb)
                        {
                            // Reported at the deployment that comes later in name order.
                            let (first, second) = if la.deployments <= lb.deployments {
                                (la, lb)
                            } else {
                                (lb, la)
                            };
                            diagnostics.push(conflict(first, second));
                        }
                    }
                }
            }
        }
    }
    for (a, b) in links {
        for (from, to) in [(&a, &b), (&b, &a)] {
            if let Some(lesson) = ir.lessons.get_mut(from) {
                lesson.alternatives.push(to.clone());
            }
        }
    }
    for lesson in ir.lessons.values_mut() {
        lesson.alternatives.sort();
        lesson.alternatives.dedup();
    }
    diagnostics
}

/// A symptom the runtime can match: an operation, a metric or a condition.
fn has_trigger(s: &Symptom) -> bool {
    s.op.is_some() || s.metric.is_some() || !s.params.is_empty()
}

fn conflict(first: &LessonIr, second: &LessonIr) -> Diagnostic {
    let condition =
        condition_text(first).map_or_else(|| "on every model".to_string(), |c| format!("if {c}"));
    Diagnostic::new(
        Code::ConflictingFixes,
        second.span,
        format!(
            "lesson `{}` ({}) and lesson `{}` ({}) fix the same symptom {condition} differently",
            second.id,
            second.deployments.join(", "),
            first.id,
            first.deployments.join(", "),
        ),
    )
    .with_related(first.span, "the other fix")
    .with_hint(
        "say which models each fix is for with `if <feature condition>` (or a `cause` condition an agent can check), or supersede the one that is wrong",
    )
}
