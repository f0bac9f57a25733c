//! Clauses of an entry (`when`, `->`, `after`, `fixes … by`, …), a lesson's
//! symptom and its fix assignments.

use pest::iterators::Pair;

use super::expr::cmp_op;
use super::{inner, Builder, Rule};
use crate::syntax::ast::*;

impl Builder<'_> {
    pub(super) fn clause(&mut self, pair: Pair<'_, Rule>) -> Option<Clause> {
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
            Rule::weights_clause => match inner(pair).next() {
                Some(word) => ClauseKind::Weights(self.name(&word)),
                None => return None,
            },
            Rule::if_clause => match inner(pair).next() {
                Some(condition) => ClauseKind::If(self.bounded_expr(condition)),
                None => return None,
            },
            Rule::source_clause => match inner(pair).next() {
                Some(text) => ClauseKind::Source(self.text(text)),
                None => return None,
            },
            _ => return None,
        };
        Some(Clause { kind, span })
    }

    pub(super) fn symptom(&mut self, pair: Pair<'_, Rule>) -> Symptom {
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

    pub(super) fn assignment(&mut self, pair: Pair<'_, Rule>) -> Assignment {
        let missing = |span| Expr {
            kind: ExprKind::Bool(false),
            span,
        };
        let (key, value, span) = self.key_value(pair, missing, Self::fix_value);
        Assignment { key, value, span }
    }
}
