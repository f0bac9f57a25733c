//! Distillation: from validated action/lesson graphs to the skill IR.
//!
//! Each trajectory is extracted on its own ([`extract`]): effective path → steps,
//! dead ends → debugging knowledge, strictest passing checks → exit gates, last
//! performance figures → targets, lessons → symptom/cause/fix with evidence. Several
//! trajectories then merge, in trajectory-name order so argument order does not
//! matter: the same step (operation and identity parameters, k-th occurrence) is
//! one step with the provenance of both, conflicting parameters are reported
//! (W0101) and the first trajectory's value kept; the same lesson met in several
//! deployments (same trigger, condition, cause and fix, whatever the words:
//! [`identity`]) is one lesson whose evidence and deployments add up, and different
//! fixes for one trigger are linked (and reported, W0104, when nothing tells them
//! apart); gates keep the strictest threshold.
//! Last, lessons are attached to the steps and phases they guard and grouped into
//! skills ([`skills`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use petgraph::graph::NodeIndex;
use rayon::prelude::*;
use skillc_runtime::bundle::{Comparison, Value};
use skillc_runtime::ops::{self, Metric};
use skillc_runtime::phase::DeployPhase;

use crate::diag::{self, Code, Diagnostic};
use crate::graph::{Graph, NodeData};
use crate::syntax::{SourceFile, Span};

pub mod catalog;
mod drafts;
mod extract;
pub mod identity;
pub mod ir;
mod lessons;
pub mod lodo;
mod notes;
mod observed;
mod path;
pub mod placement;
pub mod skills;
pub mod values;

use extract::Extracted;
pub use extract::Input;
use ir::{GateIr, LessonIr, PhaseIr, SkillIr, StepIr, TargetIr};

/// Parameters that say *what* a step acts on rather than *how*: two actions with the
/// same operation and the same values of these are the same step.
pub const IDENTITY_PARAMS: &[&str] = &["kernel", "shape", "layer", "group", "against", "layout"];

/// The IR and what distillation found worth saying (conflicts, unlowered fixes).
#[derive(Debug)]
pub struct Distilled {
    pub ir: SkillIr,
    /// Sorted by position.
    pub diagnostics: Vec<Diagnostic>,
}

/// Entry ids used by more than one of the trajectories.
pub fn shared_ids<'a>(
    graphs: impl IntoIterator<Item = &'a crate::graph::Graph>,
) -> HashSet<String> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for graph in graphs {
        for id in graph.index.keys() {
            *seen.entry(id.as_str()).or_default() += 1;
        }
    }
    seen.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(id, _)| id.to_string())
        .collect()
}

/// Distills trajectories into one bundle named `name`. `inputs` must share one
/// `shared_ids` set computed by [`shared_ids`] over all of them.
pub fn distill(name: &str, inputs: &[Input]) -> Distilled {
    let mut extracted: Vec<Extracted> = inputs.par_iter().map(extract::extract).collect();
    extracted.sort_by(|a, b| a.source.trajectory.cmp(&b.source.trajectory));
    let mut diagnostics: Vec<Diagnostic> = drafts::refuse(inputs);
    for pair in extracted.windows(2) {
        if pair[0].source.trajectory == pair[1].source.trajectory {
            if let Some(span) = pair[1].header_span {
                let mut d = Diagnostic::new(
                    Code::DuplicateTrajectory,
                    span,
                    format!(
                        "two trajectories of this build are named `{}`",
                        pair[1].source.trajectory
                    ),
                )
                .with_hint("give each trajectory its own name in its `trajectory \"…\"` header");
                if let Some(first) = pair[0].header_span {
                    d = d.with_related(first, "the other one");
                }
                diagnostics.push(d);
            }
        }
    }
    let mut merged = Merged::default();
    for trajectory in extracted {
        merged.add(trajectory, &mut diagnostics);
    }
    let mut ir = SkillIr {
        name: name.to_string(),
        sources: merged.sources,
        phases: merged.phases,
        lessons: merged.lessons,
        skills: Vec::new(),
        declared: merged.declared,
        notes: merged.notes,
        entries: merged.entries,
        dropped: merged.dropped,
    };
    finalize(&mut ir);
    diagnostics.extend(identity::alternatives(&mut ir));
    for drop in placement::account(&ir).dropped {
        diagnostics.push(
            Diagnostic::new(
                Code::DroppedItem,
                drop.span,
                format!("{} `{}` reaches no page of the bundle: {}", drop.what, drop.id, drop.reason),
            )
            .with_hint("everything a trajectory records should land somewhere; attach it with `about` or `in <skill>`, or remove it"),
        );
    }
    diag::sort(&mut diagnostics);
    Distilled { ir, diagnostics }
}

/// The bundle built so far, with what merging the next trajectory needs.
#[derive(Default)]
struct Merged<'a> {
    sources: Vec<ir::SourceIr>,
    declared: BTreeMap<String, ir::DeclaredSkillIr>,
    notes: BTreeMap<String, ir::NoteIr>,
    entries: ir::ById<ir::EntryIr>,
    dropped: Vec<ir::DroppedIr>,
    phases: Vec<PhaseIr>,
    lessons: BTreeMap<String, LessonIr>,
    /// Lesson content key → id, to find the same lesson in another trajectory.
    lesson_keys: HashMap<String, String>,
    /// Step id → the action it came from (first trajectory that has it).
    step_nodes: HashMap<String, (&'a Graph, NodeIndex, &'a [SourceFile])>,
}

/// Where parameter `key` of an action was written (the action itself if nowhere).
fn param_span(graph: &Graph, action: NodeIndex, key: &str) -> Span {
    let node = graph.node(action);
    match &node.data {
        NodeData::Action(data) => data.param(key).map_or(node.span, |p| p.span),
        _ => node.span,
    }
}

/// The value of parameter `key` as written in the trajectory (`herd=[8,2]` → `[8,2]`).
fn written_value(graph: &Graph, sources: &[SourceFile], action: NodeIndex, key: &str) -> String {
    let NodeData::Action(data) = &graph.node(action).data else {
        return String::new();
    };
    data.param(key)
        .and_then(|p| {
            let file = sources.get(p.value.span.file.0 as usize)?;
            file.text
                .get(p.value.span.start as usize..p.value.span.end as usize)
        })
        .unwrap_or_default()
        .to_string()
}

/// Identity of a step across trajectories: operation and identity parameters.
fn step_key(step: &StepIr) -> String {
    let identity: BTreeMap<String, Value> = step
        .params
        .iter()
        .filter(|(k, _)| IDENTITY_PARAMS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    format!("{} {}", step.op, values::params_key(&identity))
}

impl<'a> Merged<'a> {
    fn add(&mut self, t: Extracted<'a>, diagnostics: &mut Vec<Diagnostic>) {
        diagnostics.extend(t.diagnostics);
        for skill in t.declared {
            merge_declared(&mut self.declared, skill);
        }
        let notes = t.notes;
        self.entries
            .extend(t.entries.into_iter().map(|e| (e.id.clone(), e)));
        self.dropped.extend(t.dropped);
        let trajectory = t.source.trajectory.clone();
        self.sources.push(t.source);
        let mut renamed: HashMap<String, String> = HashMap::new();
        let graph = t.graph;
        if self.phases.is_empty() {
            self.phases = t.phases;
        } else {
            for (phase, incoming) in self.phases.iter_mut().zip(t.phases) {
                let into = MergeInto {
                    kept: &self.step_nodes,
                    incoming: &t.step_nodes,
                    graph,
                    sources: t.sources,
                    trajectory: &trajectory,
                };
                into.phase(phase, incoming, &mut renamed, diagnostics);
            }
        }
        for (id, node) in t.step_nodes {
            if !renamed.contains_key(&id) {
                self.step_nodes.insert(id, (graph, node, t.sources));
            }
        }
        let mut lessons_renamed: HashMap<String, String> = HashMap::new();
        for mut lesson in t.lessons {
            for guard in &mut lesson.guards {
                if let Some(id) = renamed.get(guard) {
                    *guard = id.clone();
                }
            }
            let key = identity::lesson_key(&lesson);
            // The same lesson met again in the trajectory that taught it is kept
            // as written: only another deployment adds evidence to it.
            match self
                .lesson_keys
                .get(&key)
                .and_then(|id| self.lessons.get_mut(id))
                .filter(|l| !l.deployments.contains(&trajectory))
            {
                Some(existing) => {
                    lessons_renamed.insert(lesson.id.clone(), existing.id.clone());
                    merge_lesson(existing, lesson);
                }
                None => {
                    self.lesson_keys
                        .entry(key)
                        .or_insert_with(|| lesson.id.clone());
                    self.lessons.insert(lesson.id.clone(), lesson);
                }
            }
        }
        for mut note in notes {
            note.place = match note.place {
                ir::NotePlace::Step(id) => {
                    ir::NotePlace::Step(renamed.get(&id).cloned().unwrap_or(id))
                }
                ir::NotePlace::Diagnosis(id) => {
                    ir::NotePlace::Diagnosis(lessons_renamed.get(&id).cloned().unwrap_or(id))
                }
                ir::NotePlace::Lesson(id) => {
                    ir::NotePlace::Lesson(lessons_renamed.get(&id).cloned().unwrap_or(id))
                }
                other => other,
            };
            self.notes.insert(note.id.clone(), note);
        }
        // Ids are qualified where trajectories share them, so a merged-away id can
        // only have been cited by this trajectory's dead ends.
        for dead_end in self.phases.iter_mut().flat_map(|p| p.dead_ends.iter_mut()) {
            if let Some(id) = dead_end
                .explained_by
                .as_ref()
                .and_then(|id| lessons_renamed.get(id))
            {
                dead_end.explained_by = Some(id.clone());
            }
        }
    }
}

/// The same skill declared by several trajectories is one skill: the first
/// trajectory's title, every trigger once.
fn merge_declared(
    declared: &mut BTreeMap<String, ir::DeclaredSkillIr>,
    skill: ir::DeclaredSkillIr,
) {
    match declared.get_mut(&skill.name) {
        Some(existing) => {
            for trigger in skill.triggers {
                if !existing.triggers.contains(&trigger) {
                    existing.triggers.push(trigger);
                }
            }
            existing.provenance.extend(skill.provenance);
        }
        None => {
            declared.insert(skill.name.clone(), skill);
        }
    }
}

fn merge_lesson(existing: &mut LessonIr, other: LessonIr) {
    existing.deployments.extend(other.deployments);
    existing.deployments.sort();
    existing.deployments.dedup();
    existing.evidence_count = existing.evidence_count.saturating_add(other.evidence_count);
    existing.evidence.extend(other.evidence);
    existing.provenance.extend(other.provenance);
    existing.diagnosis.extend(other.diagnosis);
    existing.notes.extend(other.notes);
    existing.applied_by.extend(other.applied_by);
    // Texts and guards are deduplicated once, in `finalize`: doing it at every
    // merge made a lesson recorded k times cost k² (issue 27, item 11).
    existing.fix_text.extend(other.fix_text);
    existing.guards.extend(other.guards);
    let phases: BTreeSet<DeployPhase> = existing
        .phases
        .iter()
        .chain(&other.phases)
        .copied()
        .collect();
    existing.phases = phases.into_iter().collect();
}

/// A merged lesson's fix texts once each, in the order first recorded, and its
/// guards sorted once each.
fn dedup_merged(lesson: &mut LessonIr) {
    let mut seen = HashSet::new();
    lesson.fix_text.retain(|text| seen.insert(text.clone()));
    lesson.guards.sort();
    lesson.guards.dedup();
}

struct MergeInto<'m, 'a> {
    kept: &'m HashMap<String, (&'a Graph, NodeIndex, &'a [SourceFile])>,
    incoming: &'m HashMap<String, NodeIndex>,
    graph: &'a Graph,
    sources: &'a [SourceFile],
    trajectory: &'m str,
}

impl MergeInto<'_, '_> {
    fn phase(
        &self,
        phase: &mut PhaseIr,
        incoming: PhaseIr,
        renamed: &mut HashMap<String, String>,
        diagnostics: &mut Vec<Diagnostic>,
    ) {
        for title in incoming.sessions {
            if !phase.sessions.contains(&title) {
                phase.sessions.push(title);
            }
        }
        self.steps(&mut phase.steps, incoming.steps, renamed, diagnostics);
        merge_gates(&mut phase.exit_gates, incoming.exit_gates);
        merge_targets(&mut phase.targets, incoming.targets);
        phase.dead_ends.extend(incoming.dead_ends);
        phase.context.extend(incoming.context);
    }

    /// Matches the k-th occurrence of each step key; unmatched incoming steps go
    /// right after the step that preceded them in their own trajectory.
    fn steps(
        &self,
        steps: &mut Vec<StepIr>,
        incoming: Vec<StepIr>,
        renamed: &mut HashMap<String, String>,
        diagnostics: &mut Vec<Diagnostic>,
    ) {
        let mut occurrences: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, step) in steps.iter().enumerate() {
            occurrences.entry(step_key(step)).or_default().push(i);
        }
        let mut used: HashMap<String, usize> = HashMap::new();
        // (position in `steps` to insert after, step); `None` = at the start.
        let mut inserts: Vec<(Option<usize>, StepIr)> = Vec::new();
        let mut previous: Option<usize> = None;
        for step in incoming {
            let key = step_key(&step);
            let n = used.entry(key.clone()).or_default();
            match occurrences.get(&key).and_then(|list| list.get(*n)).copied() {
                Some(i) => {
                    *n += 1;
                    renamed.insert(step.id.clone(), steps[i].id.clone());
                    self.merge_step(&mut steps[i], step, diagnostics);
                    previous = Some(i);
                }
                None => inserts.push((previous, step)),
            }
        }
        // Insert from the back so earlier positions stay valid; equal positions keep
        // their incoming order.
        let mut by_position: BTreeMap<Option<usize>, Vec<StepIr>> = BTreeMap::new();
        for (position, step) in inserts {
            by_position.entry(position).or_default().push(step);
        }
        for (position, group) in by_position.into_iter().rev() {
            let at = position.map_or(0, |p| p + 1);
            steps.splice(at..at, group);
        }
    }

    fn merge_step(&self, step: &mut StepIr, other: StepIr, diagnostics: &mut Vec<Diagnostic>) {
        for (key, value) in other.params {
            match step.params.get(&key) {
                None => {
                    step.params.insert(key, value);
                }
                Some(kept) if *kept != value => {
                    if let Some(d) = self.conflict(step, &other.id, &key, kept, &value) {
                        diagnostics.push(d);
                    }
                }
                Some(_) => {}
            }
        }
        step.notes.extend(other.notes);
        step.applies.extend(other.applies);
        step.provenance.extend(other.provenance);
    }

    fn conflict(
        &self,
        step: &StepIr,
        other_id: &str,
        key: &str,
        _kept: &Value,
        _dropped: &Value,
    ) -> Option<Diagnostic> {
        let incoming = *self.incoming.get(other_id)?;
        let span = param_span(self.graph, incoming, key);
        let (graph, action, sources) = *self.kept.get(&step.id)?;
        let kept_in = step
            .provenance
            .first()
            .map_or_else(String::new, |p| format!("{}:{}", p.file, p.line));
        let identity: Vec<String> = IDENTITY_PARAMS
            .iter()
            .filter(|k| step.params.contains_key(**k))
            .map(|k| format!("{k}={}", written_value(graph, sources, action, k)))
            .collect();
        let kept = written_value(graph, sources, action, key);
        let d = Diagnostic::new(
            Code::StepConflict,
            span,
            format!(
                "`{key}` of step `{} {}` is {} in trajectory `{}` but {kept} in {kept_in}; the bundle keeps {kept}",
                step.op,
                identity.join(" "),
                written_value(self.graph, self.sources, incoming, key),
                self.trajectory,
            ),
        )
        .with_hint("trajectories merge in name order and the first one's value wins; make them agree, or build them separately")
        .with_related(param_span(graph, action, key), "the value kept");
        Some(d)
    }
}

/// A gate's threshold in its metric's canonical unit, for comparing strictness.
fn canonical_threshold(gate: &GateIr) -> f64 {
    let (Some(canonical), Some(unit)) = (gate.metric.canonical_unit(), gate.unit) else {
        return gate.threshold;
    };
    ops::convert(gate.threshold, unit.symbol(), canonical.symbol()).unwrap_or(gate.threshold)
}

fn stricter(a: &GateIr, b: &GateIr) -> bool {
    let (ta, tb) = (canonical_threshold(a), canonical_threshold(b));
    match a.comparison {
        Comparison::Ge | Comparison::Gt => ta > tb || (ta == tb && a.comparison == Comparison::Gt),
        Comparison::Le | Comparison::Lt => ta < tb || (ta == tb && a.comparison == Comparison::Lt),
        Comparison::Eq => false,
    }
}

fn merge_gates(gates: &mut Vec<GateIr>, incoming: Vec<GateIr>) {
    for gate in incoming {
        let key = observed::gate_key(&gate);
        match gates.iter_mut().find(|g| observed::gate_key(g) == key) {
            Some(existing) => {
                let mut provenance = std::mem::take(&mut existing.provenance);
                provenance.extend(gate.provenance.iter().cloned());
                if stricter(&gate, existing) {
                    *existing = gate;
                }
                existing.provenance = provenance;
            }
            None => gates.push(gate),
        }
    }
    gates.sort_by_key(observed::gate_key);
}

fn target_key(t: &TargetIr) -> (Metric, String) {
    (t.metric, values::params_key(&t.conditions))
}

fn merge_targets(targets: &mut Vec<TargetIr>, incoming: Vec<TargetIr>) {
    for target in incoming {
        let key = target_key(&target);
        match targets.iter_mut().find(|t| target_key(t) == key) {
            Some(existing) => existing.provenance.extend(target.provenance),
            None => targets.push(target),
        }
    }
    targets.sort_by_key(target_key);
}

/// Attaches lessons to the steps and phases they guard and groups everything into
/// skills.
fn finalize(ir: &mut SkillIr) {
    let mut positions: HashMap<String, (usize, usize)> = HashMap::new();
    for (p, phase) in ir.phases.iter().enumerate() {
        for (s, step) in phase.steps.iter().enumerate() {
            positions.insert(step.id.clone(), (p, s));
        }
    }
    for lesson in ir.lessons.values_mut() {
        dedup_merged(lesson);
        lesson.guards.retain(|id| positions.contains_key(id));
        for id in &lesson.guards {
            if let Some(&(p, s)) = positions.get(id) {
                ir.phases[p].steps[s].guarded_by.push(lesson.id.clone());
            }
        }
    }
    for phase in &mut ir.phases {
        for step in &mut phase.steps {
            step.guarded_by.sort();
            step.guarded_by.dedup();
        }
        phase.lessons = ir
            .lessons
            .values()
            .filter(|l| l.phases.contains(&phase.index))
            .map(|l| l.id.clone())
            .collect();
    }
    for dead_end in ir.phases.iter_mut().flat_map(|p| p.dead_ends.iter_mut()) {
        if dead_end.skill.is_none() {
            dead_end.skill = dead_end
                .explained_by
                .as_ref()
                .and_then(|l| ir.lessons.get(l))
                .map(|l| l.skill.clone());
        }
    }
    ir.skills = skills::skill_sets(ir);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use crate::diag::Code;

    #[test]
    fn build_codes_are_their_own_and_documented() {
        let front: BTreeSet<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        let build: BTreeSet<&str> = Code::BUILD.iter().map(|c| c.as_str()).collect();
        assert_eq!(build.len(), Code::BUILD.len());
        assert!(front.is_disjoint(&build));
        let reference = include_str!("../../grammar/README.md");
        for code in build {
            assert!(
                reference.contains(&format!("| {code} |")),
                "{code} undocumented"
            );
        }
    }
}
