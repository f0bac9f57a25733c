//! A parameter value, as trajectories and `bundle.json` write it: the operations
//! read their parameters from these ([`super::Op::read`]), and the bundle schema
//! re-exports it.

use serde::{Deserialize, Serialize};

/// A parameter value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    IntList(Vec<i64>),
    /// Identifiers and free text alike; the operation's spec says which.
    Text(String),
    Quantity {
        value: f64,
        unit: String,
    },
}
