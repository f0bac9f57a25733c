//! Citations and links that resolve inside the bundle. Every `file:line` a page cites
//! links to the skill directory's `references/provenance.md`, which holds the cited
//! entries' trajectory text; sibling skills are linked by relative path. Pages are
//! drafted before it is known whether a section stays in SKILL.md or moves to
//! `references/`, so links carry markers that [`resolve`] turns into the right
//! relative path for the file they end up in.

use std::collections::{BTreeMap, BTreeSet};

use skillc_runtime::bundle::Provenance;

use super::markdown::{code_span, literal};
use crate::distill::ir::{EntryIr, SkillIr};

/// Stands for the path from a file to its directory's `references/` folder.
const REFERENCES: char = '\u{E000}';
/// Stands for the path from a file to the bundle root.
const ROOT: char = '\u{E001}';
/// Characters trajectory text may not carry into a page (see `markdown::literal`).
pub const MARKERS: &[char] = &[REFERENCES, ROOT];

/// Where a drafted text is finally written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    SkillMd,
    Reference,
}

/// A drafted text with its markers replaced for its final location.
pub fn resolve(text: &str, location: Location) -> String {
    let (references, root) = match location {
        Location::SkillMd => ("references/", "../"),
        Location::Reference => ("", "../../"),
    };
    text.replace(REFERENCES, references).replace(ROOT, root)
}

/// A link to a sibling skill's SKILL.md.
pub fn skill(name: &str) -> String {
    format!("[{name}]({ROOT}{name}/SKILL.md)")
}

/// A link to a file of this skill's `references/` folder.
pub fn reference(file: &str, text: &str) -> String {
    format!("[{text}]({REFERENCES}{file})")
}

/// The provenance records a page cites, and what lets it link them.
pub struct Cites<'a> {
    /// Entry text by `file:line`.
    entries: &'a BTreeMap<String, &'a EntryIr>,
    cited: BTreeSet<String>,
}

/// The entries of a bundle by `file:line`, for [`Cites`].
pub fn by_location(ir: &SkillIr) -> BTreeMap<String, &EntryIr> {
    ir.entries
        .values()
        .map(|e| (location(&e.provenance), e))
        .collect()
}

fn location(p: &Provenance) -> String {
    format!("{}:{}", p.file, p.line)
}

/// The anchor GitHub gives a heading: lowercase, punctuation other than `-` and `_`
/// dropped, spaces as hyphens.
pub fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Records cited at most in one place; the rest are counted.
const CITED_MAX: usize = 6;

impl<'a> Cites<'a> {
    pub fn new(entries: &'a BTreeMap<String, &'a EntryIr>) -> Self {
        Cites {
            entries,
            cited: BTreeSet::new(),
        }
    }

    /// One provenance record as a link into `references/provenance.md`.
    pub fn one(&mut self, p: &Provenance) -> String {
        let at = location(p);
        if !self.entries.contains_key(&at) {
            return code_span(&at);
        }
        self.cited.insert(at.clone());
        format!("[{at}]({REFERENCES}provenance.md#{})", anchor(&at))
    }

    /// Several records, at most [`CITED_MAX`] of them linked.
    pub fn all(&mut self, records: &[Provenance]) -> String {
        if records.is_empty() {
            return "no source recorded".to_string();
        }
        let mut cited: Vec<String> = records
            .iter()
            .take(CITED_MAX)
            .map(|p| self.one(p))
            .collect();
        if records.len() > CITED_MAX {
            cited.push(format!(
                "{} more in `bundle.json`",
                records.len() - CITED_MAX
            ));
        }
        cited.join(", ")
    }

    /// An entry by id, linked when the bundle has its text.
    pub fn entry(&mut self, ir: &SkillIr, id: &str) -> String {
        match ir.entries.get(id) {
            Some(e) => {
                let at = location(&e.provenance);
                self.cited.insert(at.clone());
                format!("[{}]({REFERENCES}provenance.md#{})", id, anchor(&at))
            }
            None => code_span(id),
        }
    }

    /// `references/provenance.md` of the directory: every cited entry's text, or
    /// `None` when the directory cites nothing.
    pub fn file(&self, title: &str) -> Option<String> {
        if self.cited.is_empty() {
            return None;
        }
        let mut out = format!(
            "# {title}: provenance\n\nThe trajectory text of every entry this skill cites, as recorded.\n"
        );
        for at in &self.cited {
            let Some(entry) = self.entries.get(at) else {
                continue;
            };
            let record = entry
                .provenance
                .source
                .as_deref()
                .map_or(String::new(), |s| {
                    format!(", drafted from the record {}", code_span(s))
                });
            out.push_str(&format!(
                "\n### {at}\n\nEntry {}{record}:\n{}\n",
                code_span(&entry.id),
                literal(&entry.text, 0)
            ));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_follow_github() {
        assert_eq!(
            anchor("llama1b/01-prefill-kernels.traj:121"),
            "llama1b01-prefill-kernelstraj121"
        );
        assert_eq!(anchor("A b_c"), "a-b_c");
    }

    #[test]
    fn markers_resolve_per_location() {
        let text = format!("{} {}", skill("debug-x"), reference("steps.md", "steps"));
        assert_eq!(
            resolve(&text, Location::SkillMd),
            "[debug-x](../debug-x/SKILL.md) [steps](references/steps.md)"
        );
        assert_eq!(
            resolve(&text, Location::Reference),
            "[debug-x](../../debug-x/SKILL.md) [steps](steps.md)"
        );
    }
}
