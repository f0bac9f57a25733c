//! The eight phases, one runner each over the run's shared state: the CPU reference
//! (`phase0`), kernel validation (`phase1`), one block (`phase2`), the full model
//! (`phase3`), prefill and decode optimization (`optimize`, phases 4 and 5), finalize
//! (`finalize`, phase 6) and the fresh-process evaluation (`phase7`); `prompts` draws
//! phase 0's verification prompts and `steps` accounts for the bundle steps a phase
//! leaves.

pub(crate) mod finalize;
pub(crate) mod optimize;
pub(crate) mod phase0;
pub(crate) mod phase1;
pub(crate) mod phase2;
pub(crate) mod phase3;
pub(crate) mod phase7;
pub(crate) mod prompts;
pub(crate) mod recorded_format;
pub(crate) mod steps;
pub(crate) mod weight_path;

pub use crate::phase::DeployPhase;
