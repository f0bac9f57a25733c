//! View structs: what the templates see. Built from the skill IR, with every piece
//! of trajectory text already made literal ([`markdown`]) and every value already in
//! trajectory notation ([`notation`]), so templates only arrange preformatted
//! fragments and cannot misinterpret data.

use std::collections::HashMap;

use serde::Serialize;
use skillc_runtime::bundle::{Baseline, LessonKind, Provenance};

use super::markdown::{code_span, literal};
use super::notation;
use crate::distill::catalog;
use crate::distill::ir::{
    DeadEndIr, DeadEndOutcome, GateIr, LessonIr, LessonOrigin, PhaseIr, SkillIr, SkillSetIr,
    StepIr, TargetIr,
};

/// Provenance records a SKILL.md cites in one place; `bundle.json` has them all.
pub const CITED_MAX: usize = 8;

/// `file:line` of each provenance record, as code spans joined by commas, at most
/// [`CITED_MAX`] of them.
pub fn provenance(records: &[Provenance]) -> String {
    if records.is_empty() {
        return "*(no source recorded)*".to_string();
    }
    let mut cited = records
        .iter()
        .take(CITED_MAX)
        .map(|p| code_span(&format!("{}:{}", p.file, p.line)))
        .collect::<Vec<_>>()
        .join(", ");
    if records.len() > CITED_MAX {
        cited.push_str(&format!(
            " and {} more (all in `bundle.json`)",
            records.len() - CITED_MAX
        ));
    }
    cited
}

/// A link from one skill directory to a sibling's SKILL.md.
pub fn skill_link(name: &str) -> String {
    format!("[{name}](../{name}/SKILL.md)")
}

#[derive(Debug, Serialize)]
pub struct StepView {
    pub number: usize,
    /// Spaces up to the item's content column (`10. ` needs four).
    pub indent: String,
    pub call: String,
    pub id: String,
    pub provenance: String,
    pub guarded_by: String,
    pub notes: Vec<String>,
}

pub fn steps(steps: &[StepIr]) -> Vec<StepView> {
    steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let number = i + 1;
            let column = number.to_string().len() + 2;
            StepView {
                number,
                indent: " ".repeat(column),
                call: literal(&notation::call(step.op, &step.params), column),
                id: code_span(&step.id),
                provenance: provenance(&step.provenance),
                guarded_by: ids(&step.guarded_by),
                notes: step.notes.iter().map(|n| literal(n, column + 2)).collect(),
            }
        })
        .collect()
}

fn ids(ids: &[String]) -> String {
    ids.iter()
        .map(|id| code_span(id))
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Debug, Serialize)]
pub struct GateView {
    pub subject: String,
    pub check: String,
    pub recorded: String,
    pub provenance: String,
}

pub fn gates(gates: &[GateIr]) -> Vec<GateView> {
    gates.iter().map(gate).collect()
}

fn gate(g: &GateIr) -> GateView {
    let subject = match g.op {
        Some(op) if g.conditions.is_empty() => code_span(op.name()),
        Some(op) => code_span(&format!(
            "{op}({})",
            notation::params(Some(op), &g.conditions)
        )),
        None if g.conditions.is_empty() => "any check".to_string(),
        None => code_span(&notation::params(None, &g.conditions)),
    };
    let check = match g.baseline {
        Baseline::Absolute => code_span(&notation::check(
            &g.metric,
            g.comparison,
            g.threshold,
            &g.unit,
        )),
        Baseline::PreviousPhase => format!(
            "{} the previous phase's value (it was {} in the trajectory)",
            code_span(&format!("{} {}", g.metric, g.comparison.symbol())),
            code_span(&notation::quantity(g.threshold, &g.unit))
        ),
    };
    let recorded = match g.recorded {
        Some(v) => format!(
            "recorded {} ({})",
            code_span(&notation::quantity(v, &g.unit)),
            g.recorded_source.as_str()
        ),
        None => "no value recorded".to_string(),
    };
    GateView {
        subject,
        check,
        recorded,
        provenance: provenance(&g.provenance),
    }
}

#[derive(Debug, Serialize)]
pub struct TargetView {
    pub figure: String,
    pub source: String,
    pub conditions: String,
    pub provenance: String,
}

pub fn targets(targets: &[TargetIr]) -> Vec<TargetView> {
    targets
        .iter()
        .map(|t| TargetView {
            figure: code_span(&format!(
                "{} = {}",
                t.metric,
                notation::quantity(t.value, &t.unit)
            )),
            source: t.source.as_str().to_string(),
            conditions: if t.conditions.is_empty() {
                String::new()
            } else {
                code_span(&notation::params(None, &t.conditions))
            },
            provenance: provenance(&t.provenance),
        })
        .collect()
}

#[derive(Debug, Serialize)]
pub struct LessonView {
    pub id: String,
    pub title: String,
    pub origin: String,
    pub symptom: String,
    pub symptom_text: String,
    pub cause: String,
    pub condition: String,
    pub fix: String,
    pub guards: String,
    pub evidence_count: u32,
    pub evidence: String,
    pub provenance: String,
    pub skill: String,
}

pub fn lesson(l: &LessonIr) -> LessonView {
    LessonView {
        id: code_span(&l.id),
        title: literal(&l.title, 2),
        origin: match l.origin {
            LessonOrigin::Recorded => "recorded lesson".to_string(),
            LessonOrigin::DeadEnd => "distilled from a dead end".to_string(),
        },
        symptom: if l.symptom_line.is_empty() {
            String::new()
        } else {
            code_span(&l.symptom_line)
        },
        symptom_text: if l.symptom.text.is_empty() {
            String::new()
        } else {
            literal(&l.symptom.text, 2)
        },
        cause: if l.cause.is_empty() {
            String::new()
        } else {
            literal(&l.cause, 2)
        },
        condition: l
            .cause_condition
            .as_deref()
            .map(code_span)
            .unwrap_or_default(),
        fix: std::iter::once(&l.fix)
            .chain(&l.then)
            .map(|r| code_span(&notation::remedy(r)))
            .collect::<Vec<_>>()
            .join(", then "),
        guards: ids(&l.guards),
        evidence_count: l.evidence_count,
        evidence: provenance(&l.evidence),
        provenance: provenance(&l.provenance),
        skill: skill_link(&l.skill),
    }
}

#[derive(Debug, Serialize)]
pub struct DeadEndView {
    pub id: String,
    pub call: String,
    pub outcome: String,
    pub explained_by: String,
    pub failed_checks: Vec<String>,
    pub reasons: Vec<String>,
    pub skill: String,
    pub provenance: String,
}

pub fn dead_end(d: &DeadEndIr) -> DeadEndView {
    DeadEndView {
        id: code_span(&d.id),
        call: literal(&notation::call(d.op, &d.params), 2),
        outcome: match &d.outcome {
            DeadEndOutcome::Reverted { by } => format!("reverted by {}", code_span(by)),
            DeadEndOutcome::Superseded { by } => format!("superseded by {}", code_span(by)),
            DeadEndOutcome::Failed => "failed and was never fixed".to_string(),
        },
        explained_by: d.explained_by.as_deref().map(code_span).unwrap_or_default(),
        failed_checks: d.failed_checks.iter().map(|c| code_span(c)).collect(),
        reasons: d.reasons.iter().map(|r| literal(r, 4)).collect(),
        skill: skill_link(&d.skill),
        provenance: provenance(&d.provenance),
    }
}

/// Header data every page shares.
#[derive(Debug, Serialize)]
pub struct PageView {
    pub front_matter: String,
    pub title: String,
    pub intro: Vec<String>,
    pub sections: Vec<SectionView>,
}

/// One `##` section: its body, or a pointer to the reference file holding it.
#[derive(Debug, Serialize)]
pub struct SectionView {
    pub heading: String,
    pub body: String,
}

#[derive(Debug, Serialize)]
pub struct PhaseLinkView {
    pub index: u8,
    pub link: String,
    pub title: String,
    /// `4 steps`.
    pub steps: String,
    pub gates: Vec<String>,
}

pub fn phase_links(ir: &SkillIr) -> Vec<PhaseLinkView> {
    ir.phases
        .iter()
        .map(|p| PhaseLinkView {
            index: p.index,
            link: skill_link(&p.name),
            title: p.title.clone(),
            steps: crate::distill::skills::count(p.steps.len(), "step", "steps"),
            gates: p
                .exit_gates
                .iter()
                .map(|g| {
                    let v = gate(g);
                    format!("{}: {}", v.subject, v.check)
                })
                .collect(),
        })
        .collect()
}

#[derive(Debug, Serialize)]
pub struct SkillLinkView {
    pub link: String,
    pub hypotheses: usize,
}

pub fn skill_links(ir: &SkillIr, kind: LessonKind) -> Vec<SkillLinkView> {
    ir.skills
        .iter()
        .filter(|s| s.kind == kind)
        .map(|s| SkillLinkView {
            link: skill_link(&s.name),
            hypotheses: s.hypotheses.len(),
        })
        .collect()
}

#[derive(Debug, Serialize)]
pub struct HypothesisView {
    pub number: usize,
    pub check: String,
    pub lesson: LessonView,
    pub phases: String,
}

pub fn hypotheses(ir: &SkillIr, skill: &SkillSetIr) -> Vec<HypothesisView> {
    skill
        .hypotheses
        .iter()
        .filter_map(|h| ir.lessons.get(&h.lesson).map(|l| (h, l)))
        .enumerate()
        .map(|(i, (h, l))| HypothesisView {
            number: i + 1,
            check: literal(&h.check, 2),
            lesson: lesson(l),
            phases: l
                .phases
                .iter()
                .map(|p| match catalog::phase(*p) {
                    Some(spec) => skill_link(spec.name),
                    None => p.to_string(),
                })
                .collect::<Vec<_>>()
                .join(", "),
        })
        .collect()
}

/// Steps of the effective path that apply an optimization technique, with the
/// phase they belong to.
#[derive(Debug, Serialize)]
pub struct AppliedView {
    pub call: String,
    pub id: String,
    pub phase: String,
    pub notes: Vec<String>,
    pub provenance: String,
}

/// Lookups by id over the whole IR, built once per emission.
pub struct Index<'a> {
    steps: HashMap<&'a str, (&'a PhaseIr, &'a StepIr)>,
    dead_ends: HashMap<&'a str, &'a DeadEndIr>,
}

impl<'a> Index<'a> {
    pub fn new(ir: &'a SkillIr) -> Self {
        let mut steps = HashMap::new();
        let mut dead_ends = HashMap::new();
        for phase in &ir.phases {
            for step in &phase.steps {
                steps.insert(step.id.as_str(), (phase, step));
            }
            for dead_end in &phase.dead_ends {
                dead_ends.insert(dead_end.id.as_str(), dead_end);
            }
        }
        Index { steps, dead_ends }
    }
}

/// Applied steps a skill page lists; the phase pages list every step.
pub const APPLIED_MAX: usize = 20;

pub fn applied_steps(index: &Index, skill: &SkillSetIr) -> Vec<AppliedView> {
    skill
        .applied_steps
        .iter()
        .take(APPLIED_MAX)
        .filter_map(|id| index.steps.get(id.as_str()))
        .map(|(phase, step)| AppliedView {
            call: literal(&notation::call(step.op, &step.params), 2),
            id: code_span(&step.id),
            phase: skill_link(&phase.name),
            notes: step.notes.iter().map(|n| literal(n, 4)).collect(),
            provenance: provenance(&step.provenance),
        })
        .collect()
}

pub fn skill_dead_ends(index: &Index, skill: &SkillSetIr) -> Vec<DeadEndView> {
    skill
        .dead_ends
        .iter()
        .filter_map(|id| index.dead_ends.get(id.as_str()))
        .map(|d| dead_end(d))
        .collect()
}
