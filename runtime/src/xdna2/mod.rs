//! The XDNA 2 (npu2) backend: an emulator of the array that computes what the NPU
//! computes, refuses what it cannot place, and times plans with a cost model
//! calibrated against published measurements.
//!
//! Pipeline: `device` (the array as data) → `kernels` (functional kernels with
//! hardware numerics, each with its constraints) → `plan` (a deployment as data)
//! built by `builder` → `interpreter` (the one functional execution of plans on
//! real tensors: deploy, replay, benchmarks and tests) and `cost`
//! (modeled time, fitted by `fit` against `calibration` points) → `trace` and
//! `roofline` (what a reader looks at); `harness` runs one launch against the f32
//! oracle (the kernel check of deploy, replay, calibration and the tests).

pub mod anchor;
pub mod builder;
pub mod calibration;
pub mod constraints;
pub mod cost;
pub mod device;
pub mod fit;
pub mod harness;
pub mod harness_packed;
pub mod interpreter;
pub mod kernels;
pub mod lofo;
pub mod numerics;
pub mod packed_cost;
pub mod packing;
pub mod padding;
pub mod plan;
pub mod published;
pub mod roofline;
pub mod tiling;
pub mod trace;
