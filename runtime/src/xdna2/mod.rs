//! The XDNA 2 (npu2) backend: an emulator of the array that computes what the NPU
//! computes, refuses what it cannot place, and times plans with a cost model
//! calibrated against published measurements.
//!
//! Pipeline: `device` (the array as data) → `kernels` (functional kernels with
//! hardware numerics, each with its constraints) → `plan` (a deployment as data)
//! built by `builder` → `exec` (functional execution on real tensors) and `cost`
//! (modeled time, fitted by `fit` against `calibration` points) → `trace` and
//! `roofline` (what a reader looks at); `validate` gates one launch against a
//! plain computation (phase-1 kernel validation).

pub mod builder;
pub mod calibration;
pub mod constraints;
pub mod cost;
pub mod device;
pub mod exec;
pub mod fit;
pub mod host;
pub mod kernels;
pub mod lofo;
pub mod numerics;
pub mod plan;
pub mod published;
pub mod roofline;
pub mod trace;
pub mod validate;
