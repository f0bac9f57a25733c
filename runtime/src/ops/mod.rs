//! The operation and metric vocabulary shared by the trajectory language, the
//! distiller and the runtime.
//!
//! This is the single source of truth: the front end validates actions and lesson
//! fixes against it, the distiller copies operations from it into bundles, and the
//! executor and replay dispatch on it. Adding an operation here is the only way to
//! make it exist anywhere.
//!
//! - [`operations`]: [`OpKind`] and its table of [`OpSpec`]s (phases, parameters
//!   with their kinds and ranges);
//! - [`typed`]: [`Op`], an operation with typed parameters, read once from
//!   `key=value` parameters and written back;
//! - [`effect`]: what each operation does to a deployment's design, the one
//!   definition the executor and replay apply;
//! - [`value`]: a parameter value, as the files write it;
//! - [`words`]: the closed sets parameters take (`layout=seq-first`, …) as enums;
//! - [`metrics`]: observation metrics and units;
//! - [`expressions`]: the functions and variables of remedy expressions;
//! - [`conditions`]: the model features a lesson's condition may read, and
//!   their values for one model;
//! - [`keywords`]: the reserved words of the language;
//! - [`formats`]: the weight formats a trajectory records, and which operations
//!   depend on them.

pub mod conditions;
pub mod effect;
pub mod expressions;
pub mod formats;
pub mod keywords;
pub mod operations;
pub mod typed;
pub mod value;
pub mod words;

/// The metrics and units, a module of their own below everything (`crate::metrics`).
pub use crate::metrics;
pub use crate::metrics::{
    convert, metric_spec, unit_spec, Better, Dimension, GateMetric, Metric, MetricSpec,
    RuntimeMetric, Unit, UnitSpec, UnknownMetric, METRICS, UNITS,
};
pub use conditions::{fact_spec, facts, FactKind, FactSpec, Facts};
pub use effect::{effect, ApplyError, Effect, KernelSettings, PathChange, PlanChange, PlanScope};
pub use expressions::{
    eval_function, function_spec, variable_spec, FunctionSpec, VariableSpec, FUNCTIONS, VARIABLES,
};
pub use formats::{FormatDependence, WeightFormat};
pub use keywords::{is_keyword, KEYWORDS};
pub use operations::{
    operation, Bound, OpKind, OpSpec, ParamKind, ParamSpec, UnknownOperation, KERNELS, OPERATIONS,
};
pub use typed::{KernelCheck, KernelChoice, Op, ParamError};
pub use value::Value;
pub use words::{BufferKey, RopeConvention, RopeScaling, UnknownWord, WeightOrigin};
