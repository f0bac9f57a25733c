//! One trajectory's graph → its share of the skill IR: per phase the effective path
//! as steps, exit gates, targets and dead ends, the trajectory's lessons, every note
//! with its place, the skills it declares and the text of every entry. Ids are the
//! trajectory's entry ids (qualified when several trajectories share one), so nothing
//! here depends on counters over the whole graph. Phases are extracted in parallel
//! and collected in order.

use std::collections::{BTreeMap, HashMap, HashSet};

use petgraph::graph::NodeIndex;
use rayon::prelude::*;
use skillc_runtime::phase::DeployPhase;

use super::ir::{
    DeadEndIr, DeadEndOutcome, DeclaredSkillIr, DroppedIr, EntryIr, LessonIr, NoteIr, NotePlace,
    PhaseIr, SourceIr, StepIr,
};
use super::lessons;
use super::notes;
use super::observed;
use super::path::{self, action, Cx, Fate};
use super::{catalog, values};
use crate::diag::Diagnostic;
use crate::digest::sha256_hex;
use crate::graph::{EdgeKind, Graph, NodeData};
use crate::syntax::{FileId, SourceFile, Span};

/// One trajectory to distill.
#[derive(Clone, Copy)]
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
    /// The skills the trajectory declares.
    pub declared: Vec<DeclaredSkillIr>,
    /// Eight phases; `lessons` lists are filled after merging.
    pub phases: Vec<PhaseIr>,
    pub lessons: Vec<LessonIr>,
    pub notes: Vec<NoteIr>,
    pub entries: Vec<EntryIr>,
    pub dropped: Vec<DroppedIr>,
    pub graph: &'a Graph,
    pub sources: &'a [SourceFile],
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
        weights: header.and_then(|h| h.weights),
        files,
    };
    (paths, source)
}

pub fn extract<'a>(input: &Input<'a>) -> Extracted<'a> {
    let g = input.graph;
    let (paths, source) = source(input);
    let cx = Cx::new(g, paths, source.trajectory.clone(), input.shared_ids);
    let notes = notes::place(&cx);
    let places = Places::new(&notes);
    let mut diagnostics = Vec::new();
    let mut dropped = Vec::new();
    let (mut lessons, explained) = recorded_lessons(&cx, &places, &mut dropped, &mut diagnostics);
    // By id: dead ends look up the notes that explain them.
    let note_texts: HashMap<&str, &str> = notes
        .iter()
        .map(|n| (n.id.as_str(), n.text.as_str()))
        .collect();
    let parts: Vec<PhasePart> = DeployPhase::ALL
        .par_iter()
        .map(|&p| phase(&cx, p, &places, &note_texts, &explained, &source.model))
        .collect();
    let mut phases = Vec::with_capacity(DeployPhase::ALL.len());
    let mut step_nodes = HashMap::new();
    for part in parts {
        phases.push(part.phase);
        lessons.extend(part.lessons);
        step_nodes.extend(part.step_nodes);
    }
    Extracted {
        declared: declared(&cx),
        entries: entries(&cx, input.sources),
        source,
        phases,
        lessons,
        notes,
        dropped,
        graph: g,
        sources: input.sources,
        step_nodes,
        header_span: g.header.as_ref().map(|h| h.span),
        diagnostics,
    }
}

/// Note ids by the place they land, in trajectory order.
struct Places(BTreeMap<NotePlace, Vec<String>>);

impl Places {
    fn new(notes: &[NoteIr]) -> Self {
        let mut places: BTreeMap<NotePlace, Vec<String>> = BTreeMap::new();
        for note in notes {
            places
                .entry(note.place.clone())
                .or_default()
                .push(note.id.clone());
        }
        Places(places)
    }

    fn at(&self, place: NotePlace) -> Vec<String> {
        self.0.get(&place).cloned().unwrap_or_default()
    }
}

/// The trajectory's skill declarations, in trajectory order.
fn declared(cx: &Cx) -> Vec<DeclaredSkillIr> {
    cx.g.skills
        .iter()
        .map(|s| DeclaredSkillIr {
            name: s.name.clone(),
            kind: s.kind,
            title: s.title.clone(),
            triggers: s.triggers.clone(),
            provenance: vec![cx.span_provenance(s.span, &s.name)],
        })
        .collect()
}

/// The source text of every entry and skill declaration.
fn entries(cx: &Cx, sources: &[SourceFile]) -> Vec<EntryIr> {
    let text = |span: Span| {
        sources
            .get(span.file.0 as usize)
            .and_then(|f| f.text.get(span.start as usize..span.end as usize))
            .map(|t| t.trim_end().to_string())
            .unwrap_or_default()
    };
    let mut entries: Vec<EntryIr> =
        cx.g.nodes()
            .map(|(_, node)| EntryIr {
                id: cx.qualify(&node.id),
                provenance: cx.provenance(node),
                text: text(node.span),
            })
            .collect();
    entries.extend(cx.g.skills.iter().map(|s| EntryIr {
        id: s.name.clone(),
        provenance: cx.span_provenance(s.span, &s.name),
        text: text(s.span),
    }));
    entries
}

/// The dead ends a lesson explains, through recorded edges: action → lesson id.
type Explained = HashMap<NodeIndex, String>;

fn recorded_lessons(
    cx: &Cx,
    places: &Places,
    dropped: &mut Vec<DroppedIr>,
    diagnostics: &mut Vec<Diagnostic>,
) -> (Vec<LessonIr>, Explained) {
    let g = cx.g;
    let mut found = Vec::new();
    let mut explained = Explained::new();
    let superseded = superseded_by(cx);
    for (index, node) in g.nodes() {
        let NodeData::Lesson(data) = &node.data else {
            continue;
        };
        if !node.effective {
            let by = g
                .sources(index, EdgeKind::Supersedes)
                .first()
                .map_or_else(String::new, |s| g.node(*s).id.clone());
            dropped.push(DroppedIr {
                id: cx.qualify(&node.id),
                what: "lesson",
                reason: format!("superseded by lesson `{by}`"),
                provenance: cx.provenance(node),
                span: node.span,
            });
            continue;
        }
        let Some(mut lesson) = lessons::recorded(cx, index, data, diagnostics) else {
            continue;
        };
        lesson.diagnosis = places.at(NotePlace::Diagnosis(lesson.id.clone()));
        lesson.notes = places.at(NotePlace::Lesson(lesson.id.clone()));
        for action in explained_actions(cx, index, &superseded) {
            if matches!(cx.fate(action), Fate::Dead(_)) {
                explained.entry(action).or_insert_with(|| lesson.id.clone());
            }
        }
        found.push(lesson);
    }
    (found, explained)
}

/// Actions a lesson explains: those its evidence measured, and those the actions
/// applying it replaced.
fn explained_actions(
    cx: &Cx,
    lesson: NodeIndex,
    superseded: &HashMap<&str, Vec<NodeIndex>>,
) -> Vec<NodeIndex> {
    let g = cx.g;
    let mut actions = Vec::new();
    for evidence in g.targets(lesson, EdgeKind::Evidence) {
        actions.extend(
            g.targets(evidence, EdgeKind::After)
                .into_iter()
                .filter(|a| action(g.node(*a)).is_some()),
        );
    }
    let mut replaced: Vec<NodeIndex> = lessons::appliers(cx, lesson)
        .into_iter()
        .flat_map(|a| superseded.get(g.node(a).id.as_str()).into_iter().flatten())
        .copied()
        .collect();
    // In trajectory order, as a scan of the graph would find them.
    replaced.sort();
    replaced.dedup();
    actions.extend(replaced);
    actions
}

/// The actions each entry superseded, by the superseding entry's id: looked up
/// per lesson, where a scan of every node per lesson was quadratic.
fn superseded_by<'c>(cx: &'c Cx<'_>) -> HashMap<&'c str, Vec<NodeIndex>> {
    let mut by_id: HashMap<&str, Vec<NodeIndex>> = HashMap::new();
    for (index, _) in cx.g.nodes() {
        if let Fate::Dead(DeadEndOutcome::Superseded { by }) = cx.fate(index) {
            by_id.entry(by.as_str()).or_default().push(index);
        }
    }
    by_id
}

/// One phase of the IR, the lessons its dead ends taught, and where its steps came from.
struct PhasePart {
    phase: PhaseIr,
    lessons: Vec<LessonIr>,
    step_nodes: Vec<(String, NodeIndex)>,
}

fn phase(
    cx: &Cx,
    p: DeployPhase,
    places: &Places,
    notes: &HashMap<&str, &str>,
    explained: &Explained,
    model: &str,
) -> PhasePart {
    let spec = catalog::phase(p);
    let order = path::ordered_steps(cx, p);
    let step_nodes = order
        .iter()
        .filter_map(|&a| Some((cx.step_id(a)?, a)))
        .collect();
    let mut taught = Vec::new();
    let dead_ends = cx
        .actions(p)
        .iter()
        .filter_map(|&a| dead_end(cx, a, places, notes, explained, &mut taught))
        .collect();
    PhasePart {
        phase: PhaseIr {
            index: spec.index,
            name: spec.name.to_string(),
            title: spec.title.to_string(),
            sessions: path::session_titles(cx.g, spec.index),
            steps: order.iter().filter_map(|&a| step(cx, a, places)).collect(),
            exit_gates: observed::gates(cx, p),
            lessons: Vec::new(),
            targets: observed::targets(cx, p, model),
            dead_ends,
            context: places.at(NotePlace::Phase(spec.index)),
        },
        lessons: taught,
        step_nodes,
    }
}

/// A step (ordered steps are actions); `guarded_by` is filled once every lesson of
/// every trajectory is known.
fn step(cx: &Cx, index: NodeIndex, places: &Places) -> Option<StepIr> {
    let g = cx.g;
    let node = g.node(index);
    let data = action(node)?;
    let id = cx.step_id(index)?;
    Some(StepIr {
        entry: cx.qualify(&node.id),
        op: data.op,
        params: values::params(&data.params),
        guarded_by: Vec::new(),
        applies: g
            .targets(index, EdgeKind::By)
            .into_iter()
            .map(|l| cx.qualify(&g.node(l).id))
            .collect(),
        notes: places.at(NotePlace::Step(id.clone())),
        skill: g.skill_of(index).map(|s| s.name.clone()),
        weights: g.weights_if_dependent(index),
        id,
        provenance: vec![cx.provenance(node)],
    })
}

/// The dead end an abandoned action leaves, kept in the skill it joined, else the
/// skill of the lesson that explains it, else of a lesson distilled from it (pushed
/// to `taught`); with none of these it stays on its phase's page only.
fn dead_end(
    cx: &Cx,
    index: NodeIndex,
    places: &Places,
    notes: &HashMap<&str, &str>,
    explained: &Explained,
    taught: &mut Vec<LessonIr>,
) -> Option<DeadEndIr> {
    let Fate::Dead(outcome) = cx.fate(index) else {
        return None;
    };
    let node = cx.g.node(index);
    let data = action(node)?;
    let phase = node.phase?;
    let id = cx.qualify(&node.id);
    let mut dead_end = DeadEndIr {
        reasons: places.at(NotePlace::DeadEnd(id.clone())),
        id,
        phase,
        op: data.op,
        params: values::params(&data.params),
        outcome: cx.outcome(outcome),
        symptom: observed::dead_end_symptom(cx, index, data),
        failed: observed::failed_checks(cx, index),
        explained_by: None,
        skill: None,
        provenance: vec![cx.provenance(node)],
    };
    let declared = cx.g.skill_of(index).map(|s| s.name.clone());
    if let Some(lesson) = explained.get(&index) {
        dead_end.explained_by = Some(lesson.clone());
    } else {
        let reasons: Vec<String> = dead_end
            .reasons
            .iter()
            .filter_map(|r| notes.get(r.as_str()))
            .map(|text| text.to_string())
            .collect();
        if let Some(mut lesson) = lessons::from_dead_end(cx, index, outcome, &dead_end, &reasons) {
            if let Some(skill) = &declared {
                lesson.skill = skill.clone();
            }
            dead_end.skill = Some(lesson.skill.clone());
            dead_end.explained_by = Some(lesson.id.clone());
            taught.push(lesson);
        }
    }
    if declared.is_some() {
        dead_end.skill = declared;
    }
    Some(dead_end)
}
