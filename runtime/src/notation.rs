//! The printer of the trajectory language (`grammar/README.md`): the one place its
//! text is written. The emitter (SKILL.md pages and their provenance), the
//! run-trajectory writer of `skillc deploy` ([`crate::exec::artifacts::trajectory`])
//! and the compiler's syntax-tree printer all write numbers, quoted text, values,
//! parameter lists, remedy expressions and entry lines through it, so whatever one
//! of them prints reads back through the parser and prints the same again.
//!
//! Everything printed here parses: numbers never come out as `inf`, `NaN` or with a
//! `+`, bare words are never keywords, quoted text escapes what the grammar cannot
//! hold raw. Non-finite numbers are the caller's to keep out (a gate that is not
//! finite is recorded as text).

use std::collections::BTreeMap;

use crate::bundle::{BinaryOp, Comparison, Condition, Expr, Remedy, Value};
pub use crate::numbers::{float, number};
use crate::ops::{is_keyword, Metric, OpKind, Unit};

/// `"text"` with the language's escapes (`\"`, `\\`, `\n`, `\t`). Other control
/// characters are kept as they are: the grammar reads them raw, and the pages that
/// show a text make them visible themselves.
pub fn quoted(text: &str) -> String {
    quote_with(text, |c| match c {
        '"' => Some("\\\""),
        '\\' => Some("\\\\"),
        '\n' => Some("\\n"),
        '\t' => Some("\\t"),
        _ => None,
    })
}

/// `text` between double quotes, each character `escape` maps written as what it
/// maps to (the language's strings here; other formats, such as DOT, bring their own
/// escapes).
pub fn quote_with(text: &str, escape: impl Fn(char) -> Option<&'static str>) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match escape(c) {
            Some(escaped) => out.push_str(escaped),
            None => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether the language reads `text` back as a bare identifier value: a letter or
/// `_` first, then letters, digits, `_`, `-`, `.`, and not a keyword (which would
/// read back as the keyword, or as a boolean).
pub fn is_word(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !is_keyword(text)
}

/// Text as a value: bare when it is a word, quoted otherwise.
pub fn text_value(text: &str) -> String {
    if is_word(text) {
        text.to_string()
    } else {
        quoted(text)
    }
}

/// A parameter or condition key as the language accepts it: a letter or `_` first,
/// then letters, digits and `_`; anything else becomes `_`.
pub fn key(k: &str) -> String {
    let valid = k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        return k.to_string();
    }
    let mut out: String = k
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out
}

/// A parameter value: words bare, other text quoted, lists bracketed, a quantity
/// with its unit attached (`12ms`).
pub fn value(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => number(*f),
        Value::IntList(items) => {
            let items: Vec<String> = items.iter().map(i64::to_string).collect();
            format!("[{}]", items.join(","))
        }
        Value::Text(t) => text_value(t),
        Value::Quantity { value, unit } => format!("{}{unit}", number(*value)),
    }
}

/// A number with its unit, spaced (`12.5 ms`), as measurements and thresholds are
/// written; unitless numbers alone.
pub fn quantity(f: f64, unit: Option<Unit>) -> String {
    match unit {
        None => number(f),
        Some(unit) => format!("{} {unit}", number(f)),
    }
}

/// `metric cmp value unit`, as a threshold or a symptom's predicate.
pub fn check(metric: Metric, comparison: Comparison, threshold: f64, unit: Option<Unit>) -> String {
    format!(
        "{metric} {} {}",
        comparison.symbol(),
        quantity(threshold, unit)
    )
}

/// `op key=value …`, parameters in the operation's declared order, unknown ones
/// after them alphabetically.
pub fn call(op: OpKind, params: &BTreeMap<String, Value>) -> String {
    let mut out = op.to_string();
    for key in ordered_keys(Some(op), params.keys().map(String::as_str)) {
        if let Some(v) = params.get(key) {
            out.push_str(&format!(" {}={}", self::key(key), value(v)));
        }
    }
    out
}

/// Parameters as `key=value` joined by spaces, in the operation's declared order.
pub fn params(op: Option<OpKind>, params: &BTreeMap<String, Value>) -> String {
    let keys = ordered_keys(op, params.keys().map(String::as_str));
    keys.iter()
        .filter_map(|k| params.get(*k).map(|v| format!("{}={}", key(k), value(v))))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Keys in the operation's declared order; a list slot (`tile_n`) ranks with its
/// parameter, in slot order; keys the operation does not declare come last, by name.
pub fn ordered_keys<'a>(op: Option<OpKind>, keys: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
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

/// `op key=expr …`: a remedy as the language writes it after `fix`.
pub fn remedy(fix: &Remedy) -> String {
    let mut out = fix.op.to_string();
    for k in ordered_keys(Some(fix.op), fix.set.keys().map(String::as_str)) {
        if let Some(e) = fix.set.get(k) {
            out.push_str(&format!(" {}={}", key(k), fix_value(e)));
        }
    }
    out
}

/// A fix value as the language accepts it: arithmetic at the top is parenthesised
/// (`tile_n=(tile_n / 2)`), calls, names and literals are not.
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

/// Binding strength of an arithmetic operator: `*`, `/`, `%` over `+`, `-`.
pub fn precedence(op: BinaryOp) -> u8 {
    match op {
        BinaryOp::Add | BinaryOp::Sub => 1,
        BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => 2,
    }
}

/// The operator as the language writes it.
pub fn binary_symbol(op: BinaryOp) -> &'static str {
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

/// A lesson's condition as the language writes it after `if`, with the fewest
/// parentheses that keep its meaning (`or` binds loosest, then `and`, then `not`).
pub fn condition(c: &Condition) -> String {
    condition_in(c, 0)
}

/// How tightly a condition binds: `or` 1, `and` 2, `not` 3, a comparison or a flag 4.
fn binding(c: &Condition) -> u8 {
    match c {
        Condition::Any(_) => 1,
        Condition::All(_) => 2,
        Condition::Not(_) => 3,
        Condition::Compare { .. } | Condition::Flag(_) => 4,
    }
}

fn condition_in(c: &Condition, min: u8) -> String {
    let own = binding(c);
    let joined = |list: &[Condition], word: &str| {
        list.iter()
            .map(|item| condition_in(item, own + 1))
            .collect::<Vec<_>>()
            .join(word)
    };
    let text = match c {
        Condition::Flag(name) => name.clone(),
        Condition::Compare { lhs, relation, rhs } => {
            format!("{} {} {}", expr(lhs), relation.symbol(), expr(rhs))
        }
        Condition::Not(inner) => format!("not {}", condition_in(inner, own)),
        Condition::All(list) => joined(list, " and "),
        Condition::Any(list) => joined(list, " or "),
    };
    if own < min {
        format!("({text})")
    } else {
        text
    }
}

/// The words that open a clause of a one-line entry; a long entry breaks before them.
const CLAUSE_BREAKS: &[&str] = &[
    "when",
    "after",
    "fixes",
    "supersedes",
    "reverts",
    "about",
    "->",
    "source",
];

/// Lays out one entry written on one line: at most 100 characters stay on the
/// line; a longer one breaks before clause keywords once a line holds more than 60,
/// continuation lines indented by four spaces, never inside quoted text.
pub fn wrap(line: &str) -> String {
    if line.len() <= 100 {
        return line.to_string();
    }
    let mut out = String::new();
    let mut current = String::new();
    for token in tokens(line) {
        if current.len() > 60 && CLAUSE_BREAKS.contains(&token) {
            out.push_str(current.trim_end());
            out.push_str("\n   ");
            current.clear();
        }
        current.push(' ');
        current.push_str(token);
    }
    out.push_str(current.trim_end());
    out.trim_start().to_string()
}

/// The tokens of a line: split at spaces outside quoted text (escapes honoured, so
/// `\"` does not end a text).
fn tokens(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    let mut start = 0;
    for (i, c) in line.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_string => escaped = true,
            '"' => in_string = !in_string,
            ' ' if !in_string => {
                out.push(&line[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&line[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(name: &str) -> Box<Expr> {
        Box::new(Expr::Var(name.to_string()))
    }

    #[test]
    fn numbers_use_the_language_syntax_and_read_back() {
        for (v, text) in [
            (0.99, "0.99"),
            (0.016, "0.016"),
            (3.0, "3"),
            (2048.0, "2048"),
            (-0.5, "-0.5"),
            (3.0e-6, "3e-6"),
            (5.0e-5, "5e-5"),
            (1.25e20, "1.25e20"),
            (1e15, "1e15"),
            (0.1 + 0.2, "0.30000000000000004"),
        ] {
            assert_eq!(number(v), text);
            assert_eq!(text.parse::<f64>().ok(), Some(v), "{text} reads back");
        }
        assert_eq!(float(229.0), "229.0");
        assert_eq!(float(-3.0), "-3.0");
        assert_eq!(float(1e20), "1e20");
        assert_eq!(float(0.5), "0.5");
    }

    #[test]
    fn values_read_back_as_written() {
        assert_eq!(value(&Value::Float(0.016)), "0.016");
        assert_eq!(value(&Value::Text("seq-first".into())), "seq-first");
        assert_eq!(value(&Value::Text("two words".into())), "\"two words\"");
        assert_eq!(value(&Value::Text("a \"b\"".into())), "\"a \\\"b\\\"\"");
        // A keyword would read back as the keyword (or a boolean): quoted.
        assert_eq!(value(&Value::Text("pass".into())), "\"pass\"");
        assert_eq!(value(&Value::Text("true".into())), "\"true\"");
        assert_eq!(value(&Value::IntList(vec![8, 4])), "[8,4]");
        let ms = Value::Quantity {
            value: 12.5,
            unit: "ms".into(),
        };
        assert_eq!(value(&ms), "12.5ms");
    }

    #[test]
    fn quoted_text_escapes_what_the_grammar_cannot_hold_raw() {
        assert_eq!(quoted("a\tb\nc\\d\"e"), "\"a\\tb\\nc\\\\d\\\"e\"");
        assert_eq!(quoted("bell\u{7}"), "\"bell\u{7}\"");
    }

    #[test]
    fn keys_are_valid_keys() {
        assert_eq!(key("seq_len"), "seq_len");
        assert_eq!(key("call-group"), "call_group");
        assert_eq!(key("2x"), "_2x");
    }

    #[test]
    fn conditions_keep_their_meaning_with_few_parentheses() {
        let flag = |n: &str| Condition::Flag(n.into());
        let wide = Condition::Compare {
            lhs: Expr::Binary {
                op: BinaryOp::Rem,
                lhs: Box::new(Expr::Var("hidden_size".into())),
                rhs: Box::new(Expr::Lit(Value::Int(1024))),
            },
            relation: crate::bundle::Relation::Ne,
            rhs: Expr::Lit(Value::Int(0)),
        };
        let c = Condition::All(vec![
            Condition::Any(vec![flag("mha"), flag("qk_norm")]),
            Condition::Not(Box::new(Condition::All(vec![
                flag("qkv_bias"),
                wide.clone(),
            ]))),
            Condition::Not(Box::new(flag("mqa"))),
        ]);
        assert_eq!(
            condition(&c),
            "(mha or qk_norm) and not (qkv_bias and hidden_size % 1024 != 0) and not mqa"
        );
        assert_eq!(
            condition(&Condition::Any(vec![
                Condition::All(vec![flag("a"), flag("b")]),
                wide
            ])),
            "a and b or hidden_size % 1024 != 0"
        );
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
        assert_eq!(fix_value(&div), "(N / (tile_n * herd_n))");
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

    #[test]
    fn long_lines_break_before_clauses_never_inside_text() {
        let line = format!(
            "a1 observe measured \"a label -> with when and after inside {}\" cosine = 0.99 >= 0.98 when layer=0 -> pass after a0",
            "x".repeat(30)
        );
        let wrapped = wrap(&line);
        assert_eq!(wrapped.replace("\n   ", ""), line);
        let first = wrapped.lines().next().unwrap();
        assert!(first.ends_with(">= 0.98"), "{wrapped}");
        assert!(
            wrapped.lines().skip(1).all(|l| l.starts_with("    ")),
            "{wrapped}"
        );
        assert_eq!(wrap("a1 note \"short\""), "a1 note \"short\"");
    }
}
