//! The checking machinery the phases share: a gate (one value against one threshold
//! with where it came from), one block against the reference's (`block`), the
//! teacher-forced decode comparison, its limits derived from
//! the bf16-storage floor (`floor`), the long-context probes (`long`), the greedy
//! top-k gate that verification runs, the final plan's free-running text against
//! the oracle's (`free_run`), phase 1's kernel harness, and the debugging
//! lessons a failed gate matches.

pub mod block;
pub mod decode;
pub mod features;
pub mod floor;
pub mod free_run;
pub mod gate;
pub mod long;
pub mod remedy;
pub mod topk;
pub mod validate;
pub mod verify;
