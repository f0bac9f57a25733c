//! Models: the architecture description, config parsing, weight loading and the
//! CPU f32 reference that every numerical gate compares against.

pub mod arch;
pub mod config;
pub mod scope;
