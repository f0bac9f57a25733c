//! Actions: the operation named in the table, allowed in its phase, and each
//! parameter known, of its kind, in range, with the units its kind allows.

use skillc_runtime::ops::{self, OpSpec, ParamKind, ParamSpec};
use skillc_runtime::phase::DeployPhase;

use super::{describe_kind, number_text, Checker};
use crate::diag::{Code, Diagnostic};
use crate::syntax::{Name, Number, Param, Quantity, Span, Value, ValueKind};

impl Checker {
    pub(super) fn operation(&mut self, op: &Name) -> Option<&'static OpSpec> {
        let spec = ops::operation(&op.text);
        if spec.is_none() {
            let names: Vec<&str> = ops::OPERATIONS.iter().map(|o| o.name).collect();
            let mut diagnostic = Diagnostic::new(
                Code::UnknownOperation,
                op.span,
                format!("unknown operation `{}`", op.text),
            );
            if let Some(close) = crate::graph::suggest::closest(&op.text, names.iter().copied()) {
                diagnostic = diagnostic.with_hint(format!("did you mean `{close}`?"));
            } else {
                diagnostic = diagnostic.with_hint(
                    "operations are listed in OPERATIONS, runtime/src/ops/operations.rs",
                );
            }
            self.push(diagnostic);
        }
        spec
    }

    pub(super) fn action(&mut self, op: &Name, params: &[Param], phase: Option<DeployPhase>) {
        let Some(spec) = self.operation(op) else {
            return;
        };
        if let Some(phase) = phase.filter(|p| !spec.allowed_in(*p)) {
            let phases: Vec<String> = spec.phases.iter().map(DeployPhase::to_string).collect();
            self.push(
                Diagnostic::new(
                    Code::OpNotInPhase,
                    op.span,
                    format!("`{}` is not an operation of phase {phase}", spec.name),
                )
                .with_hint(format!(
                    "`{}` belongs to phase{} {}",
                    spec.name,
                    if phases.len() == 1 { "" } else { "s" },
                    phases.join(", ")
                )),
            );
        }
        self.no_duplicate_keys(params, "parameter");
        for param in params {
            match spec.param(&param.key.text) {
                Some(param_spec) => self.value_fits(param_spec, &param.value),
                None => self.unknown_parameter(spec, &param.key, false),
            }
        }
        for required in spec.params.iter().filter(|p| p.required) {
            if !params.iter().any(|p| p.key.text == required.name) {
                self.push(
                    Diagnostic::new(
                        Code::MissingParameter,
                        op.span,
                        format!("`{}` needs parameter `{}`", spec.name, required.name),
                    )
                    .with_hint(format!("{}: {}", required.name, required.doc)),
                );
            }
        }
    }

    pub(super) fn unknown_parameter(&mut self, spec: &OpSpec, key: &Name, slots_allowed: bool) {
        let mut diagnostic = Diagnostic::new(
            Code::UnknownParameter,
            key.span,
            format!("`{}` has no parameter `{}`", spec.name, key.text),
        );
        let slot_owner = spec
            .resolve_param(&key.text)
            .and_then(|(p, slot)| slot.map(|_| p));
        diagnostic = match slot_owner {
            Some(owner) if !slots_allowed => diagnostic.with_hint(format!(
                "`{}` is a slot of `{}`: write the whole list, `{}=[{}]`",
                key.text,
                owner.name,
                owner.name,
                owner.components.join(", ")
            )),
            _ => {
                let names: Vec<String> = spec
                    .params
                    .iter()
                    .map(|p| {
                        if p.components.is_empty() || !slots_allowed {
                            p.name.to_string()
                        } else {
                            format!("{} [{}]", p.name, p.components.join(", "))
                        }
                    })
                    .collect();
                if names.is_empty() {
                    diagnostic.with_hint(format!("`{}` takes no parameters", spec.name))
                } else {
                    diagnostic.with_hint(format!("parameters: {}", names.join(", ")))
                }
            }
        };
        self.push(diagnostic);
    }

    /// Whether a literal value fits a parameter's kind.
    pub(super) fn value_fits(&mut self, spec: &ParamSpec, value: &Value) {
        let expected = describe_kind(spec.kind);
        let wrong = |found: &str| {
            Diagnostic::new(
                Code::WrongValueKind,
                value.span,
                format!("`{}` takes {expected}, found {found}", spec.name),
            )
        };
        match (&value.kind, spec.kind) {
            (ValueKind::Number(q), ParamKind::Int) => {
                if let Number::Float(_) = q.number {
                    self.push(wrong("a float"));
                }
                self.no_unit(spec, q);
                self.in_bounds(spec, q);
            }
            (ValueKind::Number(q), ParamKind::Float) => {
                self.no_unit(spec, q);
                self.in_bounds(spec, q);
            }
            (ValueKind::Bool(_), ParamKind::Bool)
            | (ValueKind::Str(_), ParamKind::Str)
            | (ValueKind::Ident(_), ParamKind::Ident) => {}
            (ValueKind::Ident(word), ParamKind::Enum(choices)) => {
                if !choices.contains(&word.as_str()) {
                    self.not_in_enum(spec.name, word, choices, value.span);
                }
            }
            (ValueKind::List(items), ParamKind::IntList) => {
                for item in items {
                    match &item.kind {
                        ValueKind::Number(q) if matches!(q.number, Number::Int(_)) => {
                            self.no_unit(spec, q);
                            self.in_bounds(spec, q);
                        }
                        other => self.push(Diagnostic::new(
                            Code::WrongValueKind,
                            item.span,
                            format!(
                                "`{}` is a list of integers, found {}",
                                spec.name,
                                describe_value(other)
                            ),
                        )),
                    }
                }
                self.list_length(spec, items.len(), value.span);
            }
            (ValueKind::Str(_), ParamKind::Ident | ParamKind::Enum(_)) => {
                self.push(wrong("a string").with_hint("write the word without quotes"))
            }
            (ValueKind::Ident(_), ParamKind::Str) => {
                self.push(wrong("a word").with_hint("put text in double quotes"))
            }
            (other, _) => self.push(wrong(&describe_value(other))),
        }
    }

    /// A literal outside its parameter's range (`shape=[0,…]`, `rtol=-1`): the
    /// table's bound, the one replay and deploy enforce too.
    pub(super) fn in_bounds(&mut self, spec: &ParamSpec, quantity: &Quantity) {
        let value = quantity.number.as_f64();
        if !spec.bound.admits(value) {
            let slot = if spec.kind == ParamKind::IntList {
                " (every slot)"
            } else {
                ""
            };
            self.push(
                Diagnostic::new(
                    Code::ParameterOutOfRange,
                    quantity.span,
                    format!(
                        "`{}` = {}: {}",
                        spec.name,
                        number_text(quantity.number),
                        spec.bound.rule()
                    ),
                )
                .with_hint(format!("{}{slot}: {}", spec.name, spec.doc)),
            );
        }
    }

    pub(super) fn list_length(&mut self, spec: &ParamSpec, len: usize, span: Span) {
        if !spec.components.is_empty() && len > spec.components.len() {
            self.push(
                Diagnostic::new(
                    Code::WrongValueKind,
                    span,
                    format!(
                        "`{}` has at most {} slots, found {len}",
                        spec.name,
                        spec.components.len()
                    ),
                )
                .with_hint(format!("slots: [{}]", spec.components.join(", "))),
            );
        }
    }

    pub(super) fn no_unit(&mut self, spec: &ParamSpec, quantity: &Quantity) {
        if let Some(unit) = &quantity.unit {
            self.push(
                Diagnostic::new(
                    Code::UnknownUnit,
                    unit.span,
                    format!(
                        "parameter `{}` takes a plain number, not `{}`",
                        spec.name, unit.text
                    ),
                )
                .with_hint("operation parameters carry no units"),
            );
        }
    }

    fn not_in_enum(&mut self, param: &str, word: &str, choices: &[&str], span: Span) {
        let mut diagnostic = Diagnostic::new(
            Code::NotInEnum,
            span,
            format!("`{word}` is not a valid `{param}`"),
        );
        diagnostic = match crate::graph::suggest::closest(word, choices.iter().copied()) {
            Some(close) => diagnostic.with_hint(format!(
                "did you mean `{close}`? one of: {}",
                choices.join(", ")
            )),
            None => diagnostic.with_hint(format!("one of: {}", choices.join(", "))),
        };
        self.push(diagnostic);
    }
}

fn describe_value(kind: &ValueKind) -> String {
    match kind {
        ValueKind::Number(q) => match (q.number, &q.unit) {
            (_, Some(unit)) => format!("a quantity in {}", unit.text),
            (Number::Int(_), None) => "an integer".into(),
            (Number::Float(_), None) => "a float".into(),
        },
        ValueKind::Str(_) => "a string".into(),
        ValueKind::Ident(word) => format!("the word `{word}`"),
        ValueKind::Bool(_) => "a boolean".into(),
        ValueKind::List(_) => "a list".into(),
    }
}
