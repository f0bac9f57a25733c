//! Drafted sessions → the language's syntax tree → text, through the one printer
//! (`syntax::print`), so an imported file is exactly what the printer writes and
//! print → parse → print leaves it unchanged. Ids are the record file's slug and
//! the record line an entry starts at (`readme.17`), with `.2`, `.3` for further
//! entries of the same line: stable as long as the records and their set are.

use std::collections::BTreeSet;

use super::draft::{Body, Condition, DraftEntry, DraftFile, Observed, Placement};
use crate::syntax::{
    Clause, ClauseKind, Draft, Entry, EntryBody, FileId, Header, HeaderField, Item, Measurement,
    Name, ObserveHead, Param, ParsedFile, Provenance, Quantity, Session, Span, Text, Timestamp,
    Value, ValueKind,
};

/// The trajectory header: name, model, target and baseline.
pub struct HeaderFields<'a> {
    pub name: &'a str,
    pub model: &'a str,
    pub baseline: &'a str,
}

const NOWHERE: Span = Span {
    file: FileId(0),
    start: 0,
    end: 0,
    line: 1,
    col: 1,
};

fn name(text: &str) -> Name {
    Name {
        text: text.to_string(),
        span: NOWHERE,
    }
}

fn text(text: &str) -> Text {
    Text {
        text: text.to_string(),
        span: NOWHERE,
    }
}

fn value(kind: ValueKind) -> Value {
    Value {
        kind,
        span: NOWHERE,
    }
}

/// The header file's text.
pub fn header(fields: &HeaderFields) -> String {
    let field = |key: &str, kind: ValueKind| HeaderField {
        key: name(key),
        value: value(kind),
        span: NOWHERE,
    };
    let header = Header {
        name: text(fields.name),
        fields: vec![
            field("model", ValueKind::Str(fields.model.to_string())),
            field("target", ValueKind::Ident("npu2".to_string())),
            field("baseline", ValueKind::Str(fields.baseline.to_string())),
        ],
        span: NOWHERE,
    };
    print(vec![Item::Header(header)])
}

/// A record file's sessions as trajectory text; its entries' ids start with `slug`.
pub fn file(draft: &DraftFile, slug: &str) -> String {
    let mut ids = BTreeSet::new();
    let mut items = Vec::new();
    for session in &draft.sessions {
        items.push(Item::Session(self::session(
            &session.date,
            session.phase,
            &session.title,
        )));
        let session_ids: Vec<String> = session
            .entries
            .iter()
            .map(|e| fresh_id(&mut ids, slug, e.first))
            .collect();
        for (entry, id) in session.entries.iter().zip(&session_ids) {
            let about = entry.about.and_then(|i| session_ids.get(i));
            items.push(Item::Entry(self::entry(entry, id, about, &draft.cite)));
        }
    }
    print(items)
}

fn print(items: Vec<Item>) -> String {
    let parsed = ParsedFile {
        file: FileId(0),
        path: String::new(),
        items,
    };
    crate::syntax::print::file(&parsed)
}

/// `slug.line`, or `slug.line.k` when the line already gave an id.
fn fresh_id(taken: &mut BTreeSet<String>, slug: &str, line: u32) -> String {
    let base = format!("{slug}.{line}");
    let mut id = base.clone();
    let mut k = 2;
    while taken.contains(&id) {
        id = format!("{base}.{k}");
        k += 1;
    }
    taken.insert(id.clone());
    id
}

fn session(date: &str, placement: Placement, title: &str) -> Session {
    Session {
        timestamp: Timestamp::unread(date.to_string(), NOWHERE),
        phase: u64::from(placement.phase().index()),
        phase_span: NOWHERE,
        weights: None,
        draft: matches!(placement, Placement::Draft(_)).then_some(Draft {
            suggested: None,
            span: NOWHERE,
        }),
        title: Some(text(title)),
        span: NOWHERE,
    }
}

/// `mlir-air:path:12` or `mlir-air:path:12-15`.
pub fn citation(cite: &str, first: u32, last: u32) -> String {
    if last > first {
        format!("{cite}:{first}-{last}")
    } else {
        format!("{cite}:{first}")
    }
}

fn entry(entry: &DraftEntry, id: &str, about: Option<&String>, cite: &str) -> Entry {
    let clause = |kind: ClauseKind| Clause {
        kind,
        span: NOWHERE,
    };
    let mut clauses = Vec::new();
    let body = match &entry.body {
        Body::Note { text: t, draft } => EntryBody::Note {
            text: text(t),
            draft: draft.map(|suggested| Draft {
                suggested,
                span: NOWHERE,
            }),
        },
        Body::Observe(observed) => {
            if !observed.conditions.is_empty() {
                clauses.push(clause(ClauseKind::When(conditions(observed))));
            }
            EntryBody::Observe(observe_head(observed))
        }
    };
    if let Some(about) = about {
        clauses.push(clause(ClauseKind::About(vec![name(about)])));
    }
    clauses.push(clause(ClauseKind::Source(text(&citation(
        cite,
        entry.first,
        entry.last,
    )))));
    Entry {
        id: name(id),
        body,
        clauses,
        span: NOWHERE,
    }
}

fn observe_head(observed: &Observed) -> ObserveHead {
    ObserveHead {
        provenance: Some(Provenance::Measured),
        label: (!observed.label.is_empty()).then(|| text(&observed.label)),
        measurements: observed
            .figures
            .iter()
            .map(|f| Measurement {
                metric: name(f.metric.name()),
                value: Quantity {
                    number: f.value,
                    unit: f.unit.map(|u| name(u.symbol())),
                    span: NOWHERE,
                },
                threshold: None,
                span: NOWHERE,
            })
            .collect(),
    }
}

fn conditions(observed: &Observed) -> Vec<Param> {
    observed
        .conditions
        .iter()
        .map(|(key, v)| Param {
            key: name(key),
            value: value(match v {
                Condition::Number(n) => ValueKind::Number(Quantity {
                    number: *n,
                    unit: None,
                    span: NOWHERE,
                }),
                Condition::Word(w) => ValueKind::Ident(w.clone()),
            }),
            span: NOWHERE,
        })
        .collect()
}
