//! Lowering the skill IR to `bundle.json`, the half of the bundle the runtime
//! executes, and hashing the generated files into it.

use std::collections::BTreeMap;

use rayon::prelude::*;
use sha2::{Digest, Sha256};
use skillc_runtime::bundle::{
    Bundle, DeadEnd, Gate, Hypothesis, Lesson, Phase, SkillSet, Source, Step, Target,
    SCHEMA_VERSION,
};

use crate::distill::ir::{DeadEndOutcome, GateIr, LessonIr, PhaseIr, SkillIr, TargetIr};

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

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
                files: s.files.clone(),
            })
            .collect(),
        phases: ir.phases.iter().map(phase).collect(),
        lessons: ir
            .lessons
            .iter()
            .map(|(id, l)| (id.clone(), lesson(l)))
            .collect(),
        skills: ir
            .skills
            .iter()
            .map(|s| SkillSet {
                name: s.name.clone(),
                kind: s.kind,
                title: s.title.clone(),
                triggers: s.triggers.clone(),
                description: s.description.clone(),
                trigger: s.trigger.clone(),
                hypotheses: s
                    .hypotheses
                    .iter()
                    .map(|h| Hypothesis {
                        lesson: h.lesson.clone(),
                        check: h.check.clone(),
                        evidence_count: h.evidence_count,
                    })
                    .collect(),
                evidence_count: s.evidence_count,
            })
            .collect(),
        files: BTreeMap::new(),
    }
}

fn phase(p: &PhaseIr) -> Phase {
    Phase {
        index: p.index,
        name: p.name.clone(),
        title: p.title.clone(),
        steps: p
            .steps
            .iter()
            .map(|s| Step {
                id: s.id.clone(),
                op: s.op.clone(),
                params: s.params.clone(),
                guarded_by: s.guarded_by.clone(),
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
                op: d.op.clone(),
                params: d.params.clone(),
                outcome: match &d.outcome {
                    DeadEndOutcome::Reverted { by } => format!("reverted by {by}"),
                    DeadEndOutcome::Superseded { by } => format!("superseded by {by}"),
                    DeadEndOutcome::Failed => "failed".to_string(),
                },
                symptom: d.symptom.clone(),
                failed_checks: d.failed_checks.clone(),
                reasons: d.reasons.clone(),
                explained_by: d.explained_by.clone(),
                skill: d.skill.clone(),
                provenance: d.provenance.clone(),
            })
            .collect(),
    }
}

fn gate(g: &GateIr) -> Gate {
    Gate {
        metric: g.metric.clone(),
        comparison: g.comparison,
        threshold: g.threshold,
        unit: g.unit.clone(),
        baseline: g.baseline.clone(),
        op: g.op.clone(),
        conditions: g.conditions.clone(),
        recorded: g.recorded,
        provenance: g.provenance.clone(),
    }
}

fn target(t: &TargetIr) -> Target {
    Target {
        metric: t.metric.clone(),
        value: t.value,
        unit: t.unit.clone(),
        conditions: t.conditions.clone(),
        source: t.source.as_str().to_string(),
        provenance: t.provenance.clone(),
    }
}

fn lesson(l: &LessonIr) -> Lesson {
    // The bundle keeps one cause string; an executable condition without prose is
    // still worth reading there.
    let cause = match (&l.cause, &l.cause_condition) {
        (text, Some(condition)) if text.is_empty() => condition.clone(),
        (text, _) => text.clone(),
    };
    Lesson {
        id: l.id.clone(),
        kind: l.kind,
        title: l.title.clone(),
        symptom: l.symptom.clone(),
        cause,
        fix: l.fix.clone(),
        then: l.then.clone(),
        phases: l.phases.clone(),
        skill: l.skill.clone(),
        evidence_count: l.evidence_count,
        evidence: l.evidence.clone(),
        provenance: l.provenance.clone(),
    }
}

/// `bundle.json` text: pretty-printed, newline-terminated. The remedy expression of
/// each lesson is also rendered in notation in SKILL.md; the JSON keeps the tree.
pub fn to_json(bundle: &Bundle) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(bundle)?;
    text.push('\n');
    Ok(text)
}
