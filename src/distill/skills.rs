//! Cross-phase skills: how lessons, dead ends, steps and notes are grouped into
//! `debug-…` and `opt-…` directories.
//!
//! A trajectory names its skills with `skill` declarations and entries join one with
//! `in`; a dead end without `in` follows the lesson that explains it. What joins no
//! declared skill falls back to a derived grouping (and `skillc check` warns): a
//! debugging lesson belongs to the check that shows its symptom (`validate-kernel
//! fails` for `kernel=gemm` → `debug-validate-kernel-gemm`), falling back to its
//! first symptom metric, then to its fix's operation; an optimization lesson (one
//! whose symptom is a performance figure) and, when the trajectories declare no skill
//! at all, every step of phases 4–5 that changes the deployment plan belong to the
//! operation that does it (`opt-merge-launches`). A dead end that no lesson explains
//! and that joins no skill stays on its phase's page. Hypotheses are ordered by
//! evidence, most first, then in the order they were recorded.

use std::collections::{BTreeMap, BTreeSet};

use skillc_runtime::bundle::{LessonKind, Symptom, Value};
use skillc_runtime::ops::{Dimension, Metric, OpKind};
use skillc_runtime::phase::DeployPhase;

use super::catalog::{DEBUG_PREFIX, OPT_PREFIX};
use super::ir::{HypothesisIr, NotePlace, SkillIr, SkillSetIr};
use super::values;
use crate::graph::skills::skill_name;

/// Figures that say how fast, not how right (compile time is a budget, not a target).
pub fn is_performance_metric(metric: Metric) -> bool {
    match metric.spec().dimension {
        Dimension::TokenRate | Dimension::FlopRate | Dimension::ByteRate => true,
        Dimension::Time => metric != Metric::CompileS,
        Dimension::Count => metric == Metric::CallsPerLayer,
        Dimension::Ratio => false,
    }
}

fn kernel_suffix(params: &BTreeMap<String, Value>) -> String {
    params
        .get("kernel")
        .map(|k| format!("-{}", values::key_text(k)))
        .unwrap_or_default()
}

/// The skill directory a lesson that joined no declared skill belongs to.
pub fn lesson_skill(kind: LessonKind, symptom: &Symptom, fix_op: OpKind) -> String {
    match kind {
        LessonKind::Optimization => skill_name(&format!("{OPT_PREFIX}{fix_op}")),
        LessonKind::Debugging => {
            let topic = match (&symptom.op, &symptom.metric) {
                (Some(op), _) => format!("{op}{}", kernel_suffix(&symptom.params)),
                (None, Some(metric)) => metric.to_string(),
                (None, None) => fix_op.to_string(),
            };
            skill_name(&format!("{DEBUG_PREFIX}{topic}"))
        }
    }
}

/// Skill directory of the optimization technique an operation applies.
fn technique_skill(op: OpKind) -> String {
    skill_name(&format!("{OPT_PREFIX}{op}"))
}

#[derive(Default)]
struct Members {
    lessons: Vec<String>,
    dead_ends: Vec<String>,
    applied_steps: Vec<String>,
    context: Vec<String>,
    patterns: Vec<Symptom>,
    phases: BTreeSet<DeployPhase>,
}

impl Members {
    fn pattern(&mut self, symptom: &Symptom) {
        let checkable = symptom.op.is_some() || symptom.metric.is_some();
        if checkable && !self.patterns.contains(symptom) {
            self.patterns.push(symptom.clone());
        }
    }
}

/// Every skill the IR's declarations, lessons, dead ends, steps and notes call for.
pub fn skill_sets(ir: &SkillIr) -> Vec<SkillSetIr> {
    let mut members: BTreeMap<String, Members> = BTreeMap::new();
    for name in ir.declared.keys() {
        members.entry(name.clone()).or_default();
    }
    for lesson in ir.lessons.values() {
        let m = members.entry(lesson.skill.clone()).or_default();
        m.lessons.push(lesson.id.clone());
        m.pattern(&lesson.machine);
        m.phases.extend(&lesson.phases);
    }
    for phase in &ir.phases {
        for dead_end in &phase.dead_ends {
            let Some(skill) = &dead_end.skill else {
                continue;
            };
            let m = members.entry(skill.clone()).or_default();
            m.dead_ends.push(dead_end.id.clone());
            m.phases.insert(phase.index);
            if let (None, Some(symptom)) = (&dead_end.explained_by, &dead_end.symptom) {
                m.pattern(symptom);
            }
        }
        for step in &phase.steps {
            // Without declared skills, every plan change of phases 4–5 is a technique
            // of its own operation; with them, a step belongs where it was declared.
            let skill = match &step.skill {
                Some(skill) => skill.clone(),
                None if ir.declared.is_empty()
                    && matches!(phase.index, DeployPhase::Prefill | DeployPhase::Decode)
                    && step.op.is_technique() =>
                {
                    technique_skill(step.op)
                }
                None => continue,
            };
            let m = members.entry(skill).or_default();
            m.applied_steps.push(step.id.clone());
            m.phases.insert(phase.index);
        }
    }
    for note in ir.notes.values() {
        if let NotePlace::Skill(skill) = &note.place {
            if let Some(m) = members.get_mut(skill) {
                m.context.push(note.id.clone());
            }
        }
    }
    members
        .into_iter()
        .map(|(name, m)| skill_set(ir, name, m))
        .collect()
}

fn skill_set(ir: &SkillIr, name: String, m: Members) -> SkillSetIr {
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
            evidence_count: l.evidence_count,
        })
        .collect();
    // Most evidence first; then in the order they were recorded. The key is
    // computed once per hypothesis, not looked up again in every comparison.
    hypotheses.sort_by_cached_key(|h| {
        let recorded = ir
            .lessons
            .get(&h.lesson)
            .and_then(|l| l.provenance.first().cloned());
        (
            std::cmp::Reverse(h.evidence_count),
            recorded,
            h.lesson.clone(),
        )
    });
    let evidence_count = hypotheses.iter().map(|h| h.evidence_count).sum();
    SkillSetIr {
        name,
        kind,
        title: declared.map(|d| d.title.clone()).unwrap_or_default(),
        triggers: declared.map(|d| d.triggers.clone()).unwrap_or_default(),
        patterns: m.patterns,
        context: m.context,
        hypotheses,
        applied_steps: m.applied_steps,
        dead_ends: m.dead_ends,
        phases: m.phases.into_iter().collect(),
        evidence_count,
    }
}

/// `1 lesson`, `2 lessons`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
