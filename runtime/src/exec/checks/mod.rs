//! The checking machinery the phases share: a gate (one value against one threshold
//! with where it came from), the binding top-k gate, greedy verification of either
//! side, phase 1's kernel harness, and the debugging lessons a failed gate matches.

pub mod gate;
pub mod remedy;
pub mod topk;
pub mod validate;
pub mod verify;
