//! One trajectory's graph → its share of the skill IR: per phase the effective path
//! as steps, exit gates, targets and dead ends, plus the trajectory's lessons. Ids
//! are the trajectory's entry ids (qualified when several trajectories share one),
//! so nothing here depends on counters over the whole graph. Phases are extracted
//! in parallel and collected in order.

use std::collections::{BTreeMap, HashMap, HashSet};

use petgraph::graph::NodeIndex;
use rayon::prelude::*;

use super::checks;
use super::ir::{DeadEndIr, DeclaredSkillIr, LessonIr, NoteIr, PhaseIr, SourceIr, StepIr};
use super::lessons;
use super::path::{self, action, Cx, Fate, PHASE_COUNT};
use super::{catalog, skills, values};
use crate::diag::Diagnostic;
use crate::emit::bundle_json::sha256_hex;
use crate::graph::{Graph, NodeData};
use crate::syntax::{FileId, SourceFile, Span};

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
pub struct Extracted<'a> {
    pub source: SourceIr,
    /// The skills the trajectory declares, with the notes that joined them.
    pub declared: Vec<DeclaredSkillIr>,
    /// Eight phases; `lessons` lists are filled after merging.
    pub phases: Vec<PhaseIr>,
    pub lessons: Vec<LessonIr>,
    pub graph: &'a Graph,
    /// Step id → the action it came from, for conflict reports.
    pub step_nodes: HashMap<String, NodeIndex>,
    pub header_span: Option<Span>,
    pub diagnostics: Vec<Diagnostic>,
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Provenance paths (`<dir>/<file>`) and the source record with file hashes.
fn source(input: &Input) -> (HashMap<FileId, String>, SourceIr) {
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
    (paths, source)
}

pub fn extract<'a>(input: &Input<'a>) -> Extracted<'a> {
    let g = input.graph;
    let (paths, source) = source(input);
    let cx = Cx::new(g, paths, source.trajectory.clone(), input.shared_ids);
    let texts = path::attached_texts(g);
    let mut diagnostics = Vec::new();
    let (mut lessons, explained) = recorded_lessons(&cx, &mut diagnostics);
    let parts: Vec<PhasePart> = (0..PHASE_COUNT)
        .into_par_iter()
        .map(|p| phase(&cx, p, &texts, &explained, &source.model))
        .collect();
    let mut phases = Vec::with_capacity(PHASE_COUNT);
    let mut step_nodes = HashMap::new();
    for part in parts {
        phases.push(part.phase);
        lessons.extend(part.lessons);
        step_nodes.extend(part.step_nodes);
    }
    Extracted {
        declared: declared(&cx),
        source,
        phases,
        lessons,
        graph: g,
        step_nodes,
        header_span: g.header.as_ref().map(|h| h.span),
        diagnostics,
    }
}

/// The trajectory's skill declarations, each with the notes and decisions that joined
/// it, in trajectory order.
fn declared(cx: &Cx) -> Vec<DeclaredSkillIr> {
    let g = cx.g;
    let mut skills: Vec<DeclaredSkillIr> = g
        .skills
        .iter()
        .map(|s| DeclaredSkillIr {
            name: s.name.clone(),
            kind: s.kind,
            title: s.title.clone(),
            triggers: s.triggers.clone(),
            notes: Vec::new(),
            provenance: vec![cx.span_provenance(s.span, &s.name)],
        })
        .collect();
    for (index, node) in g.nodes() {
        let (NodeData::Note { text } | NodeData::Decision { text }, Some(skill)) =
            (&node.data, node.skill)
        else {
            continue;
        };
        if let Some(declared) = skills.get_mut(skill) {
            declared.notes.push(NoteIr {
                id: cx.qualify(&node.id),
                text: text.clone(),
                provenance: cx.provenance(g.node(index)),
            });
        }
    }
    skills
}

/// The dead ends a lesson explains: action → (skill, lesson id) of the first one.
type Explained = HashMap<NodeIndex, (String, String)>;

fn recorded_lessons(cx: &Cx, diagnostics: &mut Vec<Diagnostic>) -> (Vec<LessonIr>, Explained) {
    let mut found = Vec::new();
    let mut explained = Explained::new();
    for (index, node) in cx.g.nodes() {
        let (NodeData::Lesson(data), true) = (&node.data, node.effective) else {
            continue;
        };
        let Some(lesson) = lessons::recorded(cx, index, data, diagnostics) else {
            continue;
        };
        for action in lessons::explained_actions(cx.g, index) {
            if matches!(cx.fate(action), Fate::Dead(_)) {
                explained
                    .entry(action)
                    .or_insert_with(|| (lesson.skill.clone(), lesson.id.clone()));
            }
        }
        found.push(lesson);
    }
    (found, explained)
}

/// One phase of the IR, the lessons its dead ends taught, and where its steps came from.
struct PhasePart {
    phase: PhaseIr,
    lessons: Vec<LessonIr>,
    step_nodes: Vec<(String, NodeIndex)>,
}

fn phase(
    cx: &Cx,
    p: usize,
    texts: &HashMap<NodeIndex, Vec<String>>,
    explained: &Explained,
    model: &str,
) -> PhasePart {
    let spec = &catalog::PHASES[p];
    let order = path::ordered_steps(cx, p);
    let step_nodes = order.iter().map(|&a| (cx.step_id(a), a)).collect();
    let mut taught = Vec::new();
    let dead_ends = cx.actions[p]
        .iter()
        .filter_map(|&a| dead_end(cx, a, texts, explained, &mut taught))
        .collect();
    PhasePart {
        phase: PhaseIr {
            index: spec.index,
            name: spec.name.to_string(),
            title: spec.title.to_string(),
            sessions: path::session_titles(cx.g, spec.index),
            steps: order.iter().map(|&a| step(cx, a, texts)).collect(),
            exit_gates: checks::gates(cx, p),
            lessons: Vec::new(),
            targets: checks::targets(cx, p, model),
            dead_ends,
        },
        lessons: taught,
        step_nodes,
    }
}

/// A step; `guarded_by` is filled once every lesson of every trajectory is known.
fn step(cx: &Cx, index: NodeIndex, texts: &HashMap<NodeIndex, Vec<String>>) -> StepIr {
    let node = cx.g.node(index);
    let (op, params) = action(node).map_or_else(
        || (String::new(), BTreeMap::new()),
        |data| (data.op.clone(), values::params(&data.params)),
    );
    StepIr {
        id: cx.step_id(index),
        op,
        params,
        guarded_by: Vec::new(),
        notes: texts.get(&index).cloned().unwrap_or_default(),
        skill: cx.g.skill_of(index).map(|s| s.name.clone()),
        provenance: vec![cx.provenance(node)],
    }
}

/// The dead end an abandoned action leaves, kept in the skill of the lesson that
/// explains it, else of a lesson distilled from it (pushed to `taught`), else of
/// its own operation.
fn dead_end(
    cx: &Cx,
    index: NodeIndex,
    texts: &HashMap<NodeIndex, Vec<String>>,
    explained: &Explained,
    taught: &mut Vec<LessonIr>,
) -> Option<DeadEndIr> {
    let Fate::Dead(outcome) = cx.fate(index) else {
        return None;
    };
    let node = cx.g.node(index);
    let data = action(node)?;
    let mut dead_end = DeadEndIr {
        id: cx.qualify(&node.id),
        phase: node.phase,
        op: data.op.clone(),
        params: values::params(&data.params),
        outcome: cx.outcome(outcome),
        symptom: checks::dead_end_symptom(cx, index, data),
        failed_checks: checks::failed_checks(cx, index),
        reasons: texts.get(&index).cloned().unwrap_or_default(),
        explained_by: None,
        skill: String::new(),
        provenance: vec![cx.provenance(node)],
    };
    let declared = cx.g.skill_of(index).map(|s| s.name.clone());
    if let Some((skill, lesson)) = explained.get(&index) {
        dead_end.skill = skill.clone();
        dead_end.explained_by = Some(lesson.clone());
    } else if let Some(mut lesson) = lessons::from_dead_end(cx, index, outcome, &dead_end) {
        if let Some(skill) = &declared {
            lesson.skill = skill.clone();
        }
        dead_end.skill = lesson.skill.clone();
        dead_end.explained_by = Some(lesson.id.clone());
        taught.push(lesson);
    } else {
        dead_end.skill = skills::dead_end_skill(&dead_end.op, &dead_end.params);
    }
    if let Some(skill) = declared {
        dead_end.skill = skill;
    }
    Some(dead_end)
}
