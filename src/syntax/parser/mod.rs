//! pest parser for grammar/trajectory.pest and the conversion of its parse tree into
//! the typed AST. Each piece from `split` is parsed separately; a syntax error becomes
//! one `E0001` diagnostic for its piece and parsing goes on with the next.

use pest::iterators::Pair;
use pest::Parser;
use pest_derive::Parser;
use rayon::prelude::*;

use super::ast::*;
use super::span::{FileId, LineIndex, Span};
use super::split;
use crate::diag::{Code, Diagnostic};

mod clauses;
mod expr;
mod values;

pub use values::dedent;

#[derive(Parser)]
#[grammar = "grammar/trajectory.pest"]
pub struct TrajectoryParser;

/// Longest remedy expression accepted, in parse-tree tokens (`divisor(N / herd_n)` is
/// about 20).
const MAX_EXPRESSION_TOKENS: usize = 2000;

/// Parses one file's text. Never panics; every problem is a diagnostic. Runs of items
/// are parsed in parallel; items and diagnostics come back in file order.
pub fn parse_text(file: FileId, path: &str, text: &str) -> (ParsedFile, Vec<Diagnostic>) {
    let index = LineIndex::new(text);
    let pieces = split::split(text);
    let batches: Vec<&[split::Piece]> = batches(&pieces).collect();
    let results: Vec<(Vec<Item>, Vec<Diagnostic>)> = batches
        .par_iter()
        .map(|batch| parse_batch(file, text, &index, batch))
        .collect();
    let mut items = Vec::with_capacity(pieces.len());
    let mut diagnostics = Vec::new();
    for (batch_items, batch_diagnostics) in results {
        items.extend(batch_items);
        diagnostics.extend(batch_diagnostics);
    }
    let parsed = ParsedFile {
        file,
        path: path.to_string(),
        items,
    };
    (parsed, diagnostics)
}

fn parse_batch(
    file: FileId,
    text: &str,
    index: &LineIndex,
    batch: &[split::Piece],
) -> (Vec<Item>, Vec<Diagnostic>) {
    let mut builder = Builder {
        spans: SpanMaker::new(file, text, index),
        diagnostics: Vec::new(),
    };
    let mut items = Vec::with_capacity(batch.len());
    // Fast path: the whole run in one pest call. Only if that fails is each piece
    // parsed on its own, which pins down every error; valid files never get there.
    if batch.len() > 1 && batch.iter().all(|p| p.too_deep_at.is_none()) {
        let range = batch[0].range.start..batch[batch.len() - 1].range.end;
        if let Ok(pairs) = TrajectoryParser::parse(Rule::file, &text[range.clone()]) {
            builder.spans.base = range.start;
            builder.items(pairs, &mut items);
            return (items, builder.diagnostics);
        }
    }
    for piece in batch {
        builder.piece(text, piece, &mut items);
    }
    (items, builder.diagnostics)
}

/// Turns byte offsets of the current piece into spans with line and column. Lookups
/// walk forward from the previous one (the tree is visited in source order), falling
/// back to a binary search.
pub(super) struct SpanMaker<'a> {
    file: FileId,
    text: &'a str,
    index: &'a LineIndex,
    pub(super) base: usize,
    /// The last lookup (line index, offset, column), where the next one starts.
    cursor: std::cell::Cell<(usize, u32, u32)>,
}

impl<'a> SpanMaker<'a> {
    fn new(file: FileId, text: &'a str, index: &'a LineIndex) -> Self {
        Self {
            file,
            text,
            index,
            base: 0,
            cursor: std::cell::Cell::new((0, 0, 1)),
        }
    }

    /// Span of absolute byte range `start..end`.
    pub(super) fn span_at(&self, start: usize, end: usize) -> Span {
        let start = start.min(self.text.len());
        let end = end.clamp(start, self.text.len());
        let ((line, col), cursor) =
            self.index
                .line_col_from(self.text, start as u32, self.cursor.get());
        self.cursor.set(cursor);
        Span {
            file: self.file,
            start: start as u32,
            end: end as u32,
            line,
            col,
        }
    }

    fn span(&self, pair: &Pair<'_, Rule>) -> Span {
        let s = pair.as_span();
        self.span_at(self.base + s.start(), self.base + s.end())
    }
}

struct Builder<'a> {
    spans: SpanMaker<'a>,
    diagnostics: Vec<Diagnostic>,
}

/// Children of a pair without the keyword tokens, which carry no data.
fn inner<'i>(pair: Pair<'i, Rule>) -> impl Iterator<Item = Pair<'i, Rule>> {
    pair.into_inner().filter(|p| !is_keyword(p.as_rule()))
}

fn is_keyword(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::kw_trajectory
            | Rule::kw_session
            | Rule::kw_phase
            | Rule::kw_action
            | Rule::kw_observe
            | Rule::kw_lesson
            | Rule::kw_note
            | Rule::kw_decision
            | Rule::kw_when
            | Rule::kw_after
            | Rule::kw_about
            | Rule::kw_evidence
            | Rule::kw_fixes
            | Rule::kw_by
            | Rule::kw_supersedes
            | Rule::kw_reverts
            | Rule::kw_symptom
            | Rule::kw_cause
            | Rule::kw_fix
            | Rule::kw_fails
            | Rule::kw_with
            | Rule::kw_and
            | Rule::kw_or
            | Rule::kw_not
            | Rule::kw_skill
            | Rule::kw_trigger
            | Rule::kw_in
            | Rule::kw_weights
            | Rule::kw_if
            | Rule::kw_source
            | Rule::EOI
    )
}

/// Consecutive pieces grouped into runs of about [`BATCH_BYTES`]: one pest call per run
/// instead of per item saves the parser's per-call setup.
fn batches(pieces: &[split::Piece]) -> impl Iterator<Item = &[split::Piece]> {
    let mut rest = pieces;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let start = rest[0].range.start;
        let len = rest
            .iter()
            .position(|p| p.range.end - start > BATCH_BYTES)
            .unwrap_or(rest.len())
            .max(1);
        let (batch, tail) = rest.split_at(len);
        rest = tail;
        Some(batch)
    })
}

const BATCH_BYTES: usize = 16 * 1024;

impl Builder<'_> {
    /// Parses one piece on its own, reporting its syntax error if it has one.
    fn piece(&mut self, text: &str, piece: &split::Piece, items: &mut Vec<Item>) {
        if let Some(at) = piece.too_deep_at {
            let span = self.spans.span_at(at, at + 1);
            self.diagnostics.push(
                Diagnostic::new(
                    Code::NestingTooDeep,
                    span,
                    format!("brackets nested more than {} deep", split::MAX_NESTING),
                )
                .with_hint("flatten the value; lists and expressions need only a few levels"),
            );
            return;
        }
        let source = &text[piece.range.clone()];
        self.spans.base = piece.range.start;
        match TrajectoryParser::parse(Rule::file, source) {
            Ok(pairs) => self.items(pairs, items),
            Err(error) => {
                let (diagnostic, at) =
                    super::errors::syntax_error(&self.spans, piece.range.start, source, &error);
                self.diagnostics.push(diagnostic);
                self.salvage(source, at, items);
            }
        }
    }

    fn items(&mut self, mut pairs: pest::iterators::Pairs<'_, Rule>, items: &mut Vec<Item>) {
        let Some(file_pair) = pairs.next() else {
            return;
        };
        for pair in file_pair.into_inner() {
            if let Some(item) = self.item(pair) {
                items.push(item);
            }
        }
    }

    /// After a syntax error at `at` in `source`: keeps the items that end before the
    /// error's line (a session line followed by a broken entry keeps its session), or
    /// a header or session cut short by the error, and records the broken item so the
    /// resolver knows it existed.
    fn salvage(&mut self, source: &str, at: usize, items: &mut Vec<Item>) {
        let line_start = source[..at].rfind('\n').map_or(0, |i| i + 1);
        let base = self.spans.base;
        let mut kept_until = 0;
        if let Ok(pairs) = TrajectoryParser::parse(Rule::file, &source[..at]) {
            let mut salvaged = Vec::new();
            self.items(pairs, &mut salvaged);
            for item in salvaged {
                let (start, end) = match &item {
                    Item::Entry(e) => (e.span.start, e.span.end),
                    Item::Header(h) => (h.span.start, h.span.end),
                    Item::Session(s) => (s.span.start, s.span.end),
                    Item::Skill(s) => (s.span.start, s.span.end),
                    Item::Unparsed(_) => continue,
                };
                let (start, end) = (start as usize - base, end as usize - base);
                // An entry or skill cut short by the error would be checked with its tail
                // missing.
                if matches!(item, Item::Entry(_) | Item::Skill(_)) && end > line_start {
                    break;
                }
                kept_until = if start < line_start { end } else { at };
                items.push(item);
            }
        }
        if kept_until >= at {
            return;
        }
        let rest = source[kept_until..].trim_start();
        let rest_start = source.len() - rest.len();
        let span = self.spans.span_at(base + rest_start, base + source.len());
        items.push(Item::Unparsed(Unparsed {
            kind: split::item_kind(rest),
            span,
        }));
    }

    fn item(&mut self, pair: Pair<'_, Rule>) -> Option<Item> {
        match pair.as_rule() {
            Rule::header => Some(Item::Header(self.header(pair))),
            Rule::session => Some(Item::Session(self.session(pair))),
            Rule::skill => Some(Item::Skill(self.skill(pair))),
            Rule::entry => Some(Item::Entry(self.entry(pair))),
            _ => None,
        }
    }

    fn name(&self, pair: &Pair<'_, Rule>) -> Name {
        Name {
            text: pair.as_str().to_string(),
            span: self.spans.span(pair),
        }
    }

    fn header(&mut self, pair: Pair<'_, Rule>) -> Header {
        let span = self.spans.span(&pair);
        let mut name = None;
        let mut fields = Vec::new();
        for part in inner(pair) {
            match part.as_rule() {
                Rule::string | Rule::triple_string => name = Some(self.text(part)),
                Rule::header_field => {
                    let field_span = self.spans.span(&part);
                    let mut parts = inner(part);
                    let (Some(key), Some(value)) = (parts.next(), parts.next()) else {
                        continue;
                    };
                    fields.push(HeaderField {
                        key: self.name(&key),
                        value: self.value(value),
                        span: field_span,
                    });
                }
                _ => {}
            }
        }
        Header {
            name: name.unwrap_or_else(|| Text {
                text: String::new(),
                span,
            }),
            fields,
            span,
        }
    }

    fn session(&mut self, pair: Pair<'_, Rule>) -> Session {
        let span = self.spans.span(&pair);
        let mut timestamp = None;
        let mut phase = (0, span);
        let mut title = None;
        let mut weights = None;
        let mut draft = None;
        for part in inner(pair) {
            match part.as_rule() {
                Rule::timestamp => timestamp = Some(self.timestamp(&part)),
                Rule::kw_draft => {
                    draft = Some(Draft {
                        suggested: None,
                        span: self.spans.span(&part),
                    })
                }
                Rule::weights_clause => weights = inner(part).next().map(|w| self.name(&w)),
                Rule::phase_num => {
                    let phase_span = self.spans.span(&part);
                    phase = (part.as_str().parse::<u64>().unwrap_or(u64::MAX), phase_span);
                }
                Rule::string | Rule::triple_string => title = Some(self.text(part)),
                _ => {}
            }
        }
        Session {
            timestamp: timestamp.unwrap_or_else(|| Timestamp::unread(String::new(), span)),
            phase: phase.0,
            phase_span: phase.1,
            weights,
            draft,
            title,
            span,
        }
    }

    fn skill(&mut self, pair: Pair<'_, Rule>) -> SkillDecl {
        let span = self.spans.span(&pair);
        let empty = Name {
            text: String::new(),
            span,
        };
        let (mut name, mut kind, mut title) = (empty.clone(), empty, None);
        let mut triggers = Vec::new();
        for part in inner(pair) {
            match part.as_rule() {
                Rule::skill_name => name = self.name(&part),
                Rule::skill_kind => kind = self.name(&part),
                Rule::string | Rule::triple_string => title = Some(self.text(part)),
                Rule::trigger_clause => triggers.extend(inner(part).map(|t| self.text(t))),
                _ => {}
            }
        }
        SkillDecl {
            name,
            kind,
            title: title.unwrap_or_else(|| Text {
                text: String::new(),
                span,
            }),
            triggers,
            span,
        }
    }

    /// `draft [kind]` of a note.
    fn draft(&self, pair: Pair<'_, Rule>) -> Draft {
        let span = self.spans.span(&pair);
        let suggested = pair
            .into_inner()
            .find(|p| p.as_rule() == Rule::draft_kind)
            .and_then(|kind| match kind.as_str() {
                "action" => Some(EntryKind::Action),
                "observe" => Some(EntryKind::Observation),
                "lesson" => Some(EntryKind::Lesson),
                "decision" => Some(EntryKind::Decision),
                _ => None,
            });
        Draft { suggested, span }
    }

    fn timestamp(&self, pair: &Pair<'_, Rule>) -> Timestamp {
        let text = pair.as_str();
        let digits = |range: std::ops::Range<usize>| -> u16 {
            text.get(range)
                .and_then(|d| d.parse::<u16>().ok())
                .unwrap_or(0)
        };
        let has_time = text.len() >= 16;
        let has_seconds = text.as_bytes().get(16) == Some(&b':');
        Timestamp {
            text: text.to_string(),
            year: digits(0..4),
            month: digits(5..7) as u8,
            day: digits(8..10) as u8,
            hour: if has_time { digits(11..13) as u8 } else { 0 },
            minute: if has_time { digits(14..16) as u8 } else { 0 },
            second: if has_seconds { digits(17..19) as u8 } else { 0 },
            span: self.spans.span(pair),
        }
    }

    fn entry(&mut self, pair: Pair<'_, Rule>) -> Entry {
        let span = self.spans.span(&pair);
        let mut parts = inner(pair);
        let id = parts.next().map(|p| self.name(&p)).unwrap_or_else(|| Name {
            text: String::new(),
            span,
        });
        if split::is_reserved(&id.text) {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::Syntax,
                    id.span,
                    format!("`{}` is a keyword and cannot be an entry id", id.text),
                )
                .with_hint("ids are words like `a12`, `o13`, `l14`"),
            );
        }
        let body = match parts.next() {
            Some(head) => self.entry_body(head, span),
            None => EntryBody::Note {
                text: Text {
                    text: String::new(),
                    span,
                },
                draft: None,
            },
        };
        let clauses = parts.filter_map(|p| self.clause(p)).collect();
        Entry {
            id,
            body,
            clauses,
            span,
        }
    }

    fn entry_body(&mut self, head: Pair<'_, Rule>, entry_span: Span) -> EntryBody {
        let rule = head.as_rule();
        let head_span = self.spans.span(&head);
        let empty_text = || Text {
            text: String::new(),
            span: head_span,
        };
        match rule {
            Rule::action => {
                let mut parts = inner(head);
                let op = parts.next().map(|p| self.name(&p)).unwrap_or(Name {
                    text: String::new(),
                    span: entry_span,
                });
                let params = parts.map(|p| self.param(p)).collect();
                EntryBody::Action(ActionHead { op, params })
            }
            Rule::observe => {
                let mut observe = ObserveHead {
                    provenance: None,
                    label: None,
                    measurements: Vec::new(),
                };
                for part in inner(head) {
                    match part.as_rule() {
                        Rule::provenance => {
                            observe.provenance = Some(if part.as_str() == "modeled" {
                                Provenance::Modeled
                            } else {
                                Provenance::Measured
                            })
                        }
                        Rule::string | Rule::triple_string => observe.label = Some(self.text(part)),
                        Rule::measurement => observe.measurements.push(self.measurement(part)),
                        _ => {}
                    }
                }
                EntryBody::Observe(observe)
            }
            Rule::lesson | Rule::note | Rule::decision => {
                let mut draft = None;
                let mut text = None;
                for part in inner(head) {
                    match part.as_rule() {
                        Rule::draft_mark => draft = Some(self.draft(part)),
                        _ => text = Some(self.text(part)),
                    }
                }
                let text = text.unwrap_or_else(empty_text);
                match rule {
                    Rule::lesson => EntryBody::Lesson { title: text },
                    Rule::note => EntryBody::Note { text, draft },
                    _ => EntryBody::Decision { text },
                }
            }
            _ => EntryBody::Note {
                text: empty_text(),
                draft: None,
            },
        }
    }
}
