//! `skillc diff OLD NEW`: what changed between two bundles in the terms a reviewer
//! cares about (phases, steps, gates, targets, dead ends, lessons, skills), each
//! change with the trajectory entries it comes from. Works on `bundle.json` alone, so
//! it compares bundles built by different compiler versions too.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use skillc_runtime::bundle::{
    Baseline, Bundle, BundlePhase, DeadEnd, Gate, Lesson, Provenance, SkillSet, Step, Target, Value,
};

use super::print;
use super::prose_diff;
use skillc_runtime::notation;
use skillc_runtime::ops::Unit;

/// `+` added, `-` removed, `~` changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sign {
    Added,
    Removed,
    Changed,
}

impl Sign {
    fn symbol(self) -> char {
        match self {
            Sign::Added => '+',
            Sign::Removed => '-',
            Sign::Changed => '~',
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub sign: Sign,
    pub text: String,
    pub provenance: Vec<Provenance>,
    /// For edited prose: the changed sentences as word diffs (`~ a [-b-]{+c+}`,
    /// `- removed`, `+ added`), or with `--full` the whole texts line by line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
}

/// Changes grouped under a heading (`phase 1 (phase-1-kernel-validation)`, `lessons`, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Section {
    pub title: String,
    pub changes: Vec<Change>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct SemanticDiff {
    pub sections: Vec<Section>,
}

impl SemanticDiff {
    pub fn is_empty(&self) -> bool {
        self.sections.is_empty()
    }

    /// One line per change, indented under its section, provenance in brackets.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for section in &self.sections {
            let _ = writeln!(out, "{}", section.title);
            for change in &section.changes {
                let _ = write!(out, "  {} {}", change.sign.symbol(), change.text);
                if !change.provenance.is_empty() {
                    let _ = write!(out, "  [{}]", cite(&change.provenance));
                }
                out.push('\n');
                for line in &change.details {
                    let _ = writeln!(out, "      {line}");
                }
            }
        }
        if out.is_empty() {
            out.push_str("no semantic differences\n");
        }
        out
    }
}

fn cite(provenance: &[Provenance]) -> String {
    provenance
        .iter()
        .map(|p| format!("{}:{}", p.file, p.line))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A described item: its text and the entries it comes from.
type Described = (String, Vec<Provenance>);

/// Added and removed items (described by `describe`), then items in both that
/// differ (described by `compare`), in key order.
fn keyed<K: Ord, T>(
    old: &BTreeMap<K, &T>,
    new: &BTreeMap<K, &T>,
    describe: impl Fn(&K, &T) -> Described,
    compare: impl Fn(&K, &T, &T) -> Option<Described>,
) -> Vec<Change> {
    let change = |sign, (text, provenance): Described| Change {
        sign,
        text,
        provenance,
        details: Vec::new(),
    };
    let mut changes = Vec::new();
    for (key, o) in old {
        if !new.contains_key(key) {
            changes.push(change(Sign::Removed, describe(key, o)));
        }
    }
    for (key, n) in new {
        if !old.contains_key(key) {
            changes.push(change(Sign::Added, describe(key, n)));
        }
    }
    for (key, o) in old {
        if let Some(difference) = new.get(key).and_then(|n| compare(key, o, n)) {
            changes.push(change(Sign::Changed, difference));
        }
    }
    changes
}

fn by_key<T, K: Ord>(items: &[T], key: impl Fn(&T) -> K) -> BTreeMap<K, &T> {
    items.iter().map(|item| (key(item), item)).collect()
}

fn section(title: String, changes: Vec<Change>, sections: &mut Vec<Section>) {
    if !changes.is_empty() {
        sections.push(Section { title, changes });
    }
}

/// `name old → new` into `parts` when they differ.
fn field(name: &str, old: &str, new: &str, parts: &mut Vec<String>) {
    if old != new {
        parts.push(format!("{name} {old} → {new}"));
    }
}

/// `name edited` into `parts` when a prose field differs (the words that changed
/// are the change's details).
fn edited(name: &str, old: &str, new: &str, parts: &mut Vec<String>) {
    if old != new {
        parts.push(format!("{name} edited"));
    }
}

/// `prefix: part; part` with `provenance`, or nothing when no part changed.
fn changed(prefix: String, parts: Vec<String>, provenance: &[Provenance]) -> Option<Described> {
    (!parts.is_empty()).then(|| {
        (
            format!("{prefix}: {}", parts.join("; ")),
            provenance.to_vec(),
        )
    })
}

/// The semantic diff of two bundles; `full` shows edited prose whole instead of
/// its changed sentences.
pub fn diff(old: &Bundle, new: &Bundle, full: bool) -> SemanticDiff {
    let mut sections = Vec::new();

    let mut header = Vec::new();
    let mut parts = Vec::new();
    field(
        "schema",
        &old.schema_version,
        &new.schema_version,
        &mut parts,
    );
    field("name", &old.name, &new.name, &mut parts);
    if !parts.is_empty() {
        header.push(Change {
            sign: Sign::Changed,
            text: parts.join("; "),
            provenance: vec![],
            details: Vec::new(),
        });
    }
    header.extend(keyed(
        &by_key(&old.sources, |s| s.trajectory.clone()),
        &by_key(&new.sources, |s| s.trajectory.clone()),
        |key, s| (format!("source {key} (model {})", s.model), vec![]),
        |key, o, n| {
            let mut parts = Vec::new();
            field("model", &o.model, &n.model, &mut parts);
            field("target", &o.target, &n.target, &mut parts);
            for (path, hash) in &n.files {
                match o.files.get(path) {
                    None => parts.push(format!("file {path} added")),
                    Some(old_hash) if old_hash != hash => parts.push(format!("file {path} edited")),
                    Some(_) => {}
                }
            }
            parts.extend(
                o.files
                    .keys()
                    .filter(|path| !n.files.contains_key(*path))
                    .map(|path| format!("file {path} removed")),
            );
            changed(format!("source {key}"), parts, &[])
        },
    ));
    section("bundle".to_string(), header, &mut sections);

    let old_phases = by_key(&old.phases, |p| p.index);
    let new_phases = by_key(&new.phases, |p| p.index);
    let indices: BTreeSet<u8> = old_phases
        .keys()
        .chain(new_phases.keys())
        .copied()
        .collect();
    for index in indices {
        let (o, n) = (old_phases.get(&index), new_phases.get(&index));
        let name = n.or(o).map(|p| p.name.as_str()).unwrap_or_default();
        let changes = match (o, n) {
            (Some(o), Some(n)) => phase_changes(o, n),
            (None, Some(_)) => vec![Change {
                sign: Sign::Added,
                text: "phase".to_string(),
                provenance: vec![],
                details: Vec::new(),
            }],
            (Some(_), None) => vec![Change {
                sign: Sign::Removed,
                text: "phase".to_string(),
                provenance: vec![],
                details: Vec::new(),
            }],
            (None, None) => vec![],
        };
        section(format!("phase {index} ({name})"), changes, &mut sections);
    }

    let mut lessons = keyed(
        &old.lessons.iter().map(|(k, v)| (k.clone(), v)).collect(),
        &new.lessons.iter().map(|(k, v)| (k.clone(), v)).collect(),
        |key, l: &Lesson| {
            (
                format!(
                    "{key} ({}, evidence {}): {}",
                    l.skill,
                    l.evidence_count,
                    one_line(&l.title)
                ),
                l.provenance.clone(),
            )
        },
        |key, o, n| lesson_changes(key, o, n),
    );
    // The changed lessons come last, in key order (see `keyed`): each gets
    // the word diff of its edited prose.
    let edited = old.lessons.iter().filter_map(|(key, o)| {
        let n = new.lessons.get(key)?;
        lesson_changes(key, o, n).map(|_| lesson_prose(o, n, full))
    });
    let changed_lessons = lessons.iter_mut().filter(|c| c.sign == Sign::Changed);
    for (change, details) in changed_lessons.zip(edited) {
        change.details = details;
    }
    section("lessons".to_string(), lessons, &mut sections);

    let skills = keyed(
        &by_key(&old.skills, |s| s.name.clone()),
        &by_key(&new.skills, |s| s.name.clone()),
        |key, s| (format!("{key}: {} hypotheses", s.hypotheses.len()), vec![]),
        |key, o, n| skill_changes(key, o, n),
    );
    section("skills".to_string(), skills, &mut sections);

    let files = keyed(
        &old.files.iter().map(|(k, v)| (k.clone(), v)).collect(),
        &new.files.iter().map(|(k, v)| (k.clone(), v)).collect(),
        |key, _: &String| (key.clone(), vec![]),
        |key, o, n| (o != n).then(|| (key.clone(), vec![])),
    );
    section("files".to_string(), files, &mut sections);

    SemanticDiff { sections }
}

impl SemanticDiff {
    /// Fills the details of every edited text file (`SKILL.md`, references)
    /// from the two bundle directories, when both are directories.
    pub fn with_texts(mut self, old_dir: &Path, new_dir: &Path, full: bool) -> Self {
        if !(old_dir.is_dir() && new_dir.is_dir()) {
            return self;
        }
        let files = self.sections.iter_mut().filter(|s| s.title == "files");
        for change in files.flat_map(|s| s.changes.iter_mut()) {
            if change.sign != Sign::Changed {
                continue;
            }
            let read =
                |dir: &Path| skillc_runtime::input::read_to_string(&dir.join(&change.text)).ok();
            if let (Some(o), Some(n)) = (read(old_dir), read(new_dir)) {
                change.details = prose(&o, &n, full);
            }
        }
        self
    }
}

/// Edited prose: its changed sentences, or with `full` the whole texts.
fn prose(old: &str, new: &str, full: bool) -> Vec<String> {
    if full {
        prose_diff::whole(old, new)
    } else {
        prose_diff::changed_sentences(old, new)
    }
}

/// The prose of a lesson that changed (title, cause, the fix in words), each
/// line led by the field's name.
fn lesson_prose(o: &Lesson, n: &Lesson, full: bool) -> Vec<String> {
    [
        ("title", &o.title, &n.title),
        ("cause", &o.cause, &n.cause),
        ("fix in words", &o.fix_text, &n.fix_text),
    ]
    .into_iter()
    .filter(|(_, a, b)| a != b)
    .flat_map(|(name, a, b)| {
        prose(a, b, full)
            .into_iter()
            .map(move |line| format!("{name}: {line}"))
    })
    .collect()
}

fn one_line(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 80 {
        format!("{}…", line.chars().take(79).collect::<String>())
    } else {
        line
    }
}

fn phase_changes(o: &BundlePhase, n: &BundlePhase) -> Vec<Change> {
    let old_steps = by_key(&o.steps, |s| s.id.clone());
    let new_steps = by_key(&n.steps, |s| s.id.clone());
    let mut changes = keyed(
        &old_steps,
        &new_steps,
        |key, s: &Step| {
            (
                format!("step {key}: {}", notation::call(s.op, &s.params)),
                s.provenance.clone(),
            )
        },
        |key, o, n| step_changes(key, o, n),
    );
    let common = |steps: &[Step], other: &BTreeMap<String, &Step>| -> Vec<String> {
        steps
            .iter()
            .filter(|s| other.contains_key(&s.id))
            .map(|s| s.id.clone())
            .collect()
    };
    if common(&o.steps, &new_steps) != common(&n.steps, &old_steps) {
        changes.push(Change {
            sign: Sign::Changed,
            text: "step order".to_string(),
            provenance: vec![],
            details: Vec::new(),
        });
    }
    changes.extend(keyed(
        &by_key(&o.exit_gates, gate_key),
        &by_key(&n.exit_gates, gate_key),
        |key, g: &Gate| {
            (
                format!("gate {key}: {}", gate_check(g)),
                g.provenance.clone(),
            )
        },
        |key, o: &Gate, n: &Gate| {
            let mut parts = Vec::new();
            field("check", &gate_check(o), &gate_check(n), &mut parts);
            field(
                "recorded",
                &recorded(o.recorded, o.unit),
                &recorded(n.recorded, n.unit),
                &mut parts,
            );
            changed(format!("gate {key}"), parts, &n.provenance)
        },
    ));
    changes.extend(keyed(
        &by_key(&o.targets, target_key),
        &by_key(&n.targets, target_key),
        |key, t: &Target| {
            (
                format!(
                    "target {key} = {} ({})",
                    notation::quantity(t.value, t.unit),
                    t.source
                ),
                t.provenance.clone(),
            )
        },
        |key, o: &Target, n: &Target| {
            let mut parts = Vec::new();
            field(
                "value",
                &notation::quantity(o.value, o.unit),
                &notation::quantity(n.value, n.unit),
                &mut parts,
            );
            field("source", o.source.as_str(), n.source.as_str(), &mut parts);
            changed(format!("target {key}"), parts, &n.provenance)
        },
    ));
    changes.extend(keyed(
        &by_key(&o.dead_ends, |d| d.id.clone()),
        &by_key(&n.dead_ends, |d| d.id.clone()),
        |key, d: &DeadEnd| {
            (
                format!(
                    "dead end {key}: {} ({})",
                    notation::call(d.op, &d.params),
                    d.outcome
                ),
                d.provenance.clone(),
            )
        },
        |key, o: &DeadEnd, n: &DeadEnd| {
            let mut parts = Vec::new();
            field(
                "action",
                &notation::call(o.op, &o.params),
                &notation::call(n.op, &n.params),
                &mut parts,
            );
            field(
                "outcome",
                &o.outcome.to_string(),
                &n.outcome.to_string(),
                &mut parts,
            );
            field("skill", &o.skill, &n.skill, &mut parts);
            changed(format!("dead end {key}"), parts, &n.provenance)
        },
    ));
    let mut parts = Vec::new();
    field("lessons", &list(&o.lessons), &list(&n.lessons), &mut parts);
    if let Some((text, provenance)) = changed("phase".to_string(), parts, &[]) {
        changes.push(Change {
            sign: Sign::Changed,
            text,
            provenance,
            details: Vec::new(),
        });
    }
    changes
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "(none)".to_string()
    } else {
        items.join(", ")
    }
}

fn step_changes(key: &str, o: &Step, n: &Step) -> Option<Described> {
    let mut parts = Vec::new();
    field("op", o.op.name(), n.op.name(), &mut parts);
    let keys: BTreeSet<&String> = o.params.keys().chain(n.params.keys()).collect();
    let show = |v: Option<&Value>| v.map_or_else(|| "(unset)".to_string(), notation::value);
    for k in keys {
        field(
            k,
            &show(o.params.get(k)),
            &show(n.params.get(k)),
            &mut parts,
        );
    }
    field(
        "guarded by",
        &list(&o.guarded_by),
        &list(&n.guarded_by),
        &mut parts,
    );
    field(
        "source",
        &cite(&o.provenance),
        &cite(&n.provenance),
        &mut parts,
    );
    changed(format!("step {key}"), parts, &n.provenance)
}

fn gate_key(g: &Gate) -> String {
    let subject = match g.op {
        Some(op) if g.conditions.is_empty() => op.to_string(),
        Some(op) => format!("{op}({})", notation::params(Some(op), &g.conditions)),
        None => notation::params(None, &g.conditions),
    };
    format!("{subject} {}", g.metric)
}

fn gate_check(g: &Gate) -> String {
    let check = notation::check(g.metric, g.comparison, g.threshold, g.unit);
    match g.baseline {
        Baseline::Absolute => check,
        Baseline::PreviousPhase => format!("{check} (the previous phase's value)"),
    }
}

fn recorded(value: Option<f64>, unit: Option<Unit>) -> String {
    value.map_or_else(|| "none".to_string(), |v| notation::quantity(v, unit))
}

fn target_key(t: &Target) -> String {
    if t.conditions.is_empty() {
        t.metric.to_string()
    } else {
        format!("{} ({})", t.metric, notation::params(None, &t.conditions))
    }
}

fn lesson_changes(key: &str, o: &Lesson, n: &Lesson) -> Option<Described> {
    let mut parts = Vec::new();
    edited("title", &o.title, &n.title, &mut parts);
    field(
        "symptom",
        &print::machine(&o.symptom),
        &print::machine(&n.symptom),
        &mut parts,
    );
    edited("cause", &o.cause, &n.cause, &mut parts);
    edited("fix in words", &o.fix_text, &n.fix_text, &mut parts);
    field(
        "fix",
        &notation::remedy(&o.fix),
        &notation::remedy(&n.fix),
        &mut parts,
    );
    let condition = |l: &Lesson| {
        l.condition
            .as_ref()
            .map_or_else(|| "every model".to_string(), notation::condition)
    };
    field("if", &condition(o), &condition(n), &mut parts);
    field("skill", &o.skill, &n.skill, &mut parts);
    field(
        "evidence",
        &o.evidence_count.to_string(),
        &n.evidence_count.to_string(),
        &mut parts,
    );
    field(
        "deployments",
        &o.deployments.join(","),
        &n.deployments.join(","),
        &mut parts,
    );
    let phases = |l: &Lesson| {
        l.phases
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    field("phases", &phases(o), &phases(n), &mut parts);
    changed(key.to_string(), parts, &n.provenance)
}

fn skill_changes(key: &str, o: &SkillSet, n: &SkillSet) -> Option<Described> {
    let mut parts = Vec::new();
    let order = |s: &SkillSet| {
        let lessons: Vec<String> = s.hypotheses.iter().map(|h| h.lesson.clone()).collect();
        list(&lessons)
    };
    field("hypotheses", &order(o), &order(n), &mut parts);
    field(
        "evidence",
        &o.evidence_count.to_string(),
        &n.evidence_count.to_string(),
        &mut parts,
    );
    field(
        "trigger",
        &one_line(&o.trigger),
        &one_line(&n.trigger),
        &mut parts,
    );
    changed(key.to_string(), parts, &[])
}
