//! Leave one deployment out: what each deployment teaches that no other does. The
//! bundle is distilled from every trajectory, then once without each; a lesson of
//! deployment X is new knowledge when the bundle without X has no lesson of the
//! same identity ([`super::identity::lesson_key`]), whatever its words.

use std::collections::HashSet;

use super::identity::{condition_text, lesson_key};
use super::ir::LessonIr;
use super::{distill, Input};

/// One deployment left out.
#[derive(Debug, Clone, PartialEq)]
pub struct LeftOut {
    /// The trajectory's name.
    pub deployment: String,
    pub model: String,
    /// Lessons of the whole bundle this deployment taught (alone or with others).
    pub lessons: usize,
    /// Those the bundle without it does not have, by id, in id order.
    pub new: Vec<NewLesson>,
}

/// A lesson only one deployment teaches.
#[derive(Debug, Clone, PartialEq)]
pub struct NewLesson {
    /// Its id in the bundle of every deployment.
    pub id: String,
    pub title: String,
    pub skill: String,
    /// The model features it depends on, as the language writes them.
    pub condition: Option<String>,
}

/// Every deployment of `inputs` left out in turn, in trajectory-name order. The
/// inputs share one set of shared ids, so lesson ids mean the same in every build.
pub fn leave_one_out(inputs: &[Input]) -> Vec<LeftOut> {
    let all = distill("lodo", inputs).ir;
    let mut out = Vec::new();
    for source in &all.sources {
        let others: Vec<Input> = inputs
            .iter()
            .filter(|input| trajectory_name(input) != source.trajectory)
            .cloned()
            .collect();
        let known: HashSet<String> = if others.is_empty() {
            HashSet::new()
        } else {
            distill("lodo", &others)
                .ir
                .lessons
                .values()
                .map(lesson_key)
                .collect()
        };
        let taught: Vec<&LessonIr> = all
            .lessons
            .values()
            .filter(|l| l.deployments.contains(&source.trajectory))
            .collect();
        let new = taught
            .iter()
            .filter(|l| !known.contains(&lesson_key(l)))
            .map(|l| NewLesson {
                id: l.id.clone(),
                title: l.title.clone(),
                skill: l.skill.clone(),
                condition: condition_text(l),
            })
            .collect();
        out.push(LeftOut {
            deployment: source.trajectory.clone(),
            model: source.model.clone(),
            lessons: taught.len(),
            new,
        });
    }
    out
}

/// The name a trajectory goes by: its header's, else its directory's.
fn trajectory_name(input: &Input) -> String {
    input
        .graph
        .header
        .as_ref()
        .map_or_else(|| input.dir_name.to_string(), |h| h.name.clone())
}
