//! One debugging or optimization skill, written for an agent with a real NPU. A
//! debugging skill reads like the reference system's hand-written ones: the literal
//! messages that call for it, then the diagnosis in order (what to check, which
//! result points where), then each fix in words with where it is made, the models it
//! is for, the deployments it was learnt on and how the failure was diagnosed, then
//! what was tried and abandoned. An optimization skill gives when to apply it, the
//! technique its lessons teach and where the trajectory applied it. Every lesson is
//! written here once; phase pages link to it. The failing checks and remedies in
//! trajectory notation, as `bundle.json` holds them, go to `references/remedies.md`.

use std::collections::{HashMap, HashSet};

use skillc_runtime::bundle::{LessonKind, Remedy};

use super::cite::{self, Cites};
use super::entry_page::{metadata, part_of};
use super::frontmatter::FrontMatter;
use super::hardware;
use super::markdown::{code_span, inline, literal};
use super::page::{assemble, Draft, Page, SkillDir, Templates};
use super::phase_page;
use super::print;
use super::EmitError;
use crate::distill::catalog;
use crate::distill::ir::{LessonIr, PhaseIr, SkillIr, SkillSetIr, StepIr};

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
    entries: &cite::ByLocation<'_>,
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
                    applied(ir, skill, steps),
                ));
            }
        }
    }
    if !skill.dead_ends.is_empty() {
        drafts.push(Draft::new(
            "Tried and abandoned",
            "dead-ends",
            abandoned(ir, skill),
        ));
    }
    if !skill.context.is_empty() {
        drafts.push(Draft::new("Context", "context", context(ir, skill)));
    }
    drafts.push(Draft::fixed(
        "References",
        "references",
        references(skill, !lessons.is_empty()),
    ));
    let references = if lessons.is_empty() {
        Vec::new()
    } else {
        vec![(REMEDIES.to_string(), remedies(ir, skill, &lessons))]
    };
    assemble(
        t,
        Page {
            name: skill.name.clone(),
            front_matter,
            title: inline(&print::skill_title(skill)),
            intro: vec![part_of()],
            drafts,
            references,
            cites,
        },
    )
}

/// The literal triggers; the checks that show the skill's failures when no message
/// was recorded.
fn trigger(skill: &SkillSetIr) -> String {
    if !skill.triggers.is_empty() {
        let items: Vec<String> = skill
            .triggers
            .iter()
            .map(|t| format!("- {}", literal(t, 2)))
            .collect();
        return format!(
            "Use `{}` when a run shows one of these:\n{}",
            skill.name,
            items.join("\n")
        );
    }
    if !skill.patterns.is_empty() {
        let items: Vec<String> = skill
            .patterns
            .iter()
            .map(|p| format!("- {}", code_span(&print::machine(p))))
            .collect();
        return format!(
            "No message was recorded for `{}`; use it when one of these checks fails:\n{}",
            skill.name,
            items.join("\n")
        );
    }
    format!("No trigger was recorded for `{}`.", skill.name)
}

/// One step per hypothesis: what to check, and where each result points.
fn diagnosis(ir: &SkillIr, lessons: &[&LessonIr]) -> String {
    let mut out = Vec::new();
    for (i, lesson) in lessons.iter().enumerate() {
        let n = i + 1;
        let models = lesson.condition.as_ref().map_or_else(String::new, |c| {
            format!(
                " (models where `{}`)",
                skillc_runtime::notation::condition(c)
            )
        });
        out.push(format!(
            "{n}. {}{models}: check {}.",
            inline(&print::title(ir, lesson)),
            code_span(&print::hypothesis_check(lesson))
        ));
        let next = if n < lessons.len() {
            format!("go to step {}", n + 1)
        } else {
            format!(
                "none of the {} fits: escalate as the rules of {} say",
                lessons.len(),
                cite::skill(catalog::ENTRY_SKILL)
            )
        };
        out.push(format!(
            "   - holds: apply fix {n} below and re-run the failed check; does not hold: {next}."
        ));
    }
    out.join("\n")
}

/// Each lesson in full: what shows, why, the fix in words and where it is made, the
/// models it is for, where it was learnt, how the trajectory diagnosed it, and the
/// fixes other deployments gave for the same symptom.
fn fixes(ir: &SkillIr, lessons: &[&LessonIr], steps: &Steps<'_>, cites: &mut Cites) -> String {
    if lessons.is_empty() {
        return "No lesson was recorded for this skill; what the trajectory tried is below."
            .to_string();
    }
    let mut out = Vec::new();
    for (i, l) in lessons.iter().enumerate() {
        out.push(format!("### {}. {}", i + 1, inline(&print::title(ir, l))));
        out.push(String::new());
        let check = print::symptom(&l.symptom);
        match (l.symptom.text.is_empty(), check.is_empty()) {
            (false, false) => out.push(format!(
                "- what you see: {} (the failing check: {})",
                literal(&l.symptom.text, 2),
                code_span(&check)
            )),
            (false, true) => out.push(format!("- what you see: {}", literal(&l.symptom.text, 2))),
            (true, false) => out.push(format!("- the failing check: {}", code_span(&check))),
            (true, true) => {}
        }
        if !l.cause.is_empty() {
            out.push(format!("- cause: {}", literal(&l.cause, 2)));
        }
        if let Some(condition) = print::condition(l) {
            out.push(format!("- check: {}", code_span(&condition)));
        }
        out.extend(fix_lines(l));
        out.push(format!(
            "- for: {}",
            l.condition
                .as_ref()
                .map_or_else(|| "every model".to_string(), print::condition_words)
        ));
        out.push(format!(
            "- learnt on: {}; {} evidence: {}",
            print::deployments(ir, &l.deployments),
            l.evidence_count,
            cites.all(&l.evidence)
        ));
        let thresholds = print::measured_thresholds(l);
        if !thresholds.is_empty() {
            let first = l.deployments.first().map_or("", String::as_str);
            let whose = if l.deployments.len() == 1 {
                "one model's measurement"
            } else {
                "the first deployment's measurement"
            };
            out.push(format!(
                "- thresholds from {whose} (`{}`): {}; set yours from your model's own profile",
                print::model_of(ir, first),
                thresholds
                    .iter()
                    .map(|t| code_span(t))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
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
                "- diagnosed in {}: {}",
                Cites::shown(ir, &note.id),
                literal(&note.text, 2)
            ));
        }
        for note in l.notes.iter().filter_map(|n| ir.notes.get(n)) {
            out.push(format!(
                "- note {}: {}",
                Cites::shown(ir, &note.id),
                literal(&note.text, 2)
            ));
        }
        for other in l.alternatives.iter().filter_map(|id| ir.lessons.get(id)) {
            out.push(alternative(ir, l, other, lessons));
        }
        out.push(format!("- recorded as {}", cites.entry(ir, &l.id)));
        out.push(String::new());
    }
    out.join("\n")
}

/// Another deployment's fix for the same symptom: where it is written, the models
/// it is for, and whether anything tells the two apart.
fn alternative(ir: &SkillIr, lesson: &LessonIr, other: &LessonIr, here: &[&LessonIr]) -> String {
    let place = match here.iter().position(|l| l.id == other.id) {
        Some(i) => format!("fix {} of this skill", i + 1),
        None => cite::skill(&other.skill),
    };
    let models = |l: &LessonIr| {
        l.condition.as_ref().map_or_else(
            || "every model".to_string(),
            |c| format!("models where `{}`", skillc_runtime::notation::condition(c)),
        )
    };
    let apart = if lesson.condition == other.condition
        && lesson.cause_condition == other.cause_condition
    {
        "; nothing in the model's features tells the two apart: check each cause before applying either"
    } else {
        ""
    };
    format!(
        "- the same symptom was fixed otherwise on {}, for {}: {} ({place}){apart}",
        print::deployments(ir, &other.deployments),
        models(other),
        code_span(&print::title(ir, other)),
    )
}

/// The fix in words, or, where none was recorded, the operation and the parameters
/// it sets; then where that change is made.
fn fix_lines(l: &LessonIr) -> Vec<String> {
    let remedies: Vec<&Remedy> = std::iter::once(&l.fix).chain(&l.then).collect();
    let mut out: Vec<String> = if l.fix_text.is_empty() {
        remedies
            .iter()
            .map(|r| format!("- fix: {}", print::fix_formula(r)))
            .collect()
    } else if let [one] = l.fix_text.as_slice() {
        vec![format!("- fix: {}", literal(one, 2))]
    } else {
        // One fix that several deployments recorded, each in its own words.
        std::iter::once("- fix, as each deployment that met it wrote it:".to_string())
            .chain(l.fix_text.iter().map(|t| format!("  - {}", literal(t, 4))))
            .collect()
    };
    let mut places: Vec<&str> = remedies
        .iter()
        .map(|r| hardware::where_done(r.op))
        .collect();
    places.dedup();
    out.push(format!("- where: {}", places.join("; then ")));
    out
}

/// The entry id behind a step id.
fn entry_of(steps: &Steps<'_>, id: &str) -> String {
    steps
        .get(id)
        .first()
        .map_or_else(|| id.to_string(), |(_, s)| s.entry.clone())
}

/// How the step that applied a lesson did it, from the notes about it: one note
/// after a colon, several as a nested list (a fenced block must end its own line).
fn applier_notes(ir: &SkillIr, steps: &Steps<'_>, id: &str) -> String {
    let notes: Vec<&str> = steps
        .get(id)
        .iter()
        .flat_map(|(_, s)| &s.notes)
        .filter_map(|n| ir.notes.get(n))
        .map(|n| n.text.as_str())
        .collect();
    match notes.as_slice() {
        [] => String::new(),
        [one] => format!(": {}", literal(one, 2)),
        several => several
            .iter()
            .map(|text| format!("\n  - {}", literal(text, 4)))
            .collect(),
    }
}

fn applied(ir: &SkillIr, skill: &SkillSetIr, steps: &Steps<'_>) -> String {
    let mut out = Vec::new();
    for id in &skill.applied_steps {
        let Some(&(phase, step)) = steps.get(id).first() else {
            continue;
        };
        out.push(format!(
            "- in {}, from {}: {}",
            cite::skill(&phase.name),
            Cites::locations(&step.provenance),
            literal(&print::call(step.op, &step.params), 2)
        ));
        for note in step.notes.iter().filter_map(|n| ir.notes.get(n)) {
            out.push(format!("  - {}: {}", note.id, literal(&note.text, 4)));
        }
    }
    out.join("\n")
}

fn abandoned(ir: &SkillIr, skill: &SkillSetIr) -> String {
    let mut out = vec![format!(
        "What the trajectory tried under `{}` and gave up; do not repeat it without a new reason.",
        skill.name
    )];
    out.push(String::new());
    // A set: scanning the skill's list for every dead end of the bundle would make
    // the build quadratic in dead ends.
    let mine: HashSet<&str> = skill.dead_ends.iter().map(String::as_str).collect();
    for d in ir
        .phases
        .iter()
        .flat_map(|p| &p.dead_ends)
        .filter(|d| mine.contains(d.id.as_str()))
    {
        out.push(phase_page::dead_end(ir, d, &skill.name));
    }
    out.join("\n")
}

fn context(ir: &SkillIr, skill: &SkillSetIr) -> String {
    phase_page::context_notes(ir, &skill.context)
}

fn references(skill: &SkillSetIr, has_lessons: bool) -> String {
    let phases: Vec<String> = skill
        .phases
        .iter()
        .map(|p| cite::skill(catalog::phase(*p).name))
        .collect();
    let mut lines = vec![if phases.is_empty() {
        format!(
            "- `{}` belongs to no phase of the trajectory yet",
            skill.name
        )
    } else {
        format!("- phases that call `{}`: {}", skill.name, phases.join(", "))
    }];
    if has_lessons {
        lines.push(format!(
            "- {}: each lesson's failing check and remedy in trajectory notation, as `bundle.json` holds them",
            cite::reference(REMEDIES, "references/remedies.md")
        ));
    }
    lines.join("\n")
}

/// The file of `references/` with the machine-readable form of the skill's lessons.
const REMEDIES: &str = "remedies.md";

/// `references/remedies.md`: every lesson of the skill as a check and the remedy
/// `bundle.json` holds, in trajectory notation, for recording or replaying a run.
fn remedies(ir: &SkillIr, skill: &SkillSetIr, lessons: &[&LessonIr]) -> String {
    let mut out = vec![
        format!("# {}: remedies", inline(&print::skill_title(skill))),
        String::new(),
        "Each lesson of the skill as `bundle.json` holds it, in trajectory notation: the check whose failure calls for it, the models it is for, and the remedy (an operation and the parameters it sets, computed from the failing call's values and the model's sizes). Record what you do in the same notation.".to_string(),
    ];
    for (i, l) in lessons.iter().enumerate() {
        out.push(String::new());
        out.push(format!("## {}. {}", i + 1, code_span(&l.id)));
        out.push(String::new());
        out.push(format!("- title: {}", literal(&print::title(ir, l), 2)));
        let machine = print::machine(&l.machine);
        if !machine.is_empty() {
            out.push(format!("- check: {}", code_span(&machine)));
        }
        if let Some(c) = &l.condition {
            out.push(format!(
                "- if: {}",
                code_span(&skillc_runtime::notation::condition(c))
            ));
        }
        for r in print::remedies(l) {
            out.push(format!("- remedy: {}", code_span(&r)));
        }
    }
    out.join("\n")
}
