//! Remedy values: a closed expression language with no side effects, evaluated
//! against the failing context (a kernel's shape, herd and tile, the model's
//! dimensions) so that a fix recorded on one model computes its values on the next.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ops::Value;

/// A remedy value: a closed expression language with no side effects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expr {
    Lit(Value),
    /// A name from the evaluation context (`N`, `K`, `herd_n`, `tile_n`, `head_dim`).
    Var(String),
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Call {
        func: String,
        args: Vec<Expr>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum EvalError {
    #[error("unknown variable `{0}` in remedy expression")]
    UnknownVariable(String),
    #[error("unknown function `{0}` in remedy expression (known: divisor, min, max, ceil_div, round_up, round_down, pow2_floor, gcd)")]
    UnknownFunction(String),
    #[error("`{func}` takes {expected} argument(s), got {got}")]
    Arity {
        func: String,
        expected: usize,
        got: usize,
    },
    #[error("division by zero or an undefined result in remedy expression")]
    DivisionByZero,
    #[error("remedy expression needs a number, found {0}")]
    NotANumber(String),
}

impl Expr {
    pub(super) fn collect_vars(&self, names: &mut std::collections::BTreeSet<String>) {
        match self {
            Expr::Lit(_) => {}
            Expr::Var(name) => {
                names.insert(name.clone());
            }
            Expr::Binary { lhs, rhs, .. } => {
                lhs.collect_vars(names);
                rhs.collect_vars(names);
            }
            Expr::Call { args, .. } => {
                for a in args {
                    a.collect_vars(names);
                }
            }
        }
    }

    /// Evaluates to an integer-valued number where all inputs are integers.
    /// `vars` holds the context; `cap` bounds `divisor`.
    pub fn eval(&self, vars: &BTreeMap<String, f64>, cap: Option<f64>) -> Result<f64, EvalError> {
        match self {
            Expr::Lit(Value::Int(i)) => Ok(*i as f64),
            Expr::Lit(Value::Float(f)) => Ok(*f),
            Expr::Lit(Value::Quantity { value, .. }) => Ok(*value),
            Expr::Lit(other) => Err(EvalError::NotANumber(format!("{other:?}"))),
            Expr::Var(name) => vars
                .get(name)
                .copied()
                .ok_or_else(|| EvalError::UnknownVariable(name.clone())),
            Expr::Binary { op, lhs, rhs } => {
                let (l, r) = (lhs.eval(vars, cap)?, rhs.eval(vars, cap)?);
                binary(*op, l, r)
            }
            Expr::Call { func, args } => {
                let values = args
                    .iter()
                    .map(|a| a.eval(vars, cap))
                    .collect::<Result<Vec<_>, _>>()?;
                call(func, &values, cap)
            }
        }
    }
}

fn binary(op: BinaryOp, l: f64, r: f64) -> Result<f64, EvalError> {
    let both_int = l.fract() == 0.0 && r.fract() == 0.0;
    match op {
        BinaryOp::Add => Ok(l + r),
        BinaryOp::Sub => Ok(l - r),
        BinaryOp::Mul => Ok(l * r),
        BinaryOp::Div | BinaryOp::Rem if r == 0.0 => Err(EvalError::DivisionByZero),
        // Integer operands divide like the dimensions they are (floor).
        BinaryOp::Div if both_int => Ok((l / r).floor()),
        BinaryOp::Div => Ok(l / r),
        BinaryOp::Rem => Ok(l % r),
    }
}

/// Calls a function of the remedy language (`ops::FUNCTIONS`, evaluated by
/// `ops::eval_function`, the one definition the front end also checks against).
fn call(func: &str, args: &[f64], cap: Option<f64>) -> Result<f64, EvalError> {
    let spec = crate::ops::function_spec(func)
        .ok_or_else(|| EvalError::UnknownFunction(func.to_string()))?;
    if args.len() != spec.arity {
        return Err(EvalError::Arity {
            func: func.to_string(),
            expected: spec.arity,
            got: args.len(),
        });
    }
    let ints = args
        .iter()
        .map(|&a| {
            (a.fract() == 0.0 && a.abs() < 9.0e15)
                .then_some(a as i64)
                .ok_or_else(|| EvalError::NotANumber(format!("{a} (functions take integers)")))
        })
        .collect::<Result<Vec<i64>, _>>()?;
    let current = cap.map(|c| c as i64);
    crate::ops::eval_function(func, &ints, current)
        .map(|v| v as f64)
        .ok_or(EvalError::DivisionByZero)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn divisor_shrinks_tile_n_until_it_divides() {
        // N = 896 over herd_n = 4 leaves 224 columns per herd column; tile_n 128
        // does not divide it, the largest divisor not above 128 is 112.
        let e = Expr::Call {
            func: "divisor".into(),
            args: vec![Expr::Binary {
                op: BinaryOp::Div,
                lhs: Box::new(Expr::Var("N".into())),
                rhs: Box::new(Expr::Var("herd_n".into())),
            }],
        };
        let v = vars(&[("N", 896.0), ("herd_n", 4.0)]);
        assert_eq!(e.eval(&v, Some(128.0)), Ok(112.0));
    }

    #[test]
    fn errors_name_the_problem() {
        let e = Expr::Var("tile_q".into());
        assert_eq!(
            e.eval(&BTreeMap::new(), None),
            Err(EvalError::UnknownVariable("tile_q".into()))
        );
        let e = Expr::Call {
            func: "sqrt".into(),
            args: vec![],
        };
        assert!(matches!(
            e.eval(&BTreeMap::new(), None),
            Err(EvalError::UnknownFunction(_))
        ));
    }
}
