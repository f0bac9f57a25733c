//! Writes the run as a trajectory in the language of `grammar/README.md`, so the next
//! `skillc build` can learn from it: one session per phase, every executed step as an
//! action, every gate as an observation (emulated numerics `measured` on the
//! emulator, cost-model figures `modeled`), and every bundle lesson the run applied
//! restated with this run's failing observation as new evidence and the repairing
//! action linked by `fixes … by …`. Lessons are restated with the bundle's symptom
//! and fix unchanged, which is what lets the distiller merge them and add up evidence.
//!
//! Ids are prefixed with the run's slug (`qwen2.5-0.5b.a12`) so the run can be built
//! together with other trajectories without collisions.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::bundle::{BinaryOp, Expr, Lesson, LessonKind, Remedy, SkillSet, Symptom, Value};
use crate::exec::checks::gate::GateCheck;
use crate::ops::is_keyword;
use crate::ops::OpKind;

/// Builds the text of one `.traj` file.
#[derive(Debug, Clone)]
pub struct TrajectoryWriter {
    prefix: String,
    next: u32,
    text: String,
    /// Skills already declared in this file.
    declared: BTreeSet<String>,
}

/// Links of a new action.
#[derive(Debug, Clone, Default)]
pub struct ActionLinks<'a> {
    pub after: Vec<&'a str>,
    pub fixes: Vec<&'a str>,
    pub by: Option<&'a str>,
    pub supersedes: Vec<&'a str>,
}

impl TrajectoryWriter {
    /// Starts the file with its header. `slug` prefixes every id.
    pub fn new(name: &str, slug: &str, model: &str, baseline: &str) -> Self {
        let mut text = String::new();
        let _ = writeln!(
            text,
            "# Written by `skillc deploy`: the record of one run, in the trajectory language.\n"
        );
        let _ = writeln!(text, "trajectory {}", quote(name));
        let _ = writeln!(text, "  model {}", quote(model));
        let _ = writeln!(text, "  target npu2");
        let _ = writeln!(text, "  baseline {}", quote(baseline));
        Self {
            prefix: id_slug(slug),
            next: 1,
            text,
            declared: BTreeSet::new(),
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    fn id(&mut self, kind: char) -> String {
        let id = format!("{}.{kind}{}", self.prefix, self.next);
        self.next += 1;
        id
    }

    pub fn session(&mut self, timestamp: &str, phase: u8, title: &str) {
        let _ = writeln!(
            self.text,
            "\nsession {timestamp} phase {phase} {}",
            quote(title)
        );
    }

    pub fn action(
        &mut self,
        op: OpKind,
        params: &BTreeMap<String, Value>,
        links: &ActionLinks<'_>,
    ) -> String {
        let id = self.id('a');
        let mut line = format!("{id} action {op}");
        for (k, v) in params {
            let _ = write!(line, " {k}={}", value(v));
        }
        push_refs(&mut line, "after", &links.after);
        push_refs(&mut line, "supersedes", &links.supersedes);
        if !links.fixes.is_empty() {
            push_refs(&mut line, "fixes", &links.fixes);
            if let Some(by) = links.by {
                let _ = write!(line, " by {by}");
            }
        }
        let _ = writeln!(self.text, "{}", wrap(&line));
        id
    }

    /// One observation holding `gates` (all measured under the same conditions of the
    /// first one); the verdict is the conjunction.
    pub fn observe(
        &mut self,
        label: Option<&str>,
        gates: &[&GateCheck],
        after: Option<&str>,
    ) -> String {
        let id = self.id('o');
        let modeled = gates.iter().any(|g| g.modeled);
        let mut line = format!(
            "{id} observe {}",
            if modeled { "modeled" } else { "measured" }
        );
        let mut labels: Vec<String> = label.map(str::to_string).into_iter().collect();
        let mut measurements = String::new();
        for g in gates {
            let known = crate::ops::metric_spec(&g.metric).is_some();
            if !known {
                // Not a metric of the vocabulary: kept as text, never lost.
                labels.push(g.summary());
            } else if g.value.is_finite() && g.threshold.is_finite() {
                let unit = unit(&g.unit);
                let _ = write!(
                    measurements,
                    " {} = {}{unit} {} {}{unit}",
                    g.metric,
                    number(g.value),
                    g.comparison.symbol(),
                    number(g.threshold)
                );
            } else {
                labels.push(format!("{} is not finite", g.metric));
            }
        }
        if !labels.is_empty() {
            let _ = write!(line, " {}", quote(&labels.join("; ")));
        }
        line.push_str(&measurements);
        if let Some(first) = gates.first() {
            if !first.conditions.is_empty() {
                line.push_str(" when");
                for (k, v) in &first.conditions {
                    let _ = write!(line, " {}={}", key(k), value(v));
                }
            }
        }
        let passed = gates.iter().all(|g| g.passed);
        line.push_str(if passed { " -> pass" } else { " -> fail" });
        if let Some(after) = after {
            let _ = write!(line, " after {after}");
        }
        let _ = writeln!(self.text, "{}", wrap(&line));
        id
    }

    /// An observation with only a verdict, e.g. the scope check.
    pub fn verdict(&mut self, label: &str, passed: bool, after: Option<&str>) -> String {
        let id = self.id('o');
        let mut line = format!(
            "{id} observe measured {} {}",
            quote(label),
            if passed { "-> pass" } else { "-> fail" }
        );
        if let Some(after) = after {
            let _ = write!(line, " after {after}");
        }
        let _ = writeln!(self.text, "{}", wrap(&line));
        id
    }

    /// Restates a bundle lesson with new evidence, in the bundle skill it belongs to
    /// when that skill was declared (its declaration is restated once per file).
    pub fn lesson(
        &mut self,
        lesson: &Lesson,
        skill: Option<&SkillSet>,
        evidence: &[&str],
    ) -> String {
        let skill = skill.filter(|s| !s.title.is_empty() && !s.triggers.is_empty());
        if let Some(skill) = skill.filter(|s| !self.declared.contains(&s.name)) {
            self.declared.insert(skill.name.clone());
            let kind = match skill.kind {
                LessonKind::Optimization => "opt",
                LessonKind::Debugging => "debug",
            };
            let _ = writeln!(
                self.text,
                "skill {} {kind} {}",
                skill.name,
                quote(&skill.title)
            );
            for trigger in &skill.triggers {
                let _ = writeln!(self.text, "  trigger {}", quote(trigger));
            }
        }
        let id = self.id('l');
        let mut out = format!("{id} lesson {}\n", quote(&lesson.title));
        let _ = writeln!(out, "    symptom{}", symptom(&lesson.symptom));
        if !lesson.cause.is_empty() {
            let _ = writeln!(out, "    cause {}", quote(&lesson.cause));
        }
        let _ = match lesson.fix_text.as_str() {
            "" => writeln!(out, "    {}", fix(&lesson.fix)),
            text => writeln!(out, "    fix {} {}", quote(text), &fix(&lesson.fix)[4..]),
        };
        for remedy in &lesson.then {
            let _ = writeln!(out, "    {}", fix(remedy));
        }
        if !lesson.symptom.params.is_empty() {
            let mut when = String::from("    when");
            for (k, v) in &lesson.symptom.params {
                let _ = write!(when, " {}={}", key(k), value(v));
            }
            let _ = writeln!(out, "{when}");
        }
        if !evidence.is_empty() {
            let _ = writeln!(out, "    evidence {}", evidence.join(" "));
        }
        if let Some(skill) = skill {
            let _ = writeln!(out, "    in {}", skill.name);
        }
        self.text.push_str(&out);
        id
    }

    pub fn note(&mut self, text: &str, about: &[&str]) -> String {
        let id = self.id('n');
        let mut line = format!("{id} note {}", quote(text));
        push_refs(&mut line, "about", about);
        let _ = writeln!(self.text, "{}", wrap(&line));
        id
    }

    pub fn decision(&mut self, text: &str, reverts: &[&str]) -> String {
        let id = self.id('d');
        let mut line = format!("{id} decision {}", quote(text));
        push_refs(&mut line, "reverts", reverts);
        let _ = writeln!(self.text, "{}", wrap(&line));
        id
    }
}

fn push_refs(line: &mut String, clause: &str, ids: &[&str]) {
    if !ids.is_empty() {
        let _ = write!(line, " {clause} {}", ids.join(" "));
    }
}

/// Breaks a long entry before clause keywords so it reads like a hand-written one.
fn wrap(line: &str) -> String {
    if line.len() <= 100 {
        return line.to_string();
    }
    let mut out = String::new();
    let mut in_string = false;
    let mut current = String::new();
    for token in line.split(' ') {
        if token.starts_with('"') && !(token.len() > 1 && token.ends_with('"')) {
            in_string = true;
        } else if in_string && token.ends_with('"') {
            in_string = false;
        }
        let breaks = !in_string && current.len() > 60 && is_clause(token);
        if breaks {
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

fn is_clause(token: &str) -> bool {
    matches!(
        token,
        "when" | "after" | "fixes" | "supersedes" | "reverts" | "about" | "->"
    )
}

/// `"text"` with the language's escapes.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An id prefix that is a valid id token: starts with a letter, then letters,
/// digits, `_`, `-`, `.`.
pub fn id_slug(name: &str) -> String {
    let mut slug: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    slug = slug
        .trim_matches(|c| matches!(c, '-' | '.' | '_'))
        .to_string();
    if !slug.starts_with(|c: char| c.is_ascii_alphabetic()) {
        slug.insert_str(0, "run-");
    }
    if slug.is_empty() || is_keyword(&slug) {
        slug = format!("run-{slug}");
    }
    slug
}

fn key(k: &str) -> String {
    let valid = k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        k.to_string()
    } else {
        k.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect()
    }
}

fn unit(u: &str) -> String {
    if u.is_empty() {
        String::new()
    } else {
        format!(" {u}")
    }
}

/// A number in the language's syntax (no `inf`, no `NaN`, no `+`).
pub fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e9).contains(&a) {
        // Six significant digits, then the shortest form of that.
        let rounded: f64 = format!("{v:.5e}").parse().unwrap_or(v);
        return format!("{rounded:e}");
    }
    let s = format!("{v:.6}");
    let trimmed = s.trim_end_matches('0').trim_end_matches('.');
    if trimmed == "0" || trimmed == "-0" {
        format!("{v:e}")
    } else {
        trimmed.to_string()
    }
}

fn is_word(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !is_keyword(s)
}

/// A parameter value.
pub fn value(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => number(*f),
        Value::IntList(list) => format!(
            "[{}]",
            list.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
        Value::Text(t) if is_word(t) => t.clone(),
        Value::Text(t) => quote(t),
        Value::Quantity { value, unit } => format!("{} {unit}", number(*value)),
    }
}

fn symptom(s: &Symptom) -> String {
    let mut out = String::new();
    if !s.text.is_empty() {
        let _ = write!(out, " {}", quote(&s.text));
    }
    if let Some(op) = &s.op {
        let _ = write!(out, " {op} fails");
    }
    if let (Some(metric), Some(cmp), Some(v)) = (&s.metric, s.comparison, s.value) {
        let u = crate::ops::metric_spec(metric)
            .map(|m| m.canonical_unit)
            .unwrap_or("");
        let _ = write!(
            out,
            " with {metric} {} {}{}",
            cmp.symbol(),
            number(v),
            unit(u)
        );
    }
    out
}

/// `fix op key=value …`.
pub fn fix(remedy: &Remedy) -> String {
    let mut out = format!("fix {}", remedy.op);
    for (k, e) in &remedy.set {
        let _ = write!(out, " {k}={}", fix_value(e));
    }
    out
}

fn fix_value(e: &Expr) -> String {
    match e {
        Expr::Lit(v) => value(v),
        Expr::Var(_) | Expr::Binary { .. } => format!("({})", expr(e)),
        Expr::Call { .. } => expr(e),
    }
}

fn expr(e: &Expr) -> String {
    match e {
        Expr::Lit(v) => value(v),
        Expr::Var(name) => name.clone(),
        Expr::Binary { op, lhs, rhs } => {
            let sym = match op {
                BinaryOp::Add => "+",
                BinaryOp::Sub => "-",
                BinaryOp::Mul => "*",
                BinaryOp::Div => "/",
                BinaryOp::Rem => "%",
            };
            format!("{} {sym} {}", operand(lhs), operand(rhs))
        }
        Expr::Call { func, args } => format!(
            "{func}({})",
            args.iter().map(expr).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn operand(e: &Expr) -> String {
    match e {
        Expr::Binary { .. } => format!("({})", expr(e)),
        _ => expr(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_ids() {
        assert_eq!(id_slug("Qwen2.5-0.5B"), "qwen2.5-0.5b");
        assert_eq!(id_slug("3b model"), "run-3b-model");
        assert_eq!(id_slug("fix"), "run-fix");
    }

    #[test]
    fn numbers_use_the_language_syntax() {
        assert_eq!(number(0.99), "0.99");
        assert_eq!(number(3.0e-6), "3e-6");
        assert_eq!(number(2048.0), "2048");
        assert_eq!(number(-0.5), "-0.5");
        assert_eq!(number(1.25e20), "1.25e20");
    }

    #[test]
    fn values_quote_what_is_not_a_word() {
        assert_eq!(value(&Value::Text("gemm".into())), "gemm");
        assert_eq!(value(&Value::Text("two words".into())), "\"two words\"");
        assert_eq!(value(&Value::Text("pass".into())), "\"pass\"");
        assert_eq!(value(&Value::IntList(vec![8, 4])), "[8,4]");
    }
}
