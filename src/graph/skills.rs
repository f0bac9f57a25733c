//! Skill declarations and membership: `skill <name> <kind> "title" trigger "…"` items
//! become [`SkillInfo`]s, `in <name>` clauses point entries at them. Checks the names
//! (a bundle directory name whose prefix matches the kind), duplicates, unknown
//! skills, skills nothing joins, and lessons that join none, whose grouping then falls
//! back to the operation they fix.

use std::collections::HashSet;

use petgraph::graph::NodeIndex;
use skillc_runtime::bundle::LessonKind;

use super::{Graph, NodeData, SkillInfo};
use crate::diag::{Code, Diagnostic};
use crate::syntax::{EntryKind, Name, SkillDecl, Span};

/// Longest skill directory name the Agent Skills specification accepts.
pub const NAME_MAX_CHARS: usize = 64;

/// The directory-name prefix each kind of skill carries, as in the reference system's
/// `opt-…` and `debug-…` skills.
pub fn prefix(kind: LessonKind) -> &'static str {
    match kind {
        LessonKind::Optimization => "opt-",
        LessonKind::Debugging => "debug-",
    }
}

/// The kind a `skill` declaration names: `opt` or `debug`.
fn kind_of(word: &str) -> Option<LessonKind> {
    match word {
        "opt" => Some(LessonKind::Optimization),
        "debug" => Some(LessonKind::Debugging),
        _ => None,
    }
}

/// Why `name` cannot be the directory of a skill of `kind`.
fn name_problem(name: &str, kind: LessonKind) -> Option<String> {
    let lower = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !lower || name.contains("--") || name.ends_with('-') {
        return Some(
            "a skill name is its bundle directory: lowercase letters, digits and single hyphens"
                .to_string(),
        );
    }
    if name.len() > NAME_MAX_CHARS {
        return Some(format!(
            "a skill name has at most {NAME_MAX_CHARS} characters (this one has {})",
            name.len()
        ));
    }
    let prefix = prefix(kind);
    let rest = name.strip_prefix(prefix).unwrap_or_default();
    if rest.is_empty() {
        return Some(format!(
            "the name of a{} skill starts with `{prefix}` and names its topic",
            match kind {
                LessonKind::Optimization => "n `opt`",
                LessonKind::Debugging => " `debug`",
            }
        ));
    }
    None
}

/// Checks one declaration and adds it to the graph; a name given twice keeps the first.
pub(super) fn declare(decl: SkillDecl, graph: &mut Graph, diagnostics: &mut Vec<Diagnostic>) {
    let Some(kind) = kind_of(&decl.kind.text) else {
        diagnostics.push(
            Diagnostic::new(
                Code::InvalidSkill,
                decl.kind.span,
                format!("`{}` is not a kind of skill", decl.kind.text),
            )
            .with_hint("write `opt` for an optimization skill or `debug` for a debugging skill"),
        );
        return;
    };
    if let Some(problem) = name_problem(&decl.name.text, kind) {
        diagnostics.push(
            Diagnostic::new(
                Code::InvalidSkill,
                decl.name.span,
                format!("`{}` cannot name a skill: {problem}", decl.name.text),
            )
            .with_hint("e.g. `skill debug-bo-corruption debug \"…\"` or `skill opt-merge-launches opt \"…\"`"),
        );
    }
    if decl.title.text.trim().is_empty() {
        diagnostics.push(
            Diagnostic::new(
                Code::InvalidSkill,
                decl.title.span,
                "a skill needs a title saying what it does",
            )
            .with_hint("e.g. \"Find why a kernel is right on the first call and wrong after\""),
        );
    }
    if decl.triggers.is_empty() {
        diagnostics.push(
            Diagnostic::new(
                Code::InvalidSkill,
                keyword_span(decl.span, "skill"),
                format!("skill `{}` names no situation that calls for it", decl.name.text),
            )
            .with_hint(
                "add `trigger \"…\"` with the message or symptom a failing run shows, word for word",
            ),
        );
    }
    for trigger in decl.triggers.iter().filter(|t| t.text.trim().is_empty()) {
        diagnostics.push(Diagnostic::new(
            Code::InvalidSkill,
            trigger.span,
            "empty trigger",
        ));
    }
    if let Some(first) = graph.skills.iter().find(|s| s.name == decl.name.text) {
        diagnostics.push(
            Diagnostic::new(
                Code::DuplicateSkill,
                decl.name.span,
                format!("skill `{}` is already declared", decl.name.text),
            )
            .with_related(first.span, "first declared here")
            .with_hint("declare each skill once; entries join it with `in <name>`"),
        );
        return;
    }
    graph.skills.push(SkillInfo {
        name: decl.name.text,
        kind,
        title: decl.title.text,
        triggers: decl.triggers.into_iter().map(|t| t.text).collect(),
        span: decl.span,
    });
}

/// Points each entry with an `in` clause at its skill; unknown names are reported
/// (with a suggestion), except those of declarations that failed to parse.
pub(super) fn resolve_memberships(
    graph: &mut Graph,
    memberships: Vec<(NodeIndex, Name)>,
    broken: &HashSet<String>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    for (index, name) in memberships {
        match graph.skills.iter().position(|s| s.name == name.text) {
            Some(skill) => graph.inner[index].skill = Some(skill),
            None if broken.contains(&name.text) => {}
            None => {
                let mut d = Diagnostic::new(
                    Code::UnknownSkill,
                    name.span,
                    format!("no skill `{}` is declared", name.text),
                );
                let names = graph.skills.iter().map(|s| s.name.as_str());
                d = match super::suggest::closest(&name.text, names) {
                    Some(close) => d.with_hint(format!("did you mean `{close}`?")),
                    None => d.with_hint(format!(
                        "declare it: `skill {} debug \"what it does\" trigger \"…\"`",
                        name.text
                    )),
                };
                diagnostics.push(d);
            }
        }
    }
}

/// Skills no lesson or action joins (they would be empty), and lessons that join no
/// skill (grouped by the operation they fix instead).
pub(super) fn warn_membership(graph: &Graph, diagnostics: &mut Vec<Diagnostic>) {
    let mut joined = vec![false; graph.skills.len()];
    for (_, node) in graph.nodes() {
        if let (Some(skill), EntryKind::Lesson | EntryKind::Action) = (node.skill, node.kind) {
            joined[skill] = true;
        }
    }
    for (skill, joined) in graph.skills.iter().zip(joined) {
        if !joined {
            diagnostics.push(
                Diagnostic::new(
                    Code::SkillWithoutMembers,
                    keyword_span(skill.span, "skill"),
                    format!("no lesson or action is `in {}`", skill.name),
                )
                .with_hint("add `in <name>` to the lessons and actions it teaches, or remove it"),
            );
        }
    }
    for (_, node) in graph.nodes() {
        if node.skill.is_some() || !matches!(node.data, NodeData::Lesson(_)) {
            continue;
        }
        let hint = if graph.skills.is_empty() {
            "declare the skill it teaches (`skill debug-… debug \"…\" trigger \"…\"`) and add `in <name>` to the lesson".to_string()
        } else {
            let names: Vec<String> = graph
                .skills
                .iter()
                .take(6)
                .map(|s| format!("`{}`", s.name))
                .collect();
            format!(
                "add `in <skill>` to the lesson; declared: {}",
                names.join(", ")
            )
        };
        diagnostics.push(
            Diagnostic::new(
                Code::LessonWithoutSkill,
                keyword_span(node.span, &node.id),
                format!(
                    "lesson `{}` joins no skill; the bundle groups it by the operation it fixes",
                    node.id
                ),
            )
            .with_hint(hint),
        );
    }
}

fn keyword_span(span: Span, word: &str) -> Span {
    Span {
        end: (span.start + word.len() as u32).min(span.end),
        ..span
    }
}

/// A valid skill name from any text: lowercase ASCII letters and digits, other runs
/// of characters become one hyphen, no hyphen at either end, cut at a hyphen to at
/// most 64 characters.
pub fn skill_name(raw: &str) -> String {
    let mut name = String::new();
    for c in raw.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            name.push(c);
        } else if !name.is_empty() && !name.ends_with('-') {
            name.push('-');
        }
    }
    while name.len() > NAME_MAX_CHARS {
        match name[..NAME_MAX_CHARS].rfind('-') {
            Some(cut) if cut > 0 => name.truncate(cut),
            _ => name.truncate(NAME_MAX_CHARS),
        }
    }
    let name = name.trim_end_matches('-').to_string();
    if name.is_empty() {
        "unnamed".to_string()
    } else {
        name
    }
}
