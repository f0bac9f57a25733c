//! The printer of the skill IR: its typed pieces (calls, predicates, symptoms,
//! failed checks, conditions, remedies, distilled lesson titles, descriptions) in
//! trajectory notation and in the words the pages and `bundle.json` use. Values go
//! through the language printer ([`skillc_runtime::notation`]); nothing here is stored back in the IR.

use std::collections::BTreeMap;

use skillc_runtime::bundle::{Baseline, Condition, LessonKind, Provenance, Remedy, Symptom, Value};
use skillc_runtime::notation;
use skillc_runtime::ops::{self, formats, FormatDependence, OpKind, WeightFormat};

use crate::distill::ir::{
    CheckIr, DeadEndIr, DeadEndOutcome, GateIr, LessonIr, LessonOrigin, PredicateIr, SkillIr,
    SkillSetIr, SymptomIr, TargetIr,
};

/// What an agent does with a step or fix (`what`) recorded on `format` when the
/// weights in front of it are another format: `recorded on bf16 weights (why it
/// matters); on 4-bit weights re-derive its values from their footprint (phase 1
/// re-validates them)`, or measure a figure again.
pub fn weights_advice(format: WeightFormat, op: OpKind, what: &str) -> String {
    let why = match op.spec().weights {
        FormatDependence::Depends(why) => format!(" ({why})"),
        FormatDependence::Independent => String::new(),
    };
    let other = if formats::is_four_bit(format) {
        "bf16"
    } else {
        "4-bit"
    };
    let word = formats::word(format);
    if op.measures() {
        return format!("recorded on {word} weights{why}; on {other} weights measure it again");
    }
    format!(
        "recorded on {word} weights{why}; on {other} weights re-derive {what} values from their footprint (phase 1 re-validates them)"
    )
}

/// `op key=value …`.
pub fn call(op: OpKind, params: &BTreeMap<String, Value>) -> String {
    notation::call(op, params)
}

/// `metric cmp value unit`.
pub fn predicate(p: &PredicateIr) -> String {
    format!(
        "{} {} {}",
        p.metric,
        p.cmp.symbol(),
        notation::quantity(p.value, p.unit)
    )
}

/// A whole symptom as the language writes it: `op(params) fails with p and q`; the
/// machine symptom when nothing else was written.
pub fn symptom(s: &SymptomIr) -> String {
    let mut line = String::new();
    if let Some(op) = s.op {
        line.push_str(op.name());
        if !s.params.is_empty() {
            line.push_str(&format!("({})", notation::params(Some(op), &s.params)));
        }
        line.push_str(" fails");
    }
    let predicates: Vec<String> = s.predicates.iter().map(predicate).collect();
    if !predicates.is_empty() {
        if !line.is_empty() {
            line.push_str(" with ");
        }
        line.push_str(&predicates.join(" and "));
    }
    line
}

/// The machine-matchable symptom (`bundle.json` holds one predicate):
/// `op(params) fails with metric cmp value`.
pub fn machine(s: &Symptom) -> String {
    let mut out = String::new();
    if let Some(op) = s.op {
        out.push_str(op.name());
        if !s.params.is_empty() {
            out.push_str(&format!("({})", notation::params(Some(op), &s.params)));
        }
        out.push_str(" fails");
    }
    if let (Some(metric), Some(cmp), Some(v)) = (s.metric, s.comparison, s.value) {
        if !out.is_empty() {
            out.push_str(" with ");
        }
        out.push_str(&notation::check(metric, cmp, v, metric.canonical_unit()));
    }
    out
}

/// A failed observation: `metric = value cmp threshold -> fail`.
pub fn check(c: &CheckIr) -> String {
    let mut parts: Vec<String> = c
        .measurements
        .iter()
        .map(|(value, threshold)| {
            let mut text = format!(
                "{} = {}",
                value.metric,
                notation::quantity(value.value, value.unit)
            );
            if let Some(t) = threshold {
                text.push_str(&format!(
                    " {} {}",
                    t.cmp.symbol(),
                    notation::quantity(t.value, t.unit)
                ));
            }
            text
        })
        .collect();
    if parts.is_empty() && !c.label.is_empty() {
        parts.push(notation::quoted(&c.label));
    }
    parts.push("-> fail".to_string());
    parts.join(" ")
}

/// A cause condition in the remedy expression language.
pub fn condition(lesson: &LessonIr) -> Option<String> {
    lesson.cause_condition.as_ref().map(crate::graph::expr_text)
}

/// `op key=expr …` for every fix clause, joined by `, then `.
pub fn remedies(lesson: &LessonIr) -> Vec<String> {
    std::iter::once(&lesson.fix)
        .chain(&lesson.then)
        .map(remedy)
        .collect()
}

pub fn remedy(r: &Remedy) -> String {
    notation::remedy(r)
}

/// The dead end a lesson was distilled from.
pub fn origin<'a>(ir: &'a SkillIr, lesson: &LessonIr) -> Option<&'a DeadEndIr> {
    let LessonOrigin::DeadEnd(id) = &lesson.origin else {
        return None;
    };
    ir.phases
        .iter()
        .flat_map(|p| &p.dead_ends)
        .find(|d| &d.id == id)
}

/// A lesson's title: as recorded, or what its dead end says.
pub fn title(ir: &SkillIr, lesson: &LessonIr) -> String {
    match origin(ir, lesson) {
        None => lesson.title.clone(),
        Some(d) => {
            let failed: Vec<String> = d.failed.iter().map(check).collect();
            let by = match &d.outcome {
                DeadEndOutcome::Superseded { by } | DeadEndOutcome::Reverted { by } => by.clone(),
                DeadEndOutcome::Failed => String::new(),
            };
            format!(
                "tried `{}`; it failed ({}) and `{by}` replaced it",
                call(d.op, &d.params),
                failed.join("; ")
            )
        }
    }
}

/// What calls for a skill, in one line: its literal triggers when declared, else the
/// runtime's checks that show its lessons' symptoms.
pub fn trigger(skill: &SkillSetIr) -> String {
    if skill.triggers.is_empty() {
        let patterns: Vec<String> = skill.patterns.iter().map(machine).collect();
        patterns.join("; or ")
    } else {
        skill.triggers.join("; ")
    }
}

/// What a skill does: its declared title, else a sentence from its kind and name.
pub fn skill_title(skill: &SkillSetIr) -> String {
    if !skill.title.is_empty() {
        return skill.title.clone();
    }
    match skill.kind {
        LessonKind::Debugging => format!(
            "Find and fix what {} shows",
            skill.name.trim_start_matches("debug-").replace('-', " ")
        ),
        LessonKind::Optimization => format!(
            "Apply {}",
            skill.name.trim_start_matches("opt-").replace('-', " ")
        ),
    }
}

/// The front matter description of a skill: what it does, then when to use it in the
/// words a failing run prints.
pub fn skill_description(skill: &SkillSetIr, sources: &str) -> String {
    let when = trigger(skill);
    let title = skill_title(skill);
    let title = title.trim_end_matches('.');
    let lead = match skill.kind {
        LessonKind::Debugging => "Use when a run shows",
        LessonKind::Optimization => "Use when",
    };
    if when.is_empty() {
        format!("{title}. For LLM deployment on AMD XDNA 2 (npu2); distilled from {sources}.")
    } else {
        format!(
            "{title}. {lead}: {when}. For LLM deployment on AMD XDNA 2 (npu2); distilled from {sources}."
        )
    }
}

/// How to confirm a hypothesis before applying its fix: its cause condition, else
/// its symptom as recorded, else the failing check in trajectory notation.
pub fn hypothesis_check(lesson: &LessonIr) -> String {
    [
        condition(lesson),
        Some(lesson.symptom.text.clone()),
        Some(symptom(&lesson.symptom)),
    ]
    .into_iter()
    .flatten()
    .find(|c| !c.is_empty())
    .unwrap_or_else(|| "the symptom as recorded".to_string())
}

/// What a gate reads (`validate-kernel(kernel=gemm)`) and what it requires
/// (`mismatches == 0`, or the comparison with the previous phase's figure).
pub fn gate(g: &GateIr) -> (String, String) {
    let subject = match g.op {
        Some(op) if g.conditions.is_empty() => op.name().to_string(),
        Some(op) => format!("{op}({})", notation::params(Some(op), &g.conditions)),
        None if g.conditions.is_empty() => "any check".to_string(),
        None => notation::params(None, &g.conditions),
    };
    let check = match g.baseline {
        Baseline::Absolute if g.op == Some(OpKind::ValidateKernel) => format!(
            "{} at every call site",
            notation::check(g.metric, g.comparison, g.threshold, g.unit)
        ),
        Baseline::Absolute => notation::check(g.metric, g.comparison, g.threshold, g.unit),
        Baseline::PreviousPhase => format!(
            "{} {} the previous phase's figure",
            g.metric,
            g.comparison.symbol()
        ),
    };
    (subject, check)
}

/// The figure a gate recorded when it passed, with where it came from.
pub fn recorded(g: &GateIr) -> String {
    let sites = match g.provenance.len() {
        n if n > 1 && g.op == Some(OpKind::ValidateKernel) => {
            format!("; passed in {n} recorded validations")
        }
        _ => String::new(),
    };
    match g.recorded {
        Some(v) => format!(
            "{} ({}){sites}",
            notation::quantity(v, g.unit),
            g.recorded_source.as_str()
        ),
        None => "no value recorded".to_string(),
    }
}

/// `metric = value unit`.
pub fn target(t: &TargetIr) -> String {
    format!("{} = {}", t.metric, notation::quantity(t.value, t.unit))
}

/// Parameters as `key=value` in the operation's declared order.
pub fn params(op: Option<OpKind>, params: &BTreeMap<String, Value>) -> String {
    notation::params(op, params)
}

/// `llama1b` or `llama1b, qwen05b`: where the bundle was distilled from.
pub fn sources(ir: &SkillIr) -> String {
    let names: Vec<&str> = ir.sources.iter().map(|s| s.trajectory.as_str()).collect();
    if names.is_empty() {
        "no trajectory".to_string()
    } else {
        names.join(", ")
    }
}

/// A lesson's condition in the words of `config.json`: the condition as written,
/// then what each name it reads is and where it comes from.
pub fn condition_words(condition: &Condition) -> String {
    let names: Vec<String> = condition
        .names()
        .iter()
        .filter_map(|n| ops::fact_spec(n))
        .map(|spec| format!("`{}`: {}, from {}", spec.name, spec.doc, spec.source))
        .collect();
    format!(
        "models where `{}` holds ({})",
        notation::condition(condition),
        names.join("; ")
    )
}

/// `llama1b (meta-llama/Llama-3.2-1B)`, for each deployment a lesson came from.
pub fn deployments(ir: &SkillIr, names: &[String]) -> String {
    names
        .iter()
        .map(
            |name| match ir.sources.iter().find(|s| &s.trajectory == name) {
                Some(s) if s.model != *name => format!("{name} (`{}`)", s.model),
                _ => name.clone(),
            },
        )
        .collect::<Vec<_>>()
        .join(", ")
}

/// The model of the deployment a lesson or a figure came from (its first).
pub fn model_of<'a>(ir: &'a SkillIr, deployment: &'a str) -> &'a str {
    ir.sources
        .iter()
        .find(|s| s.trajectory == deployment)
        .map_or(deployment, |s| s.model.as_str())
}

/// The deployment a provenance record belongs to: its file's first component.
pub fn deployment_of(p: &Provenance) -> &str {
    p.file.split('/').next().unwrap_or_default()
}

/// The symptom's thresholds on performance figures: each was one model's
/// measurement, not a rule of the hardware.
pub fn measured_thresholds(lesson: &LessonIr) -> Vec<String> {
    lesson
        .symptom
        .predicates
        .iter()
        .filter(|p| crate::distill::skills::is_performance_metric(p.metric))
        .map(predicate)
        .collect()
}

/// A fix recorded without words: the operation, what it does and the parameters it
/// sets, as formulas of the model's sizes.
pub fn fix_formula(r: &Remedy) -> String {
    let spec = r.op.spec();
    let set: Vec<String> = notation::ordered_keys(Some(r.op), r.set.keys().map(String::as_str))
        .into_iter()
        .filter_map(|k| {
            r.set
                .get(k)
                .map(|e| format!("{k}={}", notation::fix_value(e)))
        })
        .collect();
    if set.is_empty() {
        format!("`{}`: {}", r.op, spec.doc)
    } else {
        format!("`{}` with `{}`: {}", r.op, set.join(" "), spec.doc)
    }
}
