//! Cross-phase skills: how lessons, dead ends and optimization steps are grouped
//! into `debug-…` and `opt-…` directories, and what each skill says about itself.
//!
//! The trajectory language has no way to name a skill, so the grouping is derived:
//! a debugging lesson belongs to the check that shows its symptom (`validate-kernel
//! fails` for `kernel=gemm` → `debug-validate-kernel-gemm`), falling back to its
//! first symptom metric, then to its fix's operation; an optimization lesson (one
//! whose symptom is a performance figure) and every step of phases 4–5 that changes
//! the deployment plan belong to the operation that does it (`opt-merge-launches`).
//! Hypotheses are ordered by evidence, most first, then by id.

use std::collections::{BTreeMap, BTreeSet};

use skillc_runtime::bundle::{LessonKind, Symptom, Value};
use skillc_runtime::ops::{self, Dimension};

use super::catalog::{DEBUG_PREFIX, OPT_PREFIX};
use super::ir::{HypothesisIr, SkillIr, SkillSetIr};
use super::path::is_check;
use crate::emit::frontmatter::skill_name;
use crate::emit::notation;

/// Figures that say how fast, not how right (compile time is a budget, not a target).
pub fn is_performance_metric(metric: &str) -> bool {
    match ops::metric_spec(metric).map(|m| m.dimension) {
        Some(Dimension::TokenRate | Dimension::FlopRate | Dimension::ByteRate) => true,
        Some(Dimension::Time) => metric != "compile_s",
        Some(Dimension::Count) => metric == "calls_per_layer",
        _ => false,
    }
}

/// Operations of phases 4–5 that change the deployment plan (not checks, not notes).
fn changes_the_plan(op: &str) -> bool {
    !is_check(op) && op != "note-host"
}

fn kernel_suffix(params: &BTreeMap<String, Value>) -> String {
    params
        .get("kernel")
        .map(|k| format!("-{}", notation::value(k)))
        .unwrap_or_default()
}

/// The skill directory a lesson belongs to.
pub fn lesson_skill(kind: LessonKind, symptom: &Symptom, fix_op: &str) -> String {
    match kind {
        LessonKind::Optimization => skill_name(&format!("{OPT_PREFIX}{fix_op}")),
        LessonKind::Debugging => {
            let topic = match (&symptom.op, &symptom.metric) {
                (Some(op), _) => format!("{op}{}", kernel_suffix(&symptom.params)),
                (None, Some(metric)) => metric.clone(),
                (None, None) => fix_op.to_string(),
            };
            skill_name(&format!("{DEBUG_PREFIX}{topic}"))
        }
    }
}

/// The debugging skill keeping a dead end that no lesson explains.
pub fn dead_end_skill(op: &str, params: &BTreeMap<String, Value>) -> String {
    skill_name(&format!("{DEBUG_PREFIX}{op}{}", kernel_suffix(params)))
}

/// Skill directory of the optimization technique an operation applies.
fn technique_skill(op: &str) -> String {
    skill_name(&format!("{OPT_PREFIX}{op}"))
}

#[derive(Default)]
struct Members {
    lessons: Vec<String>,
    dead_ends: Vec<String>,
    applied_steps: Vec<String>,
    triggers: BTreeSet<String>,
    phases: BTreeSet<u8>,
}

/// Every skill the IR's lessons, dead ends and optimization steps call for.
pub fn skill_sets(ir: &SkillIr) -> Vec<SkillSetIr> {
    let mut members: BTreeMap<String, Members> = BTreeMap::new();
    for lesson in ir.lessons.values() {
        let m = members.entry(lesson.skill.clone()).or_default();
        m.lessons.push(lesson.id.clone());
        m.triggers.insert(if lesson.symptom_line.is_empty() {
            lesson.symptom.text.clone()
        } else {
            lesson.symptom_line.clone()
        });
        m.phases.extend(&lesson.phases);
    }
    for phase in &ir.phases {
        for dead_end in &phase.dead_ends {
            let m = members.entry(dead_end.skill.clone()).or_default();
            m.dead_ends.push(dead_end.id.clone());
            m.phases.insert(phase.index);
            if dead_end.explained_by.is_some() {
                continue;
            }
            m.triggers.insert(match &dead_end.symptom {
                Some(symptom) => notation::symptom(symptom),
                None => format!(
                    "{} fails",
                    notation::call(&dead_end.op, &kernel_only(&dead_end.params))
                ),
            });
        }
        for step in &phase.steps {
            // Without declared skills, every plan change of phases 4–5 is a technique
            // of its own operation; with them, a step belongs where it was declared.
            let skill = match &step.skill {
                Some(skill) => skill.clone(),
                None if ir.declared.is_empty()
                    && matches!(phase.index, 4 | 5)
                    && changes_the_plan(&step.op) =>
                {
                    technique_skill(&step.op)
                }
                None => continue,
            };
            let m = members.entry(skill).or_default();
            m.applied_steps.push(step.id.clone());
            m.phases.insert(phase.index);
        }
    }
    for name in ir.declared.keys() {
        members.entry(name.clone()).or_default();
    }
    let sources: Vec<&str> = ir.sources.iter().map(|s| s.trajectory.as_str()).collect();
    members
        .into_iter()
        .map(|(name, m)| skill_set(ir, name, m, &sources.join(", ")))
        .collect()
}

fn kernel_only(params: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    params
        .iter()
        .filter(|(k, _)| k.as_str() == "kernel")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn skill_set(ir: &SkillIr, name: String, m: Members, sources: &str) -> SkillSetIr {
    let declared = ir.declared.get(&name);
    let kind = match declared {
        Some(d) => d.kind,
        None if name.starts_with(OPT_PREFIX) => LessonKind::Optimization,
        None => LessonKind::Debugging,
    };
    let mut hypotheses: Vec<HypothesisIr> = m
        .lessons
        .iter()
        .filter_map(|id| ir.lessons.get(id))
        .map(|l| HypothesisIr {
            lesson: l.id.clone(),
            check: [
                l.cause_condition.as_deref(),
                Some(l.symptom_line.as_str()),
                Some(l.symptom.text.as_str()),
            ]
            .into_iter()
            .flatten()
            .find(|c| !c.is_empty())
            .unwrap_or("the symptom as recorded")
            .to_string(),
            evidence_count: l.evidence_count,
        })
        .collect();
    hypotheses.sort_by(|a, b| {
        b.evidence_count
            .cmp(&a.evidence_count)
            .then_with(|| a.lesson.cmp(&b.lesson))
    });
    let evidence_count = hypotheses.iter().map(|h| h.evidence_count).sum();
    let phases: Vec<String> = m.phases.iter().map(u8::to_string).collect();
    let phases = phases.join(", ");
    let trigger_patterns: Vec<String> = m.triggers.into_iter().collect();
    let op = name.strip_prefix(OPT_PREFIX).unwrap_or(&name).to_string();
    let trigger_note = if kind == LessonKind::Optimization && !m.applied_steps.is_empty() {
        format!(
            "the phase's figure must improve and {op} is not applied yet (the trajectory applied it in phase {phases})"
        )
    } else {
        String::new()
    };
    let trigger = match declared {
        Some(d) => d.triggers.join("; "),
        None => trigger_patterns
            .iter()
            .chain(std::iter::once(&trigger_note).filter(|n| !n.is_empty()))
            .cloned()
            .collect::<Vec<_>>()
            .join("; or "),
    };
    let description = match declared {
        Some(d) => format!(
            "{}. Use when: {trigger}. For an LLM deployment on an AMD XDNA 2 (npu2) NPU; distilled from trajectory {sources}.",
            d.title.trim_end_matches('.')
        ),
        None => match kind {
            LessonKind::Debugging => format!(
            "Debugging skill for deploying LLMs on an AMD XDNA 2 (npu2) NPU: what to check and \
             fix, in order, when {trigger}. {}, {} and {}, for phase {phases}; distilled from \
             trajectory {sources}.",
            count(hypotheses.len(), "hypothesis", "hypotheses"),
            count(evidence_count as usize, "evidence entry", "evidence entries"),
            count(m.dead_ends.len(), "abandoned attempt", "abandoned attempts"),
        ),
            LessonKind::Optimization => {
                let doc = ops::operation(&op).map_or("", |spec| spec.doc);
                format!(
                    "Optimization technique {op} for deploying LLMs on an AMD XDNA 2 (npu2) NPU: \
                 {doc}. Applied {} on the effective path, {}, for phase {phases}; distilled \
                 from trajectory {sources}.",
                    count(m.applied_steps.len(), "time", "times"),
                    count(hypotheses.len(), "lesson", "lessons"),
                )
            }
        },
    };
    SkillSetIr {
        name,
        kind,
        title: declared.map(|d| d.title.clone()).unwrap_or_default(),
        triggers: declared.map(|d| d.triggers.clone()).unwrap_or_default(),
        context: declared.map(|d| d.notes.clone()).unwrap_or_default(),
        description,
        trigger,
        trigger_patterns,
        trigger_note,
        hypotheses,
        applied_steps: m.applied_steps,
        dead_ends: m.dead_ends,
        evidence_count,
    }
}

/// `1 lesson`, `2 lessons`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
