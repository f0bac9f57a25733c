//! Lesson conditions: truth values over a model's features, so that a lesson says
//! which models it is for (`if head_dim >= 128`) and a deploy can skip the ones
//! that do not apply.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::expr::{EvalError, Expr};

/// A truth value over the model features of `ops::conditions` (`qk_norm`,
/// `n_kv_heads == n_heads`, `intermediate_size > gemv_k_limit`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// A flag of the vocabulary: true when the model takes that path.
    Flag(String),
    Compare {
        lhs: Expr,
        relation: Relation,
        rhs: Expr,
    },
    Not(Box<Condition>),
    /// Every one holds.
    All(Vec<Condition>),
    /// At least one holds.
    Any(Vec<Condition>),
}

/// A comparison of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Relation {
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = "==")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
}

impl Relation {
    pub fn holds(self, lhs: f64, rhs: f64) -> bool {
        match self {
            Relation::Lt => lhs < rhs,
            Relation::Le => lhs <= rhs,
            Relation::Gt => lhs > rhs,
            Relation::Ge => lhs >= rhs,
            Relation::Eq => lhs == rhs,
            Relation::Ne => lhs != rhs,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            Relation::Lt => "<",
            Relation::Le => "<=",
            Relation::Gt => ">",
            Relation::Ge => ">=",
            Relation::Eq => "==",
            Relation::Ne => "!=",
        }
    }
}

impl Condition {
    /// Whether the condition holds for a model whose features are `facts` (flags
    /// as 1 or 0, sizes as numbers: `ops::conditions::facts`).
    pub fn holds(&self, facts: &BTreeMap<String, f64>) -> Result<bool, EvalError> {
        match self {
            Condition::Flag(name) => facts
                .get(name)
                .map(|v| *v != 0.0)
                .ok_or_else(|| EvalError::UnknownVariable(name.clone())),
            Condition::Compare { lhs, relation, rhs } => {
                Ok(relation.holds(lhs.eval(facts, None)?, rhs.eval(facts, None)?))
            }
            Condition::Not(inner) => Ok(!inner.holds(facts)?),
            Condition::All(all) => {
                for c in all {
                    if !c.holds(facts)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Condition::Any(any) => {
                for c in any {
                    if c.holds(facts)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
        }
    }

    /// The feature names it reads, sorted, each once.
    pub fn names(&self) -> Vec<String> {
        let mut names = std::collections::BTreeSet::new();
        self.collect_names(&mut names);
        names.into_iter().collect()
    }

    fn collect_names(&self, names: &mut std::collections::BTreeSet<String>) {
        match self {
            Condition::Flag(name) => {
                names.insert(name.clone());
            }
            Condition::Compare { lhs, rhs, .. } => {
                lhs.collect_vars(names);
                rhs.collect_vars(names);
            }
            Condition::Not(inner) => inner.collect_names(names),
            Condition::All(list) | Condition::Any(list) => {
                for c in list {
                    c.collect_names(names);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Value;

    fn vars(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn var(name: &str) -> Expr {
        Expr::Var(name.into())
    }

    fn compare(lhs: Expr, relation: Relation, rhs: Expr) -> Condition {
        Condition::Compare { lhs, relation, rhs }
    }

    #[test]
    fn conditions_hold_on_the_features_they_read() {
        let qwen3 = vars(&[
            ("qk_norm", 1.0),
            ("mha", 0.0),
            ("head_dim", 128.0),
            ("n_heads", 16.0),
            ("n_kv_heads", 8.0),
        ]);
        let wide_heads = Condition::All(vec![
            Condition::Flag("qk_norm".into()),
            compare(var("head_dim"), Relation::Ge, Expr::Lit(Value::Int(128))),
        ]);
        assert_eq!(wide_heads.holds(&qwen3), Ok(true));
        assert_eq!(wide_heads.names(), ["head_dim", "qk_norm"]);
        let mha = compare(var("n_kv_heads"), Relation::Eq, var("n_heads"));
        assert_eq!(mha.holds(&qwen3), Ok(false));
        assert_eq!(
            Condition::Any(vec![mha.clone(), Condition::Flag("mha".into())]).holds(&qwen3),
            Ok(false)
        );
        assert_eq!(
            Condition::Not(Box::new(Condition::Flag("mha".into()))).holds(&qwen3),
            Ok(true)
        );
        assert_eq!(
            Condition::Flag("qk_norms".into()).holds(&qwen3),
            Err(EvalError::UnknownVariable("qk_norms".into()))
        );
        let json = serde_json::to_string(&wide_heads).unwrap();
        assert_eq!(
            json,
            r#"{"all":[{"flag":"qk_norm"},{"compare":{"lhs":{"var":"head_dim"},"relation":">=","rhs":{"lit":128}}}]}"#
        );
        assert_eq!(
            serde_json::from_str::<Condition>(&json).unwrap(),
            wide_heads
        );
    }
}
