//! The remedy expression language after parsing: canonical printing, name checks
//! against the vocabulary, and the rewrite of bare words into variables for numeric
//! parameters. Expression trees are small (the parser caps their size and nesting), so
//! plain recursion is safe here.

use skillc_runtime::ops::{self, OpSpec};

use crate::diag::{Code, Diagnostic};
use crate::syntax::{Expr, ExprKind};

/// Which names an expression may read.
pub(super) enum Scope<'a> {
    /// A fix value: the fix operation's parameters and slots, and the model variables.
    Fix(&'a OpSpec),
    /// A cause condition: any operation's parameters and slots, and the model variables.
    Cause,
}

impl Scope<'_> {
    fn knows(&self, name: &str) -> bool {
        if ops::variable_spec(name).is_some() {
            return true;
        }
        match self {
            Scope::Fix(op) => op.resolve_param(name).is_some(),
            Scope::Cause => ops::OPERATIONS
                .iter()
                .any(|op| op.resolve_param(name).is_some()),
        }
    }

    fn describe(&self) -> String {
        let model: Vec<&str> = ops::VARIABLES.iter().map(|v| v.name).collect();
        match self {
            Scope::Fix(op) => {
                let mut params: Vec<&str> = Vec::new();
                for p in op.params {
                    params.push(p.name);
                    params.extend(p.components.iter().copied());
                }
                if params.is_empty() {
                    format!("known names: {}", model.join(", "))
                } else {
                    format!(
                        "known names: {} (of {}) and {}",
                        params.join(", "),
                        op.name,
                        model.join(", ")
                    )
                }
            }
            Scope::Cause => format!(
                "known names: parameters of any operation and {}",
                model.join(", ")
            ),
        }
    }
}

/// Reports unknown variables and functions and wrong argument counts.
pub(super) fn check(expr: &Expr, scope: &Scope<'_>, diagnostics: &mut Vec<Diagnostic>) {
    match &expr.kind {
        ExprKind::Var(name) if !scope.knows(name) => diagnostics.push(
            Diagnostic::new(
                Code::BadExpression,
                expr.span,
                format!("unknown variable `{name}` in a remedy expression"),
            )
            .with_hint(scope.describe()),
        ),
        ExprKind::Call { function, args } => {
            match ops::function_spec(function) {
                None => {
                    let names: Vec<&str> = ops::FUNCTIONS.iter().map(|f| f.name).collect();
                    diagnostics.push(
                        Diagnostic::new(
                            Code::BadExpression,
                            expr.span,
                            format!("unknown function `{function}`"),
                        )
                        .with_hint(format!("functions: {}", names.join(", "))),
                    );
                }
                Some(spec) if spec.arity != args.len() => diagnostics.push(Diagnostic::new(
                    Code::BadExpression,
                    expr.span,
                    format!(
                        "`{function}` takes {} argument{}, found {}",
                        spec.arity,
                        if spec.arity == 1 { "" } else { "s" },
                        args.len()
                    ),
                )),
                Some(_) => {}
            }
            for arg in args {
                check(arg, scope, diagnostics);
            }
        }
        ExprKind::Unary { operand, .. } => check(operand, scope, diagnostics),
        ExprKind::Binary { lhs, rhs, .. } => {
            check(lhs, scope, diagnostics);
            check(rhs, scope, diagnostics);
        }
        ExprKind::List(items) => {
            for item in items {
                check(item, scope, diagnostics);
            }
        }
        _ => {}
    }
}

/// Whether the expression computes something (as opposed to a literal).
pub(super) fn is_computed(expr: &Expr) -> bool {
    matches!(
        expr.kind,
        ExprKind::Var(_) | ExprKind::Unary { .. } | ExprKind::Binary { .. } | ExprKind::Call { .. }
    )
}

/// Turns a top-level bare word into a variable reference (numeric parameters read
/// `tile_n=N` as the value of `N`).
pub(super) fn word_as_variable(expr: &Expr) -> Expr {
    match &expr.kind {
        ExprKind::Word(word) => Expr {
            kind: ExprKind::Var(word.clone()),
            span: expr.span,
        },
        ExprKind::List(items) => Expr {
            kind: ExprKind::List(items.iter().map(word_as_variable).collect()),
            span: expr.span,
        },
        _ => expr.clone(),
    }
}

/// Canonical text of a fix value, as it would be written after `key=`: computed values
/// other than calls are parenthesised.
pub fn to_fix_text(expr: &Expr) -> String {
    match expr.kind {
        ExprKind::Unary { .. } | ExprKind::Binary { .. } => format!("({})", to_text(expr)),
        _ => to_text(expr),
    }
}

/// Canonical source text: single spaces around binary operators, parentheses only
/// where precedence needs them (the syntax printer's).
pub fn to_text(expr: &Expr) -> String {
    crate::syntax::print::expr(expr)
}
