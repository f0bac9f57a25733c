//! One phase skill. Its SKILL.md teaches the phase for any model: the entry gate,
//! the procedure (the recorded steps generalised: each operation once, with what
//! stays fixed and what each call site sets, the lessons that guard it, and why a
//! step was recorded when a model-specific failure called for it), the phase's rules
//! and the constraints its lessons recorded as formulas, the exit gates, the phase's
//! context notes and its dead ends. The concrete steps of the recorded model, with
//! their notes and figures, go to `references/worked-example.md`.

use std::collections::BTreeMap;

use skillc_runtime::bundle::Value;
use skillc_runtime::ops::OpKind;
use skillc_runtime::phase::DeployPhase;

use super::cite::{self, Cites};
use super::entry_page::{metadata, part_of};
use super::frontmatter::FrontMatter;
use super::hardware;
use super::markdown::{code_span, inline, inline_name, literal};
use super::page::{assemble, Draft, Page, SkillDir, Templates};
use super::print;
use super::EmitError;
use crate::distill::catalog;
use crate::distill::ir::{DeadEndIr, PhaseIr, SkillIr, StepIr};

/// Parameters whose values are the recorded model's own (its shapes and tilings):
/// the procedure names them, the worked example gives them.
const MODEL_VALUES: &[&str] = &["shape", "tile", "herd", "parts", "rows", "layer"];

pub fn page(
    t: &Templates,
    ir: &SkillIr,
    phase: &PhaseIr,
    entries: &cite::ByLocation<'_>,
) -> Result<SkillDir, EmitError> {
    let spec = catalog::phase(phase.index);
    let mut meta = metadata(ir, "phase");
    meta.insert("phase".to_string(), phase.index.to_string());
    let when = match phase.index.previous().map(catalog::phase) {
        None => "Use it first, on the model directory (config.json, with or without weights)."
            .to_string(),
        Some(previous) => format!(
            "Use it once phase {} ({}) has passed every exit gate on this model.",
            previous.index, previous.title
        ),
    };
    let front_matter = FrontMatter {
        name: phase.name.clone(),
        description: format!(
            "{} Phase {} of 8 ({}) in deploying a decoder-only LLM on an AMD XDNA 2 (npu2) NPU. {when} Distilled from trajectory {}.",
            spec.purpose,
            phase.index,
            phase.title.to_lowercase(),
            print::sources(ir)
        ),
        metadata: meta,
    };
    let mut cites = Cites::new(entries);
    let mut drafts = vec![
        Draft::fixed("Entry gate", "entry-gate", entry_gate(phase.index)),
        Draft::new("Procedure", "procedure", procedure(ir, phase)),
        Draft::new("Rules and formulas", "rules", rules(ir, phase, spec.rules)),
        Draft::new(
            "Exit gates",
            "exit-gates",
            exit_gates(ir, phase, &mut cites),
        ),
    ];
    if !phase.context.is_empty() {
        drafts.push(Draft::new("Context", "context", context(ir, phase)));
    }
    if !phase.dead_ends.is_empty() {
        drafts.push(Draft::new("Dead ends", "dead-ends", dead_ends(ir, phase)));
    }
    let example = worked_example(ir, phase);
    drafts.push(Draft::fixed(
        "References",
        "references",
        references(ir, phase),
    ));
    assemble(
        t,
        Page {
            name: phase.name.clone(),
            front_matter,
            title: format!("Phase {}: {}", phase.index, phase.title),
            intro: vec![format!("**Purpose.** {}", spec.purpose), part_of()],
            drafts,
            references: vec![("worked-example.md".to_string(), example)],
            cites,
        },
    )
}

fn entry_gate(index: DeployPhase) -> String {
    match index.previous().map(catalog::phase) {
        None => "None: this is the first phase. Start from the model directory: `config.json` \
                 with `*.safetensors` weights, or the config alone with seeded random weights \
                 for performance work."
            .to_string(),
        Some(previous) => format!(
            "Phase {} ({}) passed every exit gate on this model. Do not start phase {index} otherwise.",
            previous.index,
            cite::skill(previous.name)
        ),
    }
}

/// Steps grouped by operation, in the order each operation first appears.
fn groups(steps: &[StepIr]) -> Vec<(OpKind, Vec<&StepIr>)> {
    let mut groups: Vec<(OpKind, Vec<&StepIr>)> = Vec::new();
    for step in steps {
        match groups.iter_mut().find(|(op, _)| *op == step.op) {
            Some((_, members)) => members.push(step),
            None => groups.push((step.op, vec![step])),
        }
    }
    groups
}

/// The model the steps were recorded on, or how many models when a merged bundle
/// recorded them on several (each step's model is its deployment's, never the
/// bundle's first).
fn models_of(ir: &SkillIr, steps: &[&StepIr]) -> String {
    let mut models: Vec<&str> = steps
        .iter()
        .filter_map(|step| step.provenance.first())
        .map(|p| print::model_of(ir, print::deployment_of(p)))
        .collect();
    models.sort_unstable();
    models.dedup();
    match models.as_slice() {
        [one] => code_span(one),
        several => format!("{} models", several.len()),
    }
}

/// The recorded steps as a procedure for any model.
fn procedure(ir: &SkillIr, phase: &PhaseIr) -> String {
    if phase.steps.is_empty() {
        return format!(
            "The trajectory recorded no step on the effective path of phase {}. Establish the phase's purpose with the operations of the trajectory language and record them.",
            phase.index
        );
    }
    let mut out = Vec::new();
    for (i, (op, steps)) in groups(&phase.steps).into_iter().enumerate() {
        let doc = op.spec().doc;
        let times = if steps.len() == 1 {
            String::new()
        } else {
            format!(" ({} times on {})", steps.len(), models_of(ir, &steps))
        };
        out.push(format!(
            "{}. {}{times}: {doc}; on the NPU: {}.",
            i + 1,
            code_span(op.name()),
            hardware::where_done(op)
        ));
        let (fixed, varying) = split_params(&steps);
        if !fixed.is_empty() {
            out.push(format!(
                "   - with {}",
                code_span(&print::params(Some(op), &fixed))
            ));
        }
        if !varying.is_empty() {
            out.push(format!(
                "   - set per call site: {}",
                varying
                    .iter()
                    .map(|k| code_span(k))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let mut guards: Vec<&String> = steps.iter().flat_map(|s| &s.guarded_by).collect();
        guards.sort();
        guards.dedup();
        if !guards.is_empty() {
            out.push(format!("   - guarded by {}", lesson_links(ir, &guards)));
        }
        if let Some(format) = steps.iter().find_map(|s| s.weights) {
            out.push(format!("   - {}", print::weights_advice(format, op, "its")));
        }
        for step in &steps {
            for lesson in step.applies.iter().filter_map(|l| ir.lessons.get(l)) {
                out.push(format!(
                    "   - recorded on {} because {} ({}): do it when that lesson's symptom shows",
                    models_of(ir, &[step]),
                    code_span(&print::title(ir, lesson)),
                    cite::skill(&lesson.skill)
                ));
            }
        }
        let mut skills: Vec<&String> = steps.iter().filter_map(|s| s.skill.as_ref()).collect();
        skills.sort();
        skills.dedup();
        for skill in skills {
            out.push(format!("   - technique: {}", cite::skill(skill)));
        }
    }
    out.push(String::new());
    let recorded_on = match ir.sources.as_slice() {
        [one] => code_span(&one.model),
        _ => "each recorded model".to_string(),
    };
    out.push(format!(
        "The values {recorded_on} used for every step of phase {} are in {}.",
        phase.index,
        cite::reference("worked-example.md", "references/worked-example.md")
    ));
    out.join("\n")
}

/// Parameters every step of a group sets to the same value, and the keys that vary
/// (or that hold the recorded model's own shapes).
fn split_params(steps: &[&StepIr]) -> (BTreeMap<String, Value>, Vec<String>) {
    let mut fixed = BTreeMap::new();
    let mut varying = Vec::new();
    let mut keys: Vec<&String> = steps.iter().flat_map(|s| s.params.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let first = steps[0].params.get(key);
        let same = first.is_some() && steps.iter().all(|s| s.params.get(key) == first);
        match first {
            Some(v) if same && !MODEL_VALUES.contains(&key.as_str()) => {
                fixed.insert(key.clone(), v.clone());
            }
            _ => varying.push(key.clone()),
        }
    }
    (fixed, varying)
}

fn lesson_links(ir: &SkillIr, ids: &[&String]) -> String {
    ids.iter()
        .map(|id| match ir.lessons.get(*id) {
            Some(l) => format!("{} in {}", code_span(id), cite::skill(&l.skill)),
            None => code_span(id),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The phase's rules, then a link to every lesson first met in the phase (each is
/// written once, in its skill), with the models it is for.
fn rules(ir: &SkillIr, phase: &PhaseIr, rules: &[&str]) -> String {
    let mut out: Vec<String> = rules.iter().map(|r| format!("- {r}")).collect();
    let lessons: Vec<String> = phase
        .lessons
        .iter()
        .filter_map(|id| ir.lessons.get(id))
        .filter(|l| l.phases.first() == Some(&phase.index))
        .map(|l| {
            let models = l.condition.as_ref().map_or_else(String::new, |c| {
                format!(" (for `{}`)", skillc_runtime::notation::condition(c))
            });
            format!(
                "- {}{models}: {}",
                inline(&print::title(ir, l)),
                cite::skill(&l.skill)
            )
        })
        .collect();
    if !lessons.is_empty() {
        out.push(String::new());
        out.push(format!(
            "Lessons first met in phase {}, each written in full in its skill:",
            phase.index
        ));
        out.push(String::new());
        out.extend(lessons);
    }
    out.join("\n")
}

/// The checks that decide the phase, by rule: `op metric` pairs of the catalog.
fn exit_criteria(phase: &PhaseIr) -> String {
    catalog::phase(phase.index)
        .exit_criteria
        .iter()
        .map(|(op, metric)| code_span(&format!("{} {metric}", op.name())))
        .collect::<Vec<_>>()
        .join(", ")
}

fn exit_gates(ir: &SkillIr, phase: &PhaseIr, cites: &mut Cites) -> String {
    let criteria = format!(
        "Only these checks decide phase {}: {}.",
        phase.index,
        exit_criteria(phase)
    );
    if phase.exit_gates.is_empty() {
        return format!(
            "{criteria}\n\nThe trajectory recorded none of them passing for phase {}. Do not treat it as passed without them: run these checks and record their results.",
            phase.index
        );
    }
    let mut out = vec![
        criteria,
        String::new(),
        format!(
            "{} before {}:",
            match phase.exit_gates.len() {
                1 => "This gate must hold".to_string(),
                n => format!("All {n} gates must hold"),
            },
            match phase.index.next().map(catalog::phase) {
                Some(next) => format!("phase {} starts", next.index),
                None => "the deployment is reported done".to_string(),
            }
        ),
    ];
    out.push(String::new());
    for g in &phase.exit_gates {
        let (subject, check) = print::gate(g);
        let on = g
            .provenance
            .first()
            .map(|p| format!(" on `{}`", print::model_of(ir, print::deployment_of(p))))
            .unwrap_or_default();
        out.push(format!(
            "- {}: {}; recorded {}{on}; from {}",
            code_span(&subject),
            code_span(&check),
            print::recorded(g),
            cites.some(&g.provenance, 1)
        ));
    }
    out.join("\n")
}

fn context(ir: &SkillIr, phase: &PhaseIr) -> String {
    context_notes(ir, &phase.context)
}

/// The notes and decisions `ids` as a list, each citing its entry.
pub fn context_notes(ir: &SkillIr, ids: &[String]) -> String {
    ids.iter()
        .filter_map(|id| ir.notes.get(id))
        .map(|n| {
            format!(
                "- {} {}: {}",
                if n.decision { "decision" } else { "note" },
                Cites::shown(ir, &n.id),
                literal(&n.text, 2)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A dead end in full: what was tried, what became of it, why. `page` is the skill
/// directory it is written in, which it does not link to.
pub fn dead_end(ir: &SkillIr, d: &DeadEndIr, page: &str) -> String {
    let mut out = vec![format!(
        "- {}: {}",
        Cites::shown(ir, &d.id),
        literal(&print::call(d.op, &d.params), 2)
    )];
    out.push(format!("  - {}", d.outcome));
    for check in &d.failed {
        out.push(format!(
            "  - failed check: {}",
            code_span(&print::check(check))
        ));
    }
    if let Some(lesson) = d.explained_by.as_ref().and_then(|l| ir.lessons.get(l)) {
        if lesson.skill == page {
            out.push(format!(
                "  - explained by lesson {} above",
                code_span(&lesson.id)
            ));
        } else {
            out.push(format!(
                "  - explained by lesson {} in {}",
                code_span(&lesson.id),
                cite::skill(&lesson.skill)
            ));
        }
    }
    for reason in d.reasons.iter().filter_map(|r| ir.notes.get(r)) {
        out.push(format!(
            "  - why ({}): {}",
            reason.id,
            literal(&reason.text, 4)
        ));
    }
    out.join("\n")
}

/// Dead ends its skill keeps are linked; the others are shown here in full.
fn dead_ends(ir: &SkillIr, phase: &PhaseIr) -> String {
    let mut out = Vec::new();
    for d in &phase.dead_ends {
        match &d.skill {
            Some(skill) => out.push(format!(
                "- {} ({}): see {}",
                code_span(&d.id),
                code_span(&print::call(d.op, &d.params)),
                cite::skill(skill)
            )),
            None => out.push(dead_end(ir, d, &phase.name)),
        }
    }
    out.join("\n")
}

fn references(ir: &SkillIr, phase: &PhaseIr) -> String {
    let mut lines = vec![format!(
        "- {}: phase {} step by step as recorded, with the notes and figures",
        cite::reference("worked-example.md", "references/worked-example.md"),
        phase.index
    )];
    let mut skills: Vec<&str> = phase
        .lessons
        .iter()
        .filter_map(|id| ir.lessons.get(id))
        .map(|l| l.skill.as_str())
        .chain(phase.dead_ends.iter().filter_map(|d| d.skill.as_deref()))
        .chain(phase.steps.iter().filter_map(|s| s.skill.as_deref()))
        .collect();
    skills.sort();
    skills.dedup();
    if !skills.is_empty() {
        lines.push(format!(
            "- skills phase {} draws on: {}",
            phase.index,
            skills
                .iter()
                .map(|s| cite::skill(s))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    lines.join("\n")
}

/// `references/worked-example.md`: the steps, gates and figures of the recorded model.
fn worked_example(ir: &SkillIr, phase: &PhaseIr) -> String {
    let model = ir
        .sources
        .iter()
        .map(|s| {
            format!(
                "{} (trajectory {})",
                inline_name(&s.model),
                inline_name(&s.trajectory)
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = vec![
        format!(
            "# Phase {}: {}, as recorded on {}",
            phase.index,
            phase.title,
            model
        ),
        String::new(),
        "The steps below are the recorded model's; the SKILL.md says how to derive them for another model.".to_string(),
    ];
    if !phase.sessions.is_empty() {
        out.push(String::new());
        out.push(format!(
            "Sessions: {}.",
            phase
                .sessions
                .iter()
                .map(|s| code_span(s))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out.push(String::new());
    out.push("## Steps".to_string());
    out.push(String::new());
    for (i, step) in phase.steps.iter().enumerate() {
        let column = (i + 1).to_string().len() + 2;
        let pad = " ".repeat(column);
        out.push(format!(
            "{}. {}",
            i + 1,
            literal(&print::call(step.op, &step.params), column)
        ));
        out.push(format!(
            "{pad}- step {}, from {}",
            code_span(&step.id),
            Cites::locations(&step.provenance)
        ));
        for note in step.notes.iter().filter_map(|n| ir.notes.get(n)) {
            out.push(format!(
                "{pad}- {}: {}",
                note.id,
                literal(&note.text, column + 2)
            ));
        }
    }
    if !phase.targets.is_empty() {
        out.push(String::new());
        out.push("## Figures reached".to_string());
        out.push(String::new());
        for target in &phase.targets {
            let conditions = if target.conditions.is_empty() {
                String::new()
            } else {
                format!(
                    " when {}",
                    code_span(&print::params(None, &target.conditions))
                )
            };
            out.push(format!(
                "- {} ({}){conditions}; from {}",
                code_span(&print::target(target)),
                target.source.as_str(),
                Cites::locations(&target.provenance)
            ));
        }
    }
    out.join("\n")
}
