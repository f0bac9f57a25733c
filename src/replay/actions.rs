//! The actions of a replay: each changes the deployment state the walk holds,
//! or runs what it names (a kernel configuration and its validation, a plan
//! check, a model-level numerical run), and leaves an [`ActionResult`] that the
//! observations after it read.

use skillc_runtime::exec::gates::topk::TopKGate;
use skillc_runtime::model::oracle::compare::{
    check_reference, ReferenceTensors, DEFAULT_TOLERANCE, REFERENCE_FILE,
};
use skillc_runtime::model::{Model, ModelError};
use skillc_runtime::ops::{self, Effect, Metric, Op, PlanChange};
use skillc_runtime::phase::DeployPhase;
use skillc_runtime::xdna2::builder::unsupported_features;
use skillc_runtime::xdna2::kernels::Precision;
use skillc_runtime::xdna2::numerics::{self, Tolerance};
use skillc_runtime::xdna2::plan::{Binding, Call, Launch, Phase, Step};

use super::params::Params;
use super::state::{group_parts, group_phase};
use super::{harness, kernel, measure, model_run};
use super::{ActionResult, Functional, KernelRun, Refusal, Walk};
use crate::distill::values;
use crate::graph::{ActionData, Node};

impl Walk<'_> {
    pub(super) fn apply(&mut self, node: &Node, action: &ActionData) -> ActionResult {
        let p = Params(&action.params);
        let op = match Op::read(action.op, &values::params(&action.params)) {
            Ok(op) => op,
            Err(e) => return ActionResult::Problem(e.to_string()),
        };
        let effect = match ops::effect(&op, &self.emu.arch, &self.emu.device) {
            Ok(effect) => effect,
            Err(e) => return ActionResult::Problem(e.to_string()),
        };
        match &op {
            Op::CheckScope => {
                let blockers = unsupported_features(&self.emu.arch);
                ActionResult::Values(
                    vec![(Metric::Blockers, blockers.len() as f64)],
                    blockers.is_empty(),
                )
            }
            Op::SelectTiling(_) => self.select(p),
            Op::ValidateKernel(_) => self.validate(p),
            Op::LoadWeights { .. }
            | Op::CompareReference { .. }
            | Op::VerifyModel { .. }
            | Op::ValidateBlock { .. }
            | Op::DiagnoseLayers
            | Op::Evaluate { .. } => self.model_level(&op),
            _ => match node.phase {
                Some(phase) => self.change(phase, effect),
                // Replay refuses a trajectory with errors, the only kind with such entries.
                None => ActionResult::Problem("its session names no phase".into()),
            },
        }
    }

    /// What an operation's effect does to the deployment state, with the plans it
    /// changed checked.
    fn change(&mut self, session_phase: DeployPhase, effect: Effect) -> ActionResult {
        match effect {
            Effect::Plan {
                change: PlanChange::MergeLaunches { group },
                ..
            } => self.merge(&group),
            Effect::Plan {
                change: PlanChange::SplitLaunches { group },
                ..
            } => {
                for part in group_parts(&group) {
                    self.state.merged.remove(part);
                }
                ActionResult::Done
            }
            Effect::Plan { change, plans } => {
                if let PlanChange::StaticWeights { key } = change {
                    self.state.weight_buffers = key;
                }
                let phases = self.state.apply(&change, plans, session_phase);
                self.check_plans(&phases)
            }
            Effect::RopePairing(convention) => {
                self.state.rope = convention;
                ActionResult::Done
            }
            // Building, bookkeeping, host-only and profiling actions change nothing
            // the emulator holds (profiles are evaluated per observation); its plan
            // interpreter takes the bias, the Q/K norm and the RoPE table from the
            // config, and retuned kernels from the builder's rule.
            Effect::Path(_) => {
                ActionResult::NoOp("the plan interpreter takes this from the model's config".into())
            }
            Effect::Kernel(_) => {
                ActionResult::NoOp("retuned kernels come from the builder's rule".into())
            }
            Effect::Measures => ActionResult::NoOp("a profile is evaluated per observation".into()),
            Effect::Records => ActionResult::NoOp("bookkeeping changes no plan".into()),
        }
    }

    /// Weight loading, the transformers comparison and the model-level gates:
    /// run at `--functional full` only.
    fn model_level(&mut self, op: &Op) -> ActionResult {
        if self.options.functional != Functional::Full {
            return ActionResult::NotRun(format!(
                "{} is a model-level run; it runs at --functional full",
                op.kind()
            ));
        }
        match *op {
            Op::LoadWeights { .. } => self.load_weights(),
            Op::CompareReference { tol, .. } => self.compare_reference(tol),
            Op::ValidateBlock {
                layer,
                cosine_min,
                position_min,
            } => ActionResult::Model(model_run::Run::Block {
                layer: layer.unwrap_or(0),
                cosine_min,
                position_min,
            }),
            Op::DiagnoseLayers => ActionResult::Model(model_run::Run::Diagnose),
            Op::VerifyModel { tokens, top_k } => {
                ActionResult::Model(model_run::Run::Verify(TopKGate::recorded(tokens, top_k)))
            }
            _ => ActionResult::Model(model_run::Run::Verify(TopKGate::DEFAULT)),
        }
    }

    /// The model's weights (read, or seeded when the directory has none).
    pub(super) fn model(&mut self) -> Result<&Model, ModelError> {
        let model = match self.model.take() {
            Some(model) => model,
            None => Model::load(&self.options.model_dir, Some(self.options.seed))?,
        };
        Ok(self.model.insert(model))
    }

    fn load_weights(&mut self) -> ActionResult {
        match self.model() {
            Ok(model) => {
                let bad: usize = model
                    .weights
                    .tensors()
                    .iter()
                    .map(|t| non_finite(t.bits()))
                    .sum();
                ActionResult::Values(vec![(Metric::NanCount, bad as f64)], bad == 0)
            }
            Err(why) => ActionResult::Problem(why.to_string()),
        }
    }

    fn compare_reference(&mut self, tol: Option<f64>) -> ActionResult {
        let path = self.options.model_dir.join(REFERENCE_FILE);
        if !path.exists() {
            return ActionResult::NotRun(format!(
                "the model directory has no {REFERENCE_FILE} to compare with"
            ));
        }
        let tolerance = tol.unwrap_or(DEFAULT_TOLERANCE);
        let reference = match ReferenceTensors::read(&path) {
            Ok(r) => r,
            Err(e) => return ActionResult::Problem(e.to_string()),
        };
        let model = match self.model() {
            Ok(model) => model,
            Err(why) => return ActionResult::Problem(why.to_string()),
        };
        match check_reference(model, &reference, tolerance) {
            Ok(check) => {
                let max_abs = check
                    .rows
                    .iter()
                    .map(|r| r.max_abs_error as f64)
                    .fold(0.0, f64::max);
                let nan = check
                    .rows
                    .iter()
                    .filter(|r| !r.pass && r.ratio <= tolerance)
                    .count();
                let values = vec![
                    (Metric::MaxAbs, max_abs),
                    (Metric::MaxRel, check.worst_ratio()),
                    (Metric::NanCount, nan as f64),
                ];
                ActionResult::Values(values, check.passed())
            }
            Err(e) => ActionResult::Problem(e.to_string()),
        }
    }

    fn kernel_context(&self) -> kernel::Context<'_> {
        kernel::Context {
            arch: &self.emu.arch,
            device: &self.emu.device,
            lm_head_parts: self.state.decode.lm_head_parts,
        }
    }

    fn select(&mut self, p: Params<'_>) -> ActionResult {
        let launch = match kernel::launch(p, self.kernel_context()) {
            Ok(launch) => launch,
            Err(e) => return ActionResult::Problem(e.to_string()),
        };
        let key = (
            p.word("kernel").unwrap_or_default().to_string(),
            p.dims("shape").unwrap_or_default(),
        );
        self.state.kernels.insert(key, launch.clone());
        let violations = launch.check(&self.emu.device);
        ActionResult::Kernel(Box::new(KernelRun {
            launch: if violations.is_empty() {
                Ok(launch)
            } else {
                Err(Refusal(violations))
            },
            check: None,
            not_run: "select-tiling only chooses a configuration".into(),
        }))
    }

    fn validate(&mut self, p: Params<'_>) -> ActionResult {
        let key = (
            p.word("kernel").unwrap_or_default().to_string(),
            p.dims("shape").unwrap_or_default(),
        );
        let launch = match self.state.kernels.get(&key) {
            Some(launch) => launch.clone(),
            None => match kernel::launch(p, self.kernel_context()) {
                Ok(launch) => launch,
                Err(e) => return ActionResult::Problem(e.to_string()),
            },
        };
        let violations = launch.check(&self.emu.device);
        if !violations.is_empty() {
            let why = Refusal(violations);
            return ActionResult::Kernel(Box::new(KernelRun {
                launch: Err(why.clone()),
                check: Some(Err(why.into())),
                not_run: String::new(),
            }));
        }
        let check = match self.options.functional {
            Functional::None => None,
            Functional::Kernels | Functional::Full => Some(harness::validate(
                &launch,
                &self.emu.arch,
                &self.emu.device,
                tolerance(&launch, p),
                self.options.seed,
            )),
        };
        ActionResult::Kernel(Box::new(KernelRun {
            launch: Ok(launch),
            check,
            not_run: "--functional none skips kernel runs".into(),
        }))
    }

    /// Merges a builder group, or checks a merge of several (`a-b`) that the
    /// builder does not make, by placing their launches in one call.
    fn merge(&mut self, group: &str) -> ActionResult {
        let parts = group_parts(group);
        let phase = parts.iter().find_map(|p| group_phase(p));
        let Some(phase) = phase else {
            return ActionResult::Problem(format!(
                "no launch group of the emulator's plans is named {group}"
            ));
        };
        if parts.len() == 1 {
            self.state.merged.insert(group.to_string());
            return self.check_plans(&[phase]);
        }
        let mut options = self.state.options(phase);
        options.merge_launches = false;
        let seq_len = if phase == Phase::Prefill {
            2048
        } else {
            self.emu.decode_context
        };
        let built = match self.emu.plan(phase, seq_len, &options) {
            Ok(built) => built,
            Err(e) => return ActionResult::Problem(e.to_string()),
        };
        let mut plan = built.plan.clone();
        plan.layer = fuse_groups(&plan.layer, group, &parts);
        match plan.check(&self.emu.device) {
            Ok(()) => ActionResult::Problem(format!(
                "the merge {group} places on the emulator, but its plans cannot keep it"
            )),
            Err(v) => ActionResult::Refused(measure::join(&v)),
        }
    }

    /// Checks the current plans of `phases`.
    fn check_plans(&mut self, phases: &[Phase]) -> ActionResult {
        let mut refused = Vec::new();
        for &phase in phases {
            let options = self.state.options(phase);
            let seq_len = if phase == Phase::Prefill {
                2048
            } else {
                self.emu.decode_context
            };
            match self.emu.plan(phase, seq_len, &options) {
                Ok(built) if !built.violations.is_empty() => {
                    refused.push(measure::join(&built.violations))
                }
                Ok(_) => {}
                Err(e) => return ActionResult::Problem(e.to_string()),
            }
        }
        if refused.is_empty() {
            ActionResult::Done
        } else {
            ActionResult::Refused(refused.join("; "))
        }
    }
}

/// bf16 values whose exponent is all ones (infinities and NaNs).
fn non_finite(bits: &[u16]) -> usize {
    bits.iter().filter(|&&b| b & 0x7f80 == 0x7f80).count()
}

/// The registry tolerance, overridden by the action's `rtol`/`atol`.
fn tolerance(launch: &Launch, p: Params<'_>) -> Tolerance {
    let precision = match launch {
        Launch::Gemm { spec, .. } => spec.precision,
        _ => Precision::Bf16,
    };
    let base = numerics::tolerance(launch.kernel(), precision);
    Tolerance {
        rtol: p.number("rtol").unwrap_or(base.rtol),
        atol: p.number("atol").unwrap_or(base.atol),
        source: base.source,
    }
}

/// The layer's steps with the calls of `parts` merged into one call named `name`
/// at the position of the first of them.
fn fuse_groups(layer: &[Step], name: &str, parts: &[&str]) -> Vec<Step> {
    let mut fused = Call {
        name: name.to_string(),
        group: name.to_string(),
        launches: Vec::new(),
        bindings: Vec::<Binding>::new(),
    };
    let mut out = Vec::new();
    let mut placed = false;
    for step in layer {
        match step {
            Step::Call(call) if parts.contains(&call.group.as_str()) => {
                fused.launches.extend(call.launches.iter().cloned());
                for b in &call.bindings {
                    if !fused.bindings.iter().any(|x| x.buffer == b.buffer) {
                        fused.bindings.push(b.clone());
                    }
                }
                if !placed {
                    out.push(Step::Call(Call {
                        launches: Vec::new(),
                        ..fused.clone()
                    }));
                    placed = true;
                }
            }
            other => out.push(other.clone()),
        }
    }
    for step in &mut out {
        if let Step::Call(call) = step {
            if call.name == name {
                *call = fused.clone();
            }
        }
    }
    out
}
