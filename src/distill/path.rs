//! The effective path of one trajectory: what became of each action (a step, or a
//! dead end and why), the steps of each phase in dependency order, and the notes
//! and decisions attached to actions. Holds the per-trajectory context the other
//! extraction passes share ([`Cx`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use petgraph::graph::NodeIndex;
use skillc_runtime::bundle::Provenance;

use super::ir::DeadEndOutcome;
use crate::graph::{ActionData, EdgeKind, Graph, Node, NodeData, ObservationData};
use crate::syntax::{EntryKind, FileId, Verdict};

/// Phases a trajectory can have.
pub const PHASE_COUNT: usize = 8;

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

/// Operations that measure or check rather than change the deployment.
pub fn is_check(op: &str) -> bool {
    matches!(
        op,
        "validate-kernel"
            | "validate-block"
            | "verify-model"
            | "compare-reference"
            | "profile-prefill"
            | "profile-decode"
            | "diagnose-layers"
            | "evaluate"
    )
}

/// Per-trajectory context: the graph, what became of each node, nodes bucketed by
/// phase, and how entry ids and files are shown.
pub struct Cx<'a> {
    pub g: &'a Graph,
    paths: HashMap<FileId, String>,
    /// By node index.
    fates: Vec<Fate>,
    /// Actions and observations of each phase, in trajectory order.
    pub actions: Vec<Vec<NodeIndex>>,
    pub observations: Vec<Vec<NodeIndex>>,
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
pub fn step_id(phase: u8, entry: &str) -> String {
    format!("p{phase}-{entry}")
}

impl<'a> Cx<'a> {
    pub fn new(
        g: &'a Graph,
        paths: HashMap<FileId, String>,
        trajectory: String,
        shared_ids: &'a HashSet<String>,
    ) -> Self {
        let mut actions = vec![Vec::new(); PHASE_COUNT];
        let mut observations = vec![Vec::new(); PHASE_COUNT];
        let mut fates = Vec::with_capacity(g.node_count());
        for (index, node) in g.nodes() {
            let phase = usize::from(node.phase);
            match node.kind {
                EntryKind::Action => {
                    fates.push(fate(g, index));
                    if let Some(bucket) = actions.get_mut(phase) {
                        bucket.push(index);
                    }
                }
                EntryKind::Observation => {
                    fates.push(Fate::None);
                    if let Some(bucket) = observations.get_mut(phase) {
                        bucket.push(index);
                    }
                }
                _ => fates.push(Fate::None),
            }
        }
        supersede_changed_actions(g, &mut fates);
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

    pub fn fate(&self, index: NodeIndex) -> &Fate {
        self.fates.get(index.index()).unwrap_or(&Fate::None)
    }

    pub fn is_step(&self, index: NodeIndex) -> bool {
        matches!(self.fate(index), Fate::Step)
    }

    pub fn provenance(&self, node: &Node) -> Provenance {
        self.span_provenance(node.span, &node.id)
    }

    /// Provenance of anything with a span: `entry` names it (an entry id, a skill name).
    pub fn span_provenance(&self, span: crate::syntax::Span, entry: &str) -> Provenance {
        Provenance {
            file: self.paths.get(&span.file).cloned().unwrap_or_default(),
            line: span.line,
            entry: entry.to_string(),
        }
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

    pub fn step_id(&self, index: NodeIndex) -> String {
        let node = self.g.node(index);
        step_id(node.phase, &self.qualify(&node.id))
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

/// Reverted or superseded by an effective entry, or whose last verdict failed: a
/// dead end (a fixed check is dropped instead); otherwise a step.
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
    let checks = action(node).is_some_and(|a| is_check(&a.op));
    match fixer {
        Some(_) if checks => Fate::Dropped,
        Some(by) => Fate::Dead(DeadEndOutcome::Superseded {
            by: g.node(*by).id.clone(),
        }),
        None => Fate::Dead(DeadEndOutcome::Failed),
    }
}

/// An action that applies a lesson (`fixes … by <lesson>`) replaces the earlier
/// action of the same operation that the lesson's fix changes (the graph's `changes`
/// edge): `reuse-static-weights key=per-layer` fixing a failed check replaces the
/// `reuse-static-weights key=shared` that caused it, even when the check, not the
/// culprit, is what the failed observation measured.
fn supersede_changed_actions(g: &Graph, fates: &mut [Fate]) {
    for (fixer, node) in g.nodes() {
        let Some(fixer_op) = action(node).map(|a| a.op.as_str()) else {
            continue;
        };
        for lesson in g.targets(fixer, EdgeKind::By) {
            for changed in g.targets(lesson, EdgeKind::Changes) {
                let same_op = action(g.node(changed)).is_some_and(|a| a.op == fixer_op);
                let fate = fates.get_mut(changed.index());
                if let Some(fate @ Fate::Step) = fate {
                    if same_op && changed < fixer {
                        *fate = Fate::Dead(DeadEndOutcome::Superseded {
                            by: node.id.clone(),
                        });
                    }
                }
            }
        }
    }
}

/// Texts of notes and decisions, by the action they are about (directly, or about
/// one of its observations), and decisions by the actions they revert.
pub fn attached_texts(g: &Graph) -> HashMap<NodeIndex, Vec<String>> {
    let mut texts: HashMap<NodeIndex, Vec<String>> = HashMap::new();
    for (index, node) in g.nodes() {
        let text = match &node.data {
            NodeData::Note { text } | NodeData::Decision { text } => text,
            _ => continue,
        };
        let mut targets = g.targets(index, EdgeKind::About);
        targets.extend(g.targets(index, EdgeKind::Reverts));
        targets.extend(g.targets(index, EdgeKind::Supersedes));
        let mut seen = HashSet::new();
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

pub fn session_titles(g: &Graph, phase: u8) -> Vec<String> {
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
pub fn ordered_steps(cx: &Cx, phase: usize) -> Vec<NodeIndex> {
    let steps: Vec<NodeIndex> = cx.actions[phase]
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
