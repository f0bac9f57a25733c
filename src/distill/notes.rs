//! Where every note and decision of a trajectory lands, found through recorded edges
//! only: `in <skill>` first; else what it is `about` (or `reverts`, `supersedes`):
//! a lesson, a failed observation that is a lesson's evidence (the note is how that
//! failure was diagnosed), a step or an observation of it, an abandoned action. A
//! note about entries that land in different places, or about none, belongs to its
//! phase's context. Every note lands somewhere, so none is lost.

use petgraph::graph::NodeIndex;

use super::ir::{NoteIr, NotePlace};
use super::path::{observation, Cx, Fate};
use crate::graph::{EdgeKind, NodeData};
use crate::syntax::{EntryKind, Verdict};

/// Every note and decision of the trajectory with its place, in trajectory order.
pub fn place(cx: &Cx) -> Vec<NoteIr> {
    let g = cx.g;
    let mut notes = Vec::new();
    for (index, node) in g.nodes() {
        let (text, decision) = match &node.data {
            NodeData::Note { text, .. } => (text, false),
            NodeData::Decision { text } => (text, true),
            _ => continue,
        };
        // Only a graph with errors, which is never distilled, has entries with no phase.
        let Some(phase) = node.phase else {
            continue;
        };
        let place = match g.skill_of(index) {
            Some(skill) => NotePlace::Skill(skill.name.clone()),
            None => about(cx, index).unwrap_or(NotePlace::Phase(phase)),
        };
        notes.push(NoteIr {
            id: cx.qualify(&node.id),
            decision,
            phase,
            text: text.clone(),
            place,
            provenance: cx.provenance(node),
            span: node.span,
        });
    }
    notes
}

/// The one place all of the note's targets agree on.
fn about(cx: &Cx, note: NodeIndex) -> Option<NotePlace> {
    let g = cx.g;
    let mut targets = g.targets(note, EdgeKind::About);
    targets.extend(g.targets(note, EdgeKind::Reverts));
    targets.extend(g.targets(note, EdgeKind::Supersedes));
    let mut places: Vec<NotePlace> = targets.into_iter().filter_map(|t| target(cx, t)).collect();
    places.sort();
    places.dedup();
    match places.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// Where a note about `index` lands.
fn target(cx: &Cx, index: NodeIndex) -> Option<NotePlace> {
    let g = cx.g;
    let node = g.node(index);
    match node.kind {
        EntryKind::Lesson if node.effective => Some(NotePlace::Lesson(cx.qualify(&node.id))),
        EntryKind::Observation => diagnosed_lesson(cx, index).or_else(|| {
            let homes: Vec<NotePlace> = g
                .targets(index, EdgeKind::After)
                .into_iter()
                .filter(|t| g.node(*t).kind == EntryKind::Action)
                .filter_map(|a| action(cx, a))
                .collect();
            // A note on an observation of a redone action explains why it was redone.
            homes
                .iter()
                .find(|h| matches!(h, NotePlace::DeadEnd(_)))
                .or(homes.first())
                .cloned()
        }),
        EntryKind::Action => action(cx, index),
        _ => None,
    }
}

/// The lesson whose evidence a failed observation is.
fn diagnosed_lesson(cx: &Cx, observation_index: NodeIndex) -> Option<NotePlace> {
    let g = cx.g;
    let failed = observation(g.node(observation_index))
        .and_then(|o| o.outcome())
        .is_some_and(|v| v == Verdict::Fail);
    if !failed {
        return None;
    }
    g.sources(observation_index, EdgeKind::Evidence)
        .into_iter()
        .find(|l| g.node(*l).effective && g.node(*l).kind == EntryKind::Lesson)
        .map(|l| NotePlace::Diagnosis(cx.qualify(&g.node(l).id)))
}

fn action(cx: &Cx, index: NodeIndex) -> Option<NotePlace> {
    let g = cx.g;
    match cx.fate(index) {
        Fate::Step => cx.step_id(index).map(NotePlace::Step),
        Fate::Dead(_) => Some(NotePlace::DeadEnd(cx.qualify(&g.node(index).id))),
        // A fixed check: its failure is explained by the lesson its fix applied.
        Fate::Dropped => g.observations_of(index).into_iter().find_map(|o| {
            g.sources(o, EdgeKind::Fixes)
                .into_iter()
                .flat_map(|f| g.targets(f, EdgeKind::By))
                .next()
                .map(|l| NotePlace::Diagnosis(cx.qualify(&g.node(l).id)))
        }),
        Fate::None => None,
    }
}
