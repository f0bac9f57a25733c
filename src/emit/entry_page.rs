//! The entry skill, `deploy-new-llm`: the rules every phase and skill follows, the
//! phases with their exit gates, which debugging skill a failing run's message calls
//! for, the optimization skills, the lessons that hold for some models only (with the
//! features they need), the sources and what became of everything they recorded, and
//! the shipped summary of the trajectory language.

use std::collections::BTreeMap;

use serde_json::json;
use skillc_runtime::bundle::{LessonKind, SCHEMA_VERSION};

use super::cite::{self, Cites};
use super::frontmatter::FrontMatter;
use super::language;
use super::markdown::{code_span, inline};
use super::page::{assemble, Draft, Page, SkillDir, Templates};
use super::print;
use super::EmitError;
use crate::distill::catalog::ENTRY_SKILL;
use crate::distill::ir::SkillIr;
use crate::distill::placement;

/// Metadata every generated SKILL.md carries.
pub fn metadata(ir: &SkillIr, kind: &str) -> BTreeMap<String, String> {
    [
        ("bundle", ir.name.clone()),
        ("kind", kind.to_string()),
        ("generated-by", "skillc".to_string()),
        ("schema-version", SCHEMA_VERSION.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The paragraph every page but the entry skill opens with: the one text the pages
/// share.
pub fn part_of() -> String {
    format!(
        "Part of {}: its rules (gates, escalation, one change at a time, recording) apply here.",
        cite::skill(ENTRY_SKILL)
    )
}

pub fn page(
    t: &Templates,
    ir: &SkillIr,
    entries: &cite::ByLocation<'_>,
) -> Result<SkillDir, EmitError> {
    let sources = print::sources(ir);
    let front_matter = FrontMatter {
        name: ENTRY_SKILL.to_string(),
        description: format!(
            "Deploy a decoder-only LLM end to end on an AMD XDNA 2 (npu2) NPU: run the eight \
             phase skills in order (CPU reference, kernels, one block, whole model, prefill and \
             decode optimization, finalize, independent evaluation), each gated on numerical \
             correctness, and the debugging and optimization skills they call. Use when bringing \
             up a new model from its config.json on the NPU. Distilled from trajectory {sources}."
        ),
        metadata: metadata(ir, "entry"),
    };
    let intro = vec![
        "This skill orchestrates: every gate belongs to its phase skill, every fix to a \
         debugging or optimization skill. Follow the rules below in all of them."
            .to_string(),
    ];
    let language_link = cite::reference(language::FILE, "references/trajectory-language.md");
    let drafts = vec![
        Draft::new(
            "Rules",
            "rules",
            t.render("rules", &json!({ "language": language_link }))?,
        ),
        Draft::new("Phases", "phases", phases(ir)),
        Draft::new(
            "When a run fails",
            "when-a-run-fails",
            skills(ir, LessonKind::Debugging),
        ),
        Draft::new(
            "Optimization skills",
            "optimization-skills",
            skills(ir, LessonKind::Optimization),
        ),
        Draft::new(
            "Lessons for some models only",
            "conditional-lessons",
            conditional_lessons(ir),
        ),
        Draft::new("Sources", "sources", sources_section(ir)),
        Draft::fixed(
            "Machine-readable bundle",
            "bundle",
            t.render("bundle-note", &json!({ "schema": SCHEMA_VERSION }))?,
        ),
    ];
    assemble(
        t,
        Page {
            name: ENTRY_SKILL.to_string(),
            front_matter,
            title: "Deploy a new LLM on XDNA 2".to_string(),
            intro,
            drafts,
            references: vec![(language::FILE.to_string(), language::summary())],
            cites: Cites::new(entries),
        },
    )
}

fn phases(ir: &SkillIr) -> String {
    let mut lines = Vec::new();
    for p in &ir.phases {
        lines.push(format!(
            "{}. {}: {}.",
            p.index,
            cite::skill(&p.name),
            p.title
        ));
        if p.exit_gates.is_empty() {
            lines.push("   - exit gate: none recorded; do not pass the phase without one".into());
        }
        for g in &p.exit_gates {
            let (subject, check) = print::gate(g);
            lines.push(format!(
                "   - exit gate: {}: {}",
                code_span(&subject),
                code_span(&check)
            ));
        }
    }
    lines.join("\n")
}

fn skills(ir: &SkillIr, kind: LessonKind) -> String {
    let lines: Vec<String> = ir
        .skills
        .iter()
        .filter(|s| s.kind == kind)
        .map(|s| {
            let when: Vec<String> = if s.triggers.is_empty() {
                s.patterns
                    .iter()
                    .map(|p| code_span(&print::machine(p)))
                    .collect()
            } else {
                s.triggers.iter().map(|t| code_span(t)).collect()
            };
            format!(
                "- {}: {}. When: {}",
                cite::skill(&s.name),
                inline(print::skill_title(s).trim_end_matches('.')),
                when.join("; ")
            )
        })
        .collect();
    if lines.is_empty() {
        return "None recorded in the trajectory.".to_string();
    }
    lines.join("\n")
}

/// The lessons that hold for some models only, with the features they need, so an
/// agent with a new model sees at once which apply to it.
fn conditional_lessons(ir: &SkillIr) -> String {
    let lines: Vec<String> = ir
        .lessons
        .values()
        .filter_map(|l| {
            let condition = l.condition.as_ref()?;
            Some(format!(
                "- `{}`: {} ({}; learnt on {})",
                skillc_runtime::notation::condition(condition),
                inline(&print::title(ir, l)),
                cite::skill(&l.skill),
                l.deployments.join(", ")
            ))
        })
        .collect();
    if lines.is_empty() {
        return "None: every lesson of this bundle holds for any model. A lesson that needs a model feature says so with its condition (`if qk_norm`, `if n_kv_heads == n_heads`).".to_string();
    }
    format!(
        "Check your model's `config.json` against these conditions; the others' lessons hold for any model.\n\n{}",
        lines.join("\n")
    )
}

fn sources_section(ir: &SkillIr) -> String {
    let mut lines: Vec<String> = ir
        .sources
        .iter()
        .map(|s| {
            format!(
                "- trajectory {}: model {}, target {}, {} file(s)",
                code_span(&s.trajectory),
                code_span(&s.model),
                code_span(&s.target),
                s.files.len()
            )
        })
        .collect();
    lines.push(format!(
        "- what the bundle placed: {}",
        placement::account(ir).summary()
    ));
    lines.join("\n")
}
