//! The effective path of one trajectory: what became of each action (a step, or a
//! dead end and why), the steps of each phase in dependency order, and the notes
//! and decisions attached to actions. Holds the per-trajectory context the other
//! extraction passes share ([`Cx`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use petgraph::graph::NodeIndex;
use skillc_runtime::bundle::Provenance;
use skillc_runtime::phase::DeployPhase;

use super::ir::DeadEndOutcome;
use crate::graph::{ActionData, EdgeKind, Graph, Node, NodeData, ObservationData};
use crate::syntax::{EntryKind, FileId, ValueKind, Verdict};

/// What became of an action.
#[derive(Debug, Clone)]
pub enum Fate {
    Step,
    Dead(DeadEndOutcome),
    /// A check whose failure a later action fixed: the failure belongs to what was
    /// checked (a dead end of its own, or a step the fix changed), so the check
    /// itself is neither a step nor a dead end.
    Dropped,
    /// Not an action.
    None,
}

/// Per-trajectory context: the graph, what became of each node, nodes bucketed by
/// phase, and how entry ids and files are shown.
pub struct Cx<'a> {
    pub g: &'a Graph,
    paths: HashMap<FileId, String>,
    /// By node index.
    fates: Vec<Fate>,
    /// Actions and observations of each phase (by its number), in trajectory order.
    actions: Vec<Vec<NodeIndex>>,
    observations: Vec<Vec<NodeIndex>>,
    trajectory: String,
    shared_ids: &'a HashSet<String>,
}

pub fn observation(node: &Node) -> Option<&ObservationData> {
    match &node.data {
        NodeData::Observation(data) => Some(data),
        _ => None,
    }
}

pub fn action(node: &Node) -> Option<&ActionData> {
    match &node.data {
        NodeData::Action(data) => Some(data),
        _ => None,
    }
}

/// `p<phase>-<entry id>`.
pub fn step_id(phase: DeployPhase, entry: &str) -> String {
    format!("p{phase}-{entry}")
}

impl<'a> Cx<'a> {
    pub fn new(
        g: &'a Graph,
        paths: HashMap<FileId, String>,
        trajectory: String,
        shared_ids: &'a HashSet<String>,
    ) -> Self {
        let mut actions = vec![Vec::new(); DeployPhase::ALL.len()];
        let mut observations = vec![Vec::new(); DeployPhase::ALL.len()];
        let mut fates = Vec::with_capacity(g.node_count());
        for (index, node) in g.nodes() {
            // An entry with no phase (only in a graph with errors) is in no bucket.
            let bucket = node.phase.map(|p| usize::from(p.index()));
            match node.kind {
                EntryKind::Action => {
                    fates.push(fate(g, index));
                    if let Some(bucket) = bucket.and_then(|b| actions.get_mut(b)) {
                        bucket.push(index);
                    }
                }
                EntryKind::Observation => {
                    fates.push(Fate::None);
                    if let Some(bucket) = bucket.and_then(|b| observations.get_mut(b)) {
                        bucket.push(index);
                    }
                }
                _ => fates.push(Fate::None),
            }
        }
        supersede_culprits(g, &mut fates);
        Cx {
            g,
            paths,
            fates,
            actions,
            observations,
            trajectory,
            shared_ids,
        }
    }

    /// The actions of `phase`, in trajectory order.
    pub fn actions(&self, phase: DeployPhase) -> &[NodeIndex] {
        &self.actions[usize::from(phase.index())]
    }

    /// The observations of `phase`, in trajectory order.
    pub fn observations(&self, phase: DeployPhase) -> &[NodeIndex] {
        &self.observations[usize::from(phase.index())]
    }

    pub fn fate(&self, index: NodeIndex) -> &Fate {
        self.fates.get(index.index()).unwrap_or(&Fate::None)
    }

    pub fn is_step(&self, index: NodeIndex) -> bool {
        matches!(self.fate(index), Fate::Step)
    }

    pub fn provenance(&self, node: &Node) -> Provenance {
        Provenance {
            source: node.source.clone(),
            ..self.span_provenance(node.span, &node.id)
        }
    }

    /// Provenance of anything with a span: `entry` names it (an entry id, a skill name).
    pub fn span_provenance(&self, span: crate::syntax::Span, entry: &str) -> Provenance {
        Provenance {
            file: self.paths.get(&span.file).cloned().unwrap_or_default(),
            line: span.line,
            entry: entry.to_string(),
            source: None,
        }
    }

    /// The trajectory's name (its header's), the deployment its lessons came from.
    pub fn trajectory(&self) -> &str {
        &self.trajectory
    }

    /// An entry id as the bundle shows it: qualified with the trajectory's name when
    /// another trajectory of the build uses it too.
    pub fn qualify(&self, entry: &str) -> String {
        if self.shared_ids.contains(entry) {
            format!("{}.{entry}", self.trajectory)
        } else {
            entry.to_string()
        }
    }

    /// The step id of an action; `None` for an entry with no phase (only in a graph
    /// with errors, which is never distilled).
    pub fn step_id(&self, index: NodeIndex) -> Option<String> {
        let node = self.g.node(index);
        Some(step_id(node.phase?, &self.qualify(&node.id)))
    }

    pub fn outcome(&self, outcome: &DeadEndOutcome) -> DeadEndOutcome {
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

    /// The step that finally replaced an action (following supersessions), or the
    /// action itself when it is a step.
    pub fn replacement(&self, mut index: NodeIndex) -> Option<NodeIndex> {
        for _ in 0..self.g.node_count() {
            match self.fate(index) {
                Fate::Step => return Some(index),
                Fate::Dead(DeadEndOutcome::Superseded { by }) => index = self.g.find(by)?,
                _ => return None,
            }
        }
        None
    }

    /// The action an observation measures, when that action is a step (or none is
    /// named); `None` for observations of dead ends and off the effective path.
    pub fn on_path(&self, observation: NodeIndex) -> Option<Option<NodeIndex>> {
        if !self.g.node(observation).effective {
            return None;
        }
        let measured = self.g.measured_action(observation);
        match measured {
            Some(a) if !self.is_step(a) => None,
            _ => Some(measured),
        }
    }
}

/// Reverted or superseded by an effective entry: a dead end. Otherwise what its last
/// verdict says: a failure that an action of the same operation fixed is a dead end
/// superseded by it (the action was redone); a failure fixed by an action of another
/// operation leaves the action on the path (the fix was added beside it); a fixed
/// check is dropped; an unfixed failure is a dead end.
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
    let last = g.observations_of(index).into_iter().rev().find_map(|o| {
        observation(g.node(o))
            .and_then(|d| d.outcome())
            .map(|v| (o, v))
    });
    let Some((failed, Verdict::Fail)) = last else {
        return Fate::Step;
    };
    // The fixer may itself have been replaced later; the replacement chain is
    // followed when the fix is attached to steps.
    let fixers: Vec<NodeIndex> = g
        .sources(failed, EdgeKind::Fixes)
        .into_iter()
        .filter(|f| g.node(*f).kind == EntryKind::Action)
        .collect();
    let fixer = fixers
        .iter()
        .find(|f| g.node(**f).effective)
        .or(fixers.first());
    let op = action(node).map(|a| a.op);
    match fixer {
        Some(_) if op.is_some_and(|o| o.measures()) => Fate::Dropped,
        Some(by) if action(g.node(*by)).map(|a| a.op) == op => {
            Fate::Dead(DeadEndOutcome::Superseded {
                by: g.node(*by).id.clone(),
            })
        }
        Some(_) => Fate::Step,
        None => Fate::Dead(DeadEndOutcome::Failed),
    }
}

/// The actions an observation stands for: those it measures (`after`, written or
/// derived), then, through written `after` references between actions, the ones they
/// followed from, nearest first.
pub fn after_chain(g: &Graph, observation: NodeIndex) -> Vec<NodeIndex> {
    let mut chain: Vec<NodeIndex> = g
        .targets(observation, EdgeKind::After)
        .into_iter()
        .filter(|t| g.node(*t).kind == EntryKind::Action)
        .collect();
    let mut next = 0;
    while next < chain.len() {
        let from = chain[next];
        next += 1;
        for target in g.written_targets(from, EdgeKind::After) {
            if g.node(target).kind == EntryKind::Action && !chain.contains(&target) {
                chain.push(target);
            }
        }
    }
    chain
}

/// An action that applies a lesson (`fixes … by`) replaces the earlier step of its
/// own operation (and kernel) that the failures it fixes, or the lesson's evidence,
/// stand for through recorded `after` references: `reuse-static-weights
/// key=per-layer` fixing a failed verify replaces the `reuse-static-weights
/// key=shared` the verify followed, even though the verify, not the culprit, is what
/// the failed observation measured. Nothing is attributed by nearness alone.
fn supersede_culprits(g: &Graph, fates: &mut [Fate]) {
    for (fixer, node) in g.nodes() {
        let Some(data) = action(node) else {
            continue;
        };
        let mut failures = g.targets(fixer, EdgeKind::Fixes);
        for lesson in g.targets(fixer, EdgeKind::By) {
            failures.extend(g.targets(lesson, EdgeKind::Evidence));
        }
        let culprit = failures
            .into_iter()
            .flat_map(|o| after_chain(g, o))
            .find(|c| *c < fixer && same_target(g, *c, data));
        if let Some(fate @ Fate::Step) = culprit.and_then(|c| fates.get_mut(c.index())) {
            *fate = Fate::Dead(DeadEndOutcome::Superseded {
                by: node.id.clone(),
            });
        }
    }
}

/// Whether `candidate` runs the operation of `fixer` on the same kernel.
fn same_target(g: &Graph, candidate: NodeIndex, fixer: &ActionData) -> bool {
    let Some(c) = action(g.node(candidate)) else {
        return false;
    };
    let kernel = |a: &ActionData| match a.param("kernel").map(|p| &p.value.kind) {
        Some(ValueKind::Ident(k) | ValueKind::Str(k)) => Some(k.clone()),
        _ => None,
    };
    c.op == fixer.op && (kernel(fixer).is_none() || kernel(c) == kernel(fixer))
}

pub fn session_titles(g: &Graph, phase: DeployPhase) -> Vec<String> {
    let mut titles: Vec<String> = Vec::new();
    for session in g.sessions.iter().filter(|s| s.phase == Some(phase)) {
        if let Some(title) = &session.title {
            if !titles.contains(title) {
                titles.push(title.clone());
            }
        }
    }
    titles
}

/// The phase's steps, `after` dependencies first, otherwise in trajectory order.
pub fn ordered_steps(cx: &Cx, phase: DeployPhase) -> Vec<NodeIndex> {
    let steps: Vec<NodeIndex> = cx
        .actions(phase)
        .iter()
        .copied()
        .filter(|a| cx.is_step(*a))
        .collect();
    // Buckets hold nodes in trajectory order, so `steps` is sorted by index.
    let position = |node: NodeIndex| steps.binary_search(&node).ok();
    let mut waiting = vec![0usize; steps.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    for (i, &index) in steps.iter().enumerate() {
        for dep in cx.g.targets(index, EdgeKind::After) {
            if let Some(d) = position(dep).filter(|d| *d != i) {
                waiting[i] += 1;
                dependents[d].push(i);
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..steps.len())
        .filter(|i| waiting[*i] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::with_capacity(steps.len());
    let mut placed = vec![false; steps.len()];
    while let Some(Reverse(i)) = ready.pop() {
        order.push(steps[i]);
        placed[i] = true;
        for &next in &dependents[i] {
            waiting[next] -= 1;
            if waiting[next] == 0 {
                ready.push(Reverse(next));
            }
        }
    }
    // A cycle is a front-end error; keep whatever it left in trajectory order.
    order.extend((0..steps.len()).filter(|i| !placed[*i]).map(|i| steps[i]));
    order
}
