//! Checks one entry on its own against the vocabulary of `skillc_runtime::ops` and the
//! clause rules of its kind, and produces its resolved [`NodeData`] and the references
//! it makes. Nothing here looks at other entries, so entries are checked in parallel.

use skillc_runtime::ops::{self, Dimension, OpSpec, ParamKind, ParamSpec};

use super::expr::{self, Scope};
use super::{ActionData, Change, EdgeKind, LessonData, NodeData, ObservationData, Remedy};
use crate::diag::{Code, Diagnostic};
use crate::syntax::{
    ClauseKind, Entry, EntryBody, EntryKind, Expr, ExprKind, Measurement, Name, Number, Param,
    Provenance, Quantity, Span, Symptom, Value, ValueKind,
};

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
    pub diagnostics: Vec<Diagnostic>,
}

/// Checks an entry, then moves its parts into the node data (the AST is consumed, so
/// a large trajectory is not held in memory twice).
pub(super) fn check_entry(entry: Entry, phase: u8) -> Checked {
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
            })))
        }
        EntryBody::Note { text } => NodeData::Note { text: text.text },
        EntryBody::Decision { text } => NodeData::Decision { text: text.text },
    };
    Checked {
        id: id.text,
        kind,
        span,
        data,
        references,
        skill,
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

fn conditions(entry: &Entry) -> Vec<Param> {
    entry
        .clauses
        .iter()
        .filter_map(|c| match &c.kind {
            ClauseKind::When(params) => Some(params.clone()),
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
        | ClauseKind::Fix(_) => kind == Lesson,
        ClauseKind::Fixes { .. } => kind == Action,
        ClauseKind::Supersedes(_) => matches!(kind, Action | Lesson | Decision),
        ClauseKind::Reverts(_) => matches!(kind, Action | Decision),
        // An observation belongs through the lesson or action it is evidence of.
        ClauseKind::In(_) => kind != Observation,
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
            if let Some(first) = params[..i].iter().find(|p| p.key.text == param.key.text) {
                self.push(
                    Diagnostic::new(
                        Code::DuplicateParameter,
                        param.key.span,
                        format!("{what} `{}` given twice", param.key.text),
                    )
                    .with_related(first.key.span, "first given here"),
                );
            }
        }
    }

    // ----------------------------------------------------------------------------
    // Actions
    // ----------------------------------------------------------------------------

    fn operation(&mut self, op: &Name) -> Option<&'static OpSpec> {
        let spec = ops::operation(&op.text);
        if spec.is_none() {
            let names: Vec<&str> = ops::OPERATIONS.iter().map(|o| o.name).collect();
            let mut diagnostic = Diagnostic::new(
                Code::UnknownOperation,
                op.span,
                format!("unknown operation `{}`", op.text),
            );
            if let Some(close) = super::suggest::closest(&op.text, names.iter().copied()) {
                diagnostic = diagnostic.with_hint(format!("did you mean `{close}`?"));
            } else {
                diagnostic = diagnostic.with_hint(
                    "operations are listed in OPERATIONS, runtime/src/ops/operations.rs",
                );
            }
            self.push(diagnostic);
        }
        spec
    }

    fn action(&mut self, op: &Name, params: &[Param], phase: u8) {
        let Some(spec) = self.operation(op) else {
            return;
        };
        if phase <= 7 && !spec.allowed_in(phase) {
            let phases: Vec<String> = spec.phases.iter().map(u8::to_string).collect();
            self.push(
                Diagnostic::new(
                    Code::OpNotInPhase,
                    op.span,
                    format!("`{}` is not an operation of phase {phase}", spec.name),
                )
                .with_hint(format!(
                    "`{}` belongs to phase{} {}",
                    spec.name,
                    if phases.len() == 1 { "" } else { "s" },
                    phases.join(", ")
                )),
            );
        }
        self.no_duplicate_keys(params, "parameter");
        for param in params {
            match spec.param(&param.key.text) {
                Some(param_spec) => self.value_fits(param_spec, &param.value),
                None => self.unknown_parameter(spec, &param.key, false),
            }
        }
        for required in spec.params.iter().filter(|p| p.required) {
            if !params.iter().any(|p| p.key.text == required.name) {
                self.push(
                    Diagnostic::new(
                        Code::MissingParameter,
                        op.span,
                        format!("`{}` needs parameter `{}`", spec.name, required.name),
                    )
                    .with_hint(format!("{}: {}", required.name, required.doc)),
                );
            }
        }
    }

    fn unknown_parameter(&mut self, spec: &OpSpec, key: &Name, slots_allowed: bool) {
        let mut diagnostic = Diagnostic::new(
            Code::UnknownParameter,
            key.span,
            format!("`{}` has no parameter `{}`", spec.name, key.text),
        );
        let slot_owner = spec
            .resolve_param(&key.text)
            .and_then(|(p, slot)| slot.map(|_| p));
        diagnostic = match slot_owner {
            Some(owner) if !slots_allowed => diagnostic.with_hint(format!(
                "`{}` is a slot of `{}`: write the whole list, `{}=[{}]`",
                key.text,
                owner.name,
                owner.name,
                owner.components.join(", ")
            )),
            _ => {
                let names: Vec<String> = spec
                    .params
                    .iter()
                    .map(|p| {
                        if p.components.is_empty() || !slots_allowed {
                            p.name.to_string()
                        } else {
                            format!("{} [{}]", p.name, p.components.join(", "))
                        }
                    })
                    .collect();
                if names.is_empty() {
                    diagnostic.with_hint(format!("`{}` takes no parameters", spec.name))
                } else {
                    diagnostic.with_hint(format!("parameters: {}", names.join(", ")))
                }
            }
        };
        self.push(diagnostic);
    }

    /// Whether a literal value fits a parameter's kind.
    fn value_fits(&mut self, spec: &ParamSpec, value: &Value) {
        let expected = describe_kind(spec.kind);
        let wrong = |found: &str| {
            Diagnostic::new(
                Code::WrongValueKind,
                value.span,
                format!("`{}` takes {expected}, found {found}", spec.name),
            )
        };
        match (&value.kind, spec.kind) {
            (ValueKind::Number(q), ParamKind::Int) => {
                if let Number::Float(_) = q.number {
                    self.push(wrong("a float"));
                }
                self.no_unit(spec, q);
                self.in_bounds(spec, q);
            }
            (ValueKind::Number(q), ParamKind::Float) => {
                self.no_unit(spec, q);
                self.in_bounds(spec, q);
            }
            (ValueKind::Bool(_), ParamKind::Bool)
            | (ValueKind::Str(_), ParamKind::Str)
            | (ValueKind::Ident(_), ParamKind::Ident) => {}
            (ValueKind::Ident(word), ParamKind::Enum(choices)) => {
                if !choices.contains(&word.as_str()) {
                    self.not_in_enum(spec.name, word, choices, value.span);
                }
            }
            (ValueKind::List(items), ParamKind::IntList) => {
                for item in items {
                    match &item.kind {
                        ValueKind::Number(q) if matches!(q.number, Number::Int(_)) => {
                            self.no_unit(spec, q);
                            self.in_bounds(spec, q);
                        }
                        other => self.push(Diagnostic::new(
                            Code::WrongValueKind,
                            item.span,
                            format!(
                                "`{}` is a list of integers, found {}",
                                spec.name,
                                describe_value(other)
                            ),
                        )),
                    }
                }
                self.list_length(spec, items.len(), value.span);
            }
            (ValueKind::Str(_), ParamKind::Ident | ParamKind::Enum(_)) => {
                self.push(wrong("a string").with_hint("write the word without quotes"))
            }
            (ValueKind::Ident(_), ParamKind::Str) => {
                self.push(wrong("a word").with_hint("put text in double quotes"))
            }
            (other, _) => self.push(wrong(&describe_value(other))),
        }
    }

    /// A literal outside its parameter's range (`shape=[0,…]`, `rtol=-1`): the
    /// table's bound, the one replay and deploy enforce too.
    fn in_bounds(&mut self, spec: &ParamSpec, quantity: &Quantity) {
        let value = quantity.number.as_f64();
        if !spec.bound.admits(value) {
            let slot = if spec.kind == ParamKind::IntList {
                " (every slot)"
            } else {
                ""
            };
            self.push(
                Diagnostic::new(
                    Code::ParameterOutOfRange,
                    quantity.span,
                    format!(
                        "`{}` = {}: {}",
                        spec.name,
                        number_text(quantity.number),
                        spec.bound.rule()
                    ),
                )
                .with_hint(format!("{}{slot}: {}", spec.name, spec.doc)),
            );
        }
    }

    fn list_length(&mut self, spec: &ParamSpec, len: usize, span: Span) {
        if !spec.components.is_empty() && len > spec.components.len() {
            self.push(
                Diagnostic::new(
                    Code::WrongValueKind,
                    span,
                    format!(
                        "`{}` has at most {} slots, found {len}",
                        spec.name,
                        spec.components.len()
                    ),
                )
                .with_hint(format!("slots: [{}]", spec.components.join(", "))),
            );
        }
    }

    fn no_unit(&mut self, spec: &ParamSpec, quantity: &Quantity) {
        if let Some(unit) = &quantity.unit {
            self.push(
                Diagnostic::new(
                    Code::UnknownUnit,
                    unit.span,
                    format!(
                        "parameter `{}` takes a plain number, not `{}`",
                        spec.name, unit.text
                    ),
                )
                .with_hint("operation parameters carry no units"),
            );
        }
    }

    fn not_in_enum(&mut self, param: &str, word: &str, choices: &[&str], span: Span) {
        let mut diagnostic = Diagnostic::new(
            Code::NotInEnum,
            span,
            format!("`{word}` is not a valid `{param}`"),
        );
        diagnostic = match super::suggest::closest(word, choices.iter().copied()) {
            Some(close) => diagnostic.with_hint(format!(
                "did you mean `{close}`? one of: {}",
                choices.join(", ")
            )),
            None => diagnostic.with_hint(format!("one of: {}", choices.join(", "))),
        };
        self.push(diagnostic);
    }

    // ----------------------------------------------------------------------------
    // Observations
    // ----------------------------------------------------------------------------

    /// Checks the measurements and returns whether all thresholds hold (`None` without
    /// thresholds or when a unit problem makes it undecidable).
    fn observation(
        &mut self,
        measurements: &[Measurement],
        verdict: Option<crate::syntax::Verdict>,
        entry: &Entry,
    ) -> Option<bool> {
        if measurements.is_empty() && verdict.is_none() {
            self.push(
                Diagnostic::new(
                    Code::EmptyObservation,
                    entry.id.span,
                    format!("observation `{}` records nothing", entry.id.text),
                )
                .with_hint("add a measurement `metric = value` or a verdict `-> pass`/`-> fail`"),
            );
        }
        let mut all_met = true;
        let mut any_threshold = false;
        let mut undecidable = false;
        for (i, measurement) in measurements.iter().enumerate() {
            if let Some(first) = measurements[..i]
                .iter()
                .find(|m| m.metric.text == measurement.metric.text)
            {
                self.push(
                    Diagnostic::new(
                        Code::DuplicateParameter,
                        measurement.metric.span,
                        format!("metric `{}` measured twice", measurement.metric.text),
                    )
                    .with_related(first.metric.span, "first measured here")
                    .with_hint("record a second measurement in its own observation"),
                );
            }
            let Some(metric) = self.metric(&measurement.metric) else {
                undecidable |= measurement.threshold.is_some();
                continue;
            };
            let value_unit = self.unit_fits(metric, &measurement.value, true);
            if let Some(threshold) = &measurement.threshold {
                any_threshold = true;
                let threshold_unit = self.unit_fits(metric, &threshold.value, false);
                if let (Some(value), Some(limit)) = (
                    canonical(&measurement.value, value_unit, metric),
                    canonical(&threshold.value, threshold_unit.or(value_unit), metric),
                ) {
                    all_met &= threshold.op.holds(value, limit);
                } else {
                    undecidable = true;
                }
            }
        }
        if !any_threshold || undecidable {
            return None;
        }
        {
            if let Some(verdict) = verdict {
                let implied = if all_met {
                    crate::syntax::Verdict::Pass
                } else {
                    crate::syntax::Verdict::Fail
                };
                if verdict != implied {
                    let span = entry
                        .clauses
                        .iter()
                        .find(|c| matches!(c.kind, ClauseKind::Verdict(_)))
                        .map_or(entry.id.span, |c| c.span);
                    self.push(
                        Diagnostic::new(
                            Code::VerdictContradictsThreshold,
                            span,
                            format!(
                                "verdict says {} but the thresholds {}",
                                verdict_word(verdict),
                                if all_met {
                                    "all hold"
                                } else {
                                    "do not all hold"
                                }
                            ),
                        )
                        .with_hint(describe_thresholds(measurements)),
                    );
                }
            }
        }
        Some(all_met)
    }

    fn metric(&mut self, name: &Name) -> Option<&'static ops::MetricSpec> {
        let spec = ops::metric_spec(&name.text);
        if spec.is_none() {
            let names: Vec<&str> = ops::METRICS.iter().map(|m| m.name).collect();
            let is_condition = ops::OPERATIONS
                .iter()
                .any(|op| op.resolve_param(&name.text).is_some())
                || matches!(name.text.as_str(), "shape" | "model" | "prompt" | "layer");
            let hint = if is_condition {
                format!(
                    "`{}` looks like a condition: conditions go after `when`",
                    name.text
                )
            } else if let Some(close) = super::suggest::closest(&name.text, names.iter().copied()) {
                format!("did you mean `{close}`?")
            } else {
                format!("metrics: {}", names.join(", "))
            };
            self.push(
                Diagnostic::new(
                    Code::UnknownMetric,
                    name.span,
                    format!("unknown metric `{}`", name.text),
                )
                .with_hint(hint),
            );
        }
        spec
    }

    /// Checks a quantity's unit against a metric and returns the unit symbol it is in
    /// (the written one, or the canonical one when none was written). `warn_missing`
    /// reports a missing unit on a dimensioned metric.
    fn unit_fits(
        &mut self,
        metric: &ops::MetricSpec,
        quantity: &Quantity,
        warn_missing: bool,
    ) -> Option<&'static str> {
        match &quantity.unit {
            Some(unit) => {
                let Some(spec) = ops::unit_spec(&unit.text) else {
                    let symbols: Vec<&str> = ops::UNITS.iter().map(|u| u.symbol).collect();
                    self.push(
                        Diagnostic::new(
                            Code::UnknownUnit,
                            unit.span,
                            format!("unknown unit `{}`", unit.text),
                        )
                        .with_hint(format!("units: {}", symbols.join(", "))),
                    );
                    return None;
                };
                if spec.dimension != metric.dimension {
                    let fitting: Vec<&str> = ops::UNITS
                        .iter()
                        .filter(|u| u.dimension == metric.dimension)
                        .map(|u| u.symbol)
                        .collect();
                    let hint = if fitting.is_empty() {
                        format!("`{}` is a plain number; drop the unit", metric.name)
                    } else {
                        format!("`{}` takes {}", metric.name, fitting.join(", "))
                    };
                    self.push(
                        Diagnostic::new(
                            Code::UnitMismatch,
                            unit.span,
                            format!(
                                "`{}` is a {} unit but `{}` is a {}",
                                unit.text,
                                dimension_word(spec.dimension),
                                metric.name,
                                dimension_word(metric.dimension)
                            ),
                        )
                        .with_hint(hint),
                    );
                    return None;
                }
                Some(spec.symbol)
            }
            None if metric.canonical_unit.is_empty() => None,
            None => {
                if warn_missing {
                    self.push(
                        Diagnostic::new(
                            Code::MissingUnit,
                            quantity.span,
                            format!(
                                "`{}` written without a unit; reading it in {}",
                                metric.name, metric.canonical_unit
                            ),
                        )
                        .with_hint(format!(
                            "write the unit: `{} = {} {}`",
                            metric.name,
                            number_text(quantity.number),
                            metric.canonical_unit
                        )),
                    );
                }
                ops::unit_spec(metric.canonical_unit).map(|u| u.symbol)
            }
        }
    }

    // ----------------------------------------------------------------------------
    // Lessons
    // ----------------------------------------------------------------------------

    fn lesson(&mut self, title: &str, entry: &Entry) -> LessonData {
        let mut data = LessonData {
            title: title.to_string(),
            symptom: None,
            cause: None,
            remedies: Vec::new(),
            conditions: conditions(entry),
        };
        for clause in &entry.clauses {
            match &clause.kind {
                ClauseKind::Symptom(symptom) => {
                    self.symptom(symptom, clause.span);
                    data.symptom.get_or_insert_with(|| symptom.clone());
                }
                ClauseKind::Cause(cause) => {
                    if cause.text.is_none() && cause.condition.is_none() {
                        self.push(
                            Diagnostic::new(
                                Code::EmptySymptom,
                                clause.span,
                                "`cause` says nothing",
                            )
                            .with_hint(
                                "give a text, a condition such as `N % tile_n != 0`, or both",
                            ),
                        );
                    }
                    if let Some(condition) = &cause.condition {
                        expr::check(condition, &Scope::Cause, &mut self.diagnostics);
                    }
                    data.cause.get_or_insert_with(|| cause.clone());
                }
                ClauseKind::Fix(fix) => {
                    if let Some(mut remedy) = self.remedy(&fix.op, &fix.assignments, clause.span) {
                        remedy.text = fix.text.as_ref().map(|t| t.text.clone());
                        data.remedies.push(remedy);
                    }
                }
                _ => {}
            }
        }
        if !entry
            .clauses
            .iter()
            .any(|c| matches!(c.kind, ClauseKind::Fix(_)))
        {
            self.push(
                Diagnostic::new(
                    Code::LessonWithoutFix,
                    entry.id.span,
                    format!("lesson `{}` has no `fix`", entry.id.text),
                )
                .with_hint("a lesson's remedy is executable: `fix <operation> key=value…`"),
            );
        }
        data
    }

    fn symptom(&mut self, symptom: &Symptom, span: Span) {
        if symptom.text.is_none() && symptom.failing_op.is_none() && symptom.predicates.is_empty() {
            self.push(
                Diagnostic::new(Code::EmptySymptom, span, "`symptom` says nothing").with_hint(
                    "give a text, `<operation> fails`, a predicate such as `cosine < 0.99`, or several",
                ),
            );
        }
        if let Some(op) = &symptom.failing_op {
            self.operation(op);
        }
        for predicate in &symptom.predicates {
            if let Some(metric) = self.metric(&predicate.metric) {
                self.unit_fits(metric, &predicate.value, false);
            }
        }
    }

    fn remedy(
        &mut self,
        op: &Name,
        assignments: &[crate::syntax::Assignment],
        span: Span,
    ) -> Option<Remedy> {
        let spec = self.operation(op)?;
        let mut changes = Vec::new();
        for (i, assignment) in assignments.iter().enumerate() {
            if let Some(first) = assignments[..i]
                .iter()
                .find(|a| a.key.text == assignment.key.text)
            {
                self.push(
                    Diagnostic::new(
                        Code::DuplicateParameter,
                        assignment.key.span,
                        format!("`{}` assigned twice in one fix", assignment.key.text),
                    )
                    .with_related(first.key.span, "first assigned here"),
                );
            }
            let Some((param, slot)) = spec.resolve_param(&assignment.key.text) else {
                self.unknown_parameter(spec, &assignment.key, true);
                continue;
            };
            let value = self.fix_value(spec, param, slot, &assignment.value);
            changes.push(Change {
                param: param.name.to_string(),
                slot,
                key: assignment.key.text.clone(),
                text: expr::to_fix_text(&value),
                value,
                span: assignment.span,
            });
        }
        Some(Remedy {
            text: None,
            op: spec.kind,
            changes,
            span,
        })
    }

    /// Checks a fix value against the parameter (or list slot) it assigns and returns
    /// it with bare words resolved for numeric parameters.
    fn fix_value(
        &mut self,
        spec: &'static OpSpec,
        param: &'static ParamSpec,
        slot: Option<usize>,
        value: &Expr,
    ) -> Expr {
        let scope = Scope::Fix(spec);
        let numeric = matches!(param.kind, ParamKind::Int | ParamKind::Float)
            || (param.kind == ParamKind::IntList && slot.is_some());
        if numeric {
            let value = expr::word_as_variable(value);
            self.numeric_fix_value(param, &value, &scope);
            return value;
        }
        if param.kind == ParamKind::IntList {
            match &value.kind {
                ExprKind::List(items) => {
                    let items: Vec<Expr> = items.iter().map(expr::word_as_variable).collect();
                    for item in &items {
                        self.numeric_fix_value(param, item, &scope);
                    }
                    self.list_length(param, items.len(), value.span);
                    return Expr {
                        kind: ExprKind::List(items),
                        span: value.span,
                    };
                }
                _ => {
                    self.push(Diagnostic::new(
                        Code::WrongValueKind,
                        value.span,
                        format!("`{}` takes a list of integers", param.name),
                    ));
                    return value.clone();
                }
            }
        }
        if expr::is_computed(value) {
            self.push(
                Diagnostic::new(
                    Code::BadExpression,
                    value.span,
                    format!(
                        "`{}` takes {}, not a computed value",
                        param.name,
                        describe_kind(param.kind)
                    ),
                )
                .with_hint("only numeric parameters can be computed"),
            );
            return value.clone();
        }
        let literal = match &value.kind {
            ExprKind::Word(word) => Some(ValueKind::Ident(word.clone())),
            ExprKind::Str(text) => Some(ValueKind::Str(text.clone())),
            ExprKind::Bool(b) => Some(ValueKind::Bool(*b)),
            ExprKind::Number(q) => Some(ValueKind::Number(q.clone())),
            _ => None,
        };
        match literal {
            Some(kind) => self.value_fits(
                param,
                &Value {
                    kind,
                    span: value.span,
                },
            ),
            None => self.push(Diagnostic::new(
                Code::WrongValueKind,
                value.span,
                format!("`{}` takes {}", param.name, describe_kind(param.kind)),
            )),
        }
        value.clone()
    }

    fn numeric_fix_value(&mut self, param: &ParamSpec, value: &Expr, scope: &Scope<'_>) {
        match &value.kind {
            ExprKind::Number(q) => {
                if param.kind != ParamKind::Float && matches!(q.number, Number::Float(_)) {
                    self.push(Diagnostic::new(
                        Code::WrongValueKind,
                        value.span,
                        format!("`{}` takes integers, found a float", param.name),
                    ));
                }
                self.no_unit(param, q);
                self.in_bounds(param, q);
            }
            ExprKind::Str(_) | ExprKind::Bool(_) | ExprKind::List(_) | ExprKind::Word(_) => self
                .push(Diagnostic::new(
                    Code::WrongValueKind,
                    value.span,
                    format!("`{}` takes a number or a computed value", param.name),
                )),
            _ => expr::check(value, scope, &mut self.diagnostics),
        }
    }
}

/// The span of a clause's keyword (its first token).
fn keyword_span(clause: Span, keyword: &str) -> Span {
    Span {
        end: (clause.start + keyword.len() as u32).min(clause.end),
        ..clause
    }
}

fn article(kind: EntryKind) -> &'static str {
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

fn describe_value(kind: &ValueKind) -> String {
    match kind {
        ValueKind::Number(q) => match (q.number, &q.unit) {
            (_, Some(unit)) => format!("a quantity in {}", unit.text),
            (Number::Int(_), None) => "an integer".into(),
            (Number::Float(_), None) => "a float".into(),
        },
        ValueKind::Str(_) => "a string".into(),
        ValueKind::Ident(word) => format!("the word `{word}`"),
        ValueKind::Bool(_) => "a boolean".into(),
        ValueKind::List(_) => "a list".into(),
    }
}

fn dimension_word(dimension: Dimension) -> &'static str {
    match dimension {
        Dimension::Ratio => "ratio",
        Dimension::Count => "count",
        Dimension::Time => "time",
        Dimension::TokenRate => "token-rate",
        Dimension::FlopRate => "flop-rate",
        Dimension::ByteRate => "byte-rate",
    }
}

fn verdict_word(verdict: crate::syntax::Verdict) -> &'static str {
    match verdict {
        crate::syntax::Verdict::Pass => "pass",
        crate::syntax::Verdict::Fail => "fail",
    }
}

fn number_text(number: Number) -> String {
    match number {
        Number::Int(i) => i.to_string(),
        Number::Float(f) => format!("{f:?}"),
    }
}

/// The value in the metric's canonical unit (units already checked).
fn canonical(quantity: &Quantity, unit: Option<&str>, metric: &ops::MetricSpec) -> Option<f64> {
    let value = quantity.number.as_f64();
    match unit {
        None if quantity.unit.is_some() => None,
        None => Some(value),
        Some(unit) if metric.canonical_unit.is_empty() => {
            ops::unit_spec(unit).map(|u| value * u.to_canonical)
        }
        Some(unit) => ops::convert(value, unit, metric.canonical_unit),
    }
}

fn describe_thresholds(measurements: &[Measurement]) -> String {
    let parts: Vec<String> = measurements
        .iter()
        .filter_map(|m| {
            let threshold = m.threshold.as_ref()?;
            let unit = |q: &Quantity| {
                q.unit
                    .as_ref()
                    .map_or(String::new(), |u| format!(" {}", u.text))
            };
            Some(format!(
                "{} = {}{} {} {}{}",
                m.metric.text,
                number_text(m.value.number),
                unit(&m.value),
                threshold.op.symbol(),
                number_text(threshold.value.number),
                unit(&threshold.value)
            ))
        })
        .collect();
    format!("checked: {}", parts.join("; "))
}
