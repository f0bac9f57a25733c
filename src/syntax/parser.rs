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
        for part in inner(pair) {
            match part.as_rule() {
                Rule::timestamp => timestamp = Some(self.timestamp(&part)),
                Rule::phase_num => {
                    let phase_span = self.spans.span(&part);
                    phase = (part.as_str().parse::<u64>().unwrap_or(u64::MAX), phase_span);
                }
                Rule::string | Rule::triple_string => title = Some(self.text(part)),
                _ => {}
            }
        }
        Session {
            timestamp: timestamp.unwrap_or_else(|| Timestamp {
                text: String::new(),
                year: 0,
                month: 0,
                day: 0,
                hour: 0,
                minute: 0,
                second: 0,
                span,
            }),
            phase: phase.0,
            phase_span: phase.1,
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
                let text = inner(head)
                    .next()
                    .map(|p| self.text(p))
                    .unwrap_or_else(empty_text);
                match rule {
                    Rule::lesson => EntryBody::Lesson { title: text },
                    Rule::note => EntryBody::Note { text },
                    _ => EntryBody::Decision { text },
                }
            }
            _ => EntryBody::Note { text: empty_text() },
        }
    }

    fn measurement(&mut self, pair: Pair<'_, Rule>) -> Measurement {
        let span = self.spans.span(&pair);
        let mut parts = inner(pair);
        let metric = parts.next().map(|p| self.name(&p));
        let value = parts.next().map(|p| self.quantity(p));
        let threshold = parts.next().map(|p| self.threshold(p));
        Measurement {
            metric: metric.unwrap_or(Name {
                text: String::new(),
                span,
            }),
            value: value.unwrap_or_else(|| zero_quantity(span)),
            threshold,
            span,
        }
    }

    fn threshold(&mut self, pair: Pair<'_, Rule>) -> Threshold {
        let span = self.spans.span(&pair);
        let mut parts = inner(pair);
        let op = parts.next().map_or(CmpOp::Eq, |p| cmp_op(p.as_str()));
        let value = parts
            .next()
            .map_or_else(|| zero_quantity(span), |p| self.quantity(p));
        Threshold { op, value, span }
    }

    fn quantity(&mut self, pair: Pair<'_, Rule>) -> Quantity {
        let mut span = self.spans.span(&pair);
        let mut parts = inner(pair);
        let number = parts.next().map(|p| (self.number(&p), self.spans.span(&p)));
        let unit = parts.next().map(|p| self.name(&p));
        let number = match (number, &unit) {
            // Without a unit the quantity ends with its number, not with the
            // blank the grammar skipped looking for one.
            (Some((number, number_span)), None) => {
                span = number_span;
                number
            }
            (Some((number, _)), Some(_)) => number,
            (None, _) => Number::Int(0),
        };
        Quantity { number, unit, span }
    }

    fn number(&mut self, pair: &Pair<'_, Rule>) -> Number {
        let text = pair.as_str();
        if !text.contains(['.', 'e', 'E']) {
            if let Ok(i) = text.parse::<i64>() {
                return Number::Int(i);
            }
            self.out_of_range(pair);
            return Number::Int(if text.starts_with('-') {
                i64::MIN
            } else {
                i64::MAX
            });
        }
        match text.parse::<f64>() {
            Ok(f) if f.is_finite() => {
                if (f == 0.0 && has_nonzero_digit(text)) || f.is_subnormal() {
                    self.underflow(pair, f);
                }
                Number::Float(f)
            }
            _ => {
                self.out_of_range(pair);
                Number::Float(0.0)
            }
        }
    }

    fn underflow(&mut self, pair: &Pair<'_, Rule>, value: f64) {
        let became = if value == 0.0 {
            "0".to_string()
        } else {
            format!("the subnormal {value:e}, with fewer significant bits")
        };
        self.diagnostics.push(
            Diagnostic::new(
                Code::NumberUnderflow,
                self.spans.span(pair),
                format!(
                    "number `{}` underflows: it reads as {became}",
                    pair.as_str()
                ),
            )
            .with_hint("the smallest normal float is 2.2e-308; write 0 if zero is meant"),
        );
    }

    fn out_of_range(&mut self, pair: &Pair<'_, Rule>) {
        self.diagnostics.push(
            Diagnostic::new(
                Code::NumberOutOfRange,
                self.spans.span(pair),
                format!("number `{}` is out of range", pair.as_str()),
            )
            .with_hint("integers are 64-bit signed; floats must be finite"),
        );
    }

    fn param(&mut self, pair: Pair<'_, Rule>) -> Param {
        let span = self.spans.span(&pair);
        let mut parts = inner(pair);
        let key = parts.next().map(|p| self.name(&p)).unwrap_or(Name {
            text: String::new(),
            span,
        });
        let value = parts.next().map_or_else(
            || Value {
                kind: ValueKind::Bool(false),
                span,
            },
            |p| self.value(p),
        );
        Param { key, value, span }
    }

    fn value(&mut self, pair: Pair<'_, Rule>) -> Value {
        let span = self.spans.span(&pair);
        let kind = match pair.as_rule() {
            Rule::list => ValueKind::List(inner(pair).map(|p| self.value(p)).collect()),
            Rule::string | Rule::triple_string => ValueKind::Str(self.text(pair).text),
            Rule::boolean => ValueKind::Bool(pair.as_str() == "true"),
            Rule::quantity => ValueKind::Number(self.quantity(pair)),
            _ => ValueKind::Ident(pair.as_str().to_string()),
        };
        Value { kind, span }
    }

    fn text(&self, pair: Pair<'_, Rule>) -> Text {
        let span = self.spans.span(&pair);
        let rule = pair.as_rule();
        let raw = pair.into_inner().next().map_or("", |p| p.as_str());
        let text = if rule == Rule::triple_string {
            dedent(raw)
        } else {
            unescape(raw)
        };
        Text { text, span }
    }

    fn refs<'i>(&self, parts: impl Iterator<Item = Pair<'i, Rule>>) -> Vec<Name> {
        parts.map(|p| self.name(&p)).collect()
    }

    fn clause(&mut self, pair: Pair<'_, Rule>) -> Option<Clause> {
        let span = self.spans.span(&pair);
        let kind = match pair.as_rule() {
            Rule::when_clause => ClauseKind::When(inner(pair).map(|p| self.param(p)).collect()),
            Rule::verdict_clause => ClauseKind::Verdict(
                if inner(pair).next().is_some_and(|p| p.as_str() == "pass") {
                    Verdict::Pass
                } else {
                    Verdict::Fail
                },
            ),
            Rule::after_clause => ClauseKind::After(self.refs(inner(pair))),
            Rule::about_clause => ClauseKind::About(self.refs(inner(pair))),
            Rule::evidence_clause => ClauseKind::Evidence(self.refs(inner(pair))),
            Rule::supersedes_clause => ClauseKind::Supersedes(self.refs(inner(pair))),
            Rule::reverts_clause => ClauseKind::Reverts(self.refs(inner(pair))),
            Rule::fixes_clause => {
                // `by` is a keyword token: refs before it are targets, the one after the lesson.
                let mut targets = Vec::new();
                let mut by = None;
                let mut seen_by = false;
                for part in pair.into_inner() {
                    match part.as_rule() {
                        Rule::kw_by => seen_by = true,
                        Rule::entry_ref if seen_by => by = Some(self.name(&part)),
                        Rule::entry_ref => targets.push(self.name(&part)),
                        _ => {}
                    }
                }
                ClauseKind::Fixes { targets, by }
            }
            Rule::symptom_clause => ClauseKind::Symptom(self.symptom(pair)),
            Rule::cause_clause => {
                let mut cause = Cause {
                    text: None,
                    condition: None,
                };
                for part in inner(pair) {
                    match part.as_rule() {
                        Rule::string | Rule::triple_string => cause.text = Some(self.text(part)),
                        Rule::expr => cause.condition = Some(self.bounded_expr(part)),
                        _ => {}
                    }
                }
                ClauseKind::Cause(cause)
            }
            Rule::fix_clause => {
                let mut parts = inner(pair).peekable();
                let text = match parts.peek().map(|p| p.as_rule()) {
                    Some(Rule::string | Rule::triple_string) => parts.next().map(|p| self.text(p)),
                    _ => None,
                };
                let op = parts.next().map(|p| self.name(&p)).unwrap_or(Name {
                    text: String::new(),
                    span,
                });
                let assignments = parts.map(|p| self.assignment(p)).collect();
                ClauseKind::Fix(Fix {
                    text,
                    op,
                    assignments,
                })
            }
            Rule::in_clause => match inner(pair).next() {
                Some(name) => ClauseKind::In(self.name(&name)),
                None => return None,
            },
            _ => return None,
        };
        Some(Clause { kind, span })
    }

    fn symptom(&mut self, pair: Pair<'_, Rule>) -> Symptom {
        let mut symptom = Symptom {
            text: None,
            failing_op: None,
            predicates: Vec::new(),
        };
        for part in inner(pair) {
            match part.as_rule() {
                Rule::string | Rule::triple_string => symptom.text = Some(self.text(part)),
                Rule::symptom_gate => {
                    symptom.failing_op = inner(part).next().map(|p| self.name(&p));
                }
                Rule::predicates => {
                    for predicate in inner(part) {
                        let span = self.spans.span(&predicate);
                        let mut pieces = inner(predicate);
                        let (Some(metric), Some(op), Some(value)) =
                            (pieces.next(), pieces.next(), pieces.next())
                        else {
                            continue;
                        };
                        symptom.predicates.push(Predicate {
                            metric: self.name(&metric),
                            op: cmp_op(op.as_str()),
                            value: self.quantity(value),
                            span,
                        });
                    }
                }
                _ => {}
            }
        }
        symptom
    }

    fn assignment(&mut self, pair: Pair<'_, Rule>) -> Assignment {
        let span = self.spans.span(&pair);
        let mut parts = inner(pair);
        let key = parts.next().map(|p| self.name(&p)).unwrap_or(Name {
            text: String::new(),
            span,
        });
        let value = parts.next().map_or_else(
            || Expr {
                kind: ExprKind::Bool(false),
                span,
            },
            |p| self.fix_value(p),
        );
        Assignment { key, value, span }
    }

    /// A fix value: the literal forms of `value`, or a computed expression.
    fn fix_value(&mut self, pair: Pair<'_, Rule>) -> Expr {
        let span = self.spans.span(&pair);
        let kind = match pair.as_rule() {
            Rule::fix_list => ExprKind::List(inner(pair).map(|p| self.fix_value(p)).collect()),
            Rule::string | Rule::triple_string => ExprKind::Str(self.text(pair).text),
            Rule::boolean => ExprKind::Bool(pair.as_str() == "true"),
            Rule::quantity => ExprKind::Number(self.quantity(pair)),
            Rule::ident_value => ExprKind::Word(pair.as_str().to_string()),
            _ => return self.bounded_expr(pair),
        };
        Expr { kind, span }
    }

    /// An expression of at most [`MAX_EXPRESSION_TOKENS`] tokens; a larger one is
    /// reported and replaced by `0`, so later passes can walk expression trees
    /// recursively without risking the stack.
    fn bounded_expr(&mut self, pair: Pair<'_, Rule>) -> Expr {
        let span = self.spans.span(&pair);
        if pair.clone().into_inner().flatten().count() > MAX_EXPRESSION_TOKENS {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::NestingTooDeep,
                    span,
                    format!("expression longer than {MAX_EXPRESSION_TOKENS} tokens"),
                )
                .with_hint("a remedy expression computes one parameter; keep it short"),
            );
            return zero_expr(span);
        }
        self.expr(pair)
    }

    /// Expression rules nest one level per precedence tier; each tier folds its
    /// operands left to right. Prefix chains (`- - x`, `not not x`) are walked in a
    /// loop, so a long chain cannot exhaust the stack.
    fn expr(&mut self, pair: Pair<'_, Rule>) -> Expr {
        let span = self.spans.span(&pair);
        match pair.as_rule() {
            Rule::expr | Rule::paren_expr => match inner(pair).next() {
                Some(p) => self.expr(p),
                None => zero_expr(span),
            },
            Rule::or_expr | Rule::and_expr | Rule::sum | Rule::product | Rule::cmp_expr => {
                let mut parts = pair.into_inner();
                let mut lhs = match parts.next() {
                    Some(p) => self.expr(p),
                    None => return zero_expr(span),
                };
                while let Some(op) = parts.next() {
                    let op = binary_op(op.as_rule(), op.as_str());
                    let Some(rhs) = parts.next() else { break };
                    let rhs = self.expr(rhs);
                    let span = self
                        .spans
                        .span_at(lhs.span.start as usize, rhs.span.end as usize);
                    lhs = Expr {
                        kind: ExprKind::Binary {
                            op,
                            lhs: Box::new(lhs),
                            rhs: Box::new(rhs),
                        },
                        span,
                    };
                }
                lhs
            }
            Rule::unary | Rule::not_expr => self.prefix_chain(pair),
            Rule::call => {
                let mut parts = inner(pair);
                let function = parts
                    .next()
                    .map_or_else(String::new, |p| p.as_str().to_string());
                let args = parts.map(|p| self.expr(p)).collect();
                Expr {
                    kind: ExprKind::Call { function, args },
                    span,
                }
            }
            Rule::number => {
                let number = self.number(&pair);
                Expr {
                    kind: ExprKind::Number(Quantity {
                        number,
                        unit: None,
                        span,
                    }),
                    span,
                }
            }
            Rule::variable => Expr {
                kind: ExprKind::Var(pair.as_str().to_string()),
                span,
            },
            _ => zero_expr(span),
        }
    }

    fn prefix_chain(&mut self, pair: Pair<'_, Rule>) -> Expr {
        let mut prefixes = Vec::new();
        let mut current = pair;
        loop {
            let rule = current.as_rule();
            if rule != Rule::unary && rule != Rule::not_expr {
                break;
            }
            let start = current.as_span().start();
            let mut parts = current.into_inner();
            let Some(first) = parts.next() else {
                let span = self
                    .spans
                    .span_at(self.spans.base + start, self.spans.base + start);
                return zero_expr(span);
            };
            match first.as_rule() {
                Rule::neg_op | Rule::kw_not => {
                    let op = if first.as_rule() == Rule::neg_op {
                        UnaryOp::Neg
                    } else {
                        UnaryOp::Not
                    };
                    prefixes.push((op, start));
                    match parts.next() {
                        Some(next) => current = next,
                        None => {
                            let span = self.spans.span(&first);
                            return zero_expr(span);
                        }
                    }
                }
                _ => {
                    current = first;
                    break;
                }
            }
        }
        let mut expr = self.expr(current);
        while let Some((op, start)) = prefixes.pop() {
            let span = self
                .spans
                .span_at(self.spans.base + start, expr.span.end as usize);
            expr = Expr {
                kind: ExprKind::Unary {
                    op,
                    operand: Box::new(expr),
                },
                span,
            };
        }
        expr
    }
}

fn zero_quantity(span: Span) -> Quantity {
    Quantity {
        number: Number::Int(0),
        unit: None,
        span,
    }
}

fn zero_expr(span: Span) -> Expr {
    Expr {
        kind: ExprKind::Number(zero_quantity(span)),
        span,
    }
}

fn cmp_op(symbol: &str) -> CmpOp {
    match symbol {
        "<" => CmpOp::Lt,
        "<=" => CmpOp::Le,
        ">" => CmpOp::Gt,
        ">=" => CmpOp::Ge,
        "!=" => CmpOp::Ne,
        _ => CmpOp::Eq,
    }
}

fn binary_op(rule: Rule, symbol: &str) -> BinaryOp {
    match (rule, symbol) {
        (Rule::kw_and, _) => BinaryOp::And,
        (Rule::kw_or, _) => BinaryOp::Or,
        (Rule::cmp_op, s) => BinaryOp::Cmp(cmp_op(s)),
        (_, "+") => BinaryOp::Add,
        (_, "-") => BinaryOp::Sub,
        (_, "*") => BinaryOp::Mul,
        (_, "/") => BinaryOp::Div,
        _ => BinaryOp::Rem,
    }
}

/// Resolves the escapes of a one-line string: `\"`, `\\`, `\n`, `\t`.
fn unescape(raw: &str) -> String {
    if !raw.contains('\\') {
        return raw.to_string();
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// The text of a `"""` block: a first line that is empty after the quotes and a
/// last line of only indentation are dropped, then the indentation common to all
/// non-blank lines is removed. Nothing else changes.
pub fn dedent(raw: &str) -> String {
    let raw = raw.replace("\r\n", "\n");
    let mut lines: Vec<&str> = raw.split('\n').collect();
    if lines.len() > 1 && lines.first().is_some_and(|l| l.trim().is_empty()) {
        lines.remove(0);
    }
    if lines.len() > 1 && lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start_matches([' ', '\t']).len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| {
            l.get(indent..)
                .unwrap_or_else(|| l.trim_start_matches([' ', '\t']))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a number's mantissa (the digits before any exponent) is not zero.
fn has_nonzero_digit(text: &str) -> bool {
    text.split(['e', 'E'])
        .next()
        .is_some_and(|mantissa| mantissa.chars().any(|c| matches!(c, '1'..='9')))
}
