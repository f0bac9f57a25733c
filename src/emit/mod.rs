//! Lowering the skill IR to a bundle directory: one Agent Skills directory per
//! phase, per cross-phase skill and for the entry skill (SKILL.md rendered with
//! handlebars templates from view structs, long sections under `references/`), and
//! `bundle.json` with a sha256 of every other file.
//!
//! Rendering is pure: it returns the files in memory ([`Rendered`]); [`write`]
//! swaps them into place atomically and [`check`] compares them with what is on
//! disk. Pages render in parallel and are collected in a fixed order, so the output
//! is byte-identical whatever the thread count.

use std::collections::BTreeMap;

use rayon::prelude::*;
use thiserror::Error;

use crate::distill::ir::SkillIr;

pub mod bundle_json;
pub mod check;
pub mod cite;
mod entry_page;
pub mod frontmatter;
mod hardware;
pub mod language;
pub mod markdown;
mod page;
mod phase_page;
pub mod print;
pub mod prose_diff;
pub mod semantic_diff;
mod skill_page;
pub mod write;

/// The machine-readable file at the bundle root.
pub const BUNDLE_JSON: &str = "bundle.json";

#[derive(Debug, Error)]
pub enum EmitError {
    #[error("template does not parse: {0}")]
    Template(Box<handlebars::TemplateError>),
    #[error("template rendering failed: {0}")]
    Render(Box<handlebars::RenderError>),
    #[error("SKILL.md of `{skill}` is {lines} lines long even with every long section in references/ (limit {limit})", limit = page::SKILL_MD_MAX_LINES)]
    BodyTooLong { skill: String, lines: usize },
    #[error("two skills would share the directory `{0}`")]
    DuplicateSkill(String),
    #[error("cannot serialise bundle.json: {0}")]
    Json(#[from] serde_json::Error),
}

/// Every generated file of a bundle, by `/`-separated path relative to its root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub files: BTreeMap<String, String>,
}

impl Rendered {
    /// The skill directories (first path component of every SKILL.md), sorted.
    pub fn skill_dirs(&self) -> Vec<&str> {
        self.files
            .keys()
            .filter_map(|path| path.strip_suffix("/SKILL.md"))
            .collect()
    }
}

pub fn render(ir: &SkillIr) -> Result<Rendered, EmitError> {
    // The machine-readable half does not depend on the pages except for their
    // hashes, so it is lowered while they render.
    let (pages, bundle) = rayon::join(|| render_pages(ir), || bundle_json::lower(ir));
    let mut files = pages?;
    let mut bundle = bundle;
    bundle.files = bundle_json::hashes(&files);
    files.insert(BUNDLE_JSON.to_string(), bundle_json::to_json(&bundle)?);
    Ok(Rendered { files })
}

/// Every SKILL.md and reference file, by path relative to the bundle root.
fn render_pages(ir: &SkillIr) -> Result<BTreeMap<String, String>, EmitError> {
    let templates = page::Templates::new()?;
    let entries = cite::by_location(ir);
    let mut dirs = vec![entry_page::page(&templates, ir, &entries)?];
    let phases: Vec<_> = ir
        .phases
        .par_iter()
        .map(|phase| phase_page::page(&templates, ir, phase, &entries))
        .collect::<Result<_, _>>()?;
    let steps = skill_page::Steps::new(ir);
    let skills: Vec<_> = ir
        .skills
        .par_iter()
        .map(|skill| skill_page::page(&templates, ir, skill, &entries, &steps))
        .collect::<Result<_, _>>()?;
    dirs.extend(phases);
    dirs.extend(skills);

    let mut files = BTreeMap::new();
    for dir in dirs {
        if files.contains_key(&format!("{}/SKILL.md", dir.name)) {
            return Err(EmitError::DuplicateSkill(dir.name));
        }
        for (path, content) in dir.files {
            files.insert(format!("{}/{path}", dir.name), content);
        }
    }
    Ok(files)
}
