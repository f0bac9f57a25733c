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

use crate::bundle::{Lesson, LessonKind, Remedy, SkillSet, Symptom, Value};
use crate::exec::gates::gate::GateCheck;
use crate::notation;
use crate::ops::{is_keyword, OpKind, Unit};
use crate::phase::DeployPhase;

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

    pub fn session(&mut self, timestamp: &str, phase: DeployPhase, title: &str) {
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
        let mut line = format!("{id} action {}", notation::call(op, params));
        push_refs(&mut line, "after", &links.after);
        push_refs(&mut line, "supersedes", &links.supersedes);
        if !links.fixes.is_empty() {
            push_refs(&mut line, "fixes", &links.fixes);
            if let Some(by) = links.by {
                let _ = write!(line, " by {by}");
            }
        }
        let _ = writeln!(self.text, "{}", notation::wrap(&line));
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
            if g.metric.language().is_none() {
                // Not a metric of the vocabulary: kept as text, never lost.
                labels.push(g.summary());
            } else if g.value.is_finite() && g.threshold.is_finite() {
                let _ = write!(
                    measurements,
                    " {} = {} {} {}",
                    g.metric,
                    figure(g.value, g.unit),
                    g.comparison.symbol(),
                    figure(g.threshold, g.unit)
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
                    let _ = write!(line, " {}={}", notation::key(k), notation::value(v));
                }
            }
        }
        let passed = gates.iter().all(|g| g.passed);
        line.push_str(if passed { " -> pass" } else { " -> fail" });
        if let Some(after) = after {
            let _ = write!(line, " after {after}");
        }
        let _ = writeln!(self.text, "{}", notation::wrap(&line));
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
        let _ = writeln!(self.text, "{}", notation::wrap(&line));
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
            text => writeln!(
                out,
                "    fix {} {}",
                quote(text),
                notation::remedy(&lesson.fix)
            ),
        };
        for remedy in &lesson.then {
            let _ = writeln!(out, "    {}", fix(remedy));
        }
        if !lesson.symptom.params.is_empty() {
            let mut when = String::from("    when");
            for (k, v) in &lesson.symptom.params {
                let _ = write!(when, " {}={}", notation::key(k), notation::value(v));
            }
            let _ = writeln!(out, "{when}");
        }
        if let Some(condition) = &lesson.condition {
            let _ = writeln!(out, "    if {}", notation::condition(condition));
        }
        if let Some(format) = lesson.weights {
            // Restated on the weights it was recorded on, so the next build keeps them.
            let _ = writeln!(out, "    weights {}", crate::ops::formats::word(format));
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
        let _ = writeln!(self.text, "{}", notation::wrap(&line));
        id
    }

    pub fn decision(&mut self, text: &str, reverts: &[&str]) -> String {
        let id = self.id('d');
        let mut line = format!("{id} decision {}", quote(text));
        push_refs(&mut line, "reverts", reverts);
        let _ = writeln!(self.text, "{}", notation::wrap(&line));
        id
    }
}

fn push_refs(line: &mut String, clause: &str, ids: &[&str]) {
    if !ids.is_empty() {
        let _ = write!(line, " {clause} {}", ids.join(" "));
    }
}

/// `"text"` with the language's escapes.
fn quote(text: &str) -> String {
    notation::quoted(text)
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

/// A figure of this run at the precision the trajectory records it with: six
/// decimals at ordinary magnitudes, six significant digits beyond 1e-4..1e9.
/// Printing is the language printer's ([`notation::number`]).
fn recorded(v: f64) -> f64 {
    if !v.is_finite() || (v.fract() == 0.0 && v.abs() < 1e15) {
        return v;
    }
    let text = if (1e-4..1e9).contains(&v.abs()) {
        format!("{v:.6}")
    } else {
        format!("{v:.5e}")
    };
    text.parse().unwrap_or(v)
}

/// A measured or modeled figure with its unit, as an observation writes it.
fn figure(v: f64, unit: Option<Unit>) -> String {
    notation::quantity(recorded(v), unit)
}

fn symptom(s: &Symptom) -> String {
    let mut out = String::new();
    if !s.text.is_empty() {
        let _ = write!(out, " {}", quote(&s.text));
    }
    if let Some(op) = &s.op {
        let _ = write!(out, " {op} fails");
    }
    if let (Some(metric), Some(cmp), Some(v)) = (s.metric, s.comparison, s.value) {
        let check = notation::check(metric, cmp, v, metric.canonical_unit());
        let _ = write!(out, " with {check}");
    }
    out
}

/// `fix op key=value …`.
pub fn fix(remedy: &Remedy) -> String {
    format!("fix {}", notation::remedy(remedy))
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
    fn figures_are_recorded_at_six_digits() {
        let shown = |v: f64| figure(v, None);
        assert_eq!(shown(0.99), "0.99");
        assert_eq!(shown(0.999_876_543_21), "0.999877");
        assert_eq!(shown(3.0e-6), "3e-6");
        assert_eq!(shown(1.234_567_89e-7), "1.23457e-7");
        assert_eq!(shown(2048.0), "2048");
        assert_eq!(shown(-0.5), "-0.5");
        assert_eq!(shown(1.25e20), "1.25e20");
        assert_eq!(figure(12.345_678_9, Some(Unit::Ms)), "12.345679 ms");
    }
}
