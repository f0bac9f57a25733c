//! Pages: one Agent Skills directory per phase, per cross-phase skill and for the
//! entry skill. Each section is rendered on its own first; a section longer than its
//! line budget moves whole to `references/<section>.md` and the SKILL.md points to
//! it, which keeps every body under the spec's 500 lines however long the
//! trajectory is, and decides placement from the section's own content only.

use std::collections::{BTreeMap, BTreeSet};

use handlebars::Handlebars;
use rayon::prelude::*;
use serde::Serialize;
use serde_json::json;
use skillc_runtime::bundle::{LessonKind, SCHEMA_VERSION};
use skillc_runtime::ops;

use super::frontmatter::FrontMatter;
use super::markdown::{code_span, literal};
use super::views::{self, Index, PageView, SectionView};
use super::EmitError;
use crate::distill::catalog::{self, ENTRY_SKILL};
use crate::distill::ir::{PhaseIr, SkillIr, SkillSetIr};
use crate::distill::skills::count;

/// The spec's limit on SKILL.md body length.
pub const BODY_MAX_LINES: usize = 500;

/// Templates, kept as files in the repository and embedded in the binary.
const TEMPLATES: &[(&str, &str)] = &[
    ("page", include_str!("templates/page.md.hbs")),
    ("reference", include_str!("templates/reference.md.hbs")),
    ("moved", include_str!("templates/moved.md.hbs")),
    ("steps", include_str!("templates/steps.md.hbs")),
    ("gates", include_str!("templates/gates.md.hbs")),
    ("lessons", include_str!("templates/lessons.md.hbs")),
    ("targets", include_str!("templates/targets.md.hbs")),
    ("dead-ends", include_str!("templates/dead-ends.md.hbs")),
    ("hypotheses", include_str!("templates/hypotheses.md.hbs")),
    ("applied", include_str!("templates/applied.md.hbs")),
    ("phases", include_str!("templates/phases.md.hbs")),
    ("skills", include_str!("templates/skills.md.hbs")),
    ("sources", include_str!("templates/sources.md.hbs")),
    ("rules", include_str!("templates/rules.md.hbs")),
    ("no-fit", include_str!("templates/no-fit.md.hbs")),
    (
        "opt-criteria",
        include_str!("templates/opt-criteria.md.hbs"),
    ),
    ("bundle-note", include_str!("templates/bundle-note.md.hbs")),
];

/// Items per chunk of a list rendered in parallel.
const LIST_CHUNK: usize = 512;

/// What every list template sees.
#[derive(Serialize)]
struct ListData<'a, T> {
    /// The chunk that carries the section's intro (or its "nothing recorded" text).
    first: bool,
    items: &'a [T],
}

/// The handlebars registry: no HTML escaping (views are already Markdown-safe) and
/// strict mode (a missing field is a bug, not an empty string).
pub struct Templates(Handlebars<'static>);

impl Templates {
    pub fn new() -> Result<Self, EmitError> {
        let mut hb = Handlebars::new();
        hb.register_escape_fn(handlebars::no_escape);
        hb.set_strict_mode(true);
        for (name, text) in TEMPLATES {
            hb.register_template_string(name, *text)
                .map_err(|e| EmitError::Template(Box::new(e)))?;
        }
        Ok(Templates(hb))
    }

    /// Renders a list template (`items`, and `first` for the intro of the first
    /// chunk). Long lists render in chunks in parallel and are joined in order; the
    /// text is the same as rendering them whole.
    fn list<T: Serialize + Sync>(&self, name: &str, items: &[T]) -> Result<String, EmitError> {
        self.list_in_chunks(name, items, LIST_CHUNK)
    }

    fn list_in_chunks<T: Serialize + Sync>(
        &self,
        name: &str,
        items: &[T],
        chunk: usize,
    ) -> Result<String, EmitError> {
        if items.len() <= chunk {
            return self.render(name, &ListData { first: true, items });
        }
        let parts = items
            .par_chunks(chunk)
            .enumerate()
            .map(|(i, items)| {
                self.render(
                    name,
                    &ListData {
                        first: i == 0,
                        items,
                    },
                )
            })
            .collect::<Result<Vec<String>, EmitError>>()?;
        Ok(parts.concat())
    }

    fn render(&self, name: &str, data: &impl Serialize) -> Result<String, EmitError> {
        self.0
            .render(name, data)
            .map_err(|e| EmitError::Render(Box::new(e)))
    }
}

/// The files of one skill directory, paths relative to it.
#[derive(Debug)]
pub struct SkillDir {
    pub name: String,
    pub files: Vec<(String, String)>,
}

/// A section before placement.
struct Draft {
    heading: &'static str,
    slug: &'static str,
    body: String,
    budget: usize,
}

impl Draft {
    fn new(heading: &'static str, slug: &'static str, body: String, budget: usize) -> Self {
        Draft {
            heading,
            slug,
            body,
            budget,
        }
    }
}

struct Page {
    name: String,
    front_matter: FrontMatter,
    title: String,
    intro: Vec<String>,
    drafts: Vec<Draft>,
}

fn assemble(t: &Templates, page: Page) -> Result<SkillDir, EmitError> {
    let mut files = Vec::new();
    let mut sections = Vec::new();
    for draft in page.drafts {
        let body = draft.body.trim_end().to_string();
        let lines = body.lines().count();
        let body = if lines > draft.budget {
            let path = format!("references/{}.md", draft.slug);
            let title = format!("{}: {}", page.title, draft.heading);
            let reference = t.render("reference", &json!({ "title": title, "body": body }))?;
            files.push((path.clone(), finish(&reference)));
            t.render("moved", &json!({ "lines": lines, "path": path }))?
        } else {
            body
        };
        sections.push(SectionView {
            heading: draft.heading.to_string(),
            body: body.trim_end().to_string(),
        });
    }
    let view = PageView {
        front_matter: page.front_matter.render(),
        title: page.title,
        intro: page.intro,
        sections,
    };
    let skill_md = finish(&t.render("page", &view)?);
    let body_lines = body_line_count(&skill_md);
    if body_lines >= BODY_MAX_LINES {
        return Err(EmitError::BodyTooLong {
            skill: page.name,
            lines: body_lines,
        });
    }
    files.insert(0, ("SKILL.md".to_string(), skill_md));
    Ok(SkillDir {
        name: page.name,
        files,
    })
}

/// One trailing newline, no trailing blank lines.
fn finish(text: &str) -> String {
    format!("{}\n", text.trim_end())
}

/// Lines after the closing `---` of the front matter.
fn body_line_count(skill_md: &str) -> usize {
    skill_md
        .splitn(3, "---\n")
        .nth(2)
        .map_or(0, |body| body.lines().count())
}

fn metadata(ir: &SkillIr, kind: &str) -> BTreeMap<String, String> {
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

/// `llama1b` or `llama1b, qwen05b`: where the bundle was distilled from.
fn source_names(ir: &SkillIr) -> String {
    let names: Vec<&str> = ir.sources.iter().map(|s| s.trajectory.as_str()).collect();
    if names.is_empty() {
        "no trajectory".to_string()
    } else {
        names.join(", ")
    }
}

pub fn phase_page(t: &Templates, ir: &SkillIr, phase: &PhaseIr) -> Result<SkillDir, EmitError> {
    let spec = catalog::phase(phase.index).ok_or(EmitError::UnknownPhase(phase.index))?;
    let mut meta = metadata(ir, "phase");
    meta.insert("phase".to_string(), phase.index.to_string());
    let front_matter = FrontMatter {
        name: phase.name.clone(),
        description: format!(
            "Phase {} of 8 in deploying a decoder-only LLM on an AMD XDNA 2 (npu2) NPU: {}. {} \
             Use it after phase {} has passed. Distilled from trajectory {}: {} steps, {} exit gates.",
            phase.index,
            phase.title,
            spec.purpose,
            phase.index.saturating_sub(1),
            source_names(ir),
            phase.steps.len(),
            phase.exit_gates.len()
        ),
        metadata: meta,
    };
    let mut intro = vec![
        format!("**Purpose.** {}", spec.purpose),
        format!(
            "Part of {}, distilled from trajectory {}.",
            views::skill_link(ENTRY_SKILL),
            source_names(ir)
        ),
    ];
    if !phase.sessions.is_empty() {
        let sessions: Vec<String> = phase.sessions.iter().map(|s| code_span(s)).collect();
        intro.push(format!(
            "Sessions recorded for this phase: {}.",
            sessions.join(", ")
        ));
    }
    let lessons: Vec<_> = phase
        .lessons
        .iter()
        .filter_map(|id| ir.lessons.get(id))
        .map(views::lesson)
        .collect();
    let mut drafts = vec![
        Draft::new("Entry gate", "entry-gate", entry_gate(phase.index), 20),
        Draft::new(
            "Steps",
            "steps",
            t.list("steps", &views::steps(&phase.steps))?,
            150,
        ),
        Draft::new(
            "Exit gates",
            "exit-gates",
            t.list("gates", &views::gates(&phase.exit_gates))?,
            50,
        ),
    ];
    if !lessons.is_empty() {
        drafts.push(Draft::new(
            "Lessons guarding these steps",
            "lessons",
            t.list("lessons", &lessons)?,
            130,
        ));
    }
    if !phase.targets.is_empty() {
        drafts.push(Draft::new(
            "Targets",
            "targets",
            t.list("targets", &views::targets(&phase.targets))?,
            40,
        ));
    }
    if !phase.dead_ends.is_empty() {
        let dead_ends: Vec<_> = phase.dead_ends.iter().map(views::dead_end).collect();
        drafts.push(Draft::new(
            "Dead ends",
            "dead-ends",
            t.list("dead-ends", &dead_ends)?,
            50,
        ));
    }
    drafts.push(Draft::new(
        "References",
        "references",
        phase_references(t, ir, phase)?,
        40,
    ));
    assemble(
        t,
        Page {
            name: phase.name.clone(),
            front_matter,
            title: format!("Phase {}: {}", phase.index, phase.title),
            intro,
            drafts,
        },
    )
}

fn entry_gate(index: u8) -> String {
    match index.checked_sub(1).and_then(catalog::phase) {
        None => "None: this is the first phase. Start from a model directory: `config.json` \
                 with `*.safetensors` weights, or the config alone with seeded random weights \
                 for performance work."
            .to_string(),
        Some(previous) => format!(
            "Phase {} ({}) passed every exit gate on this model. Do not start this phase otherwise.",
            previous.index,
            views::skill_link(previous.name)
        ),
    }
}

/// Links to the entry skill and to every cross-phase skill this phase's lessons,
/// dead ends and steps belong to.
fn phase_references(t: &Templates, ir: &SkillIr, phase: &PhaseIr) -> Result<String, EmitError> {
    let mut skills = BTreeSet::new();
    skills.extend(
        phase
            .lessons
            .iter()
            .filter_map(|id| ir.lessons.get(id))
            .map(|l| l.skill.as_str()),
    );
    skills.extend(phase.dead_ends.iter().map(|d| d.skill.as_str()));
    let step_ids: BTreeSet<&str> = phase.steps.iter().map(|s| s.id.as_str()).collect();
    skills.extend(
        ir.skills
            .iter()
            .filter(|s| {
                s.applied_steps
                    .iter()
                    .any(|id| step_ids.contains(id.as_str()))
            })
            .map(|s| s.name.as_str()),
    );
    let mut lines = vec![format!(
        "- {}: the order of the phases and the rules every phase follows.",
        views::skill_link(ENTRY_SKILL)
    )];
    lines.extend(skills.iter().map(|s| format!("- {}", views::skill_link(s))));
    lines.push(format!(
        "- {}",
        t.render("bundle-note", &json!({ "schema": SCHEMA_VERSION }))?
            .trim_end()
    ));
    Ok(lines.join("\n"))
}

pub fn entry_page(t: &Templates, ir: &SkillIr) -> Result<SkillDir, EmitError> {
    let front_matter = FrontMatter {
        name: ENTRY_SKILL.to_string(),
        description: format!(
            "Deploy a decoder-only LLM end to end on an AMD XDNA 2 (npu2) NPU by running eight \
             phase skills in order (CPU reference, kernels, one block, full model, prefill and \
             decode optimization, finalize, independent evaluation), each gated on numerical \
             correctness. Use when bringing up a new model on the NPU. Distilled from trajectory {}.",
            source_names(ir)
        ),
        metadata: metadata(ir, "entry"),
    };
    let intro = vec![
        "This skill only orchestrates: every gate belongs to its phase skill, and every fix to \
         a debugging or optimization skill."
            .to_string(),
    ];
    let sources: Vec<_> = ir
        .sources
        .iter()
        .map(|s| {
            json!({
                "trajectory": code_span(&s.trajectory),
                "model": code_span(&s.model),
                "target": code_span(&s.target),
                "files": s.files.len(),
            })
        })
        .collect();
    let drafts = vec![
        Draft::new("Rules", "rules", t.render("rules", &json!({}))?, 40),
        Draft::new(
            "Phases",
            "phases",
            t.list("phases", &views::phase_links(ir))?,
            200,
        ),
        Draft::new(
            "Optimization skills",
            "optimization-skills",
            skill_list(t, ir, LessonKind::Optimization)?,
            60,
        ),
        Draft::new(
            "Debugging skills",
            "debugging-skills",
            skill_list(t, ir, LessonKind::Debugging)?,
            60,
        ),
        Draft::new("Sources", "sources", t.list("sources", &sources)?, 30),
        Draft::new(
            "Machine-readable bundle",
            "bundle",
            t.render("bundle-note", &json!({ "schema": SCHEMA_VERSION }))?,
            10,
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
        },
    )
}

fn skill_list(t: &Templates, ir: &SkillIr, kind: LessonKind) -> Result<String, EmitError> {
    let skills = views::skill_links(ir, kind);
    if skills.is_empty() {
        return Ok("None recorded in the trajectory.".to_string());
    }
    t.list("skills", &skills)
}

pub fn skill_page(
    t: &Templates,
    ir: &SkillIr,
    index: &Index,
    skill: &SkillSetIr,
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
        description: skill.description.clone(),
        metadata: meta,
    };
    let hypotheses = views::hypotheses(ir, skill);
    let context: Vec<String> = skill
        .context
        .iter()
        .map(|n| {
            format!(
                "- {}, {}: {}",
                code_span(&n.id),
                views::provenance(std::slice::from_ref(&n.provenance)),
                literal(&n.text, 2)
            )
        })
        .collect();
    let mut drafts = vec![Draft::new(
        match skill.kind {
            LessonKind::Debugging => "Trigger",
            LessonKind::Optimization => "When to apply",
        },
        "trigger",
        trigger(skill),
        20,
    )];
    if skill.kind == LessonKind::Optimization {
        let applied = views::applied_steps(index, skill);
        if !applied.is_empty() {
            let mut body = t.list("applied", &applied)?;
            let more = skill.applied_steps.len().saturating_sub(applied.len());
            if more > 0 {
                body = format!(
                    "{}\n\n{} more, listed with the steps of the phase pages.",
                    body.trim_end(),
                    count(more, "step", "steps")
                );
            }
            drafts.push(Draft::new("Applied in the trajectory", "applied", body, 80));
        }
    }
    if !context.is_empty() {
        drafts.push(Draft::new("Context", "context", context.join("\n"), 60));
    }
    drafts.push(Draft::new(
        match skill.kind {
            LessonKind::Debugging => "Hypotheses, in order",
            LessonKind::Optimization => "Lessons",
        },
        "hypotheses",
        t.list("hypotheses", &hypotheses)?,
        250,
    ));
    let dead_ends = views::skill_dead_ends(index, skill);
    if !dead_ends.is_empty() {
        drafts.push(Draft::new(
            "Tried and abandoned",
            "dead-ends",
            t.list("dead-ends", &dead_ends)?,
            80,
        ));
    }
    drafts.push(match skill.kind {
        LessonKind::Debugging => Draft::new(
            "If no hypothesis fits",
            "no-fit",
            t.render("no-fit", &json!({}))?,
            20,
        ),
        LessonKind::Optimization => Draft::new(
            "Success criteria",
            "success",
            t.render("opt-criteria", &json!({}))?,
            20,
        ),
    });
    drafts.push(Draft::new(
        "References",
        "references",
        format!(
            "- {}: the phases and their gates.\n- {}",
            views::skill_link(ENTRY_SKILL),
            t.render("bundle-note", &json!({ "schema": SCHEMA_VERSION }))?
                .trim_end()
        ),
        10,
    ));
    let title = match (skill.kind, skill.title.is_empty()) {
        (_, false) => skill.title.clone(),
        (LessonKind::Debugging, true) => format!("Debugging: {}", skill.name),
        (LessonKind::Optimization, true) => format!("Optimization: {}", skill.name),
    };
    assemble(
        t,
        Page {
            name: skill.name.clone(),
            front_matter,
            title,
            intro: vec![format!(
                "Part of {}, distilled from trajectory {}; {}, {}.",
                views::skill_link(ENTRY_SKILL),
                source_names(ir),
                count(skill.hypotheses.len(), "hypothesis", "hypotheses"),
                count(
                    skill.evidence_count as usize,
                    "evidence entry",
                    "evidence entries"
                ),
            )],
            drafts,
        },
    )
}

/// The trigger patterns as a list, the note, and what the runtime's vocabulary says
/// about an optimization's operation.
fn trigger(skill: &SkillSetIr) -> String {
    let mut paragraphs = Vec::new();
    if !skill.triggers.is_empty() {
        let items: Vec<String> = skill
            .triggers
            .iter()
            .map(|t| format!("- {}", literal(t, 2)))
            .collect();
        paragraphs.push(format!(
            "Use this skill when a run shows one of these:\n\n{}",
            items.join("\n")
        ));
    }
    if !skill.trigger_patterns.is_empty() {
        let intro = match (skill.kind, skill.triggers.is_empty()) {
            (_, false) => "The runtime's checks that show them (trajectory notation):",
            (LessonKind::Debugging, true) => {
                "Use this skill when one of these checks fails (trajectory notation):"
            }
            (LessonKind::Optimization, true) => {
                "Apply it when one of these shows (trajectory notation):"
            }
        };
        let items: Vec<String> = skill
            .trigger_patterns
            .iter()
            .map(|pattern| format!("- {}", literal(pattern, 2)))
            .collect();
        paragraphs.push(format!("{intro}\n\n{}", items.join("\n")));
    }
    if !skill.trigger_note.is_empty() {
        paragraphs.push(format!("Apply it when {}.", skill.trigger_note));
    }
    let op = (skill.kind == LessonKind::Optimization)
        .then(|| skill.name.strip_prefix(catalog::OPT_PREFIX))
        .flatten()
        .and_then(ops::operation);
    if let Some(op) = op {
        paragraphs.push(format!("The operation {}: {}.", code_span(op.name), op.doc));
    }
    paragraphs.join("\n\n")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use skillc_runtime::bundle::{Provenance, Value};

    use super::*;
    use crate::distill::ir::StepIr;

    fn steps(n: usize) -> Vec<StepIr> {
        (0..n)
            .map(|i| StepIr {
                id: format!("p1-a{i}"),
                op: "register-kernel".to_string(),
                params: BTreeMap::from([("kernel".to_string(), Value::Text("gemm".into()))]),
                guarded_by: if i % 3 == 0 {
                    vec!["l1".into()]
                } else {
                    vec![]
                },
                notes: if i % 5 == 0 {
                    vec![format!("note {i}\nsecond line")]
                } else {
                    vec![]
                },
                skill: None,
                provenance: vec![Provenance {
                    file: "t/00.traj".into(),
                    line: i as u32 + 1,
                    entry: format!("a{i}"),
                }],
            })
            .collect()
    }

    #[test]
    fn chunked_lists_render_like_whole_ones() -> Result<(), EmitError> {
        let t = Templates::new()?;
        for n in [0, 1, 99, 100, 101, 1234] {
            let items = views::steps(&steps(n));
            let whole = t.list_in_chunks("steps", &items, usize::MAX)?;
            assert_eq!(whole, t.list_in_chunks("steps", &items, 100)?, "{n} steps");
            assert_eq!(n == 0, whole.contains("recorded no action"), "{n} steps");
        }
        Ok(())
    }
}
