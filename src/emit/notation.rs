//! Values, remedies, symptoms and checks written in trajectory notation, so that a
//! SKILL.md reads like the language the engineer recorded in: `select-tiling
//! kernel=gemm tile=[64,256,32,32]`, `tile_n=divisor(N / herd_n)`,
//! `validate-kernel fails with mismatches > 0`.

use std::collections::BTreeMap;

use skillc_runtime::bundle::{BinaryOp, Comparison, Expr, Remedy, Symptom, Value};
use skillc_runtime::ops::{self, OpKind};

/// A parameter value: identifiers bare, other text quoted with the language's escapes.
pub fn value(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => number(*f),
        Value::IntList(items) => {
            let items: Vec<String> = items.iter().map(i64::to_string).collect();
            format!("[{}]", items.join(","))
        }
        Value::Text(t) if is_identifier(t) => t.clone(),
        Value::Text(t) => quoted(t),
        Value::Quantity { value, unit } => format!("{}{unit}", number(*value)),
    }
}

/// A number as the language writes it: integers without a fraction, others in the
/// shortest form that reads back to the same `f64`.
pub fn number(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        format!("{f:?}")
    }
}

/// A number with its unit, spaced (`12.5 ms`); unitless numbers alone.
pub fn quantity(f: f64, unit: &str) -> String {
    if unit.is_empty() {
        number(f)
    } else {
        format!("{} {unit}", number(f))
    }
}

/// `"text"` with `\"`, `\\`, `\n` and `\t` escaped.
pub fn quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether the language would read `text` back as a bare identifier value.
fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !matches!(text, "true" | "false")
}

/// `op key=value …`, parameters in the operation's declared order, unknown ones
/// after them alphabetically.
pub fn call(op: OpKind, params: &BTreeMap<String, Value>) -> String {
    let mut out = op.to_string();
    for key in ordered_keys(Some(op), params.keys().map(String::as_str)) {
        if let Some(v) = params.get(key) {
            out.push_str(&format!(" {key}={}", value(v)));
        }
    }
    out
}

/// Parameters as `key=value` joined by spaces, in the operation's declared order.
pub fn params(op: Option<OpKind>, params: &BTreeMap<String, Value>) -> String {
    let keys = ordered_keys(op, params.keys().map(String::as_str));
    keys.iter()
        .filter_map(|key| params.get(*key).map(|v| format!("{key}={}", value(v))))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Keys in the operation's declared order; a list slot (`tile_n`) ranks with its
/// parameter, in slot order.
fn ordered_keys<'a>(op: Option<OpKind>, keys: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let declared = op.map_or(&[][..], |op| op.spec().params);
    let rank = |key: &str| {
        declared
            .iter()
            .enumerate()
            .find_map(|(i, p)| {
                if p.name == key {
                    Some((i, 0))
                } else {
                    p.components
                        .iter()
                        .position(|c| *c == key)
                        .map(|slot| (i, slot + 1))
                }
            })
            .unwrap_or((declared.len(), 0))
    };
    let mut keys: Vec<&str> = keys.collect();
    keys.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
    keys
}

/// `op key=expr …`: the remedy as the language writes a `fix` clause.
pub fn remedy(fix: &Remedy) -> String {
    let mut out = fix.op.to_string();
    for key in ordered_keys(Some(fix.op), fix.set.keys().map(String::as_str)) {
        if let Some(e) = fix.set.get(key) {
            out.push_str(&format!(" {key}={}", fix_value(e)));
        }
    }
    out
}

/// A fix value as the language accepts it: arithmetic at the top is parenthesised
/// (`tile_n=(tile_n / 2)`), calls and literals are not.
pub fn fix_value(e: &Expr) -> String {
    match e {
        Expr::Binary { .. } => format!("({})", expr(e)),
        _ => expr(e),
    }
}

/// A remedy expression with the fewest parentheses that keep its meaning.
pub fn expr(e: &Expr) -> String {
    expr_in(e, 0)
}

fn precedence(op: BinaryOp) -> u8 {
    match op {
        BinaryOp::Add | BinaryOp::Sub => 1,
        BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => 2,
    }
}

fn binary_symbol(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        BinaryOp::Div => "/",
        BinaryOp::Rem => "%",
    }
}

fn expr_in(e: &Expr, min_precedence: u8) -> String {
    match e {
        Expr::Lit(v) => value(v),
        Expr::Var(name) => name.clone(),
        Expr::Call { func, args } => {
            let args: Vec<String> = args.iter().map(expr).collect();
            format!("{func}({})", args.join(", "))
        }
        Expr::Binary { op, lhs, rhs } => {
            let p = precedence(*op);
            // Left-associative: the right operand needs parentheses at equal precedence.
            let text = format!(
                "{} {} {}",
                expr_in(lhs, p),
                binary_symbol(*op),
                expr_in(rhs, p + 1)
            );
            if p < min_precedence {
                format!("({text})")
            } else {
                text
            }
        }
    }
}

/// `metric cmp value unit`.
pub fn check(metric: &str, comparison: Comparison, threshold: f64, unit: &str) -> String {
    format!(
        "{metric} {} {}",
        comparison.symbol(),
        quantity(threshold, unit)
    )
}

/// The machine-matchable part of a symptom: `op(params) fails with metric cmp value`.
pub fn symptom(s: &Symptom) -> String {
    let mut out = String::new();
    if let Some(op) = s.op {
        out.push_str(op.name());
        if !s.params.is_empty() {
            out.push_str(&format!("({})", params(Some(op), &s.params)));
        }
        out.push_str(" fails");
    }
    if let (Some(metric), Some(cmp), Some(v)) = (&s.metric, s.comparison, s.value) {
        if !out.is_empty() {
            out.push_str(" with ");
        }
        let unit = ops::metric_spec(metric).map_or("", |m| m.canonical_unit);
        out.push_str(&format!("{metric} {} {}", cmp.symbol(), quantity(v, unit)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(name: &str) -> Box<Expr> {
        Box::new(Expr::Var(name.to_string()))
    }

    #[test]
    fn expressions_keep_their_meaning_with_few_parentheses() {
        let div = Expr::Binary {
            op: BinaryOp::Div,
            lhs: var("N"),
            rhs: Box::new(Expr::Binary {
                op: BinaryOp::Mul,
                lhs: var("tile_n"),
                rhs: var("herd_n"),
            }),
        };
        assert_eq!(expr(&div), "N / (tile_n * herd_n)");
        let call = Expr::Call {
            func: "divisor".into(),
            args: vec![Expr::Binary {
                op: BinaryOp::Add,
                lhs: var("a"),
                rhs: Box::new(Expr::Binary {
                    op: BinaryOp::Mul,
                    lhs: var("b"),
                    rhs: var("c"),
                }),
            }],
        };
        assert_eq!(expr(&call), "divisor(a + b * c)");
    }

    #[test]
    fn values_read_back_as_written() {
        assert_eq!(value(&Value::Float(0.016)), "0.016");
        assert_eq!(value(&Value::Float(3.0)), "3");
        assert_eq!(value(&Value::Text("seq-first".into())), "seq-first");
        assert_eq!(value(&Value::Text("a \"b\"".into())), "\"a \\\"b\\\"\"");
        assert_eq!(value(&Value::IntList(vec![8, 4])), "[8,4]");
    }

    #[test]
    fn calls_list_parameters_in_declared_order() {
        let params: BTreeMap<String, Value> = [
            ("tile", Value::IntList(vec![64, 256, 32, 32])),
            ("kernel", Value::Text("gemm".into())),
            ("shape", Value::IntList(vec![2048, 896, 896])),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(
            call(OpKind::SelectTiling, &params),
            "select-tiling kernel=gemm shape=[2048,896,896] tile=[64,256,32,32]"
        );
    }
}
