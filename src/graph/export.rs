//! Writes a graph out for people and tools: JSON (every node and edge with its
//! `file:line:col`) and Graphviz DOT (sessions as clusters, node kinds styled, dead
//! ends dashed, derived edges dotted). Output is deterministic: trajectory order.

use petgraph::visit::EdgeRef;
use serde::Serialize;
use skillc_runtime::phase::DeployPhase;

use super::{EdgeKind, Graph, Node, NodeData};
use crate::syntax::{EntryKind, Verdict};
use skillc_runtime::ops::formats::word;

#[derive(Serialize)]
struct JsonGraph<'a> {
    header: Option<JsonHeader<'a>>,
    files: Vec<&'a str>,
    sessions: Vec<JsonSession<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    skills: Vec<JsonSkill<'a>>,
    nodes: Vec<JsonNode<'a>>,
    edges: Vec<JsonEdge<'a>>,
}

#[derive(Serialize)]
struct JsonHeader<'a> {
    name: &'a str,
    model: Option<&'a str>,
    target: Option<&'a str>,
    baseline: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    weights: Option<&'static str>,
    at: String,
}

#[derive(Serialize)]
struct JsonSession<'a> {
    index: usize,
    timestamp: &'a str,
    phase: Option<DeployPhase>,
    title: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    draft: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    weights: Option<&'static str>,
    at: String,
}

#[derive(Serialize)]
struct JsonSkill<'a> {
    name: &'a str,
    kind: skillc_runtime::bundle::LessonKind,
    title: &'a str,
    triggers: &'a [String],
    at: String,
}

#[derive(Serialize)]
struct JsonNode<'a> {
    id: &'a str,
    kind: EntryKind,
    phase: Option<DeployPhase>,
    session: usize,
    at: String,
    effective: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    skill: Option<&'a str>,
    /// The format the entry was recorded on, when what it chooses depends on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    weights: Option<&'static str>,
    /// The record line the entry was drafted from.
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'a str>,
    data: &'a NodeData,
}

#[derive(Serialize)]
struct JsonEdge<'a> {
    from: &'a str,
    to: &'a str,
    kind: EdgeKind,
    derived: bool,
    at: Option<String>,
}

/// The graph as pretty-printed JSON.
pub fn to_json(graph: &Graph) -> String {
    let view = JsonGraph {
        header: graph.header.as_ref().map(|h| JsonHeader {
            name: &h.name,
            model: h.model.as_deref(),
            target: h.target.as_deref(),
            baseline: h.baseline.as_deref(),
            weights: h.weights.map(word),
            at: graph.location(h.span),
        }),
        files: graph.files.iter().map(|f| f.path.as_str()).collect(),
        sessions: graph
            .sessions
            .iter()
            .enumerate()
            .map(|(index, s)| JsonSession {
                index,
                timestamp: &s.timestamp,
                phase: s.phase,
                title: s.title.as_deref(),
                draft: s.draft,
                weights: s.weights.map(word),
                at: graph.location(s.span),
            })
            .collect(),
        skills: graph
            .skills
            .iter()
            .map(|s| JsonSkill {
                name: &s.name,
                kind: s.kind,
                title: &s.title,
                triggers: &s.triggers,
                at: graph.location(s.span),
            })
            .collect(),
        nodes: graph
            .nodes()
            .map(|(index, node)| JsonNode {
                id: &node.id,
                kind: node.kind,
                phase: node.phase,
                session: node.session,
                at: graph.location(node.span),
                effective: node.effective,
                skill: graph.skill_of(index).map(|s| s.name.as_str()),
                weights: graph.weights_if_dependent(index).map(word),
                source: node.source.as_deref(),
                data: &node.data,
            })
            .collect(),
        edges: sorted_edges(graph)
            .into_iter()
            .map(|(from, to, edge)| JsonEdge {
                from: &graph.inner[from].id,
                to: &graph.inner[to].id,
                kind: edge.kind,
                derived: edge.derived,
                at: edge.span.map(|s| graph.location(s)),
            })
            .collect(),
    };
    // Serialising plain data into a String cannot fail.
    serde_json::to_string_pretty(&view).unwrap_or_default() + "\n"
}

type EdgeTriple<'a> = (
    petgraph::graph::NodeIndex,
    petgraph::graph::NodeIndex,
    &'a super::Edge,
);

/// Edges by source in trajectory order, then written before derived, then as added.
fn sorted_edges(graph: &Graph) -> Vec<EdgeTriple<'_>> {
    let mut edges: Vec<_> = graph
        .inner
        .edge_references()
        .map(|e| {
            (
                e.source(),
                e.weight().derived,
                e.id(),
                e.target(),
                e.weight(),
            )
        })
        .collect();
    edges.sort_by_key(|(source, derived, id, _, _)| (*source, *derived, *id));
    edges
        .into_iter()
        .map(|(source, _, _, target, edge)| (source, target, edge))
        .collect()
}

/// `phase 3`; a graph with errors is not exported, so the other case is for
/// completeness.
fn phase_label(phase: Option<DeployPhase>) -> String {
    phase.map_or_else(|| "unknown phase".to_string(), |p| format!("phase {p}"))
}

/// The graph in Graphviz DOT.
pub fn to_dot(graph: &Graph) -> String {
    let name = graph
        .header
        .as_ref()
        .map_or("trajectory", |h| h.name.as_str());
    let mut out = String::new();
    out.push_str(&format!("digraph {} {{\n", quote(name)));
    out.push_str("  rankdir=TB;\n");
    out.push_str("  node [fontname=\"Helvetica\", fontsize=10];\n");
    out.push_str("  edge [fontname=\"Helvetica\", fontsize=8];\n");
    let mut session = usize::MAX;
    for (index, node) in graph.nodes() {
        if node.session != session {
            if session != usize::MAX {
                out.push_str("  }\n");
            }
            session = node.session;
            let info = &graph.sessions[session];
            let title = info
                .title
                .as_deref()
                .map_or(String::new(), |t| format!(": {t}"));
            out.push_str(&format!(
                "  subgraph cluster_{session} {{\n    label={};\n    style=rounded;\n",
                quote(&format!(
                    "{}{title} ({})",
                    phase_label(info.phase),
                    info.timestamp
                ))
            ));
        }
        let skill = graph.skill_of(index).map(|s| s.name.as_str());
        out.push_str(&format!(
            "    {} [{}];\n",
            quote(&node.id),
            node_style(node, skill)
        ));
    }
    if session != usize::MAX {
        out.push_str("  }\n");
    }
    for (from, to, edge) in sorted_edges(graph) {
        let mut attributes = vec![format!("label={}", quote(edge.kind.as_str()))];
        if edge.derived {
            attributes.push("style=dotted".into());
        }
        if matches!(edge.kind, EdgeKind::Supersedes | EdgeKind::Reverts) {
            attributes.push("color=\"firebrick\"".into());
        }
        out.push_str(&format!(
            "  {} -> {} [{}];\n",
            quote(&graph.inner[from].id),
            quote(&graph.inner[to].id),
            attributes.join(", ")
        ));
    }
    out.push_str("}\n");
    out
}

fn node_style(node: &Node, skill: Option<&str>) -> String {
    let (shape, fill, summary) = match &node.data {
        NodeData::Action(action) => ("box", "\"#dbe9f6\"", action.op.to_string()),
        NodeData::UnknownAction { op, .. } => ("box", "\"#dbe9f6\"", op.clone()),
        NodeData::Observation(observation) => {
            let fill = match observation.outcome() {
                Some(Verdict::Pass) => "\"#d5f0d5\"",
                Some(Verdict::Fail) => "\"#f6d5d5\"",
                None => "\"#eeeeee\"",
            };
            let metrics: Vec<&str> = observation
                .measurements
                .iter()
                .map(|m| m.metric.text.as_str())
                .collect();
            let summary = observation
                .label
                .clone()
                .unwrap_or_else(|| metrics.join(", "));
            ("ellipse", fill, summary)
        }
        NodeData::Lesson(lesson) => ("note", "\"#fff3c4\"", shorten(&lesson.title)),
        NodeData::Note { text, .. } => ("plaintext", "white", shorten(text)),
        NodeData::Decision { text } => ("hexagon", "\"#ead9f6\"", shorten(text)),
    };
    let mut style = "filled".to_string();
    if !node.effective {
        style.push_str(",dashed");
    }
    let skill = skill.map_or(String::new(), |s| format!("\nin {s}"));
    format!(
        "shape={shape}, style={}, fillcolor={fill}, label={}",
        quote(&style),
        quote(&format!("{}\n{summary}{skill}", node.id))
    )
}

/// The first line of a text, at most 40 characters.
fn shorten(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    match line.char_indices().nth(40) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}

/// A DOT double-quoted string.
fn quote(text: &str) -> String {
    skillc_runtime::notation::quote_with(text, |c| match c {
        '"' => Some("\\\""),
        '\\' => Some("\\\\"),
        '\n' => Some("\\n"),
        '\r' => Some(""),
        _ => None,
    })
}
