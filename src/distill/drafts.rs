//! A bundle is never built from drafts. `skillc import` marks what it could not
//! classify or place (`note draft …`, `session … draft`); `skillc check` warns about
//! each (W0061) and `skillc build` refuses each (E0102), since a draft is someone
//! else's words and guesses that no one has reviewed.

use super::Input;
use crate::diag::{Code, Diagnostic};
use crate::graph::NodeData;

/// One E0102 per draft note and draft session of the build's trajectories.
pub fn refuse(inputs: &[Input]) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    for input in inputs {
        let g = input.graph;
        for session in g.sessions.iter().filter(|s| s.draft) {
            found.push(Diagnostic::new(
                Code::DraftInBuild,
                session.span,
                "a draft session cannot be built: its phase is the importer's guess",
            ));
        }
        for (_, node) in g.nodes() {
            if let NodeData::Note {
                draft: Some(draft), ..
            } = &node.data
            {
                found.push(Diagnostic::new(
                    Code::DraftInBuild,
                    draft.span,
                    format!("`{}` is a draft note and cannot be built", node.id),
                ));
            }
        }
    }
    found
        .into_iter()
        .map(|d| d.with_hint("finish the drafts first: `skillc check` lists each (W0061) with what it reads like"))
        .collect()
}
