//! The weight format each entry was recorded on: an entry's own `weights`
//! clause, else its session's, else the header's. Which entries care is the
//! operation table's business (`OpSpec::weights` in `skillc_runtime::ops`):
//! a lesson whose fix runs a format-dependent operation, in a trajectory that
//! records no format for it, is W0051, since nothing downstream could tell a
//! bf16 tiling from a 4-bit one.

use petgraph::graph::NodeIndex;
use skillc_runtime::ops::{formats, WeightFormat};

use super::{Graph, NodeData};
use crate::diag::{Code, Diagnostic};
use crate::syntax::{Name, Span};

/// Reads a format word; an unknown one is E0051 at the word.
pub(super) fn read(
    word: &str,
    span: Span,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<WeightFormat> {
    match formats::parse(word) {
        Ok(format) => Some(format),
        Err(e) => {
            diagnostics.push(
                Diagnostic::new(Code::UnknownWeightFormat, span, e.to_string()).with_hint(format!(
                    "weight formats are {} (lower case)",
                    formats::words().join(", ")
                )),
            );
            None
        }
    }
}

/// [`read`] of a word the parser kept as a [`Name`].
pub(super) fn read_name(name: &Name, diagnostics: &mut Vec<Diagnostic>) -> Option<WeightFormat> {
    read(&name.text, name.span, diagnostics)
}

impl Graph {
    /// The format entry `index` was recorded on: its own clause, its session's,
    /// the header's; `None` when the trajectory does not say.
    pub fn recorded_weights(&self, index: NodeIndex) -> Option<WeightFormat> {
        let node = &self.inner[index];
        node.weights
            .or_else(|| self.sessions.get(node.session).and_then(|s| s.weights))
            .or_else(|| self.header.as_ref().and_then(|h| h.weights))
    }

    /// The format entry `index` was recorded on when what it does depends on it
    /// (an action of a format-dependent operation, a lesson with a fix of one).
    pub fn weights_if_dependent(&self, index: NodeIndex) -> Option<WeightFormat> {
        self.depends_on_weights(index)
            .then(|| self.recorded_weights(index))
            .flatten()
    }

    /// Whether what entry `index` chooses depends on the weights' format.
    pub fn depends_on_weights(&self, index: NodeIndex) -> bool {
        match &self.inner[index].data {
            NodeData::Action(a) => a.op.spec().weights.depends(),
            NodeData::Lesson(l) => l.remedies.iter().any(|r| r.op.spec().weights.depends()),
            _ => false,
        }
    }
}

/// W0051: a lesson whose fix depends on the weight format, with no format recorded.
pub(super) fn warn_unrecorded(graph: &Graph, diagnostics: &mut Vec<Diagnostic>) {
    for (index, node) in graph.nodes() {
        let NodeData::Lesson(lesson) = &node.data else {
            continue;
        };
        if graph.recorded_weights(index).is_some() {
            continue;
        }
        let Some(remedy) = lesson
            .remedies
            .iter()
            .find(|r| r.op.spec().weights.depends())
        else {
            continue;
        };
        let why = match remedy.op.spec().weights {
            skillc_runtime::ops::FormatDependence::Depends(why) => why,
            skillc_runtime::ops::FormatDependence::Independent => "",
        };
        diagnostics.push(
            Diagnostic::new(
                Code::UnrecordedWeightFormat,
                remedy.span,
                format!(
                    "lesson `{}` fixes `{}`, which depends on the weight format ({why}), but no weight format is recorded for it",
                    node.id, remedy.op
                ),
            )
            .with_hint(
                "say what the lesson was learnt on: `weights bf16` in the header, after the session's phase, or on the lesson",
            ),
        );
    }
}
