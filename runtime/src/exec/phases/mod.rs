//! The eight phases, one runner each over the run's shared state: the CPU reference
//! (`reference`), kernel validation (`kernels`), one block (`block`), the full model
//! (`full_model`, with the long-context probes of `long_context`, which phases 4
//! and 5 run too), prefill and decode optimization (`optimize`, phases 4 and 5), finalize
//! (`finalize`, phase 6, with the final plan's free-running text, `text`) and the
//! fresh-process evaluation (`evaluate`); `prompts` draws
//! phase 0's verification prompts and `steps` accounts for the bundle steps a phase
//! leaves.

pub(crate) mod block;
pub(crate) mod evaluate;
pub(crate) mod finalize;
pub(crate) mod full_model;
pub(crate) mod kernels;
pub(crate) mod long_context;
pub(crate) mod optimize;
pub(crate) mod prompts;
pub(crate) mod recorded_format;
pub(crate) mod reference;
pub(crate) mod steps;
pub(crate) mod text;
pub(crate) mod weight_path;

pub use crate::phase::DeployPhase;
