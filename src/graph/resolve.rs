//! Builds the graph from parsed files in passes: place items (header, sessions,
//! entries with their phase; duplicate ids), check entries against the vocabulary (in
//! parallel), resolve written references into edges, derive the implicit edges, then
//! whole-graph checks (cycles, evidence, unmeasured actions) and the effective path.
//! Every pass is linear in the number of entries and references.

use skillc_runtime::ops::OpKind;
use skillc_runtime::phase::DeployPhase;
use std::collections::{HashMap, HashSet};

use petgraph::algo::{tarjan_scc, toposort};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{EdgeFiltered, EdgeRef};
use petgraph::Direction;
use rayon::prelude::*;

use super::entry::{self, Checked, Reference};
use super::{Edge, EdgeKind, FileInfo, Graph, HeaderInfo, Node, NodeData, SessionInfo};
use crate::diag::{self, Code, Diagnostic};
use crate::syntax::{
    Entry, EntryKind, Header, Item, ParsedFile, Session, Span, Timestamp, UnparsedKind, Value,
    ValueKind, Verdict,
};

/// Dangling references that get a "did you mean" hint; each costs a scan of all ids.
const SUGGESTION_BUDGET: usize = 16;

struct Placed {
    entry: Entry,
    session: usize,
    /// `None` in a session whose phase is not one of the eight or did not parse.
    phase: Option<DeployPhase>,
}

/// What the items that failed to parse leave behind: ids that exist but have no node,
/// and whether any item failed at all.
#[derive(Default)]
struct Broken {
    ids: HashSet<String>,
    skills: HashSet<String>,
    any: bool,
}

pub(super) fn build(files: Vec<ParsedFile>) -> (Graph, Vec<Diagnostic>) {
    let entry_count = files
        .iter()
        .flat_map(|f| &f.items)
        .filter(|i| matches!(i, Item::Entry(_)))
        .count();
    let mut graph = Graph {
        header: None,
        files: files
            .iter()
            .map(|f| FileInfo {
                id: f.file,
                path: f.path.clone(),
            })
            .collect(),
        sessions: Vec::new(),
        skills: Vec::new(),
        inner: DiGraph::with_capacity(entry_count, entry_count * 2),
        index: HashMap::with_capacity(entry_count),
    };
    let mut diagnostics = Vec::new();

    let mut broken = Broken::default();
    let placed = place(files, &mut graph, &mut broken, &mut diagnostics);
    let checked: Vec<(Checked, usize, Option<DeployPhase>)> = placed
        .into_par_iter()
        .map(|p| (entry::check_entry(p.entry, p.phase), p.session, p.phase))
        .collect();

    let mut references = Vec::with_capacity(checked.len());
    let mut memberships = Vec::new();
    for (checked, session, phase) in checked {
        let index = graph.inner.add_node(Node {
            id: checked.id,
            kind: checked.kind,
            phase,
            session,
            span: checked.span,
            effective: true,
            skill: None,
            weights: checked.weights,
            source: checked.source,
            data: checked.data,
        });
        diagnostics.extend(checked.diagnostics);
        references.push(checked.references);
        if let Some(name) = checked.skill {
            memberships.push((index, name));
        }
    }

    resolve_references(&mut graph, &references, &broken, &mut diagnostics);
    super::skills::resolve_memberships(&mut graph, memberships, &broken.skills, &mut diagnostics);
    // Warnings about the graph's shape would mostly echo the syntax errors (an entry
    // that failed to parse leaves its neighbours unobserved or without evidence), so
    // they wait until the trajectory parses.
    let mut shape_warnings = Vec::new();
    super::skills::warn_membership(&graph, &mut shape_warnings);
    derive_measured_actions(&mut graph, &mut shape_warnings);
    derive_lesson_edges(&mut graph, &mut shape_warnings);
    if !broken.any {
        diagnostics.extend(shape_warnings);
    }
    warn_fixed_passes(&graph, &mut diagnostics);
    super::weights::warn_unrecorded(&graph, &mut diagnostics);
    report_cycles(&graph, &mut diagnostics);
    mark_effective(&mut graph);

    diag::sort(&mut diagnostics);
    (graph, diagnostics)
}

// ---------------------------------------------------------------------------------
// Pass 1: items
// ---------------------------------------------------------------------------------

/// Walks the items in order: the header, sessions (each entry takes the latest one's
/// phase) and entries, whose ids go into `graph.index` at the node position they will
/// get. Entries that cannot be placed are reported and dropped.
fn place(
    files: Vec<ParsedFile>,
    graph: &mut Graph,
    broken: &mut Broken,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Placed> {
    let mut placed: Vec<Placed> = Vec::with_capacity(graph.index.capacity());
    let mut header_span: Option<Span> = None;
    let mut session_sizes: Vec<usize> = Vec::new();
    let mut previous_timestamp: Option<Timestamp> = None;
    let first_file = files.first().map(|f| f.file);

    for file in files {
        for item in file.items {
            match item {
                Item::Header(header) => match header_span {
                    None => {
                        header_span = Some(header.span);
                        graph.header = Some(header_info(&header, diagnostics));
                    }
                    Some(first) => diagnostics.push(
                        Diagnostic::new(
                            Code::DuplicateHeader,
                            keyword_span(header.span, "trajectory"),
                            "a trajectory has one header",
                        )
                        .with_related(first, "the header is here")
                        .with_hint("start a new directory for a separate trajectory"),
                    ),
                },
                Item::Session(session) => {
                    check_session(&session, previous_timestamp.as_ref(), diagnostics);
                    let weights = session
                        .weights
                        .as_ref()
                        .and_then(|w| super::weights::read_name(w, diagnostics));
                    diagnostics.extend(entry::draft_session(&session));
                    graph.sessions.push(SessionInfo {
                        timestamp: session.timestamp.text.clone(),
                        phase: session_phase(session.phase),
                        title: session.title.map(|t| t.text),
                        draft: session.draft.is_some(),
                        weights,
                        span: session.span,
                    });
                    previous_timestamp = Some(session.timestamp);
                    session_sizes.push(0);
                }
                Item::Skill(skill) => super::skills::declare(skill, graph, diagnostics),
                Item::Unparsed(unparsed) => {
                    broken.any = true;
                    match unparsed.kind {
                        UnparsedKind::Header => {
                            header_span.get_or_insert(unparsed.span);
                        }
                        // Entries up to the next session belong to a session whose phase
                        // is unknown: no phase checks, and no "outside any session".
                        UnparsedKind::Session => {
                            graph.sessions.push(SessionInfo {
                                timestamp: String::new(),
                                phase: None,
                                title: None,
                                draft: false,
                                weights: None,
                                span: unparsed.span,
                            });
                            session_sizes.push(1);
                        }
                        UnparsedKind::Skill { name } => {
                            broken.skills.insert(name);
                        }
                        UnparsedKind::Entry { id } => {
                            broken.ids.insert(id);
                            if let Some(size) = session_sizes.last_mut() {
                                *size += 1;
                            }
                        }
                        UnparsedKind::Other => {}
                    }
                }
                Item::Entry(entry) => {
                    let Some(session) = graph.sessions.len().checked_sub(1) else {
                        diagnostics.push(
                            Diagnostic::new(
                                Code::EntryOutsideSession,
                                entry.id.span,
                                format!("entry `{}` comes before any session", entry.id.text),
                            )
                            .with_hint(
                                "open a session first: `session 2026-04-03T09:10 phase 1 \"title\"`",
                            ),
                        );
                        continue;
                    };
                    if let Some(first) = graph.index.get(entry.id.text.as_str()) {
                        diagnostics.push(
                            Diagnostic::new(
                                Code::DuplicateId,
                                entry.id.span,
                                format!("entry id `{}` is already used", entry.id.text),
                            )
                            .with_related(placed[first.index()].entry.id.span, "first used here")
                            .with_hint("ids are unique across all files of the trajectory"),
                        );
                        continue;
                    }
                    graph
                        .index
                        .insert(entry.id.text.clone(), NodeIndex::new(placed.len()));
                    session_sizes[session] += 1;
                    placed.push(Placed {
                        entry,
                        session,
                        phase: graph.sessions[session].phase,
                    });
                }
            }
        }
    }

    if header_span.is_none() {
        if let Some(file) = first_file {
            let span = Span {
                file,
                start: 0,
                end: 0,
                line: 1,
                col: 1,
            };
            diagnostics.push(
                Diagnostic::new(Code::MissingHeader, span, "the trajectory has no header")
                    .with_hint(
                        "begin the first file with `trajectory \"name\" model \"…\" target npu2 baseline \"…\"`",
                    ),
            );
        }
    }
    for (session, size) in graph.sessions.iter().zip(&session_sizes) {
        if *size == 0 && !broken.any {
            diagnostics.push(Diagnostic::new(
                Code::EmptySession,
                keyword_span(session.span, "session"),
                "session without entries",
            ));
        }
    }
    placed
}

fn header_info(header: &Header, diagnostics: &mut Vec<Diagnostic>) -> HeaderInfo {
    let mut info = HeaderInfo {
        name: header.name.text.clone(),
        model: None,
        target: None,
        baseline: None,
        weights: None,
        span: header.span,
    };
    for (i, field) in header.fields.iter().enumerate() {
        if let Some(first) = entry::earlier(&header.fields, i, |f| &f.key) {
            let message = format!("header field `{}` given twice", field.key.text);
            let diagnostic = Diagnostic::new(Code::HeaderField, field.key.span, message);
            diagnostics.push(diagnostic.with_related(first.span, "first given here"));
            continue;
        }
        let text = value_text(&field.value);
        match field.key.text.as_str() {
            "model" => info.model = Some(text),
            "target" => info.target = Some(text),
            "weights" => info.weights = super::weights::read(&text, field.value.span, diagnostics),
            _ => info.baseline = Some(text),
        }
    }
    let missing: Vec<&str> = [
        ("model", info.model.is_none()),
        ("target", info.target.is_none()),
        ("baseline", info.baseline.is_none()),
    ]
    .into_iter()
    .filter_map(|(name, missing)| missing.then_some(name))
    .collect();
    if !missing.is_empty() {
        diagnostics.push(
            Diagnostic::new(
                Code::HeaderField,
                keyword_span(header.span, "trajectory"),
                format!(
                    "header lacks {}",
                    missing
                        .iter()
                        .map(|m| format!("`{m}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .with_hint("e.g. `model \"meta-llama/Llama-3.2-1B\" target npu2 baseline \"none\"`"),
        );
    }
    info
}

fn value_text(value: &Value) -> String {
    match &value.kind {
        ValueKind::Str(s) | ValueKind::Ident(s) => s.clone(),
        ValueKind::Bool(b) => b.to_string(),
        ValueKind::Number(q) => match q.number {
            crate::syntax::Number::Int(i) => i.to_string(),
            crate::syntax::Number::Float(f) => f.to_string(),
        },
        ValueKind::List(_) => String::new(),
    }
}

/// The phase a session line names; `None` for a number past the last phase, which
/// [`check_session`] reports.
fn session_phase(number: u64) -> Option<DeployPhase> {
    u8::try_from(number).ok().and_then(DeployPhase::from_index)
}

fn check_session(
    session: &Session,
    previous: Option<&Timestamp>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    if session_phase(session.phase).is_none() {
        diagnostics.push(
            Diagnostic::new(
                Code::UnknownPhase,
                session.phase_span,
                format!("there is no phase {}", session.phase),
            )
            .with_hint(
                "phases: 0 reference, 1 kernels, 2 block, 3 model, 4 prefill, 5 decode, 6 finalize, 7 evaluation",
            ),
        );
    }
    let t = &session.timestamp;
    if let Some(problem) = timestamp_problem(t) {
        diagnostics.push(
            Diagnostic::new(
                Code::BadTimestamp,
                t.span,
                format!("`{}` is not a valid time: {problem}", t.text),
            )
            .with_hint("timestamps are ISO 8601: 2026-04-03 or 2026-04-03T09:10"),
        );
        return;
    }
    if let Some(previous) = previous {
        if timestamp_problem(previous).is_none() && sort_key(t) < sort_key(previous) {
            diagnostics.push(
                Diagnostic::new(
                    Code::SessionOutOfOrder,
                    t.span,
                    format!("session at {} comes after one at {}", t.text, previous.text),
                )
                .with_related(previous.span, "the earlier session")
                .with_hint("sessions are read in file-name order, then top to bottom"),
            );
        }
    }
}

fn sort_key(t: &Timestamp) -> (u16, u8, u8, u8, u8, u8) {
    (t.year, t.month, t.day, t.hour, t.minute, t.second)
}

fn timestamp_problem(t: &Timestamp) -> Option<&'static str> {
    let leap = (t.year % 4 == 0 && t.year % 100 != 0) || t.year % 400 == 0;
    let days = match t.month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return Some("no such month"),
    };
    if t.day == 0 || t.day > days {
        return Some("no such day in that month");
    }
    if t.hour > 23 || t.minute > 59 || t.second > 59 {
        return Some("no such time of day");
    }
    None
}

// ---------------------------------------------------------------------------------
// Pass 3: written references
// ---------------------------------------------------------------------------------

fn resolve_references(
    graph: &mut Graph,
    references: &[Vec<Reference>],
    broken: &Broken,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let mut suggestions_left = SUGGESTION_BUDGET;
    for (source_position, refs) in references.iter().enumerate() {
        let source = NodeIndex::new(source_position);
        for reference in refs {
            let name = &reference.target;
            let Some(target) = graph.find(&name.text) else {
                if broken.ids.contains(name.text.as_str()) {
                    continue;
                }
                let mut diagnostic = Diagnostic::new(
                    Code::UnknownReference,
                    name.span,
                    format!("`{}` is not an entry of this trajectory", name.text),
                );
                if suggestions_left > 0 {
                    suggestions_left -= 1;
                    if let Some(close) =
                        super::suggest::closest(&name.text, graph.index.keys().map(String::as_str))
                    {
                        diagnostic = diagnostic.with_hint(format!("did you mean `{close}`?"));
                    }
                }
                diagnostics.push(diagnostic);
                continue;
            };
            if target == source {
                diagnostics.push(Diagnostic::new(
                    Code::SelfReference,
                    name.span,
                    format!(
                        "`{}` refers to itself in `{}`",
                        name.text,
                        reference.kind.as_str()
                    ),
                ));
                continue;
            }
            let source_kind = graph.inner[source].kind;
            let target_kind = graph.inner[target].kind;
            if let Some(problem) = kind_problem(reference.kind, source_kind, target_kind) {
                diagnostics.push(
                    Diagnostic::new(
                        Code::WrongReferenceKind,
                        name.span,
                        format!(
                            "`{}` is {}; {problem}",
                            name.text,
                            entry::article(target_kind)
                        ),
                    )
                    .with_related(graph.inner[target].span, "defined here"),
                );
                continue;
            }
            graph.inner.add_edge(
                source,
                target,
                Edge {
                    kind: reference.kind,
                    derived: false,
                    span: Some(name.span),
                },
            );
        }
    }
}

/// Why a reference of `kind` from a `source` entry cannot name a `target` entry.
fn kind_problem(kind: EdgeKind, source: EntryKind, target: EntryKind) -> Option<&'static str> {
    match kind {
        EdgeKind::Fixes if target != EntryKind::Observation => {
            Some("`fixes` names the observations that saw the failure")
        }
        EdgeKind::By if target != EntryKind::Lesson => Some("`by` names the lesson applied"),
        EdgeKind::Supersedes if target != source => {
            Some("an entry supersedes entries of its own kind")
        }
        EdgeKind::Reverts if !matches!(target, EntryKind::Action | EntryKind::Decision) => {
            Some("only actions and decisions can be reverted")
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------------
// Pass 4: derived edges and whole-graph checks
// ---------------------------------------------------------------------------------

fn has_outgoing(graph: &Graph, index: NodeIndex, kind: EdgeKind) -> bool {
    graph
        .inner
        .edges_directed(index, Direction::Outgoing)
        .any(|e| e.weight().kind == kind)
}

/// An observation that names nothing with `after` measures the latest earlier action
/// of its session. Also reports actions that no observation follows in their session.
fn derive_measured_actions(graph: &mut Graph, diagnostics: &mut Vec<Diagnostic>) {
    let mut session = usize::MAX;
    let mut last_action: Option<NodeIndex> = None;
    let mut unobserved: Vec<NodeIndex> = Vec::new();
    let mut derived = Vec::new();
    let mut report = |unobserved: &mut Vec<NodeIndex>, graph: &Graph| {
        for action in unobserved.drain(..) {
            let node = &graph.inner[action];
            let message = format!("no observation follows action `{}` in its session", node.id);
            diagnostics.push(
                at_id(node, Code::ActionWithoutObservation, message)
                    .with_hint("record what the action did with an `observe` entry"),
            );
        }
    };
    for index in graph.inner.node_indices() {
        let node = &graph.inner[index];
        if node.session != session {
            report(&mut unobserved, graph);
            session = graph.inner[index].session;
            last_action = None;
        }
        let node = &graph.inner[index];
        match node.kind {
            EntryKind::Action => {
                last_action = Some(index);
                unobserved.push(index);
            }
            EntryKind::Observation => {
                unobserved.clear();
                if !has_outgoing(graph, index, EdgeKind::After) {
                    if let Some(action) = last_action {
                        derived.push((index, action));
                    }
                }
            }
            _ => {}
        }
    }
    report(&mut unobserved, graph);
    // In node order already, each observation once: adding sorts nothing.
    let edges = derived.into_iter().map(|(o, a)| (o, a, EdgeKind::After));
    add_derived(graph, edges.collect());
}

/// Adds `edges` to the graph as derived edges, sorted, each once.
fn add_derived(graph: &mut Graph, mut edges: Vec<(NodeIndex, NodeIndex, EdgeKind)>) {
    edges.sort();
    edges.dedup();
    for (source, target, kind) in edges {
        let edge = Edge {
            kind,
            derived: true,
            span: None,
        };
        graph.inner.add_edge(source, target, edge);
    }
}

/// Lessons without an `evidence` clause take the observations an action `fixes … by`
/// them; each lesson then points at the action each of its fixes changes. Lessons left
/// without evidence are reported.
fn derive_lesson_edges(graph: &mut Graph, diagnostics: &mut Vec<Diagnostic>) {
    let mut new_edges: Vec<(NodeIndex, NodeIndex, EdgeKind)> = Vec::new();
    for index in graph.inner.node_indices() {
        if graph.inner[index].kind != EntryKind::Action {
            continue;
        }
        let lessons = graph.targets(index, EdgeKind::By);
        if lessons.is_empty() {
            continue;
        }
        let fixed = graph.targets(index, EdgeKind::Fixes);
        for lesson in lessons {
            if !has_outgoing(graph, lesson, EdgeKind::Evidence) {
                new_edges.extend(fixed.iter().map(|o| (lesson, *o, EdgeKind::Evidence)));
            }
        }
    }
    add_derived(graph, std::mem::take(&mut new_edges));

    let mut actions_by_op: HashMap<OpKind, Vec<NodeIndex>> = HashMap::new();
    for (index, node) in graph.nodes() {
        if let NodeData::Action(action) = &node.data {
            actions_by_op.entry(action.op).or_default().push(index);
        }
    }
    for (index, node) in graph.nodes() {
        let NodeData::Lesson(lesson) = &node.data else {
            continue;
        };
        let evidence = graph.targets(index, EdgeKind::Evidence);
        if evidence.is_empty() {
            let message = format!("lesson `{}` cites no evidence", node.id);
            diagnostics.push(
                at_id(node, Code::LessonWithoutEvidence, message)
                    .with_hint("add `evidence <id>…` naming the observations behind it"),
            );
        }
        let measured: Vec<NodeIndex> = evidence
            .iter()
            .filter_map(|e| graph.measured_action(*e))
            .collect();
        for remedy in &lesson.remedies {
            let from_evidence: Vec<NodeIndex> = measured
                .iter()
                .copied()
                .filter(
                    |a| matches!(&graph.inner[*a].data, NodeData::Action(x) if x.op == remedy.op),
                )
                .collect();
            if !from_evidence.is_empty() {
                new_edges.extend(
                    from_evidence
                        .into_iter()
                        .map(|a| (index, a, EdgeKind::Changes)),
                );
                continue;
            }
            let latest_before = actions_by_op.get(&remedy.op).and_then(|actions| {
                let before = actions.partition_point(|a| *a < index);
                before.checked_sub(1).map(|i| actions[i])
            });
            if let Some(action) = latest_before {
                new_edges.push((index, action, EdgeKind::Changes));
            }
        }
    }
    add_derived(graph, new_edges);
}

fn warn_fixed_passes(graph: &Graph, diagnostics: &mut Vec<Diagnostic>) {
    for edge in graph.inner.edge_references() {
        if edge.weight().kind != EdgeKind::Fixes {
            continue;
        }
        let NodeData::Observation(observation) = &graph.inner[edge.target()].data else {
            continue;
        };
        if observation.outcome() == Some(Verdict::Pass) {
            let target = &graph.inner[edge.target()];
            let span = edge
                .weight()
                .span
                .unwrap_or(graph.inner[edge.source()].span);
            diagnostics.push(
                Diagnostic::new(
                    Code::FixesPassingObservation,
                    span,
                    format!("`{}` passed; there was nothing to fix", target.id),
                )
                .with_related(target.span, "the observation"),
            );
        }
    }
}

fn ordering_edge(kind: EdgeKind) -> bool {
    matches!(
        kind,
        EdgeKind::After | EdgeKind::Fixes | EdgeKind::Supersedes | EdgeKind::Reverts
    )
}

/// Cycles through the written `after`, `fixes`, `supersedes` and `reverts` edges: one
/// error per strongly connected component.
fn report_cycles(graph: &Graph, diagnostics: &mut Vec<Diagnostic>) {
    let ordering = EdgeFiltered::from_fn(&graph.inner, |e| {
        ordering_edge(e.weight().kind) && !e.weight().derived
    });
    for mut component in tarjan_scc(&ordering) {
        if component.len() < 2 {
            continue;
        }
        component.sort();
        let ids: Vec<&str> = component
            .iter()
            .take(8)
            .map(|i| graph.inner[*i].id.as_str())
            .collect();
        let more = component.len().saturating_sub(ids.len());
        let first = &graph.inner[component[0]];
        // Point at a reference that closes the cycle, the one written in the first entry.
        let span = graph
            .inner
            .edges_directed(component[0], Direction::Outgoing)
            .filter(|e| {
                ordering_edge(e.weight().kind) && component.binary_search(&e.target()).is_ok()
            })
            .find_map(|e| e.weight().span)
            .unwrap_or(first.span);
        diagnostics.push(
            Diagnostic::new(
                Code::Cycle,
                span,
                format!(
                    "entries {}{} depend on each other in a cycle",
                    ids.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                ),
            )
            .with_hint("`after`, `fixes`, `supersedes` and `reverts` point back in time; one of these references is reversed"),
        );
    }
}

/// An entry is effective unless an effective entry reverts or supersedes it; an
/// observation follows the action it measures. Evaluated in topological order of the
/// revert/supersede edges (every citing entry before the ones it cites).
fn mark_effective(graph: &mut Graph) {
    let undo = EdgeFiltered::from_fn(&graph.inner, |e| {
        matches!(e.weight().kind, EdgeKind::Supersedes | EdgeKind::Reverts)
    });
    let order: Vec<NodeIndex> = match toposort(&undo, None) {
        Ok(order) => order,
        // A cycle was reported; fall back to latest-first, which is right for every
        // entry that only undoes earlier ones.
        Err(_) => graph.inner.node_indices().rev().collect(),
    };
    let mut effective = vec![true; graph.inner.node_count()];
    for index in order {
        let undone = graph
            .inner
            .edges_directed(index, Direction::Incoming)
            .filter(|e| matches!(e.weight().kind, EdgeKind::Supersedes | EdgeKind::Reverts))
            .any(|e| effective[e.source().index()]);
        effective[index.index()] = !undone;
    }
    for index in graph.inner.node_indices() {
        if graph.inner[index].kind == EntryKind::Observation {
            if let Some(action) = graph.measured_action(index) {
                effective[index.index()] = effective[action.index()];
            }
        }
    }
    for index in graph.inner.node_indices() {
        graph.inner[index].effective = effective[index.index()];
    }
}

/// A diagnostic at the start of `node`'s entry, as long as its id.
fn at_id(node: &Node, code: Code, message: String) -> Diagnostic {
    Diagnostic::new(code, keyword_span(node.span, &node.id), message)
}

/// The span of the first token of a node or clause, `word` long.
fn keyword_span(span: Span, word: &str) -> Span {
    Span {
        end: (span.start + word.len() as u32).min(span.end),
        ..span
    }
}
