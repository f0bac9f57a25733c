//! Debugging lessons applied to failed gates: which lessons a failure matches
//! (symptom → hypotheses, in the bundle's order) and what parameters a lesson's fix
//! produces when its remedy expressions are evaluated against the failing action.
//!
//! Matching reads only structured fields (the failing operation, the lesson's
//! conditions, the metric predicate); a lesson's free text is never interpreted.
//! Conditions that describe where a lesson was recorded rather than what it is about
//! (the shape, the model, the layer, tolerances) are not required to match: a lesson
//! learnt on one model's shapes is meant for the next model's.

use std::collections::BTreeMap;

use super::gate::GateCheck;
use crate::bundle::{
    Bundle, EvalError, Expr, Lesson, LessonKind, Remedy, Value, RECORDING_CONDITIONS,
};
use crate::exec::phases::DeployPhase;
use crate::ops::{Facts, OpKind};

/// A failed gate with the parameters of the action it measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub phase: DeployPhase,
    pub gate: GateCheck,
    /// The failing action's operation (`select-tiling` for a placement refusal,
    /// `validate-kernel`, `validate-block`, `verify-model`, …).
    pub op: OpKind,
    /// Its parameters (kernel, shape, herd, tile, precision, …).
    pub params: BTreeMap<String, Value>,
}

/// Does `lesson`'s symptom describe `failure`?
pub fn symptom_matches(lesson: &Lesson, failure: &Failure) -> bool {
    let symptom = &lesson.symptom;
    if let Some(op) = &symptom.op {
        if op != &failure.op && op != &failure.gate.op {
            return false;
        }
    }
    for (key, expected) in &symptom.params {
        if RECORDING_CONDITIONS.contains(&key.as_str()) {
            continue;
        }
        let actual = failure
            .params
            .get(key)
            .or_else(|| failure.gate.conditions.get(key));
        if actual != Some(expected) {
            return false;
        }
    }
    if let Some(metric) = &symptom.metric {
        if failure.gate.metric != *metric {
            return false;
        }
        if let (Some(cmp), Some(limit)) = (symptom.comparison, symptom.value) {
            if !cmp.holds(failure.gate.value, limit) {
                return false;
            }
        }
    }
    symptom.op.is_some() || symptom.metric.is_some() || !symptom.params.is_empty()
}

/// Debugging lessons in the order an engineer would try them: the hypotheses of the
/// debugging skill sets in order, then any other debugging lesson by id.
pub fn debugging_order(bundle: &Bundle) -> Vec<&Lesson> {
    fn push<'b>(lesson: &'b Lesson, order: &mut Vec<&'b Lesson>) {
        if !order.iter().any(|l| l.id == lesson.id) {
            order.push(lesson);
        }
    }
    let mut order: Vec<&Lesson> = Vec::new();
    for skill in bundle
        .skills
        .iter()
        .filter(|s| s.kind == LessonKind::Debugging)
    {
        for h in &skill.hypotheses {
            if let Some(lesson) = bundle.lessons.get(&h.lesson) {
                if lesson.kind == LessonKind::Debugging {
                    push(lesson, &mut order);
                }
            }
        }
    }
    for lesson in bundle.lessons.values() {
        if lesson.kind == LessonKind::Debugging {
            push(lesson, &mut order);
        }
    }
    order
}

/// The lessons whose symptom matches, in trial order.
pub fn candidates<'b>(bundle: &'b Bundle, failure: &Failure) -> Vec<&'b Lesson> {
    debugging_order(bundle)
        .into_iter()
        .filter(|l| symptom_matches(l, failure))
        .collect()
}

/// Why a lesson that matched a failure is not applied to this model.
#[derive(Debug, Clone, PartialEq)]
pub struct NotForThisModel {
    /// The condition as the language writes it after `if`.
    pub condition: String,
    /// The model's values of the names it reads (`qk_norm = false`).
    pub values: Vec<String>,
}

/// Whether `lesson` is for a model with these features: its condition holds (or it
/// has none). A condition the model's features cannot decide (a name a hand-edited
/// bundle made up) does not hold: a lesson is applied only where it is known to be
/// meant.
pub fn for_this_model(lesson: &Lesson, facts: &Facts) -> Result<(), NotForThisModel> {
    let Some(condition) = &lesson.condition else {
        return Ok(());
    };
    match condition.holds(facts.values()) {
        Ok(true) => Ok(()),
        Ok(false) | Err(_) => Err(NotForThisModel {
            condition: crate::notation::condition(condition),
            values: condition
                .names()
                .iter()
                .map(|n| facts.describe(n))
                .collect(),
        }),
    }
}

/// Why a fix could not be evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RemedyError {
    #[error("`{op}` has no parameter or slot `{key}`")]
    UnknownParameter { op: OpKind, key: String },
    #[error("the action has no `{param}` to change slot `{key}` of")]
    MissingList { param: String, key: String },
    #[error("`{key}`: {source}")]
    Evaluation {
        key: String,
        #[source]
        source: EvaluationError,
    },
}

/// Why one assignment of a fix has no usable value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvaluationError {
    #[error(transparent)]
    Expr(#[from] EvalError),
    #[error("evaluates to {0}")]
    NotFinite(f64),
    #[error("a list slot needs a number")]
    NotANumber,
}

/// Applies `remedy` to the parameters of the action it fixes: every assignment is
/// evaluated with the action's parameters, their list slots and the model's sizes as
/// variables (`divisor` capped by the value being replaced), and the new parameter
/// map is returned.
pub fn apply_remedy(
    remedy: &Remedy,
    action: &BTreeMap<String, Value>,
    model_vars: &BTreeMap<String, f64>,
) -> Result<BTreeMap<String, Value>, RemedyError> {
    let spec = remedy.op.spec();
    let mut vars = model_vars.clone();
    vars.extend(action_vars(remedy.op, action));
    let mut out = action.clone();
    for (key, expr) in &remedy.set {
        let (param, slot) =
            spec.resolve_param(key)
                .ok_or_else(|| RemedyError::UnknownParameter {
                    op: remedy.op,
                    key: key.clone(),
                })?;
        let current = match slot {
            Some(i) => match action.get(param.name) {
                Some(Value::IntList(list)) => list.get(i).map(|v| *v as f64),
                _ => {
                    return Err(RemedyError::MissingList {
                        param: param.name.to_string(),
                        key: key.clone(),
                    })
                }
            },
            None => action.get(param.name).and_then(number),
        };
        let value = evaluate(expr, &vars, current).map_err(|source| RemedyError::Evaluation {
            key: key.clone(),
            source,
        })?;
        match slot {
            Some(i) => {
                let Some(Value::IntList(list)) = out.get_mut(param.name) else {
                    unreachable!("checked above: the slot's list exists");
                };
                let Some(v) = number(&value) else {
                    return Err(RemedyError::Evaluation {
                        key: key.clone(),
                        source: EvaluationError::NotANumber,
                    });
                };
                if let Some(cell) = list.get_mut(i) {
                    *cell = v as i64;
                }
            }
            None => {
                out.insert(param.name.to_string(), value);
            }
        }
    }
    Ok(out)
}

fn evaluate(
    expr: &Expr,
    vars: &BTreeMap<String, f64>,
    cap: Option<f64>,
) -> Result<Value, EvaluationError> {
    match expr {
        Expr::Lit(v) => Ok(v.clone()),
        Expr::Var(name) if !vars.contains_key(name) => Ok(Value::Text(name.clone())),
        _ => {
            let v = expr.eval(vars, cap)?;
            if !v.is_finite() {
                return Err(EvaluationError::NotFinite(v));
            }
            Ok(if v.fract() == 0.0 {
                Value::Int(v as i64)
            } else {
                Value::Float(v)
            })
        }
    }
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        Value::Quantity { value, .. } => Some(*value),
        _ => None,
    }
}

/// The action's parameters as remedy variables: scalars by name, list slots by
/// their component names, and the shape's slots also as `M`, `K`, `N`.
pub fn action_vars(op: OpKind, action: &BTreeMap<String, Value>) -> BTreeMap<String, f64> {
    let spec = Some(op.spec());
    let mut vars = BTreeMap::new();
    for (key, value) in action {
        match value {
            Value::IntList(list) => {
                let slots = spec
                    .and_then(|s| s.param(key))
                    .map_or(&[][..], |p| p.components);
                for (slot, v) in slots.iter().zip(list) {
                    vars.insert(slot.to_string(), *v as f64);
                }
                if key == "shape" {
                    for (name, v) in ["M", "K", "N"].iter().zip(list) {
                        vars.insert(name.to_string(), *v as f64);
                    }
                }
            }
            other => {
                if let Some(n) = number(other) {
                    vars.insert(key.clone(), n);
                }
            }
        }
    }
    vars
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{BinaryOp, Comparison, Symptom};
    use crate::ops::Metric;

    fn gemm_action(tile_n: i64) -> BTreeMap<String, Value> {
        BTreeMap::from([
            ("kernel".into(), Value::Text("gemm".into())),
            ("shape".into(), Value::IntList(vec![2048, 896, 896])),
            ("herd".into(), Value::IntList(vec![8, 4])),
            ("tile".into(), Value::IntList(vec![64, 256, 32, tile_n])),
        ])
    }

    fn divisor_fix() -> Remedy {
        Remedy {
            op: OpKind::SelectTiling,
            set: BTreeMap::from([(
                "tile_n".into(),
                Expr::Call {
                    func: "divisor".into(),
                    args: vec![Expr::Binary {
                        op: BinaryOp::Div,
                        lhs: Box::new(Expr::Var("N".into())),
                        rhs: Box::new(Expr::Var("herd_n".into())),
                    }],
                },
            )]),
        }
    }

    #[test]
    fn divisor_fix_shrinks_the_failing_tile() {
        let fixed = apply_remedy(&divisor_fix(), &gemm_action(128), &BTreeMap::new()).unwrap();
        assert_eq!(fixed["tile"], Value::IntList(vec![64, 256, 32, 112]));
    }

    #[test]
    fn a_slot_of_a_missing_list_is_an_error() {
        let mut action = gemm_action(128);
        action.remove("tile");
        assert!(matches!(
            apply_remedy(&divisor_fix(), &action, &BTreeMap::new()),
            Err(RemedyError::MissingList { .. })
        ));
    }

    fn failure(metric: Metric, value: f64, kernel: &str) -> Failure {
        Failure {
            phase: DeployPhase::Kernels,
            gate: GateCheck::named("k", OpKind::ValidateKernel)
                .measures(metric, value)
                .when(BTreeMap::from([(
                    "kernel".into(),
                    Value::Text(kernel.into()),
                )]))
                .must_be_zero("r"),
            op: OpKind::ValidateKernel,
            params: gemm_action(128),
        }
    }

    fn lesson(params: BTreeMap<String, Value>) -> Lesson {
        Lesson {
            id: "l14".into(),
            kind: LessonKind::Debugging,
            title: "t".into(),
            symptom: Symptom {
                op: Some(OpKind::ValidateKernel),
                params,
                metric: Some(Metric::Mismatches),
                comparison: Some(Comparison::Gt),
                value: Some(0.0),
                text: String::new(),
            },
            cause: String::new(),
            fix: divisor_fix(),
            then: Vec::new(),
            fix_text: String::new(),
            phases: vec![1],
            skill: "debug-gemm".into(),
            evidence_count: 1,
            weights: None,
            evidence: vec![],
            provenance: vec![],
            condition: None,
            deployments: Vec::new(),
        }
    }

    #[test]
    fn symptoms_match_on_operation_identity_and_predicate() {
        let gemm = BTreeMap::from([("kernel".into(), Value::Text("gemm".into()))]);
        let recorded_shape = BTreeMap::from([
            ("kernel".into(), Value::Text("gemm".into())),
            ("shape".into(), Value::IntList(vec![2048, 2048, 2048])),
        ]);
        assert!(symptom_matches(
            &lesson(gemm.clone()),
            &failure(Metric::Mismatches, 12.0, "gemm")
        ));
        assert!(symptom_matches(
            &lesson(recorded_shape),
            &failure(Metric::Mismatches, 12.0, "gemm")
        ));
        // Predicate does not hold, other metric, other kernel.
        assert!(!symptom_matches(
            &lesson(gemm.clone()),
            &failure(Metric::Mismatches, 0.0, "gemm")
        ));
        assert!(!symptom_matches(
            &lesson(gemm.clone()),
            &failure(Metric::Cosine, 12.0, "gemm")
        ));
        let rope = BTreeMap::from([("kernel".into(), Value::Text("rope".into()))]);
        assert!(!symptom_matches(
            &lesson(rope),
            &failure(Metric::Mismatches, 12.0, "gemm")
        ));
    }
}
