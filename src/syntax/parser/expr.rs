//! Remedy expressions: precedence tiers folded left to right, prefix chains
//! walked in a loop, and a token budget so later passes can recurse safely.

use pest::iterators::Pair;

use super::values::zero_quantity;
use super::{inner, Builder, Rule, MAX_EXPRESSION_TOKENS};
use crate::diag::{Code, Diagnostic};
use crate::syntax::ast::*;
use crate::syntax::span::Span;

impl Builder<'_> {
    /// A fix value: the literal forms of `value`, or a computed expression.
    pub(super) fn fix_value(&mut self, pair: Pair<'_, Rule>) -> Expr {
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
    pub(super) fn bounded_expr(&mut self, pair: Pair<'_, Rule>) -> Expr {
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
    pub(super) fn expr(&mut self, pair: Pair<'_, Rule>) -> Expr {
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

    pub(super) fn prefix_chain(&mut self, pair: Pair<'_, Rule>) -> Expr {
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

fn zero_expr(span: Span) -> Expr {
    Expr {
        kind: ExprKind::Number(zero_quantity(span)),
        span,
    }
}

pub(super) fn cmp_op(symbol: &str) -> CmpOp {
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
