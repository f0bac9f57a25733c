//! Lowering resolved trajectory values to the bundle's value and remedy types:
//! parameters to [`Value`], fix clauses to [`Remedy`], units to each metric's
//! canonical unit. A fix value the bundle's expression language cannot hold (a
//! boolean operator, a computed list without named slots) is reported, not guessed.

use std::collections::BTreeMap;

use skillc_runtime::bundle::{BinaryOp, Comparison, Condition, Expr, Remedy, Value};
use skillc_runtime::ops::{Metric, Unit};

use crate::graph;
use crate::syntax::{self, CmpOp, ExprKind, Number, Quantity, UnaryOp, ValueKind};

/// A number with its unit dropped.
pub fn number(q: &Quantity) -> f64 {
    q.number.as_f64()
}

fn number_value(q: &Quantity) -> Value {
    match (&q.unit, q.number) {
        (Some(unit), n) => Value::Quantity {
            value: n.as_f64(),
            unit: unit.text.clone(),
        },
        (None, Number::Int(i)) => Value::Int(i),
        (None, Number::Float(f)) => Value::Float(f),
    }
}

/// A parameter value. Lists of plain integers are `IntList`; other lists (`[base,
/// instruct]`) keep their notation as text, which the bundle can carry but not
/// compute with.
pub fn value(v: &syntax::Value) -> Value {
    match &v.kind {
        ValueKind::Number(q) => number_value(q),
        ValueKind::Str(s) | ValueKind::Ident(s) => Value::Text(s.clone()),
        ValueKind::Bool(b) => Value::Bool(*b),
        ValueKind::List(items) => {
            int_list(items).map_or_else(|| Value::Text(list_notation(items)), Value::IntList)
        }
    }
}

fn int_list(items: &[syntax::Value]) -> Option<Vec<i64>> {
    items
        .iter()
        .map(|item| match &item.kind {
            ValueKind::Number(Quantity {
                number: Number::Int(i),
                unit: None,
                ..
            }) => Some(*i),
            _ => None,
        })
        .collect()
}

/// A list the bundle cannot compute with, kept as its items' text: words and numbers
/// as written, strings quoted.
fn list_notation(items: &[syntax::Value]) -> String {
    let parts: Vec<String> = items
        .iter()
        .map(|item| match &item.kind {
            ValueKind::Ident(s) => s.clone(),
            ValueKind::Str(s) => format!("{s:?}"),
            ValueKind::Bool(b) => b.to_string(),
            ValueKind::Number(q) => match q.number {
                Number::Int(i) => i.to_string(),
                Number::Float(f) => format!("{f:?}"),
            },
            ValueKind::List(inner) => list_notation(inner),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// `key=value` parameters by key.
pub fn params(params: &[syntax::Param]) -> BTreeMap<String, Value> {
    params
        .iter()
        .map(|p| (p.key.text.clone(), value(&p.value)))
        .collect()
}

/// Why a fix value could not be lowered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unlowered {
    pub key: String,
    pub reason: LowerError,
}

/// A fix value outside the bundle's closed expression language.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LowerError {
    #[error("a list with computed or non-integer items for a parameter without named slots")]
    ComputedList,
    #[error("`not` has no value as a parameter")]
    Not,
    #[error("`{0}` gives a truth value, not a parameter value")]
    TruthValue(&'static str),
    #[error("a number where a condition needs a truth value")]
    NotACondition,
}

/// A lesson's `if` condition (already checked: flags are truth values, sizes are
/// compared) as the bundle holds it; `and` and `or` chains become one list.
pub fn condition(e: &syntax::Expr) -> Result<Condition, LowerError> {
    Ok(match &e.kind {
        ExprKind::Var(name) | ExprKind::Word(name) => Condition::Flag(name.clone()),
        ExprKind::Bool(true) => Condition::All(Vec::new()),
        ExprKind::Bool(false) => Condition::Any(Vec::new()),
        ExprKind::Unary {
            op: UnaryOp::Not,
            operand,
        } => Condition::Not(Box::new(condition(operand)?)),
        ExprKind::Binary { op, lhs, rhs } => match op {
            syntax::BinaryOp::And | syntax::BinaryOp::Or => {
                let mut items = Vec::new();
                for side in [lhs, rhs] {
                    match (op, condition(side)?) {
                        (syntax::BinaryOp::And, Condition::All(inner))
                        | (syntax::BinaryOp::Or, Condition::Any(inner))
                            if !inner.is_empty() =>
                        {
                            items.extend(inner)
                        }
                        (_, other) => items.push(other),
                    }
                }
                if *op == syntax::BinaryOp::And {
                    Condition::All(items)
                } else {
                    Condition::Any(items)
                }
            }
            syntax::BinaryOp::Cmp(cmp) => Condition::Compare {
                lhs: expr(lhs)?,
                relation: *cmp,
                rhs: expr(rhs)?,
            },
            _ => return Err(LowerError::NotACondition),
        },
        _ => return Err(LowerError::NotACondition),
    })
}

/// A fix clause as a bundle remedy. A list value for a parameter with named slots
/// becomes one assignment per slot, so `tile=[64, 256, 32, (tile_n / 2)]` is
/// `tile_m=64 … tile_n=tile_n / 2`.
pub fn remedy(fix: &graph::Remedy) -> (Remedy, Vec<Unlowered>) {
    let mut set = BTreeMap::new();
    let mut problems = Vec::new();
    let spec = Some(fix.op.spec());
    for change in &fix.changes {
        let slots = spec
            .and_then(|op| op.param(&change.param))
            .map_or(&[][..], |p| p.components);
        match (&change.value.kind, change.slot) {
            (ExprKind::List(items), None)
                if items.len() == slots.len() && !is_literal(&change.value) =>
            {
                for (slot, item) in slots.iter().zip(items) {
                    match expr(item) {
                        Ok(e) => {
                            set.insert(slot.to_string(), e);
                        }
                        Err(reason) => problems.push(Unlowered {
                            key: slot.to_string(),
                            reason,
                        }),
                    }
                }
            }
            _ => match expr(&change.value) {
                Ok(e) => {
                    set.insert(change.key.clone(), e);
                }
                Err(reason) => problems.push(Unlowered {
                    key: change.key.clone(),
                    reason,
                }),
            },
        }
    }
    (Remedy { op: fix.op, set }, problems)
}

fn is_literal(e: &syntax::Expr) -> bool {
    match &e.kind {
        ExprKind::Number(_) | ExprKind::Str(_) | ExprKind::Bool(_) | ExprKind::Word(_) => true,
        ExprKind::List(items) => items.iter().all(is_literal),
        _ => false,
    }
}

/// A remedy expression in the bundle's closed language.
pub fn expr(e: &syntax::Expr) -> Result<Expr, LowerError> {
    Ok(match &e.kind {
        ExprKind::Number(q) => Expr::Lit(number_value(q)),
        ExprKind::Str(s) | ExprKind::Word(s) => Expr::Lit(Value::Text(s.clone())),
        ExprKind::Bool(b) => Expr::Lit(Value::Bool(*b)),
        ExprKind::Var(name) => Expr::Var(name.clone()),
        ExprKind::List(items) => {
            let ints: Option<Vec<i64>> = items
                .iter()
                .map(|item| match &item.kind {
                    ExprKind::Number(Quantity {
                        number: Number::Int(i),
                        unit: None,
                        ..
                    }) => Some(*i),
                    _ => None,
                })
                .collect();
            match ints {
                Some(ints) => Expr::Lit(Value::IntList(ints)),
                None => return Err(LowerError::ComputedList),
            }
        }
        ExprKind::Unary {
            op: UnaryOp::Neg,
            operand,
        } => match &operand.kind {
            ExprKind::Number(q) => Expr::Lit(match number_value(q) {
                Value::Int(i) => Value::Int(-i),
                Value::Float(f) => Value::Float(-f),
                Value::Quantity { value, unit } => Value::Quantity {
                    value: -value,
                    unit,
                },
                other => other,
            }),
            _ => Expr::Binary {
                op: BinaryOp::Sub,
                lhs: Box::new(Expr::Lit(Value::Int(0))),
                rhs: Box::new(expr(operand)?),
            },
        },
        ExprKind::Unary {
            op: UnaryOp::Not, ..
        } => return Err(LowerError::Not),
        ExprKind::Binary { op, lhs, rhs } => {
            let op = match op {
                syntax::BinaryOp::Add => BinaryOp::Add,
                syntax::BinaryOp::Sub => BinaryOp::Sub,
                syntax::BinaryOp::Mul => BinaryOp::Mul,
                syntax::BinaryOp::Div => BinaryOp::Div,
                syntax::BinaryOp::Rem => BinaryOp::Rem,
                other => return Err(LowerError::TruthValue(other.symbol())),
            };
            Expr::Binary {
                op,
                lhs: Box::new(expr(lhs)?),
                rhs: Box::new(expr(rhs)?),
            }
        }
        ExprKind::Call { function, args } => Expr::Call {
            func: function.clone(),
            args: args.iter().map(expr).collect::<Result<_, _>>()?,
        },
    })
}

/// The language's comparison for a bundle comparison.
pub fn cmp_op(c: Comparison) -> CmpOp {
    match c {
        Comparison::Lt => CmpOp::Lt,
        Comparison::Le => CmpOp::Le,
        Comparison::Gt => CmpOp::Gt,
        Comparison::Ge => CmpOp::Ge,
        Comparison::Eq => CmpOp::Eq,
    }
}

/// The bundle's comparison for a language comparison; `!=` has none.
pub fn comparison(op: CmpOp) -> Option<Comparison> {
    match op {
        CmpOp::Lt => Some(Comparison::Lt),
        CmpOp::Le => Some(Comparison::Le),
        CmpOp::Gt => Some(Comparison::Gt),
        CmpOp::Ge => Some(Comparison::Ge),
        CmpOp::Eq => Some(Comparison::Eq),
        CmpOp::Ne => None,
    }
}

/// A quantity of `metric` in the metric's canonical unit: `12 s` of `kernel_ms` is
/// 12000, `99.9 %` of `cosine` is 0.999. A unit that does not fit passes the number
/// through (a graph without errors has none).
pub fn canonical(metric: Metric, q: &Quantity) -> f64 {
    metric.to_canonical(number(q), unit(q)).unwrap_or(number(q))
}

/// The unit a quantity was written with (a graph without errors knows every unit).
pub fn unit(q: &Quantity) -> Option<Unit> {
    q.unit.as_ref().and_then(|u| Unit::named(&u.text))
}

/// The unit a metric's figure is shown in: as written, else the canonical one.
pub fn unit_of(metric: Metric, q: &Quantity) -> Option<Unit> {
    match &q.unit {
        Some(_) => unit(q),
        None => metric.canonical_unit(),
    }
}

/// A value as a comparison key: text as itself, anything else as its JSON. Keys only
/// group and order; they are never shown.
pub fn key_text(v: &Value) -> String {
    match v {
        Value::Text(t) => t.clone(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// Parameters as one comparison key.
pub fn params_key(params: &BTreeMap<String, Value>) -> String {
    serde_json::to_string(params).unwrap_or_default()
}
