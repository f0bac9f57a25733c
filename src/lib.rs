//! skillc: compiles recorded optimization trajectories into eight-phase agent skill
//! bundles.
//!
//! Data flow (the code map and the invariants are in ARCHITECTURE.md at the
//! repository root): `syntax` parses `.traj` files into an AST with spans,
//! `graph` resolves it into the action/lesson graph and validates it, `distill`
//! turns the graph into the skill IR, `emit` lowers the IR to skill directories and
//! `bundle.json`; `import` drafts trajectories from other records. `outdir` owns the folders `build` and `deploy` write. `cli` is the
//! only place that renders diagnostics.

pub mod cli;
pub mod diag;
pub mod digest;
pub mod distill;
pub mod emit;
pub mod graph;
pub mod import;
pub mod outdir;
pub mod replay;
pub mod syntax;
pub mod synth;
