//! The closed set of functions and the variables of remedy expressions (lesson
//! fixes and causes, e.g. `tile_n=divisor(N / herd_n)`).

use serde::Serialize;

/// A function of the remedy expression language (lesson fixes and causes, e.g.
/// `tile_n=divisor(N / herd_n)`). The set is closed: the front end rejects any other
/// name, and [`eval_function`] defines what each computes.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FunctionSpec {
    pub name: &'static str,
    pub arity: usize,
    pub doc: &'static str,
}

const fn function(name: &'static str, arity: usize, doc: &'static str) -> FunctionSpec {
    FunctionSpec { name, arity, doc }
}

pub const FUNCTIONS: &[FunctionSpec] = &[
    function(
        "divisor",
        1,
        "largest divisor of x not above the current value of the parameter being assigned",
    ),
    function("min", 2, "smaller of a and b"),
    function("max", 2, "larger of a and b"),
    function("ceil_div", 2, "a / b rounded up"),
    function("round_up", 2, "smallest multiple of m not below a"),
    function("round_down", 2, "largest multiple of m not above a"),
    function("pow2_floor", 1, "largest power of two not above x"),
    function("gcd", 2, "greatest common divisor of a and b"),
];

pub fn function_spec(name: &str) -> Option<&'static FunctionSpec> {
    FUNCTIONS.iter().find(|f| f.name == name)
}

/// Evaluates a remedy function on integers. `current` is the value the assigned
/// parameter had before the fix (only `divisor` reads it). `None` for an unknown
/// function, a wrong argument count, or an undefined result (division by zero, no
/// positive divisor).
pub fn eval_function(name: &str, args: &[i64], current: Option<i64>) -> Option<i64> {
    let spec = function_spec(name)?;
    if args.len() != spec.arity {
        return None;
    }
    match (name, args) {
        ("divisor", [x]) => {
            let limit = current.unwrap_or(*x).min(*x);
            (1..=limit).rev().find(|d| x % d == 0)
        }
        ("min", [a, b]) => Some(*a.min(b)),
        ("max", [a, b]) => Some(*a.max(b)),
        ("ceil_div", [a, b]) if *b != 0 => {
            Some(a.div_euclid(*b) + i64::from(a.rem_euclid(*b) != 0))
        }
        ("round_up", [a, m]) if *m > 0 => {
            Some(a.div_euclid(*m) * m + if a.rem_euclid(*m) != 0 { *m } else { 0 })
        }
        ("round_down", [a, m]) if *m > 0 => Some(a.div_euclid(*m) * m),
        ("pow2_floor", [x]) if *x > 0 => Some(1i64 << (63 - x.leading_zeros())),
        ("gcd", [a, b]) => {
            let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
            while b != 0 {
                (a, b) = (b, a % b);
            }
            i64::try_from(a).ok()
        }
        _ => None,
    }
}

/// A name a remedy expression may read besides the parameters of its operation.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct VariableSpec {
    pub name: &'static str,
    pub doc: &'static str,
}

const fn variable(name: &'static str, doc: &'static str) -> VariableSpec {
    VariableSpec { name, doc }
}

/// Model and problem sizes available to remedy expressions. Parameters of the fix's
/// operation and their list components (`tile_n`, `herd_n`, …) are available too,
/// holding the values of the action being fixed.
pub const VARIABLES: &[VariableSpec] = &[
    variable("M", "first slot of the action's shape (rows)"),
    variable("K", "second slot of the action's shape (reduction)"),
    variable("N", "third slot of the action's shape (columns)"),
    variable("seq_len", "sequence length"),
    variable("hidden_size", "model width"),
    variable("intermediate_size", "FFN width"),
    variable("head_dim", "attention head size"),
    variable("n_heads", "query heads"),
    variable("n_kv_heads", "key/value heads"),
    variable("vocab_size", "vocabulary size"),
    variable("n_layers", "decoder layers"),
];

pub fn variable_spec(name: &str) -> Option<&'static VariableSpec> {
    VARIABLES.iter().find(|v| v.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remedy_functions_compute_what_they_document() {
        assert_eq!(eval_function("divisor", &[224], Some(128)), Some(112));
        assert_eq!(eval_function("divisor", &[7], Some(4)), Some(1));
        assert_eq!(eval_function("ceil_div", &[128256, 16384], None), Some(8));
        assert_eq!(eval_function("round_up", &[896, 1024], None), Some(1024));
        assert_eq!(eval_function("round_down", &[896, 256], None), Some(768));
        assert_eq!(eval_function("pow2_floor", &[896], None), Some(512));
        assert_eq!(eval_function("gcd", &[896, 2048], None), Some(128));
        assert_eq!(eval_function("ceil_div", &[1, 0], None), None);
        assert_eq!(eval_function("min", &[1], None), None);
        assert_eq!(eval_function("nope", &[1], None), None);
    }
}
