//! One trajectory's graph → its share of the skill IR: the effective path per phase
//! as steps, dead ends as debugging knowledge, exit gates, targets and lessons.
//! Ids are the trajectory's entry ids (qualified later if several trajectories
//! share one), so nothing here depends on counters over the whole graph.
//!
//! What happened to each action decides where it goes:
//! - reverted or superseded by an effective entry, or its last verdict failed: a
//!   dead end ("tried X; it failed because Y"), kept in a debugging skill;
//! - otherwise a step of its phase, ordered by its `after` dependencies and, among
//!   independent steps, by trajectory order.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet};

use petgraph::graph::NodeIndex;
use skillc_runtime::bundle::{
    Baseline, Comparison, LessonKind, Provenance, Remedy, Symptom, Value,
};

use super::catalog;
use super::ir::{
    DeadEndIr, DeadEndOutcome, FigureSource, GateIr, LessonIr, LessonOrigin, PhaseIr, SourceIr,
    StepIr, TargetIr,
};
use super::skills;
use super::values;
use crate::diag::{Code, Diagnostic};
use crate::emit::bundle_json::sha256_hex;
use crate::emit::notation;
use crate::graph::{self, EdgeKind, Graph, LessonData, Node, NodeData, ObservationData};
use crate::syntax::{self, EntryKind, FileId, Measurement, SourceFile, Span, Verdict};

/// Parameters that say *what* a step acts on rather than *how*: two actions with the
/// same operation and the same values of these are the same step.
pub const IDENTITY_PARAMS: &[&str] = &["kernel", "shape", "layer", "group", "against", "layout"];

/// One trajectory to distill.
pub struct Input<'a> {
    /// The directory's name: the first component of every provenance path.
    pub dir_name: &'a str,
    pub graph: &'a Graph,
    /// All loaded files; the graph's file ids index this list.
    pub sources: &'a [SourceFile],
    /// Entry ids that other trajectories of the build use too: these are qualified
    /// with the trajectory's name (`llama1b.a15`) in step, lesson and dead-end ids.
    pub shared_ids: &'a HashSet<String>,
}

/// A trajectory's share of the IR, before merging.
pub struct Extracted {
    pub source: SourceIr,
    /// Eight phases; `lessons` lists are filled after merging.
    pub phases: Vec<PhaseIr>,
    pub lessons: Vec<LessonIr>,
    /// Where each step's action and its parameters were written, for conflict reports.
    pub step_spans: HashMap<String, StepSpans>,
    pub header_span: Option<Span>,
    pub diagnostics: Vec<Diagnostic>,
}

#[derive(Debug, Clone)]
pub struct StepSpans {
    pub action: Span,
    pub params: BTreeMap<String, Span>,
}

/// What became of an action.
#[derive(Debug, Clone)]
enum Fate {
    Step,
    Dead(DeadEndOutcome),
}

struct Cx<'a> {
    g: &'a Graph,
    paths: HashMap<FileId, String>,
    fates: HashMap<NodeIndex, Fate>,
    trajectory: String,
    shared_ids: &'a HashSet<String>,
}

impl Cx<'_> {
    /// An entry id as the bundle shows it.
    fn qualify(&self, entry: &str) -> String {
        if self.shared_ids.contains(entry) {
            format!("{}.{entry}", self.trajectory)
        } else {
            entry.to_string()
        }
    }

    fn provenance(&self, node: &Node) -> Provenance {
        Provenance {
            file: self.paths.get(&node.span.file).cloned().unwrap_or_default(),
            line: node.span.line,
            entry: node.id.clone(),
        }
    }

    fn is_step(&self, index: NodeIndex) -> bool {
        matches!(self.fates.get(&index), Some(Fate::Step))
    }

    fn step_id(&self, index: NodeIndex) -> String {
        let node = self.g.node(index);
        step_id(node.phase, &self.qualify(&node.id))
    }

    fn outcome(&self, outcome: &DeadEndOutcome) -> DeadEndOutcome {
        match outcome {
            DeadEndOutcome::Reverted { by } => DeadEndOutcome::Reverted {
                by: self.qualify(by),
            },
            DeadEndOutcome::Superseded { by } => DeadEndOutcome::Superseded {
                by: self.qualify(by),
            },
            DeadEndOutcome::Failed => DeadEndOutcome::Failed,
        }
    }

    /// The step that finally replaced a dead end (following supersessions), if any.
    fn replacement(&self, mut index: NodeIndex) -> Option<NodeIndex> {
        for _ in 0..self.g.node_count() {
            match self.fates.get(&index)? {
                Fate::Step => return Some(index),
                Fate::Dead(DeadEndOutcome::Superseded { by }) => index = self.g.find(by)?,
                Fate::Dead(_) => return None,
            }
        }
        None
    }
}

/// `p<phase>-<entry id>`.
pub fn step_id(phase: u8, entry: &str) -> String {
    format!("p{phase}-{entry}")
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn observation(node: &Node) -> Option<&ObservationData> {
    match &node.data {
        NodeData::Observation(data) => Some(data),
        _ => None,
    }
}

fn action(node: &Node) -> Option<&graph::ActionData> {
    match &node.data {
        NodeData::Action(data) => Some(data),
        _ => None,
    }
}

pub fn extract(input: &Input) -> Extracted {
    let g = input.graph;
    let paths: HashMap<FileId, String> = g
        .files
        .iter()
        .map(|f| (f.id, format!("{}/{}", input.dir_name, file_name(&f.path))))
        .collect();
    let files = g
        .files
        .iter()
        .filter_map(|f| {
            let text = &input.sources.get(f.id.0 as usize)?.text;
            Some((paths.get(&f.id)?.clone(), sha256_hex(text.as_bytes())))
        })
        .collect();
    let header = g.header.as_ref();
    let source = SourceIr {
        trajectory: header.map_or_else(|| input.dir_name.to_string(), |h| h.name.clone()),
        model: header.and_then(|h| h.model.clone()).unwrap_or_default(),
        target: header.and_then(|h| h.target.clone()).unwrap_or_default(),
        files,
    };
    let fates = g
        .nodes()
        .filter(|(_, node)| node.kind == EntryKind::Action)
        .map(|(index, _)| (index, fate(g, index)))
        .collect();
    let cx = Cx {
        g,
        paths,
        fates,
        trajectory: source.trajectory.clone(),
        shared_ids: input.shared_ids,
    };

    let texts = attached_texts(g);
    let mut diagnostics = Vec::new();
    let mut lessons = Vec::new();
    // Dead end → (skill, id) of the first lesson that explains it.
    let mut explained: HashMap<NodeIndex, (String, String)> = HashMap::new();
    for (index, node) in g.nodes() {
        let (NodeData::Lesson(data), true) = (&node.data, node.effective) else {
            continue;
        };
        let Some(lesson) = recorded_lesson(&cx, index, node, data, &mut diagnostics) else {
            continue;
        };
        for action in explained_actions(g, index) {
            if matches!(cx.fates.get(&action), Some(Fate::Dead(_))) {
                explained
                    .entry(action)
                    .or_insert_with(|| (lesson.skill.clone(), lesson.id.clone()));
            }
        }
        lessons.push(lesson);
    }

    let mut phases: Vec<PhaseIr> = catalog::PHASES
        .iter()
        .map(|spec| PhaseIr {
            index: spec.index,
            name: spec.name.to_string(),
            title: spec.title.to_string(),
            sessions: session_titles(g, spec.index),
            steps: Vec::new(),
            exit_gates: Vec::new(),
            lessons: Vec::new(),
            targets: Vec::new(),
            dead_ends: Vec::new(),
        })
        .collect();
    let mut step_spans = HashMap::new();
    for phase in &mut phases {
        let order = ordered_steps(&cx, phase.index);
        phase.steps = order
            .iter()
            .map(|&index| step(&cx, index, &texts))
            .collect();
        for &index in &order {
            let node = g.node(index);
            if let Some(data) = action(node) {
                step_spans.insert(
                    cx.step_id(index),
                    StepSpans {
                        action: node.span,
                        params: data
                            .params
                            .iter()
                            .map(|p| (p.key.text.clone(), p.span))
                            .collect(),
                    },
                );
            }
        }
        phase.exit_gates = gates(&cx, phase.index);
        phase.targets = targets(&cx, phase.index, &source.model);
    }
    for (index, node) in g.nodes() {
        let Some(Fate::Dead(outcome)) = cx.fates.get(&index) else {
            continue;
        };
        let Some(data) = action(node) else { continue };
        let mut dead_end = DeadEndIr {
            id: cx.qualify(&node.id),
            phase: node.phase,
            op: data.op.clone(),
            params: values::params(&data.params),
            outcome: cx.outcome(outcome),
            symptom: dead_end_symptom(&cx, index, data),
            failed_checks: failed_checks(g, index),
            reasons: texts.get(&index).cloned().unwrap_or_default(),
            explained_by: None,
            skill: String::new(),
            provenance: vec![cx.provenance(node)],
        };
        match explained.get(&index) {
            Some((skill, lesson)) => {
                dead_end.skill = skill.clone();
                dead_end.explained_by = Some(lesson.clone());
            }
            None => match dead_end_lesson(&cx, index, outcome, &dead_end) {
                Some(lesson) => {
                    dead_end.skill = lesson.skill.clone();
                    dead_end.explained_by = Some(lesson.id.clone());
                    lessons.push(lesson);
                }
                None => dead_end.skill = skills::dead_end_skill(&dead_end.op, &dead_end.params),
            },
        }
        if let Some(phase) = phases.get_mut(usize::from(node.phase)) {
            phase.dead_ends.push(dead_end);
        }
    }
    Extracted {
        source,
        phases,
        lessons,
        step_spans,
        header_span: header.map(|h| h.span),
        diagnostics,
    }
}

fn fate(g: &Graph, index: NodeIndex) -> Fate {
    let node = g.node(index);
    if !node.effective {
        for kind in [EdgeKind::Reverts, EdgeKind::Supersedes] {
            let undoers = g.sources(index, kind);
            let by = undoers
                .iter()
                .find(|s| g.node(**s).effective)
                .or(undoers.first());
            if let Some(by) = by {
                let by = g.node(*by).id.clone();
                return Fate::Dead(match kind {
                    EdgeKind::Reverts => DeadEndOutcome::Reverted { by },
                    _ => DeadEndOutcome::Superseded { by },
                });
            }
        }
    }
    let last = g
        .observations_of(index)
        .into_iter()
        .filter_map(|o| {
            observation(g.node(o))
                .and_then(|d| d.outcome())
                .map(|v| (o, v))
        })
        .last();
    match last {
        Some((failed, Verdict::Fail)) => {
            let fixer = g
                .sources(failed, EdgeKind::Fixes)
                .into_iter()
                .find(|f| g.node(*f).effective && g.node(*f).kind == EntryKind::Action);
            Fate::Dead(match fixer {
                Some(by) => DeadEndOutcome::Superseded {
                    by: g.node(by).id.clone(),
                },
                None => DeadEndOutcome::Failed,
            })
        }
        _ => Fate::Step,
    }
}

/// Texts of notes and decisions, by the action they are about (directly, or about
/// one of its observations), and decisions by the actions they revert.
fn attached_texts(g: &Graph) -> HashMap<NodeIndex, Vec<String>> {
    let mut texts: HashMap<NodeIndex, Vec<String>> = HashMap::new();
    for (index, node) in g.nodes() {
        let text = match &node.data {
            NodeData::Note { text } | NodeData::Decision { text } => text,
            _ => continue,
        };
        let mut targets = g.targets(index, EdgeKind::About);
        targets.extend(g.targets(index, EdgeKind::Reverts));
        targets.extend(g.targets(index, EdgeKind::Supersedes));
        let mut seen = BTreeSet::new();
        for target in targets {
            let action = match g.node(target).kind {
                EntryKind::Action => Some(target),
                EntryKind::Observation => g.measured_action(target),
                _ => None,
            };
            if let Some(action) = action.filter(|a| seen.insert(*a)) {
                texts.entry(action).or_default().push(text.clone());
            }
        }
    }
    texts
}

fn session_titles(g: &Graph, phase: u8) -> Vec<String> {
    let mut titles: Vec<String> = Vec::new();
    for session in g.sessions.iter().filter(|s| s.phase == phase) {
        if let Some(title) = &session.title {
            if !titles.contains(title) {
                titles.push(title.clone());
            }
        }
    }
    titles
}

/// The phase's steps, `after` dependencies first, otherwise in trajectory order.
fn ordered_steps(cx: &Cx, phase: u8) -> Vec<NodeIndex> {
    let steps: BTreeSet<NodeIndex> =
        cx.g.nodes()
            .filter(|(index, node)| node.phase == phase && cx.is_step(*index))
            .map(|(index, _)| index)
            .collect();
    let depends_on = |index: NodeIndex| -> Vec<NodeIndex> {
        cx.g.targets(index, EdgeKind::After)
            .into_iter()
            .filter(|t| steps.contains(t) && *t != index)
            .collect()
    };
    let mut waiting: HashMap<NodeIndex, usize> = HashMap::new();
    let mut dependents: HashMap<NodeIndex, Vec<NodeIndex>> = HashMap::new();
    for &index in &steps {
        let deps = depends_on(index);
        waiting.insert(index, deps.len());
        for dep in deps {
            dependents.entry(dep).or_default().push(index);
        }
    }
    let mut ready: BinaryHeap<Reverse<NodeIndex>> = waiting
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(i, _)| Reverse(*i))
        .collect();
    let mut order = Vec::with_capacity(steps.len());
    while let Some(Reverse(index)) = ready.pop() {
        order.push(index);
        for next in dependents.get(&index).into_iter().flatten() {
            if let Some(n) = waiting.get_mut(next) {
                *n -= 1;
                if *n == 0 {
                    ready.push(Reverse(*next));
                }
            }
        }
    }
    // A cycle is a front-end error; keep whatever it left in trajectory order.
    if order.len() < steps.len() {
        let placed: BTreeSet<NodeIndex> = order.iter().copied().collect();
        order.extend(steps.iter().filter(|s| !placed.contains(s)));
    }
    order
}

/// A step; `guarded_by` is filled once every lesson of every trajectory is known.
fn step(cx: &Cx, index: NodeIndex, texts: &HashMap<NodeIndex, Vec<String>>) -> StepIr {
    let node = cx.g.node(index);
    let id = cx.step_id(index);
    let (op, params) = action(node).map_or_else(
        || (String::new(), BTreeMap::new()),
        |data| (data.op.clone(), values::params(&data.params)),
    );
    StepIr {
        id,
        op,
        params,
        guarded_by: Vec::new(),
        notes: texts.get(&index).cloned().unwrap_or_default(),
        provenance: vec![cx.provenance(node)],
    }
}

/// Observations on the effective path of a phase, with the step they measure.
fn path_observations<'a>(
    cx: &'a Cx,
    phase: u8,
) -> impl Iterator<Item = (&'a Node, &'a ObservationData, Option<NodeIndex>)> + 'a {
    cx.g.nodes().filter_map(move |(index, node)| {
        let data = observation(node)?;
        if node.phase != phase || !node.effective {
            return None;
        }
        let measured = cx.g.measured_action(index);
        if measured.is_some_and(|a| !cx.is_step(a)) {
            return None;
        }
        Some((node, data, measured))
    })
}

/// Conditions of an observation: the measured action's identity parameters, then
/// the observation's own `when` conditions.
fn conditions(
    cx: &Cx,
    data: &ObservationData,
    measured: Option<NodeIndex>,
) -> BTreeMap<String, Value> {
    let mut conditions = BTreeMap::new();
    if let Some(act) = measured.and_then(|a| action(cx.g.node(a))) {
        for p in act
            .params
            .iter()
            .filter(|p| IDENTITY_PARAMS.contains(&p.key.text.as_str()))
        {
            conditions.insert(p.key.text.clone(), values::value(&p.value));
        }
    }
    conditions.extend(values::params(&data.conditions));
    conditions
}

fn op_of(cx: &Cx, measured: Option<NodeIndex>) -> Option<String> {
    measured
        .and_then(|a| action(cx.g.node(a)))
        .map(|a| a.op.clone())
}

fn figure_source(data: &ObservationData) -> FigureSource {
    match data.provenance {
        syntax::Provenance::Measured => FigureSource::Measured,
        syntax::Provenance::Modeled => FigureSource::Modeled,
    }
}

/// Which way a comparison bounds a value; gates of one kind bound in one direction.
fn direction(c: Comparison) -> i8 {
    match c {
        Comparison::Ge | Comparison::Gt => 1,
        Comparison::Le | Comparison::Lt => -1,
        Comparison::Eq => 0,
    }
}

/// Whether check `a` is at least as strict as check `b` (same metric, same
/// direction; thresholds in canonical units).
fn at_least_as_strict(a: (Comparison, f64), b: (Comparison, f64)) -> bool {
    let strict = |c: Comparison| matches!(c, Comparison::Gt | Comparison::Lt);
    match direction(a.0) {
        1 => a.1 > b.1 || (a.1 == b.1 && (strict(a.0) || !strict(b.0))),
        -1 => a.1 < b.1 || (a.1 == b.1 && (strict(a.0) || !strict(b.0))),
        _ => true,
    }
}

/// The key gates are merged and compared under: operation, metric, kernel and
/// direction. Shapes are left out so a gate carries over to a new model's shapes.
pub fn gate_key(g: &GateIr) -> (Option<String>, String, Option<String>, i8) {
    let kernel = g.conditions.get("kernel").map(notation::value);
    (
        g.op.clone(),
        g.metric.clone(),
        kernel,
        direction(g.comparison),
    )
}

/// Per key, the strictest check that passed on the effective path of the phase;
/// among equally strict ones the latest.
fn gates(cx: &Cx, phase: u8) -> Vec<GateIr> {
    let mut best: BTreeMap<_, (f64, GateIr)> = BTreeMap::new();
    for (node, data, measured) in path_observations(cx, phase) {
        if data.outcome() != Some(Verdict::Pass) {
            continue;
        }
        for m in &data.measurements {
            let Some(gate) = gate_from(cx, node, data, measured, m) else {
                continue;
            };
            let threshold = m
                .threshold
                .as_ref()
                .map_or(0.0, |t| values::canonical(&gate.metric, &t.value));
            let key = gate_key(&gate);
            let replace = best.get(&key).is_none_or(|(current, existing)| {
                at_least_as_strict(
                    (gate.comparison, threshold),
                    (existing.comparison, *current),
                )
            });
            if replace {
                best.insert(key, (threshold, gate));
            }
        }
    }
    best.into_values().map(|(_, gate)| gate).collect()
}

fn gate_from(
    cx: &Cx,
    node: &Node,
    data: &ObservationData,
    measured: Option<NodeIndex>,
    m: &Measurement,
) -> Option<GateIr> {
    let threshold = m.threshold.as_ref()?;
    let comparison = values::comparison(threshold.op)?;
    let metric = m.metric.text.clone();
    let unit = values::unit_of(&metric, &threshold.value);
    let baseline = if skills::is_performance_metric(&metric) {
        Baseline::PreviousPhase
    } else {
        Baseline::Absolute
    };
    Some(GateIr {
        recorded: Some(values::in_unit(&m.value, &unit)),
        threshold: values::number(&threshold.value),
        metric,
        comparison,
        unit,
        baseline,
        op: op_of(cx, measured),
        conditions: conditions(cx, data, measured),
        recorded_source: figure_source(data),
        provenance: vec![cx.provenance(node)],
    })
}

/// Performance figures at the end of the phase: per metric, operation and
/// conditions, the last value recorded on the effective path.
fn targets(cx: &Cx, phase: u8, model: &str) -> Vec<TargetIr> {
    let mut last: BTreeMap<(String, Option<String>, String), TargetIr> = BTreeMap::new();
    for (node, data, measured) in path_observations(cx, phase) {
        for m in &data.measurements {
            let metric = &m.metric.text;
            if !skills::is_performance_metric(metric) {
                continue;
            }
            let mut conditions = conditions(cx, data, measured);
            if let Some(act) = measured.and_then(|a| action(cx.g.node(a))) {
                for (k, v) in values::params(&act.params) {
                    conditions.entry(k).or_insert(v);
                }
            }
            if !model.is_empty() {
                conditions.insert("model".to_string(), Value::Text(model.to_string()));
            }
            let op = op_of(cx, measured);
            let key = (metric.clone(), op, notation::params(None, &conditions));
            last.insert(
                key,
                TargetIr {
                    metric: metric.clone(),
                    value: values::number(&m.value),
                    unit: values::unit_of(metric, &m.value),
                    conditions,
                    source: figure_source(data),
                    provenance: vec![cx.provenance(node)],
                },
            );
        }
    }
    last.into_values().collect()
}

/// Failed observations of an action in trajectory notation: the violated
/// measurements (or all of them, or the label) and `-> fail`.
fn failed_checks(g: &Graph, action: NodeIndex) -> Vec<String> {
    g.observations_of(action)
        .into_iter()
        .filter_map(|o| {
            let data = observation(g.node(o))?;
            (data.outcome() == Some(Verdict::Fail)).then(|| failed_check(data))
        })
        .collect()
}

fn failed_check(data: &ObservationData) -> String {
    let violated: Vec<&Measurement> = data
        .measurements
        .iter()
        .filter(|m| {
            m.threshold.as_ref().is_some_and(|t| {
                let value = values::canonical(&m.metric.text, &m.value);
                let limit = values::canonical(&m.metric.text, &t.value);
                !t.op.holds(value, limit)
            })
        })
        .collect();
    let shown: Vec<&Measurement> = if violated.is_empty() {
        data.measurements.iter().collect()
    } else {
        violated
    };
    let mut parts: Vec<String> = shown.iter().map(|m| measurement(m)).collect();
    if parts.is_empty() {
        parts.extend(data.label.as_deref().map(notation::quoted));
    }
    parts.push("-> fail".to_string());
    parts.join(" ")
}

fn measurement(m: &Measurement) -> String {
    let quantity = |q: &syntax::Quantity| {
        notation::quantity(
            values::number(q),
            q.unit.as_ref().map_or("", |u| u.text.as_str()),
        )
    };
    let mut text = format!("{} = {}", m.metric.text, quantity(&m.value));
    if let Some(t) = &m.threshold {
        text.push_str(&format!(" {} {}", t.op.symbol(), quantity(&t.value)));
    }
    text
}

/// Actions a lesson explains: those its fixes change and those its evidence measured.
fn explained_actions(g: &Graph, lesson: NodeIndex) -> Vec<NodeIndex> {
    let mut actions = g.targets(lesson, EdgeKind::Changes);
    for evidence in g.targets(lesson, EdgeKind::Evidence) {
        match g.node(evidence).kind {
            EntryKind::Observation => actions.extend(g.measured_action(evidence)),
            EntryKind::Action => actions.push(evidence),
            _ => {}
        }
    }
    actions
}

fn recorded_lesson(
    cx: &Cx,
    index: NodeIndex,
    node: &Node,
    data: &LessonData,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<LessonIr> {
    let mut remedies = Vec::new();
    for fix in &data.remedies {
        let (remedy, problems) = values::remedy(fix);
        for problem in problems {
            diagnostics.push(
                Diagnostic::new(
                    Code::UnloweredFix,
                    fix.span,
                    format!(
                        "`{}` of lesson `{}` cannot go into bundle.json: {}",
                        problem.key, node.id, problem.reason
                    ),
                )
                .with_hint("the SKILL.md keeps the fix as written; the runtime will not apply this assignment"),
            );
        }
        remedies.push(remedy);
    }
    let mut remedies = remedies.into_iter();
    let fix = remedies.next()?;
    let conditions = values::params(&data.conditions);
    let symptom = symptom(data.symptom.as_ref(), &conditions);
    let kind = match &data.symptom {
        Some(s)
            if s.predicates
                .iter()
                .any(|p| skills::is_performance_metric(&p.metric.text)) =>
        {
            LessonKind::Optimization
        }
        _ => LessonKind::Debugging,
    };
    let g = cx.g;
    let mut guarded: Vec<NodeIndex> = g.targets(index, EdgeKind::Changes);
    guarded.extend(g.sources(index, EdgeKind::By));
    let guarded: BTreeSet<NodeIndex> = guarded
        .into_iter()
        .filter_map(|a| cx.replacement(a))
        .collect();
    let mut phases: BTreeSet<u8> = guarded.iter().map(|a| g.node(*a).phase).collect();
    phases.insert(node.phase);
    let evidence: Vec<Provenance> = g
        .targets(index, EdgeKind::Evidence)
        .into_iter()
        .map(|e| cx.provenance(g.node(e)))
        .collect();
    let (cause, cause_condition) = match &data.cause {
        Some(c) => (
            c.text.as_ref().map(|t| t.text.clone()).unwrap_or_default(),
            c.condition.as_ref().map(graph::expr_text),
        ),
        None => (String::new(), None),
    };
    Some(LessonIr {
        id: cx.qualify(&node.id),
        kind,
        origin: LessonOrigin::Recorded,
        title: data.title.clone(),
        symptom_line: symptom_line(data.symptom.as_ref(), &symptom),
        skill: skills::lesson_skill(kind, &symptom, &fix.op),
        symptom,
        cause,
        cause_condition,
        fix,
        then: remedies.collect(),
        phases: phases.into_iter().collect(),
        guards: guarded.iter().map(|a| cx.step_id(*a)).collect(),
        evidence_count: u32::try_from(evidence.len()).unwrap_or(u32::MAX),
        evidence,
        provenance: vec![cx.provenance(node)],
    })
}

/// The machine-matchable symptom: failing operation, the lesson's conditions as
/// parameters, the first predicate (in the metric's canonical unit).
fn symptom(s: Option<&syntax::Symptom>, conditions: &BTreeMap<String, Value>) -> Symptom {
    let first = s.and_then(|s| {
        s.predicates
            .iter()
            .find_map(|p| values::comparison(p.op).map(|c| (p, c)))
    });
    Symptom {
        op: s
            .and_then(|s| s.failing_op.as_ref())
            .map(|n| n.text.clone()),
        params: conditions.clone(),
        metric: first.map(|(p, _)| p.metric.text.clone()),
        comparison: first.map(|(_, c)| c),
        value: first.map(|(p, _)| values::canonical(&p.metric.text, &p.value)),
        text: s
            .and_then(|s| s.text.as_ref())
            .map(|t| t.text.clone())
            .unwrap_or_default(),
    }
}

/// Every predicate of the symptom, as the language writes them.
fn symptom_line(s: Option<&syntax::Symptom>, machine: &Symptom) -> String {
    let Some(s) = s else {
        return notation::symptom(machine);
    };
    let mut line = String::new();
    if let Some(op) = &machine.op {
        line.push_str(op);
        if !machine.params.is_empty() {
            line.push_str(&format!(
                "({})",
                notation::params(Some(op), &machine.params)
            ));
        }
        line.push_str(" fails");
    }
    let predicates: Vec<String> = s
        .predicates
        .iter()
        .map(|p| {
            let unit = p.value.unit.as_ref().map_or("", |u| u.text.as_str());
            format!(
                "{} {} {}",
                p.metric.text,
                p.op.symbol(),
                notation::quantity(values::number(&p.value), unit)
            )
        })
        .collect();
    if !predicates.is_empty() {
        if !line.is_empty() {
            line.push_str(" with ");
        }
        line.push_str(&predicates.join(" and "));
    }
    line
}

/// The first failed check of an abandoned action as a symptom: the action's
/// operation (and kernel) failing with the comparison that held instead of the
/// threshold.
fn dead_end_symptom(cx: &Cx, index: NodeIndex, data: &graph::ActionData) -> Option<Symptom> {
    let g = cx.g;
    g.observations_of(index)
        .into_iter()
        .filter_map(|o| observation(g.node(o)))
        .filter(|d| d.outcome() == Some(Verdict::Fail))
        .flat_map(|d| d.measurements.iter())
        .find_map(|m| {
            let t = m.threshold.as_ref()?;
            let value = values::canonical(&m.metric.text, &m.value);
            let limit = values::canonical(&m.metric.text, &t.value);
            if t.op.holds(value, limit) {
                return None;
            }
            let (comparison, limit) = negate(t.op, limit, value);
            Some(Symptom {
                op: Some(data.op.clone()),
                params: kernel_only(&values::params(&data.params)),
                metric: Some(m.metric.text.clone()),
                comparison: Some(comparison),
                value: Some(limit),
                text: String::new(),
            })
        })
}

fn kernel_only(params: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    params
        .iter()
        .filter(|(k, _)| k.as_str() == "kernel")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A lesson distilled from a dead end that a later action replaced and no recorded
/// lesson explains: the failed check is the symptom, the replacement's changes the fix.
fn dead_end_lesson(
    cx: &Cx,
    index: NodeIndex,
    outcome: &DeadEndOutcome,
    dead_end: &DeadEndIr,
) -> Option<LessonIr> {
    let DeadEndOutcome::Superseded { by } = outcome else {
        return None;
    };
    let g = cx.g;
    let symptom = dead_end.symptom.clone()?;
    let replacement = g.find(by)?;
    let replacement_data = action(g.node(replacement))?;
    let replacement_params = values::params(&replacement_data.params);
    let fix = Remedy {
        op: replacement_data.op.clone(),
        set: changed_params(
            &replacement_data.op,
            &dead_end.op,
            &dead_end.params,
            &replacement_params,
        ),
    };
    let replacement_step = cx.replacement(replacement);
    let mut phases: BTreeSet<u8> = BTreeSet::from([dead_end.phase]);
    phases.extend(replacement_step.map(|s| g.node(s).phase));
    let evidence: Vec<Provenance> = g
        .observations_of(index)
        .into_iter()
        .filter(|o| observation(g.node(*o)).and_then(|d| d.outcome()) == Some(Verdict::Fail))
        .map(|o| cx.provenance(g.node(o)))
        .collect();
    let kind = if symptom
        .metric
        .as_deref()
        .is_some_and(skills::is_performance_metric)
    {
        LessonKind::Optimization
    } else {
        LessonKind::Debugging
    };
    Some(LessonIr {
        id: dead_end.id.clone(),
        kind,
        origin: LessonOrigin::DeadEnd,
        title: format!(
            "tried `{}`; it failed ({}) and `{}` replaced it",
            notation::call(&dead_end.op, &dead_end.params),
            dead_end.failed_checks.join("; "),
            cx.qualify(by)
        ),
        symptom_line: notation::symptom(&symptom),
        skill: skills::lesson_skill(kind, &symptom, &fix.op),
        cause: if dead_end.reasons.is_empty() {
            "not recorded: the trajectory shows only the failed check and the replacement"
                .to_string()
        } else {
            dead_end.reasons.join("\n\n")
        },
        symptom,
        cause_condition: None,
        fix,
        then: Vec::new(),
        phases: phases.into_iter().collect(),
        guards: replacement_step
            .map(|s| cx.step_id(s))
            .into_iter()
            .collect(),
        evidence_count: u32::try_from(evidence.len()).unwrap_or(u32::MAX),
        evidence,
        provenance: dead_end.provenance.clone(),
    })
}

/// The comparison that held instead of `op limit` when `value` failed it.
fn negate(op: syntax::CmpOp, limit: f64, value: f64) -> (Comparison, f64) {
    use syntax::CmpOp::*;
    match op {
        Ge => (Comparison::Lt, limit),
        Gt => (Comparison::Le, limit),
        Le => (Comparison::Gt, limit),
        Lt => (Comparison::Ge, limit),
        Eq if value > limit => (Comparison::Gt, limit),
        Eq => (Comparison::Lt, limit),
        Ne => (Comparison::Eq, limit),
    }
}

/// The parameters of `new` that differ from `old`, as literal assignments; list
/// parameters with named slots change slot by slot.
fn changed_params(
    new_op: &str,
    old_op: &str,
    old: &BTreeMap<String, Value>,
    new: &BTreeMap<String, Value>,
) -> BTreeMap<String, skillc_runtime::bundle::Expr> {
    use skillc_runtime::bundle::Expr;
    let spec = skillc_runtime::ops::operation(new_op);
    let mut set = BTreeMap::new();
    for (key, value) in new {
        let before = (new_op == old_op).then(|| old.get(key)).flatten();
        if before == Some(value) {
            continue;
        }
        let slots = spec
            .and_then(|s| s.param(key))
            .map_or(&[][..], |p| p.components);
        match (before, value) {
            (Some(Value::IntList(a)), Value::IntList(b))
                if a.len() == b.len() && b.len() == slots.len() =>
            {
                for ((slot, x), y) in slots.iter().zip(a).zip(b) {
                    if x != y {
                        set.insert(slot.to_string(), Expr::Lit(Value::Int(*y)));
                    }
                }
            }
            _ => {
                set.insert(key.clone(), Expr::Lit(value.clone()));
            }
        }
    }
    set
}
