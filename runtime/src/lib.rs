//! skillc's companion runtime: reads models, computes the f32 oracle, emulates the
//! XDNA 2 (npu2) array with a calibrated cost model, and executes skill bundles.
//!
//! Data flow: `model` (config → architecture, safetensors → weights, oracle) feeds
//! `xdna2` (kernels, plans, cost model, traces); `exec` drives both from a bundle.
//! `input` is how every user-supplied file is opened; `threads` how many
//! threads the parallel work runs on.

pub mod bf16;
pub mod bundle;
pub mod bundle_integrity;
pub mod exec;
pub mod input;
pub mod metrics;
pub mod model;
pub mod notation;
pub mod numbers;
pub mod ops;
pub mod phase;
pub mod rng;
pub mod threads;
pub mod xdna2;
