//! Citations and links that resolve inside the bundle. A page cites the trajectory
//! entries each item came from as `file:line`. Where the page does not show the
//! entry's content (a lesson as recorded, the observation that is its evidence), the
//! citation links to the skill directory's `references/provenance.md`, which holds
//! that entry's text; where it does (a step's call, a quoted note), the location is
//! enough and nothing is copied, which keeps provenance a small part of a bundle.
//! Sibling skills are linked by relative path. Pages are drafted before it is known
//! whether a section stays in SKILL.md or moves to `references/`, so links carry
//! markers that [`resolve`] turns into the right relative path for the file they end
//! up in.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

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

/// The entries of a bundle by file and line, for [`Cites`]. Keyed by borrowed
/// parts, not by a `file:line` string: a string per entry of the bundle was an
/// allocation per entry on every build, whatever the pages cite.
pub type ByLocation<'a> = HashMap<(&'a str, u32), &'a EntryIr>;

/// The provenance records a page cites, and what lets it link them.
pub struct Cites<'a> {
    /// Entry text by location (only looked up: the order pages cite in is `cited`'s).
    entries: &'a ByLocation<'a>,
    /// `file:line` of every cited entry with its text, in the order
    /// `references/provenance.md` lists them.
    cited: BTreeMap<String, &'a EntryIr>,
}

/// The entries of a bundle by location. Two entries at one location (trajectory
/// folders of one name in different places) keep the one with the greater id, as
/// listing them by id and keeping the last did.
pub fn by_location(ir: &SkillIr) -> ByLocation<'_> {
    let mut by: ByLocation<'_> = HashMap::with_capacity(ir.entries.len());
    for e in ir.entries.values() {
        let key = (e.provenance.file.as_str(), e.provenance.line);
        match by.entry(key) {
            Entry::Occupied(mut kept) => {
                if kept.get().id < e.id {
                    kept.insert(e);
                }
            }
            Entry::Vacant(slot) => {
                slot.insert(e);
            }
        }
    }
    by
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

/// Records linked at most in one place; the rest are counted.
const CITED_MAX: usize = 3;

impl<'a> Cites<'a> {
    pub fn new(entries: &'a ByLocation<'a>) -> Self {
        Cites {
            entries,
            cited: BTreeMap::new(),
        }
    }

    /// One provenance record as a link into `references/provenance.md`.
    pub fn one(&mut self, p: &Provenance) -> String {
        let at = location(p);
        let Some(&entry) = self.entries.get(&(p.file.as_str(), p.line)) else {
            return code_span(&at);
        };
        let link = format!("[{at}]({REFERENCES}provenance.md#{})", anchor(&at));
        self.cited.insert(at, entry);
        link
    }

    /// Several records, at most `max` of them linked.
    pub fn some(&mut self, records: &[Provenance], max: usize) -> String {
        if records.is_empty() {
            return "no source recorded".to_string();
        }
        let mut cited: Vec<String> = records.iter().take(max).map(|p| self.one(p)).collect();
        if records.len() > max {
            cited.push(format!("{} more in `bundle.json`", records.len() - max));
        }
        cited.join(", ")
    }

    /// Several records, at most [`CITED_MAX`] of them linked.
    pub fn all(&mut self, records: &[Provenance]) -> String {
        self.some(records, CITED_MAX)
    }

    /// Where an entry the page shows in full was recorded: its location, not linked
    /// (its text is already on the page).
    pub fn at(p: &Provenance) -> String {
        code_span(&location(p))
    }

    /// Where entries the page shows in full were recorded, at most [`CITED_MAX`].
    pub fn locations(records: &[Provenance]) -> String {
        let mut shown: Vec<String> = records.iter().take(CITED_MAX).map(Self::at).collect();
        if records.len() > CITED_MAX {
            shown.push(format!("{} more", records.len() - CITED_MAX));
        }
        shown.join(", ")
    }

    /// An entry by id, when the page shows its content: the id and its location.
    pub fn shown(ir: &SkillIr, id: &str) -> String {
        match ir.entries.get(id) {
            Some(e) => format!("{} ({})", code_span(id), Self::at(&e.provenance)),
            None => code_span(id),
        }
    }

    /// An entry by id, linked when the bundle has its text.
    pub fn entry(&mut self, ir: &SkillIr, id: &str) -> String {
        match ir.entries.get(id) {
            Some(e) => {
                let at = location(&e.provenance);
                let link = format!("[{}]({REFERENCES}provenance.md#{})", id, anchor(&at));
                // The text listed at a location is the one `by_location` kept there.
                if let Some(&kept) = self
                    .entries
                    .get(&(e.provenance.file.as_str(), e.provenance.line))
                {
                    self.cited.insert(at, kept);
                }
                link
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
            "# {title}: provenance\n\nThe recorded text of the entries this skill links, by `file:line`.\n"
        );
        for (at, entry) in &self.cited {
            let record = entry
                .provenance
                .source
                .as_deref()
                .map_or(String::new(), |s| {
                    format!("Entry drafted from the record {}:\n", code_span(s))
                });
            out.push_str(&format!(
                "\n### {at}\n{record}{}\n",
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
