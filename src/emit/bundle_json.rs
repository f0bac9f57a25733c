//! Lowering the skill IR to `bundle.json`, the half of the bundle the runtime
//! executes, and hashing the generated files into it.

use std::collections::BTreeMap;

use crate::digest::sha256_hex;
use rayon::prelude::*;
use skillc_runtime::bundle::{
    Bundle, BundlePhase, DeadEnd, Gate, Hypothesis, Lesson, SkillSet, Source, Step, Target,
    SCHEMA_VERSION,
};
use skillc_runtime::bundle_integrity;

use super::print;
use crate::distill::ir::{GateIr, LessonIr, PhaseIr, SkillIr, TargetIr};

/// sha256 of every generated file (path relative to the bundle root → content).
pub fn hashes(files: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let hashed: Vec<(String, String)> = files
        .par_iter()
        .map(|(path, content)| (path.clone(), sha256_hex(content.as_bytes())))
        .collect();
    hashed.into_iter().collect()
}

/// The bundle for `ir`, `files` left empty for [`hashes`] of the rendered files.
pub fn lower(ir: &SkillIr) -> Bundle {
    let sources = print::sources(ir);
    Bundle {
        schema_version: SCHEMA_VERSION.to_string(),
        name: ir.name.clone(),
        sources: ir
            .sources
            .iter()
            .map(|s| Source {
                trajectory: s.trajectory.clone(),
                model: s.model.clone(),
                target: s.target.clone(),
                weights: s.weights,
                files: s.files.clone(),
            })
            .collect(),
        phases: ir.phases.iter().map(|p| phase(ir, p)).collect(),
        lessons: ir
            .lessons
            .iter()
            .map(|(id, l)| (id.clone(), lesson(ir, l)))
            .collect(),
        skills: ir
            .skills
            .iter()
            .map(|s| SkillSet {
                name: s.name.clone(),
                kind: s.kind,
                title: s.title.clone(),
                triggers: s.triggers.clone(),
                description: print::skill_description(s, &sources),
                trigger: print::trigger(s),
                hypotheses: s
                    .hypotheses
                    .iter()
                    .map(|h| Hypothesis {
                        lesson: h.lesson.clone(),
                        check: ir
                            .lessons
                            .get(&h.lesson)
                            .map(print::hypothesis_check)
                            .unwrap_or_default(),
                        evidence_count: h.evidence_count,
                    })
                    .collect(),
                evidence_count: s.evidence_count,
            })
            .collect(),
        files: BTreeMap::new(),
    }
}

fn phase(ir: &SkillIr, p: &PhaseIr) -> BundlePhase {
    BundlePhase {
        index: p.index.index(),
        name: p.name.clone(),
        title: p.title.clone(),
        steps: p
            .steps
            .iter()
            .map(|s| Step {
                id: s.id.clone(),
                op: s.op,
                params: s.params.clone(),
                guarded_by: s.guarded_by.clone(),
                weights: s.weights,
                provenance: s.provenance.clone(),
            })
            .collect(),
        exit_gates: p.exit_gates.iter().map(gate).collect(),
        lessons: p.lessons.clone(),
        targets: p.targets.iter().map(target).collect(),
        dead_ends: p
            .dead_ends
            .iter()
            .map(|d| DeadEnd {
                id: d.id.clone(),
                op: d.op,
                params: d.params.clone(),
                outcome: d.outcome.clone(),
                symptom: d.symptom.clone(),
                failed_checks: d.failed.iter().map(print::check).collect(),
                reasons: d
                    .reasons
                    .iter()
                    .filter_map(|id| ir.notes.get(id))
                    .map(|n| n.text.clone())
                    .collect(),
                explained_by: d.explained_by.clone(),
                skill: d.skill.clone().unwrap_or_default(),
                provenance: d.provenance.clone(),
            })
            .collect(),
    }
}

fn gate(g: &GateIr) -> Gate {
    Gate {
        metric: g.metric,
        comparison: g.comparison,
        threshold: g.threshold,
        unit: g.unit,
        baseline: g.baseline.clone(),
        op: g.op,
        conditions: g.conditions.clone(),
        recorded: g.recorded,
        provenance: g.provenance.clone(),
    }
}

fn target(t: &TargetIr) -> Target {
    Target {
        metric: t.metric,
        value: t.value,
        unit: t.unit,
        conditions: t.conditions.clone(),
        source: t.source,
        provenance: t.provenance.clone(),
    }
}

fn lesson(ir: &SkillIr, l: &LessonIr) -> Lesson {
    // The bundle keeps one cause string; an executable condition without prose is
    // still worth reading there.
    let cause = match print::condition(l) {
        Some(condition) if l.cause.is_empty() => condition,
        _ => l.cause.clone(),
    };
    Lesson {
        id: l.id.clone(),
        kind: l.kind,
        title: print::title(ir, l),
        symptom: l.machine.clone(),
        cause,
        fix: l.fix.clone(),
        then: l.then.clone(),
        fix_text: l.fix_text.join("\n\n"),
        phases: l.phases.iter().map(|p| p.index()).collect(),
        skill: l.skill.clone(),
        evidence_count: l.evidence_count,
        weights: l.weights,
        evidence: l.evidence.clone(),
        provenance: l.provenance.clone(),
        condition: l.condition.clone(),
        deployments: l.deployments.clone(),
    }
}

/// `bundle.json` text: pretty-printed, newline-terminated. The remedy expression of
/// each lesson is also rendered in notation in SKILL.md; the JSON keeps the tree.
pub fn to_json(bundle: &Bundle) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(&with_digest(serde_json::to_value(bundle)?))?;
    text.push('\n');
    Ok(text)
}

/// The document with its digest as the last member (see
/// `skillc_runtime::bundle_integrity`): `deploy` refuses a bundle.json whose
/// content no longer matches it.
fn with_digest(mut document: serde_json::Value) -> serde_json::Value {
    let digest = bundle_integrity::digest(&document);
    if let Some(members) = document.as_object_mut() {
        members.insert(bundle_integrity::DIGEST_KEY.to_string(), digest.into());
    }
    document
}
