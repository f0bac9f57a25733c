//! The observations and lessons of a replay: each recorded measurement is
//! recomputed from the result of the action it measures and judged
//! ([`super::judge`]) into rows, each row with the kind of evidence it is
//! ([`super::kind`]); a lesson's fix is recomputed from its remedy and compared
//! with the fix the trajectory applied.

use petgraph::graph::NodeIndex;

use skillc_runtime::ops::{Metric, OpKind, Unit};
use skillc_runtime::xdna2::calibration::PointSet;
use skillc_runtime::xdna2::plan::Phase;

use super::judge::{self, Judgement, Recorded, Replayed};
use super::kind::{self, RowKind};
use super::params::Params;
use super::state::State;
use super::{measure, remedy};
use super::{ActionResult, Outcome, Row, Walk};
use crate::graph::{ActionData, EdgeKind, LessonData, Node, NodeData, ObservationData};
use crate::syntax::{EntryKind, Verdict};

impl Walk<'_> {
    pub(super) fn observe(&mut self, index: NodeIndex, node: &Node, obs: &ObservationData) {
        self.counts.observations += 1;
        let rows = self.replay_observation(index, obs);
        self.record(node, rows);
    }

    /// Recomputes a lesson's fix from the action that failed and compares it
    /// with each action that applied the lesson.
    pub(super) fn lesson(&mut self, index: NodeIndex, node: &Node, lesson: &LessonData) {
        self.counts.lessons += 1;
        let mut rows = Vec::new();
        for applying in self.graph.sources(index, EdgeKind::By) {
            let NodeData::Action(applied) = &self.graph.node(applying).data else {
                continue;
            };
            for remedy in lesson.remedies.iter().filter(|r| r.op == applied.op) {
                let Some(failed) = self.failed_action(applying, remedy.op) else {
                    let j = Judgement {
                        outcome: Outcome::Disagree,
                        reason: "the fixed observation measures no action".into(),
                    };
                    rows.push(RowParts::new(
                        format!("fix {}", remedy.op),
                        String::new(),
                        String::new(),
                        j,
                    ));
                    continue;
                };
                for c in remedy::check(remedy, failed, applied, &self.emu.arch) {
                    let agree = c.agrees();
                    let (shown, reason) = match &c.computed {
                        Ok(v) => (
                            v.clone(),
                            format!("computed from {}", self.graph.node(applying).id),
                        ),
                        Err(why) => ("?".to_string(), why.to_string()),
                    };
                    let j = Judgement {
                        outcome: if agree {
                            Outcome::Agree
                        } else {
                            Outcome::Disagree
                        },
                        reason: if agree {
                            reason
                        } else {
                            format!("the remedy gives {shown}, the fix applied {}", c.applied)
                        },
                    };
                    rows.push(RowParts::new(
                        format!("fix {}", c.key),
                        format!("{} (applied)", c.applied),
                        shown,
                        j,
                    ));
                }
            }
        }
        if !rows.is_empty() {
            self.counts.lessons_checked += 1;
            self.record(node, rows);
        }
    }

    /// The action whose failure `applying` fixes: among the `after` actions of
    /// the observation it fixes, the one running `op`, else the measured one.
    fn failed_action(&self, applying: NodeIndex, op: OpKind) -> Option<&ActionData> {
        let fixed = self
            .graph
            .targets(applying, EdgeKind::Fixes)
            .into_iter()
            .next()?;
        let actions: Vec<&ActionData> = self
            .graph
            .targets(fixed, EdgeKind::After)
            .into_iter()
            .filter_map(|t| match &self.graph.node(t).data {
                NodeData::Action(a) => Some(a),
                _ => None,
            })
            .collect();
        actions
            .iter()
            .find(|a| a.op == op)
            .or(actions.first())
            .copied()
    }

    fn record(&mut self, node: &Node, rows: Vec<RowParts>) {
        self.counts.compared += 1;
        let location = self.graph.location(node.span);
        let before = self.rows.len();
        for parts in rows {
            let count = self.counts.rows_by_kind.entry(parts.kind).or_default();
            count.rows += 1;
            match parts.judgement.outcome {
                Outcome::Agree => count.agree += 1,
                Outcome::Disagree => count.disagree += 1,
                Outcome::Outside => count.outside += 1,
                Outcome::NotRun => count.not_run += 1,
            }
            self.rows.push(Row {
                entry: node.id.clone(),
                location: location.clone(),
                metric: parts.metric,
                recorded: parts.recorded,
                replayed: parts.replayed,
                outcome: parts.judgement.outcome,
                reason: parts.judgement.reason,
                kind: parts.kind,
                band: parts.band,
                point: parts.point,
            });
        }
        let outcomes: Vec<Outcome> = self.rows[before..].iter().map(|r| r.outcome).collect();
        let worst = outcomes.iter().copied().max_by_key(|o| match o {
            Outcome::Disagree => 3,
            Outcome::Outside => 2,
            Outcome::NotRun => 1,
            Outcome::Agree => 0,
        });
        match worst {
            Some(Outcome::Disagree) => self.counts.disagree += 1,
            Some(Outcome::Outside) => self.counts.outside += 1,
            Some(Outcome::NotRun) => self.counts.not_run += 1,
            _ => self.counts.agree += 1,
        }
    }

    /// Rows of one observation: (metric, recorded, replayed, judgement).
    fn replay_observation(&mut self, index: NodeIndex, obs: &ObservationData) -> Vec<RowParts> {
        let conditions = Params(&obs.conditions);
        let provenance = match obs.provenance {
            crate::syntax::Provenance::Measured => "measured",
            crate::syntax::Provenance::Modeled => "modeled",
        };
        let after: Vec<NodeIndex> = self
            .graph
            .targets(index, EdgeKind::After)
            .into_iter()
            .filter(|t| self.graph.node(*t).kind == EntryKind::Action)
            .collect();
        let Some(&measured) = after.first() else {
            let j = Judgement {
                outcome: Outcome::Disagree,
                reason: "no action measured by this observation".into(),
            };
            return vec![RowParts::new(
                "verdict".into(),
                String::new(),
                String::new(),
                j,
            )];
        };
        let skip = self.skip_reason(conditions, &after);
        let (result, state) = self.done[&measured].clone();
        let result = self.resolve(result, &state, conditions);
        let NodeData::Action(action) = &self.graph.node(measured).data else {
            unreachable!("after targets were filtered to actions")
        };
        let mut rows = Vec::new();
        for m in &obs.measurements {
            let Some(metric) = Metric::named(&m.metric.text) else {
                continue;
            };
            let recorded = recorded_value(metric, m);
            let replayed = match &skip {
                Some(r) => r.clone(),
                None if judge::kind_of(metric) == judge::Kind::Unmodeled => {
                    Replayed::Outside(format!("the cost model has no {metric}"))
                }
                None => self.metric(metric, action, &result, conditions, &state),
            };
            let timing = judge::kind_of(metric) == judge::Kind::Timing;
            let point = self
                .emu
                .points
                .find(metric, recorded.value, &self.emu.model)
                .filter(|_| timing);
            let band = point.map_or(kind::STATED_BAND, |p| p.band());
            let row_kind = match (obs.provenance, point) {
                (crate::syntax::Provenance::Modeled, _) => RowKind::SelfProduced,
                (_, Some(p)) if p.set == PointSet::Fit => RowKind::FitPoint,
                _ => RowKind::OutOfSample,
            };
            rows.push(RowParts {
                metric: metric.name().to_string(),
                recorded: recorded_text(metric, recorded, provenance),
                replayed: replayed_text(metric, &replayed, band),
                judgement: judge::judge(metric, recorded, &replayed, band),
                kind: row_kind,
                band: timing.then_some(band),
                point: point.map(|p| p.id.clone()),
            });
        }
        if let (true, Some(verdict)) = (obs.measurements.is_empty(), obs.verdict) {
            let no_op = matches!(result, ActionResult::NoOp(_));
            let replayed = match skip {
                Some(r) => Err(r),
                None => action_verdict(&result),
            };
            let mut parts = verdict_parts(verdict == Verdict::Pass, replayed, provenance);
            parts.kind = match (no_op, obs.provenance) {
                (true, _) => RowKind::NoOpVerdict,
                (false, crate::syntax::Provenance::Modeled) => RowKind::SelfProduced,
                (false, _) => RowKind::OutOfSample,
            };
            rows.push(parts);
        }
        rows
    }

    /// Why the observation is not compared, or is wrong, before anything runs:
    /// an unmodeled condition, or a condition that contradicts its action.
    fn skip_reason(&self, conditions: Params<'_>, after: &[NodeIndex]) -> Option<Replayed> {
        let action_params: Vec<Params<'_>> = after
            .iter()
            .filter_map(|t| match &self.graph.node(*t).data {
                NodeData::Action(a) => Some(Params(&a.params)),
                _ => None,
            })
            .collect();
        measure::unmodeled_condition(conditions)
            .map(Replayed::Outside)
            .or_else(|| {
                measure::restatement_mismatch(conditions, &action_params).map(Replayed::Problem)
            })
    }

    /// Runs a model-level check the observation reads (with its prompt count).
    fn resolve(
        &mut self,
        result: ActionResult,
        state: &State,
        conditions: Params<'_>,
    ) -> ActionResult {
        let ActionResult::Model(run) = result else {
            return result;
        };
        let prompts = conditions.count("prompts").unwrap_or(2);
        if self.model().is_err() {
            return ActionResult::Problem("the model's weights could not be loaded".into());
        }
        let (Some(model), device) = (self.model.as_ref(), &self.emu.device) else {
            return ActionResult::Problem("no model".into());
        };
        match self.runner.run(model, device, state, run, prompts) {
            Ok(outcome) => ActionResult::Values(outcome.values, outcome.pass),
            Err(why) => ActionResult::Problem(why.to_string()),
        }
    }

    fn metric(
        &mut self,
        metric: Metric,
        action: &ActionData,
        result: &ActionResult,
        conditions: Params<'_>,
        state: &State,
    ) -> Replayed {
        let p = Params(&action.params);
        match (action.op, result) {
            (_, ActionResult::Problem(why)) => Replayed::Problem(why.clone()),
            (_, ActionResult::NotRun(why)) => Replayed::NotRun(why.clone()),
            (OpKind::ProfilePrefill, _) => {
                measure::profile_metric(metric, Phase::Prefill, p, conditions, state, &mut self.emu)
            }
            (OpKind::ProfileDecode, _) => {
                measure::profile_metric(metric, Phase::Decode, p, conditions, state, &mut self.emu)
            }
            (_, ActionResult::Kernel(_)) => measure::kernel_metric(metric, result, &self.emu),
            (op, ActionResult::Values(values, _)) => {
                values.iter().find(|(m, _)| *m == metric).map_or_else(
                    || Replayed::Problem(format!("{op} produces no {metric}")),
                    |(_, v)| Replayed::Value(*v),
                )
            }
            (_, ActionResult::Refused(why)) => Replayed::Refused(why.clone()),
            (OpKind::WriteArtifacts, _) => Replayed::NotRun(
                "replay writes no artifacts; a deploy's phase 6 checks the ones it writes".into(),
            ),
            (op, _) => Replayed::Problem(format!("{op} produces no {metric}")),
        }
    }
}

/// The verdict an action's result implies on its own.
fn action_verdict(result: &ActionResult) -> Result<bool, Replayed> {
    match result {
        ActionResult::Done | ActionResult::NoOp(_) => Ok(true),
        ActionResult::Values(_, ok) => Ok(*ok),
        ActionResult::Model(_) => Err(Replayed::Problem(
            "a model-level run was not resolved".into(),
        )),
        ActionResult::Refused(why) => Err(Replayed::Refused(why.clone())),
        ActionResult::NotRun(why) => Err(Replayed::NotRun(why.clone())),
        ActionResult::Problem(why) => Err(Replayed::Problem(why.clone())),
        ActionResult::Kernel(run) => match (&run.launch, &run.check) {
            (Err(why), _) => Err(Replayed::Refused(why.to_string())),
            (Ok(_), Some(Ok(check))) => Ok(check.comparison.passed()),
            (Ok(_), Some(Err(why))) => Err(Replayed::Refused(why.to_string())),
            (Ok(_), None) => Ok(true),
        },
    }
}

/// A table row before it gets its entry.
struct RowParts {
    metric: String,
    recorded: String,
    replayed: String,
    judgement: Judgement,
    kind: RowKind,
    band: Option<f64>,
    point: Option<String>,
}

impl RowParts {
    /// An out-of-sample row without a band (gates, counts, verdicts, fixes).
    fn new(metric: String, recorded: String, replayed: String, judgement: Judgement) -> Self {
        RowParts {
            metric,
            recorded,
            replayed,
            judgement,
            kind: RowKind::OutOfSample,
            band: None,
            point: None,
        }
    }
}

/// A measurement as recorded, in the metric's canonical unit.
fn recorded_value(metric: Metric, m: &crate::syntax::Measurement) -> Recorded {
    let canonical = |q: &crate::syntax::Quantity| {
        let unit = q.unit.as_ref().and_then(|u| Unit::named(&u.text));
        judge::canonical(metric, q.number.as_f64(), unit).unwrap_or(f64::NAN)
    };
    Recorded {
        value: canonical(&m.value),
        threshold: m.threshold.as_ref().map(|t| (t.op, canonical(&t.value))),
    }
}

/// The row of an observation that records only a verdict.
fn verdict_parts(
    recorded_pass: bool,
    replayed: Result<bool, Replayed>,
    provenance: &str,
) -> RowParts {
    let shown = match &replayed {
        Ok(true) => "pass".to_string(),
        Ok(false) => "fail".to_string(),
        Err(r) => short(r),
    };
    let rec = if recorded_pass { "pass" } else { "fail" };
    let j = judge::verdict_row(recorded_pass, replayed);
    RowParts::new("verdict".into(), format!("{rec} ({provenance})"), shown, j)
}

fn recorded_text(metric: Metric, r: Recorded, provenance: &str) -> String {
    let mut text = judge::with_unit(metric, r.value);
    if let Some((op, limit)) = r.threshold {
        text.push_str(&format!(" {} {}", op.symbol(), judge::number(limit)));
    }
    format!("{text} ({provenance})")
}

fn replayed_text(metric: Metric, r: &Replayed, band: f64) -> String {
    match r {
        Replayed::Value(v) if judge::kind_of(metric) == judge::Kind::Timing => {
            format!(
                "{} (modeled ±{:.1}%)",
                judge::with_unit(metric, *v),
                band * 100.0
            )
        }
        Replayed::Value(v) => judge::with_unit(metric, *v),
        other => short(other),
    }
}

fn short(r: &Replayed) -> String {
    match r {
        Replayed::Value(v) => judge::number(*v),
        Replayed::Refused(_) => "refused".into(),
        Replayed::NotRun(_) => "-".into(),
        Replayed::Outside(_) => "-".into(),
        Replayed::Problem(_) => "?".into(),
    }
}
