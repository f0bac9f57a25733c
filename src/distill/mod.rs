//! Distillation: from the validated action/lesson graph to the skill IR.

pub mod catalog;
pub mod ir;
