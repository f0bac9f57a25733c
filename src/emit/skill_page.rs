//! One debugging or optimization skill. A debugging skill reads like the reference
//! system's hand-written ones: the literal messages that call for it, then the
//! diagnosis in order (what to inspect, which result points where), then each fix in
//! words beside the remedy the runtime applies, with how the failure was diagnosed in
//! the trajectory and its evidence, then what was tried and abandoned. An
//! optimization skill gives when to apply it, the technique its lessons teach and
//! where the trajectory applied it. Every lesson is written here once; phase pages
//! link to it.

use std::collections::{BTreeMap, HashMap, HashSet};

use skillc_runtime::bundle::LessonKind;

use super::cite::{self, Cites};
use super::entry_page::{metadata, part_of};
use super::frontmatter::FrontMatter;
use super::markdown::{code_span, inline, literal};
use super::page::{assemble, Draft, Page, SkillDir, Templates};
use super::phase_page;
use super::print;
use super::EmitError;
use crate::distill::catalog;
use crate::distill::ir::{EntryIr, LessonIr, PhaseIr, SkillIr, SkillSetIr, StepIr};

/// Every step of the bundle by id, built once for all skill pages: a page
/// looks up the steps its lessons were applied by, and scanning every phase
/// for each would make the build quadratic in lessons.
pub struct Steps<'a> {
    by_id: HashMap<&'a str, Vec<(&'a PhaseIr, &'a StepIr)>>,
}

impl<'a> Steps<'a> {
    pub fn new(ir: &'a SkillIr) -> Self {
        let mut by_id: HashMap<&str, Vec<_>> = HashMap::new();
        for phase in &ir.phases {
            for step in &phase.steps {
                by_id
                    .entry(step.id.as_str())
                    .or_default()
                    .push((phase, step));
            }
        }
        Steps { by_id }
    }

    /// The steps called `id`, in bundle order.
    fn get(&self, id: &str) -> &[(&'a PhaseIr, &'a StepIr)] {
        self.by_id.get(id).map_or(&[], Vec::as_slice)
    }
}

pub fn page(
    t: &Templates,
    ir: &SkillIr,
    skill: &SkillSetIr,
    entries: &BTreeMap<String, &EntryIr>,
    steps: &Steps<'_>,
) -> Result<SkillDir, EmitError> {
    let kind = match skill.kind {
        LessonKind::Debugging => "debugging",
        LessonKind::Optimization => "optimization",
    };
    let mut meta = metadata(ir, kind);
    meta.insert(
        "evidence-count".to_string(),
        skill.evidence_count.to_string(),
    );
    let front_matter = FrontMatter {
        name: skill.name.clone(),
        description: print::skill_description(skill, &print::sources(ir)),
        metadata: meta,
    };
    let mut cites = Cites::new(entries);
    let lessons: Vec<&LessonIr> = skill
        .hypotheses
        .iter()
        .filter_map(|h| ir.lessons.get(&h.lesson))
        .collect();
    let mut drafts = vec![Draft::new(
        match skill.kind {
            LessonKind::Debugging => "Trigger",
            LessonKind::Optimization => "When to apply",
        },
        "trigger",
        trigger(skill),
    )];
    match skill.kind {
        LessonKind::Debugging => {
            if !lessons.is_empty() {
                drafts.push(Draft::new(
                    "Diagnosis, in order",
                    "diagnosis",
                    diagnosis(ir, &lessons),
                ));
            }
            drafts.push(Draft::new(
                "Fixes",
                "fixes",
                fixes(ir, &lessons, steps, &mut cites),
            ));
        }
        LessonKind::Optimization => {
            if !lessons.is_empty() {
                drafts.push(Draft::new(
                    "Technique",
                    "technique",
                    fixes(ir, &lessons, steps, &mut cites),
                ));
            }
            if !skill.applied_steps.is_empty() {
                drafts.push(Draft::new(
                    "Applied in the trajectory",
                    "applied",
                    applied(ir, skill, steps, &mut cites),
                ));
            }
        }
    }
    if !skill.dead_ends.is_empty() {
        drafts.push(Draft::new(
            "Tried and abandoned",
            "dead-ends",
            abandoned(ir, skill, &mut cites),
        ));
    }
    if !skill.context.is_empty() {
        drafts.push(Draft::new(
            "Context",
            "context",
            context(ir, skill, &mut cites),
        ));
    }
    drafts.push(Draft::fixed("References", "references", references(skill)));
    assemble(
        t,
        Page {
            name: skill.name.clone(),
            front_matter,
            title: inline(&print::skill_title(skill)),
            intro: vec![part_of()],
            drafts,
            references: Vec::new(),
            cites,
        },
    )
}

/// The literal triggers, then the runtime's checks that show them.
fn trigger(skill: &SkillSetIr) -> String {
    let mut paragraphs = Vec::new();
    if !skill.triggers.is_empty() {
        let items: Vec<String> = skill
            .triggers
            .iter()
            .map(|t| format!("- {}", literal(t, 2)))
            .collect();
        paragraphs.push(format!(
            "Use `{}` when a run shows one of these:\n{}",
            skill.name,
            items.join("\n")
        ));
    }
    if !skill.patterns.is_empty() {
        let items: Vec<String> = skill
            .patterns
            .iter()
            .map(|p| format!("- {}", code_span(&print::machine(p))))
            .collect();
        paragraphs.push(format!(
            "The runtime's checks that call for `{}` (trajectory notation):\n{}",
            skill.name,
            items.join("\n")
        ));
    }
    if paragraphs.is_empty() {
        paragraphs.push(format!("No trigger was recorded for `{}`.", skill.name));
    }
    paragraphs.join("\n\n")
}

/// One step per hypothesis: what to inspect, and where each result points.
fn diagnosis(ir: &SkillIr, lessons: &[&LessonIr]) -> String {
    let mut out = Vec::new();
    for (i, lesson) in lessons.iter().enumerate() {
        let n = i + 1;
        out.push(format!(
            "{n}. {}: inspect {}.",
            code_span(&print::title(ir, lesson)),
            code_span(&print::hypothesis_check(lesson))
        ));
        let cause = if lesson.cause.is_empty() {
            String::new()
        } else {
            format!("; the cause: {}", literal(&lesson.cause, 6))
        };
        out.push(format!(
            "   - holds: apply fix {n} below, then re-run the failed check{cause}"
        ));
        if n < lessons.len() {
            out.push(format!("   - does not hold: go to step {}.", n + 1));
        } else {
            out.push(format!(
                "   - does not hold: none of the {} fits; escalate as the rules of {} say.",
                lessons.len(),
                cite::skill(catalog::ENTRY_SKILL)
            ));
        }
    }
    out.join("\n")
}

/// Each lesson in full: what shows, why, the fix in words and as the runtime applies
/// it, how the trajectory diagnosed it, its evidence.
fn fixes(ir: &SkillIr, lessons: &[&LessonIr], steps: &Steps<'_>, cites: &mut Cites) -> String {
    if lessons.is_empty() {
        return "No lesson was recorded for this skill; what the trajectory tried is below."
            .to_string();
    }
    let mut out = Vec::new();
    for (i, l) in lessons.iter().enumerate() {
        out.push(format!("### {}. Lesson {}", i + 1, code_span(&l.id)));
        out.push(String::new());
        out.push(format!(
            "- what it teaches: {}",
            literal(&print::title(ir, l), 2)
        ));
        out.push(format!(
            "- recorded as {} ({} evidence), phases {}",
            cites.entry(ir, &l.id),
            l.evidence_count,
            l.phases
                .iter()
                .map(|p| cite::skill(catalog::phase(*p).name))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        if !l.symptom.text.is_empty() {
            out.push(format!("- what you see: {}", literal(&l.symptom.text, 2)));
        }
        let seen = print::symptom(&l.symptom);
        if !seen.is_empty() {
            out.push(format!("- as the runtime sees it: {}", code_span(&seen)));
        }
        if !l.cause.is_empty() {
            out.push(format!("- cause: {}", literal(&l.cause, 2)));
        }
        if let Some(condition) = print::condition(l) {
            out.push(format!("- cause as a condition: {}", code_span(&condition)));
        }
        for text in &l.fix_text {
            out.push(format!("- fix, in words: {}", literal(text, 2)));
        }
        out.push(format!(
            "- remedy the runtime applies: {}",
            print::remedies(l)
                .iter()
                .map(|r| code_span(r))
                .collect::<Vec<_>>()
                .join(", then ")
        ));
        if let Some(format) = l.weights {
            let op = std::iter::once(&l.fix)
                .chain(&l.then)
                .map(|r| r.op)
                .find(|op| op.spec().weights.depends())
                .unwrap_or(l.fix.op);
            out.push(format!(
                "- weights: {}",
                print::weights_advice(format, op, "the fix's")
            ));
        }
        for id in &l.applied_by {
            let notes = applier_notes(ir, steps, id);
            out.push(format!(
                "- applied by {}{}",
                cites.entry(ir, &entry_of(steps, id)),
                notes
            ));
        }
        for note in l.diagnosis.iter().filter_map(|n| ir.notes.get(n)) {
            out.push(format!(
                "- diagnosed in the trajectory ({}): {}",
                cites.entry(ir, &note.id),
                literal(&note.text, 2)
            ));
        }
        for note in l.notes.iter().filter_map(|n| ir.notes.get(n)) {
            out.push(format!(
                "- note ({}): {}",
                cites.entry(ir, &note.id),
                literal(&note.text, 2)
            ));
        }
        out.push(format!("- evidence: {}", cites.all(&l.evidence)));
        out.push(String::new());
    }
    out.join("\n")
}

/// The entry id behind a step id.
fn entry_of(steps: &Steps<'_>, id: &str) -> String {
    steps
        .get(id)
        .first()
        .map_or_else(|| id.to_string(), |(_, s)| s.entry.clone())
}

/// How the step that applied a lesson did it, from the notes about it.
fn applier_notes(ir: &SkillIr, steps: &Steps<'_>, id: &str) -> String {
    let notes: Vec<String> = steps
        .get(id)
        .iter()
        .flat_map(|(_, s)| &s.notes)
        .filter_map(|n| ir.notes.get(n))
        .map(|n| literal(&n.text, 2))
        .collect();
    if notes.is_empty() {
        String::new()
    } else {
        format!(": {}", notes.join(" "))
    }
}

fn applied(ir: &SkillIr, skill: &SkillSetIr, steps: &Steps<'_>, cites: &mut Cites) -> String {
    let mut out = Vec::new();
    for id in &skill.applied_steps {
        let Some(&(phase, step)) = steps.get(id).first() else {
            continue;
        };
        out.push(format!(
            "- in {}, from {}: {}",
            cite::skill(&phase.name),
            cites.all(&step.provenance),
            literal(&print::call(step.op, &step.params), 2)
        ));
        for note in step.notes.iter().filter_map(|n| ir.notes.get(n)) {
            out.push(format!("  - {}: {}", note.id, literal(&note.text, 4)));
        }
    }
    out.join("\n")
}

fn abandoned(ir: &SkillIr, skill: &SkillSetIr, cites: &mut Cites) -> String {
    let mut out = vec![format!(
        "What the trajectory tried under `{}` and gave up; do not repeat it without a new reason.",
        skill.name
    )];
    out.push(String::new());
    let kept: HashSet<&str> = skill.dead_ends.iter().map(String::as_str).collect();
    for d in ir
        .phases
        .iter()
        .flat_map(|p| &p.dead_ends)
        .filter(|d| kept.contains(d.id.as_str()))
    {
        out.push(phase_page::dead_end(ir, d, &skill.name, cites));
    }
    out.join("\n")
}

fn context(ir: &SkillIr, skill: &SkillSetIr, cites: &mut Cites) -> String {
    phase_page::context_notes(ir, &skill.context, cites)
}

fn references(skill: &SkillSetIr) -> String {
    let phases: Vec<String> = skill
        .phases
        .iter()
        .map(|p| cite::skill(catalog::phase(*p).name))
        .collect();
    if phases.is_empty() {
        format!(
            "- `{}` belongs to no phase of the trajectory yet",
            skill.name
        )
    } else {
        format!("- phases that call `{}`: {}", skill.name, phases.join(", "))
    }
}
