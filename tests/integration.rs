//! The skillc package's integration tests, as one test binary: one link instead of one per
//! file, and one pool of test threads for the whole suite (issue 15: the cold test command).
//! Each module is one former `tests/<name>.rs`; run one with `cargo test --test integration
//! <name>::`. Support modules are compiled once and shared.

mod build_support;
mod deploy_support;
mod hostile_support;

mod architecture;
mod bench_deploy;
mod build;
mod build_agentskills;
mod build_cli;
mod build_deployments;
mod build_hostile;
mod bundle_quality;
mod cli;
mod cli_calibrate;
mod cli_reference;
mod cli_surface;
mod deploy_conditions;
mod deploy_evaluator;
mod deploy_faults;
mod deploy_fixtures;
mod deploy_gates;
mod deploy_gguf_fixture;
mod deploy_learning;
mod deploy_long_context;
mod deploy_optimize;
mod deploy_padding_property;
mod deploy_real_model;
mod deploy_recorded_format;
mod deploy_scope;
mod deploy_threads;
mod deploy_weights;
mod diff_prose;
mod hardening;
mod hostile;
mod hostile_models;
mod hostile_outputs;
mod import;
mod llama1b;
mod print;
mod readme_commands;
mod replay;
mod robustness;
mod syntax;
#[path = "../runtime/tests/test_support/mod.rs"]
mod test_support;

/// A new `tests/*.rs` runs only once it is a module here (see `test_support`).
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    test_support::assert_every_test_file_listed(include_str!("integration.rs"));
}
