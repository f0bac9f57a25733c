//! Checks one entry on its own against the vocabulary of `skillc_runtime::ops` and the
//! clause rules of its kind, and produces its resolved [`NodeData`] and the references
//! it makes. Nothing here looks at other entries, so entries are checked in parallel.

use skillc_runtime::ops::ParamKind;
use skillc_runtime::phase::DeployPhase;

use skillc_runtime::ops::WeightFormat;

use super::{ActionData, EdgeKind, LessonData, NodeData, ObservationData};
use crate::diag::{Code, Diagnostic};
use crate::syntax::{
    ClauseKind, Entry, EntryBody, EntryKind, Name, Number, Param, Provenance, Span,
};

mod action;
mod imported;
mod lesson;

pub(super) use imported::draft_session;
mod observation;

/// A reference written in a clause, resolved later against the whole trajectory.
#[derive(Debug, Clone)]
pub(super) struct Reference {
    pub kind: EdgeKind,
    pub target: Name,
}

pub(super) struct Checked {
    pub id: String,
    pub kind: EntryKind,
    pub span: Span,
    pub data: NodeData,
    pub references: Vec<Reference>,
    /// The skill named by an `in` clause, resolved against the declared skills later.
    pub skill: Option<Name>,
    /// The entry's `weights` clause, read (an unknown word is reported).
    pub weights: Option<WeightFormat>,
    /// The record line the entry was drafted from (`source "…"`), as written.
    pub source: Option<String>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Checks an entry, then moves its parts into the node data (the AST is consumed, so
/// a large trajectory is not held in memory twice).
/// `phase` is `None` in a session with no known phase: the phase checks are skipped.
pub(super) fn check_entry(entry: Entry, phase: Option<DeployPhase>) -> Checked {
    let mut checker = Checker {
        diagnostics: Vec::new(),
    };
    let kind = entry.body.kind();
    checker.clause_placement(&entry, kind);
    let references = references(&entry, kind);
    let skill = entry.clauses.iter().find_map(|c| match &c.kind {
        ClauseKind::In(name) if allowed(&c.kind, kind) => Some(name.clone()),
        _ => None,
    });
    let weights = entry.clauses.iter().find_map(|c| match &c.kind {
        ClauseKind::Weights(word) if allowed(&c.kind, kind) => {
            super::weights::read_name(word, &mut checker.diagnostics)
        }
        _ => None,
    });
    let source = entry.clauses.iter().find_map(|c| match &c.kind {
        ClauseKind::Source(citation) => Some(citation),
        _ => None,
    });
    if let Some(citation) = source {
        checker.source(citation);
    }
    let source = source.map(|c| c.text.clone());
    if let EntryBody::Note {
        draft: Some(draft), ..
    } = &entry.body
    {
        checker.draft_note(&entry.id.text, draft, source.as_deref());
    }
    if let Some(conditions) = entry.clauses.iter().find_map(|c| match &c.kind {
        ClauseKind::When(params) => Some(params),
        _ => None,
    }) {
        checker.no_duplicate_keys(conditions, "condition");
    }
    let verdict = entry.clauses.iter().find_map(|c| match c.kind {
        ClauseKind::Verdict(verdict) => Some(verdict),
        _ => None,
    });
    let mut thresholds_met = None;
    let mut lesson = None;
    match &entry.body {
        EntryBody::Action(head) => checker.action(&head.op, &head.params, phase),
        EntryBody::Observe(head) => {
            thresholds_met = checker.observation(&head.measurements, verdict, &entry)
        }
        EntryBody::Lesson { title } => lesson = Some(checker.lesson(&title.text, &entry)),
        EntryBody::Note { .. } | EntryBody::Decision { .. } => {}
    }
    let Entry {
        id,
        body,
        clauses,
        span,
    } = entry;
    let data = match body {
        EntryBody::Action(head) => match head.op.text.parse() {
            Ok(op) => NodeData::Action(ActionData {
                op,
                params: head.params,
            }),
            Err(_) => NodeData::UnknownAction {
                op: head.op.text,
                params: head.params,
            },
        },
        EntryBody::Observe(head) => NodeData::Observation(ObservationData {
            provenance: head.provenance.unwrap_or(Provenance::Measured),
            label: head.label.map(|t| t.text),
            measurements: head.measurements,
            conditions: into_conditions(clauses),
            verdict,
            thresholds_met,
        }),
        EntryBody::Lesson { title } => {
            NodeData::Lesson(Box::new(lesson.unwrap_or_else(|| LessonData {
                title: title.text,
                symptom: None,
                cause: None,
                remedies: Vec::new(),
                conditions: Vec::new(),
                condition: None,
            })))
        }
        EntryBody::Note { text, draft } => NodeData::Note {
            text: text.text,
            draft,
        },
        EntryBody::Decision { text } => NodeData::Decision { text: text.text },
    };
    Checked {
        id: id.text,
        kind,
        span,
        data,
        references,
        skill,
        weights,
        source,
        diagnostics: checker.diagnostics,
    }
}

fn into_conditions(clauses: Vec<crate::syntax::Clause>) -> Vec<Param> {
    clauses
        .into_iter()
        .filter_map(|c| match c.kind {
            ClauseKind::When(params) => Some(params),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The references written in the clauses the entry's kind accepts (a misplaced
/// clause is reported once, as misplaced, and adds no edge).
fn references(entry: &Entry, kind: EntryKind) -> Vec<Reference> {
    let mut references = Vec::new();
    let mut push = |kind: EdgeKind, names: &[Name]| {
        references.extend(names.iter().map(|n| Reference {
            kind,
            target: n.clone(),
        }));
    };
    for clause in entry.clauses.iter().filter(|c| allowed(&c.kind, kind)) {
        match &clause.kind {
            ClauseKind::After(names) => push(EdgeKind::After, names),
            ClauseKind::About(names) => push(EdgeKind::About, names),
            ClauseKind::Evidence(names) => push(EdgeKind::Evidence, names),
            ClauseKind::Supersedes(names) => push(EdgeKind::Supersedes, names),
            ClauseKind::Reverts(names) => push(EdgeKind::Reverts, names),
            ClauseKind::Fixes { targets, by } => {
                push(EdgeKind::Fixes, targets);
                if let Some(by) = by {
                    push(EdgeKind::By, std::slice::from_ref(by));
                }
            }
            _ => {}
        }
    }
    references
}

/// Which clauses each kind of entry accepts.
fn allowed(clause: &ClauseKind, kind: EntryKind) -> bool {
    use EntryKind::*;
    match clause {
        ClauseKind::After(_) => true,
        ClauseKind::When(_) => matches!(kind, Observation | Lesson),
        ClauseKind::Verdict(_) => kind == Observation,
        ClauseKind::About(_) => matches!(kind, Note | Decision),
        ClauseKind::Evidence(_)
        | ClauseKind::Symptom(_)
        | ClauseKind::Cause(_)
        | ClauseKind::Fix(_)
        | ClauseKind::If(_) => kind == Lesson,
        ClauseKind::Fixes { .. } => kind == Action,
        ClauseKind::Supersedes(_) => matches!(kind, Action | Lesson | Decision),
        ClauseKind::Reverts(_) => matches!(kind, Action | Decision),
        // An observation belongs through the lesson or action it is evidence of.
        ClauseKind::In(_) => kind != Observation,
        // What was recorded on some weights: a step, a figure, a lesson.
        ClauseKind::Weights(_) => matches!(kind, Action | Observation | Lesson),
        // Any entry can rest on a record line.
        ClauseKind::Source(_) => true,
    }
}

struct Checker {
    diagnostics: Vec<Diagnostic>,
}

impl Checker {
    fn push(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    fn clause_placement(&mut self, entry: &Entry, kind: EntryKind) {
        let mut seen: Vec<(&'static str, Span)> = Vec::new();
        for clause in &entry.clauses {
            let keyword = clause.kind.keyword();
            if !allowed(&clause.kind, kind) {
                let accepting: Vec<&str> = [
                    EntryKind::Action,
                    EntryKind::Observation,
                    EntryKind::Lesson,
                    EntryKind::Note,
                    EntryKind::Decision,
                ]
                .into_iter()
                .filter(|k| allowed(&clause.kind, *k))
                .map(EntryKind::keyword)
                .collect();
                self.push(
                    Diagnostic::new(
                        Code::MisplacedClause,
                        keyword_span(clause.span, keyword),
                        format!("`{keyword}` does not belong on {}", article(kind)),
                    )
                    .with_hint(format!("`{keyword}` is for: {}", accepting.join(", "))),
                );
                continue;
            }
            if matches!(clause.kind, ClauseKind::Fix(_)) {
                continue;
            }
            match seen.iter().find(|(k, _)| *k == keyword) {
                Some((_, first)) => {
                    let diagnostic = Diagnostic::new(
                        Code::DuplicateClause,
                        keyword_span(clause.span, keyword),
                        format!("`{keyword}` given twice on `{}`", entry.id.text),
                    )
                    .with_related(*first, "first given here")
                    .with_hint(match clause.kind {
                        ClauseKind::When(_)
                        | ClauseKind::After(_)
                        | ClauseKind::About(_)
                        | ClauseKind::Evidence(_)
                        | ClauseKind::Supersedes(_)
                        | ClauseKind::Reverts(_) => "list every item in one clause",
                        _ => "keep one",
                    });
                    self.push(diagnostic);
                }
                None => seen.push((keyword, keyword_span(clause.span, keyword))),
            }
        }
    }

    fn no_duplicate_keys(&mut self, params: &[Param], what: &str) {
        for (i, param) in params.iter().enumerate() {
            if let Some(first) = earlier(params, i, |p| &p.key) {
                let message = format!("{what} `{}` given twice", param.key.text);
                let diagnostic = Diagnostic::new(Code::DuplicateParameter, param.key.span, message);
                self.push(diagnostic.with_related(first.span, "first given here"));
            }
        }
    }
}

/// The first of `items` before `items[i]` with the same name, if one is.
pub(super) fn earlier<T>(items: &[T], i: usize, name: impl Fn(&T) -> &Name) -> Option<&Name> {
    let again = &name(&items[i]).text;
    items[..i].iter().map(name).find(|n| n.text == *again)
}

/// The span of a clause's keyword (its first token).
fn keyword_span(clause: Span, keyword: &str) -> Span {
    Span {
        end: (clause.start + keyword.len() as u32).min(clause.end),
        ..clause
    }
}

/// The kind of entry with its article, as a sentence names it: "an action".
pub(super) fn article(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::Action => "an action",
        EntryKind::Observation => "an observation",
        EntryKind::Lesson => "a lesson",
        EntryKind::Note => "a note",
        EntryKind::Decision => "a decision",
    }
}

fn describe_kind(kind: ParamKind) -> String {
    match kind {
        ParamKind::Int => "an integer".into(),
        ParamKind::Float => "a number".into(),
        ParamKind::Bool => "true or false".into(),
        ParamKind::Str => "a string".into(),
        ParamKind::Ident => "a word".into(),
        ParamKind::IntList => "a list of integers".into(),
        ParamKind::Enum(choices) => format!("one of {}", choices.join(", ")),
    }
}

fn number_text(number: Number) -> String {
    match number {
        Number::Int(i) => i.to_string(),
        Number::Float(f) => format!("{f:?}"),
    }
}
