//! Lessons: a symptom, a cause and executable fixes, each fix an operation of
//! the table whose values fit the parameter (or list slot) they assign.

use skillc_runtime::ops::{OpSpec, ParamKind, ParamSpec};

use super::{describe_kind, Checker};
use crate::diag::{Code, Diagnostic};
use crate::graph::expr::{self, Scope};
use crate::graph::{Change, LessonData, Remedy};
use crate::syntax::{
    ClauseKind, Entry, Expr, ExprKind, Name, Number, Param, Span, Symptom, Value, ValueKind,
};

impl Checker {
    pub(super) fn lesson(&mut self, title: &str, entry: &Entry) -> LessonData {
        let mut data = LessonData {
            title: title.to_string(),
            symptom: None,
            cause: None,
            remedies: Vec::new(),
            conditions: conditions(entry),
            condition: None,
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
                ClauseKind::If(condition) => {
                    expr::check_condition(condition, &mut self.diagnostics);
                    data.condition.get_or_insert_with(|| condition.clone());
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
            if let Some(first) = super::earlier(assignments, i, |a| &a.key) {
                let (key, span) = (&assignment.key.text, assignment.key.span);
                let message = format!("`{key}` assigned twice in one fix");
                let diagnostic = Diagnostic::new(Code::DuplicateParameter, span, message);
                self.push(diagnostic.with_related(first.span, "first assigned here"));
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
