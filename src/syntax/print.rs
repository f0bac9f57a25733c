//! The syntax tree printed back as trajectory text, in the one layout the language
//! printer of the runtime ([`skillc_runtime::notation`]) gives it — the layout the
//! run-trajectory writer of `skillc deploy` writes — so that printing a parsed file,
//! parsing the print and printing again gives the same text, for hand-written and
//! generated trajectories alike (`tests/print.rs`).
//!
//! The header's fields go one per line; a blank line precedes each session; a
//! lesson puts each clause on a line of its own, other entries stay on one line
//! broken before clause keywords when long. Text is always quoted (a `"""` block
//! comes back as one quoted line with `\n`), numbers take the printer's shortest
//! form, expressions the fewest parentheses. Comments are not part of the tree and
//! do not come back; items that did not parse are left out.

use skillc_runtime::notation;

use super::ast::*;

/// A whole parsed file as text.
pub fn file(parsed: &ParsedFile) -> String {
    let mut out = String::new();
    for item in &parsed.items {
        match item {
            Item::Header(h) => header(h, &mut out),
            Item::Session(s) => session(s, &mut out),
            Item::Skill(s) => skill(s, &mut out),
            Item::Entry(e) => {
                out.push_str(&entry(e));
                out.push('\n');
            }
            Item::Unparsed(_) => {}
        }
    }
    out
}

fn header(h: &Header, out: &mut String) {
    out.push_str(&format!("trajectory {}\n", notation::quoted(&h.name.text)));
    for field in &h.fields {
        out.push_str(&format!("  {} {}\n", field.key.text, value(&field.value)));
    }
}

fn session(s: &Session, out: &mut String) {
    out.push_str(&format!("\nsession {} phase {}", s.timestamp.text, s.phase));
    if s.draft.is_some() {
        out.push_str(" draft");
    }
    if let Some(weights) = &s.weights {
        out.push_str(&format!(" weights {}", weights.text));
    }
    if let Some(title) = &s.title {
        out.push_str(&format!(" {}", notation::quoted(&title.text)));
    }
    out.push('\n');
}

fn skill(s: &SkillDecl, out: &mut String) {
    out.push_str(&format!(
        "skill {} {} {}\n",
        s.name.text,
        s.kind.text,
        notation::quoted(&s.title.text)
    ));
    for trigger in &s.triggers {
        out.push_str(&format!("  trigger {}\n", notation::quoted(&trigger.text)));
    }
}

/// One entry: a lesson with a clause per line, anything else on one line (broken
/// before clause keywords when long).
pub fn entry(e: &Entry) -> String {
    let head = format!("{} {}", e.id.text, body(&e.body));
    let clauses = e.clauses.iter().map(|c| clause(&c.kind));
    if matches!(e.body, EntryBody::Lesson { .. }) {
        let mut out = head;
        for c in clauses {
            out.push_str("\n    ");
            out.push_str(&c);
        }
        out
    } else {
        let line: Vec<String> = std::iter::once(head).chain(clauses).collect();
        notation::wrap(&line.join(" "))
    }
}

fn body(b: &EntryBody) -> String {
    match b {
        EntryBody::Action(a) => {
            let mut out = format!("action {}", a.op.text);
            for p in &a.params {
                out.push(' ');
                out.push_str(&param(p));
            }
            out
        }
        EntryBody::Observe(o) => {
            let mut out = String::from("observe");
            match o.provenance {
                Some(Provenance::Measured) => out.push_str(" measured"),
                Some(Provenance::Modeled) => out.push_str(" modeled"),
                None => {}
            }
            if let Some(label) = &o.label {
                out.push_str(&format!(" {}", notation::quoted(&label.text)));
            }
            for m in &o.measurements {
                out.push_str(&format!(" {} = {}", m.metric.text, quantity(&m.value)));
                if let Some(t) = &m.threshold {
                    out.push_str(&format!(" {} {}", t.op.symbol(), quantity(&t.value)));
                }
            }
            out
        }
        EntryBody::Lesson { title } => format!("lesson {}", notation::quoted(&title.text)),
        EntryBody::Note { text, draft } => match draft {
            None => format!("note {}", notation::quoted(&text.text)),
            Some(draft) => {
                let kind = draft
                    .suggested
                    .map_or(String::new(), |k| format!(" {}", k.keyword()));
                format!("note draft{kind} {}", notation::quoted(&text.text))
            }
        },
        EntryBody::Decision { text } => format!("decision {}", notation::quoted(&text.text)),
    }
}

fn clause(c: &ClauseKind) -> String {
    let refs = |keyword: &str, ids: &[Name]| {
        let ids: Vec<&str> = ids.iter().map(|n| n.text.as_str()).collect();
        format!("{keyword} {}", ids.join(" "))
    };
    match c {
        ClauseKind::When(params) => {
            let params: Vec<String> = params.iter().map(param).collect();
            format!("when {}", params.join(" "))
        }
        ClauseKind::Verdict(Verdict::Pass) => "-> pass".to_string(),
        ClauseKind::Verdict(Verdict::Fail) => "-> fail".to_string(),
        ClauseKind::After(ids) => refs("after", ids),
        ClauseKind::About(ids) => refs("about", ids),
        ClauseKind::Evidence(ids) => refs("evidence", ids),
        ClauseKind::Fixes { targets, by } => {
            let mut out = refs("fixes", targets);
            if let Some(by) = by {
                out.push_str(&format!(" by {}", by.text));
            }
            out
        }
        ClauseKind::Supersedes(ids) => refs("supersedes", ids),
        ClauseKind::Reverts(ids) => refs("reverts", ids),
        ClauseKind::Symptom(s) => symptom(s),
        ClauseKind::Cause(c) => {
            let mut out = String::from("cause");
            if let Some(text) = &c.text {
                out.push_str(&format!(" {}", notation::quoted(&text.text)));
            }
            if let Some(condition) = &c.condition {
                out.push_str(&format!(" {}", expr(condition)));
            }
            out
        }
        ClauseKind::Fix(f) => {
            let mut out = String::from("fix");
            if let Some(text) = &f.text {
                out.push_str(&format!(" {}", notation::quoted(&text.text)));
            }
            out.push_str(&format!(" {}", f.op.text));
            for a in &f.assignments {
                out.push_str(&format!(" {}={}", a.key.text, fix_value(&a.value)));
            }
            out
        }
        ClauseKind::In(skill) => format!("in {}", skill.text),
        ClauseKind::Weights(format) => format!("weights {}", format.text),
        ClauseKind::If(condition) => format!("if {}", expr(condition)),
        ClauseKind::Source(citation) => format!("source {}", notation::quoted(&citation.text)),
    }
}

fn symptom(s: &Symptom) -> String {
    let mut out = String::from("symptom");
    if let Some(text) = &s.text {
        out.push_str(&format!(" {}", notation::quoted(&text.text)));
    }
    if let Some(op) = &s.failing_op {
        out.push_str(&format!(" {} fails", op.text));
    }
    let predicates: Vec<String> = s
        .predicates
        .iter()
        .map(|p| format!("{} {} {}", p.metric.text, p.op.symbol(), quantity(&p.value)))
        .collect();
    if !predicates.is_empty() {
        out.push_str(&format!(" with {}", predicates.join(" and ")));
    }
    out
}

fn param(p: &Param) -> String {
    format!("{}={}", p.key.text, value(&p.value))
}

/// A value as [`notation::value`] writes it: a quantity's unit attached, lists
/// without spaces, text quoted and identifiers bare (as they were written).
fn value(v: &Value) -> String {
    match &v.kind {
        ValueKind::Number(q) => attached(q),
        ValueKind::Str(text) => notation::quoted(text),
        ValueKind::Ident(word) => word.clone(),
        ValueKind::Bool(b) => b.to_string(),
        ValueKind::List(items) => {
            let items: Vec<String> = items.iter().map(value).collect();
            format!("[{}]", items.join(","))
        }
    }
}

fn number(n: Number) -> String {
    match n {
        Number::Int(i) => i.to_string(),
        Number::Float(f) => notation::float(f),
    }
}

/// `12ms`: a quantity inside a parameter value.
fn attached(q: &Quantity) -> String {
    match &q.unit {
        Some(unit) => format!("{}{}", number(q.number), unit.text),
        None => number(q.number),
    }
}

/// `12 ms`: a measurement, threshold or predicate.
fn quantity(q: &Quantity) -> String {
    match &q.unit {
        Some(unit) => format!("{} {}", number(q.number), unit.text),
        None => number(q.number),
    }
}

/// A fix value as it is written after `key=`: literals as parameter values are
/// (a bare word stays bare, so it is read as a literal or a variable by the
/// parameter's kind, as written), a name or arithmetic in parentheses, calls as
/// they are.
pub fn fix_value(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Number(q) => attached(q),
        ExprKind::Str(text) => notation::quoted(text),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Word(word) => word.clone(),
        ExprKind::List(items) => {
            let items: Vec<String> = items.iter().map(fix_value).collect();
            format!("[{}]", items.join(","))
        }
        ExprKind::Var(_) | ExprKind::Unary { .. } | ExprKind::Binary { .. } => {
            format!("({})", expr(e))
        }
        ExprKind::Call { .. } => expr(e),
    }
}

/// Canonical text of an expression: single spaces around binary operators,
/// parentheses only where precedence needs them.
pub fn expr(e: &Expr) -> String {
    let mut out = String::new();
    write_expr(e, &mut out, 0);
    out
}

fn precedence(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Binary { op, .. } => binary_precedence(*op),
        ExprKind::Unary {
            op: UnaryOp::Not, ..
        } => 3,
        ExprKind::Unary {
            op: UnaryOp::Neg, ..
        } => 7,
        _ => 8,
    }
}

fn binary_precedence(op: BinaryOp) -> u8 {
    match op {
        BinaryOp::Or => 1,
        BinaryOp::And => 2,
        BinaryOp::Cmp(_) => 4,
        BinaryOp::Add | BinaryOp::Sub => 5,
        BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => 6,
    }
}

fn write_expr(e: &Expr, out: &mut String, min_precedence: u8) {
    let own = precedence(e);
    let parenthesise = own < min_precedence;
    if parenthesise {
        out.push('(');
    }
    match &e.kind {
        ExprKind::Number(q) => out.push_str(&quantity(q)),
        ExprKind::Str(text) => out.push_str(&notation::quoted(text)),
        ExprKind::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        ExprKind::Word(word) | ExprKind::Var(word) => out.push_str(word),
        ExprKind::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_expr(item, out, 0);
            }
            out.push(']');
        }
        ExprKind::Unary { op, operand } => {
            match op {
                UnaryOp::Neg => out.push('-'),
                UnaryOp::Not => out.push_str("not "),
            }
            write_expr(operand, out, own);
        }
        ExprKind::Binary { op, lhs, rhs } => {
            // Comparisons do not chain, so both sides need a tighter operator.
            let left_min = if matches!(op, BinaryOp::Cmp(_)) {
                own + 1
            } else {
                own
            };
            write_expr(lhs, out, left_min);
            out.push(' ');
            out.push_str(op.symbol());
            out.push(' ');
            write_expr(rhs, out, own + 1);
        }
        ExprKind::Call { function, args } => {
            out.push_str(function);
            out.push('(');
            for (i, arg) in args.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_expr(arg, out, 0);
            }
            out.push(')');
        }
    }
    if parenthesise {
        out.push(')');
    }
}
