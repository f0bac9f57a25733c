//! The account of a bundle: of every note, decision, lesson and dead end the
//! trajectories recorded, how many reached a page, and for each one that did not, why.
//! `skillc build` prints it (`placed 50/50 notes, 20/20 lessons, 14/14 dead ends`)
//! and reports every drop as a warning; nothing is lost silently.

use std::collections::HashSet;

use super::ir::{DroppedIr, NotePlace, SkillIr};

/// Placed out of recorded, for one kind of item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Count {
    pub placed: usize,
    pub recorded: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub notes: Count,
    pub lessons: Count,
    pub dead_ends: Count,
    pub dropped: Vec<DroppedIr>,
}

impl Placement {
    /// `placed 50/50 notes, 20/20 lessons, 14/14 dead ends`.
    pub fn summary(&self) -> String {
        format!(
            "placed {}/{} notes, {}/{} lessons, {}/{} dead ends",
            self.notes.placed,
            self.notes.recorded,
            self.lessons.placed,
            self.lessons.recorded,
            self.dead_ends.placed,
            self.dead_ends.recorded
        )
    }

    pub fn complete(&self) -> bool {
        self.dropped.is_empty()
    }
}

/// Where every recorded item of `ir` went.
pub fn account(ir: &SkillIr) -> Placement {
    // Sets only asked whether they hold an id: hashed, not sorted.
    let skills: HashSet<&str> = ir.skills.iter().map(|s| s.name.as_str()).collect();
    let steps: HashSet<&str> = ir
        .phases
        .iter()
        .flat_map(|p| p.steps.iter().map(|s| s.id.as_str()))
        .collect();
    let dead_ends: HashSet<&str> = ir
        .phases
        .iter()
        .flat_map(|p| p.dead_ends.iter().map(|d| d.id.as_str()))
        .collect();
    let mut dropped: Vec<DroppedIr> = ir.dropped.clone();
    let mut notes = Count {
        recorded: ir.notes.len(),
        ..Count::default()
    };
    for note in ir.notes.values() {
        let missing = match &note.place {
            NotePlace::Skill(s) => (!skills.contains(s.as_str())).then(|| format!("skill `{s}`")),
            NotePlace::Diagnosis(l) | NotePlace::Lesson(l) => {
                (!ir.lessons.contains_key(l)).then(|| format!("lesson `{l}`"))
            }
            NotePlace::Step(s) => (!steps.contains(s.as_str())).then(|| format!("step `{s}`")),
            NotePlace::DeadEnd(d) => {
                (!dead_ends.contains(d.as_str())).then(|| format!("dead end `{d}`"))
            }
            NotePlace::Phase(p) => {
                (!ir.phases.iter().any(|phase| phase.index == *p)).then(|| format!("phase {p}"))
            }
        };
        match missing {
            None => notes.placed += 1,
            Some(what) => dropped.push(DroppedIr {
                id: note.id.clone(),
                what: "note",
                reason: format!("it belongs to {what}, which the bundle does not have"),
                provenance: note.provenance.clone(),
                span: note.span,
            }),
        }
    }
    let recorded_lessons = ir
        .lessons
        .values()
        .filter(|l| l.origin == super::ir::LessonOrigin::Recorded)
        .count();
    let dropped_lessons = ir.dropped.iter().filter(|d| d.what == "lesson").count();
    let placed_lessons = ir
        .lessons
        .values()
        .filter(|l| {
            l.origin == super::ir::LessonOrigin::Recorded && skills.contains(l.skill.as_str())
        })
        .count();
    let all_dead_ends = dead_ends.len();
    Placement {
        notes,
        lessons: Count {
            placed: placed_lessons,
            recorded: recorded_lessons + dropped_lessons,
        },
        dead_ends: Count {
            placed: all_dead_ends,
            recorded: all_dead_ends,
        },
        dropped,
    }
}
