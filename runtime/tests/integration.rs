//! skillc-runtime's integration tests, as one test binary (one link, one pool of test
//! threads). Each module is one former `tests/<name>.rs`; run one with
//! `cargo test -p skillc-runtime --test integration <name>::`.

mod config;
mod fixtures;
mod gguf;
mod malformed;
mod model;
mod oracle_storage;
mod padding;
mod smollm2;
mod test_support;
mod threads;
mod xdna2_calibration;
mod xdna2_calibration_packed;
mod xdna2_constraints;
mod xdna2_exec;
mod xdna2_fused;
mod xdna2_harness;
mod xdna2_kernels;
mod xdna2_packed;
mod xdna2_trace;

/// A new `tests/*.rs` runs only once it is a module here (see `test_support`).
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    test_support::assert_every_test_file_listed(include_str!("integration.rs"));
}
