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
            check_call(function, args.len(), expr.span, diagnostics);
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

/// Reports an unknown function or a wrong argument count.
fn check_call(
    function: &str,
    arity: usize,
    span: crate::syntax::Span,
    diagnostics: &mut Vec<Diagnostic>,
) {
    match ops::function_spec(function) {
        None => {
            let names: Vec<&str> = ops::FUNCTIONS.iter().map(|f| f.name).collect();
            diagnostics.push(
                Diagnostic::new(
                    Code::BadExpression,
                    span,
                    format!("unknown function `{function}`"),
                )
                .with_hint(format!("functions: {}", names.join(", "))),
            );
        }
        Some(spec) if spec.arity != arity => diagnostics.push(Diagnostic::new(
            Code::BadExpression,
            span,
            format!(
                "`{function}` takes {} argument{}, found {arity}",
                spec.arity,
                if spec.arity == 1 { "" } else { "s" },
            ),
        )),
        Some(_) => {}
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

/// What a piece of a lesson's condition computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sort {
    Truth,
    Number,
    /// Already reported; checked no further.
    Unknown,
}

/// Checks a lesson's `if` condition: every name is a model feature of the runtime's
/// vocabulary (`ops::conditions`), flags are truth values and sizes numbers, and
/// the whole is a truth value.
pub(super) fn check_condition(condition: &Expr, diagnostics: &mut Vec<Diagnostic>) {
    let sort = sort_of(condition, diagnostics);
    expect(condition, sort, Sort::Truth, diagnostics);
}

fn expect(expr: &Expr, found: Sort, wanted: Sort, diagnostics: &mut Vec<Diagnostic>) {
    if found == wanted || found == Sort::Unknown {
        return;
    }
    let text = to_text(expr);
    let (message, hint) = match wanted {
        Sort::Truth => (
            format!("`{text}` is a number, not a truth value"),
            "compare it: `head_dim >= 128`, `n_kv_heads == n_heads`",
        ),
        _ => (
            format!("`{text}` is a truth value, not a number"),
            "use a flag on its own (`qk_norm`, `not mha`), never in arithmetic or a comparison",
        ),
    };
    diagnostics.push(Diagnostic::new(Code::ConditionType, expr.span, message).with_hint(hint));
}

fn sort_of(expr: &Expr, diagnostics: &mut Vec<Diagnostic>) -> Sort {
    use crate::syntax::{BinaryOp, UnaryOp};
    match &expr.kind {
        ExprKind::Number(_) => Sort::Number,
        ExprKind::Bool(_) => Sort::Truth,
        ExprKind::Var(name) | ExprKind::Word(name) => feature(name, expr, diagnostics),
        ExprKind::Call { function, args } => {
            check_call(function, args.len(), expr.span, diagnostics);
            for arg in args {
                let sort = sort_of(arg, diagnostics);
                expect(arg, sort, Sort::Number, diagnostics);
            }
            Sort::Number
        }
        ExprKind::Unary { op, operand } => {
            let wanted = match op {
                UnaryOp::Neg => Sort::Number,
                UnaryOp::Not => Sort::Truth,
            };
            let sort = sort_of(operand, diagnostics);
            expect(operand, sort, wanted, diagnostics);
            wanted
        }
        ExprKind::Binary { op, lhs, rhs } => {
            let (operands, result) = match op {
                BinaryOp::And | BinaryOp::Or => (Sort::Truth, Sort::Truth),
                BinaryOp::Cmp(_) => (Sort::Number, Sort::Truth),
                _ => (Sort::Number, Sort::Number),
            };
            for side in [lhs, rhs] {
                let sort = sort_of(side, diagnostics);
                expect(side, sort, operands, diagnostics);
            }
            result
        }
        // The expression grammar builds neither inside a condition.
        ExprKind::Str(_) | ExprKind::List(_) => Sort::Unknown,
    }
}

/// The sort of a feature name, or E0071 when the vocabulary has no such name.
fn feature(name: &str, expr: &Expr, diagnostics: &mut Vec<Diagnostic>) -> Sort {
    match ops::fact_spec(name) {
        Some(spec) => match spec.kind {
            ops::FactKind::Flag => Sort::Truth,
            ops::FactKind::Size => Sort::Number,
        },
        None => {
            let names: Vec<&str> = ops::conditions::vocabulary()
                .iter()
                .map(|s| s.name)
                .collect();
            let hint = match super::suggest::closest(name, names.iter().copied()) {
                Some(close) => format!("did you mean `{close}`? {}", feature_hint()),
                None => feature_hint(),
            };
            diagnostics.push(
                Diagnostic::new(
                    Code::UnknownFeature,
                    expr.span,
                    format!("`{name}` is not a model feature a condition can read"),
                )
                .with_hint(hint),
            );
            Sort::Unknown
        }
    }
}

fn feature_hint() -> String {
    let vocabulary = ops::conditions::vocabulary();
    let names = |kind: ops::FactKind| {
        vocabulary
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "flags: {}; sizes: {}",
        names(ops::FactKind::Flag),
        names(ops::FactKind::Size)
    )
}
