//! Replays a lesson's fix: evaluates its remedy expressions on the action that
//! failed (its parameters, their list slots, the model's sizes) and compares the
//! result with the parameters of the action that applied the lesson
//! (`fixes … by <lesson>`). A lesson whose remedy does not compute what the
//! engineer did is a disagreement, like a wrong figure.

use std::collections::BTreeMap;

use skillc_runtime::bundle::{BinaryOp, Expr, Value};
use skillc_runtime::model::arch::Architecture;
use skillc_runtime::ops;

use crate::distill::values;
use crate::graph::{ActionData, Remedy};

use super::params::Params;

/// One remedy assignment, evaluated and compared.
#[derive(Debug, Clone, PartialEq)]
pub struct FixCheck {
    pub key: String,
    /// The value the applying action wrote.
    pub applied: String,
    /// The value the remedy computes, or why it cannot.
    pub computed: Result<String, String>,
}

impl FixCheck {
    pub fn agrees(&self) -> bool {
        self.computed.as_deref() == Ok(self.applied.as_str())
    }
}

/// Checks every assignment of `remedy` against `applied`, computing it from
/// `failed`. An operation mismatch is one check on the key `op`.
pub fn check(
    remedy: &Remedy,
    failed: &ActionData,
    applied: &ActionData,
    arch: &Architecture,
) -> Vec<FixCheck> {
    if remedy.op != applied.op {
        return vec![FixCheck {
            key: "op".into(),
            applied: applied.op.to_string(),
            computed: Ok(remedy.op.to_string()),
        }];
    }
    let vars = variables(failed, arch);
    let (lowered, problems) = values::remedy(remedy);
    if lowered.set.is_empty() && problems.is_empty() {
        return vec![FixCheck {
            key: "op".into(),
            applied: applied.op.to_string(),
            computed: Ok(remedy.op.to_string()),
        }];
    }
    let mut checks: Vec<FixCheck> = problems
        .into_iter()
        .map(|p| FixCheck {
            key: p.key.clone(),
            applied: slot_text(applied, &p.key).unwrap_or_default(),
            computed: Err(p.reason),
        })
        .collect();
    for (key, expr) in &lowered.set {
        let current = vars.get(key).copied();
        checks.push(FixCheck {
            key: key.clone(),
            applied: slot_text(applied, key).unwrap_or_else(|| "(not written)".into()),
            computed: eval(expr, &vars, current).map(|v| text(&v)),
        });
    }
    checks
}

/// A literal or a computed number, for comparison with what was written.
#[derive(Debug, Clone, PartialEq)]
enum Computed {
    Number(i64),
    Literal(Value),
}

fn text(v: &Computed) -> String {
    match v {
        Computed::Number(n) => n.to_string(),
        Computed::Literal(Value::Text(s)) => s.clone(),
        Computed::Literal(Value::IntList(items)) => {
            let inner: Vec<String> = items.iter().map(i64::to_string).collect();
            format!("[{}]", inner.join(","))
        }
        Computed::Literal(Value::Bool(b)) => b.to_string(),
        Computed::Literal(Value::Int(i)) => i.to_string(),
        Computed::Literal(Value::Float(f)) => f.to_string(),
        Computed::Literal(Value::Quantity { value, unit }) => format!("{value} {unit}"),
    }
}

/// Integer evaluation with the vocabulary's functions (`ops::eval_function`).
fn eval(
    expr: &Expr,
    vars: &BTreeMap<String, i64>,
    current: Option<i64>,
) -> Result<Computed, String> {
    match expr {
        Expr::Lit(Value::Int(i)) => Ok(Computed::Number(*i)),
        Expr::Lit(other) => Ok(Computed::Literal(other.clone())),
        Expr::Var(name) => vars
            .get(name)
            .map(|v| Computed::Number(*v))
            .ok_or_else(|| format!("`{name}` has no value on the failed action")),
        Expr::Binary { op, lhs, rhs } => {
            let (l, r) = (
                number(eval(lhs, vars, current)?)?,
                number(eval(rhs, vars, current)?)?,
            );
            let value = match op {
                BinaryOp::Add => l.checked_add(r),
                BinaryOp::Sub => l.checked_sub(r),
                BinaryOp::Mul => l.checked_mul(r),
                BinaryOp::Div => (r != 0).then(|| l.div_euclid(r)),
                BinaryOp::Rem => (r != 0).then(|| l.rem_euclid(r)),
            };
            value
                .map(Computed::Number)
                .ok_or_else(|| "arithmetic out of range".into())
        }
        Expr::Call { func, args } => {
            let args = args
                .iter()
                .map(|a| eval(a, vars, current).and_then(number))
                .collect::<Result<Vec<i64>, String>>()?;
            ops::eval_function(func, &args, current)
                .map(Computed::Number)
                .ok_or_else(|| format!("{func} has no value here"))
        }
    }
}

fn number(v: Computed) -> Result<i64, String> {
    match v {
        Computed::Number(n) | Computed::Literal(Value::Int(n)) => Ok(n),
        other => Err(format!("{} is not a number", text(&other))),
    }
}

/// The failed action's parameters and list slots, and the model's sizes.
fn variables(action: &ActionData, arch: &Architecture) -> BTreeMap<String, i64> {
    let mut vars: BTreeMap<String, i64> = [
        ("hidden_size", arch.hidden_size),
        ("intermediate_size", arch.intermediate_size),
        ("head_dim", arch.head_dim),
        ("n_heads", arch.num_heads),
        ("n_kv_heads", arch.num_kv_heads),
        ("vocab_size", arch.vocab_size),
        ("n_layers", arch.num_layers),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v as i64))
    .collect();
    let p = Params(&action.params);
    for param in action.op.spec().params {
        if let Some(n) = p.number(param.name) {
            vars.insert(param.name.to_string(), n as i64);
        }
        if let Some(list) = p.dims(param.name) {
            for (slot, v) in param.components.iter().zip(&list) {
                vars.insert(slot.to_string(), *v as i64);
            }
        }
    }
    if let Some(shape) = p.dims("shape") {
        for (name, v) in ["M", "K", "N"].iter().zip(&shape) {
            vars.insert(name.to_string(), *v as i64);
        }
    }
    vars
}

/// A parameter or list slot of an action, as text.
fn slot_text(action: &ActionData, key: &str) -> Option<String> {
    let p = Params(&action.params);
    if let Some(text) = p.text(key) {
        return Some(text);
    }
    let spec = action.op.spec();
    let (param, slot) = spec.resolve_param(key)?;
    let list = p.dims(param.name)?;
    slot.and_then(|i| list.get(i)).map(usize::to_string)
}
