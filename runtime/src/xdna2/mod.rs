//! The XDNA 2 (npu2) backend: an emulator of the array that computes what the NPU
//! computes, refuses what it cannot place, and times plans with a cost model
//! calibrated against published measurements.
