//! Assembling one skill directory: front matter, title, intro and `##` sections
//! drafted by the page builders, laid out by the `page` template. A SKILL.md stays
//! within [`SKILL_MD_MAX_LINES`]: while it is longer, its longest section moves whole to
//! `references/<section>.md` and the SKILL.md points to it (progressive disclosure),
//! which decides placement from the sections' own sizes only. The directory's
//! `references/provenance.md` holds the text of every entry its files cite.

use handlebars::Handlebars;
use serde::Serialize;
use serde_json::json;

use super::cite::{self, Cites, Location};
use super::frontmatter::FrontMatter;
use super::EmitError;

/// Longest SKILL.md kept, front matter included (an agent loads the whole file, so the
/// whole file is what counts: fewer than 200 lines); the Agent Skills spec allows a
/// 500-line body, progressive disclosure asks for much less.
pub const SKILL_MD_MAX_LINES: usize = 199;

/// Templates, kept as files in the repository and embedded in the binary.
const TEMPLATES: &[(&str, &str)] = &[
    ("page", include_str!("templates/page.md.hbs")),
    ("reference", include_str!("templates/reference.md.hbs")),
    ("moved", include_str!("templates/moved.md.hbs")),
    ("rules", include_str!("templates/rules.md.hbs")),
    ("bundle-note", include_str!("templates/bundle-note.md.hbs")),
];

/// The handlebars registry: no HTML escaping (drafts are already Markdown-safe) and
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

    pub fn render(&self, name: &str, data: &impl Serialize) -> Result<String, EmitError> {
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
pub struct Draft {
    pub heading: &'static str,
    pub slug: &'static str,
    pub body: String,
    /// Whether it may move to `references/` (a short pointer section may not).
    pub movable: bool,
}

impl Draft {
    pub fn new(heading: &'static str, slug: &'static str, body: String) -> Self {
        Draft {
            heading,
            slug,
            body: body.trim_end().to_string(),
            movable: true,
        }
    }

    pub fn fixed(heading: &'static str, slug: &'static str, body: String) -> Self {
        Draft {
            movable: false,
            ..Draft::new(heading, slug, body)
        }
    }
}

/// What a page builder hands over.
pub struct Page<'a> {
    pub name: String,
    pub front_matter: FrontMatter,
    pub title: String,
    pub intro: Vec<String>,
    pub drafts: Vec<Draft>,
    /// Files of `references/` written as they are (a worked example, a summary).
    pub references: Vec<(String, String)>,
    pub cites: Cites<'a>,
}

#[derive(Serialize)]
struct PageView {
    front_matter: String,
    title: String,
    intro: Vec<String>,
    sections: Vec<SectionView>,
}

#[derive(Serialize)]
struct SectionView {
    heading: String,
    body: String,
}

pub fn assemble(t: &Templates, page: Page<'_>) -> Result<SkillDir, EmitError> {
    let mut moved = vec![false; page.drafts.len()];
    let mut skill_md = render_skill_md(t, &page, &moved)?;
    while skill_md.lines().count() > SKILL_MD_MAX_LINES {
        let longest = page
            .drafts
            .iter()
            .enumerate()
            .filter(|(i, d)| d.movable && !moved[*i])
            .max_by_key(|(i, d)| (d.body.lines().count(), std::cmp::Reverse(*i)));
        let Some((i, _)) = longest else {
            break;
        };
        moved[i] = true;
        skill_md = render_skill_md(t, &page, &moved)?;
    }
    let lines = skill_md.lines().count();
    if lines > SKILL_MD_MAX_LINES {
        return Err(EmitError::BodyTooLong {
            skill: page.name,
            lines,
        });
    }
    let mut files = vec![("SKILL.md".to_string(), skill_md)];
    for (draft, _) in page.drafts.iter().zip(&moved).filter(|(_, m)| **m) {
        let title = format!("{}: {}", page.title, draft.heading);
        let text = t.render("reference", &json!({ "title": title, "body": draft.body }))?;
        files.push((
            format!("references/{}.md", draft.slug),
            finish(&cite::resolve(&text, Location::Reference)),
        ));
    }
    for (path, text) in &page.references {
        files.push((
            format!("references/{path}"),
            finish(&cite::resolve(text, Location::Reference)),
        ));
    }
    if let Some(text) = page.cites.file(&page.title) {
        files.push((
            "references/provenance.md".to_string(),
            finish(&cite::resolve(&text, Location::Reference)),
        ));
    }
    Ok(SkillDir {
        name: page.name,
        files,
    })
}

fn render_skill_md(t: &Templates, page: &Page<'_>, moved: &[bool]) -> Result<String, EmitError> {
    let mut sections = Vec::new();
    for (draft, moved) in page.drafts.iter().zip(moved) {
        let body = if *moved {
            let path = format!("references/{}.md", draft.slug);
            t.render(
                "moved",
                &json!({
                    "lines": draft.body.lines().count(),
                    "path": path,
                    "heading": draft.heading.to_lowercase(),
                    "skill": page.name,
                }),
            )?
        } else {
            draft.body.clone()
        };
        sections.push(SectionView {
            heading: draft.heading.to_string(),
            body: body.trim_end().to_string(),
        });
    }
    let view = PageView {
        front_matter: page.front_matter.render(),
        title: page.title.clone(),
        intro: page.intro.clone(),
        sections,
    };
    let text = t.render("page", &view)?;
    Ok(finish(&cite::resolve(&text, Location::SkillMd)))
}

/// One trailing newline, no trailing blank lines.
fn finish(text: &str) -> String {
    format!("{}\n", text.trim_end())
}
