//! skillc-runtime's integration tests, as one test binary (one link, one pool of test
//! threads). Each module is one former `tests/<name>.rs`; run one with
//! `cargo test -p skillc-runtime --test integration <name>::`.

mod config;
mod fixtures;
mod gguf;
mod malformed;
mod model;
mod padding;
mod smollm2;
mod xdna2_calibration;
mod xdna2_constraints;
mod xdna2_exec;
mod xdna2_harness;
mod xdna2_kernels;
mod xdna2_trace;

/// `autotests = false` means a new `tests/*.rs` runs only once it is a module here: fail
/// rather than let a forgotten file pass by not running.
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let listed = include_str!("integration.rs");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/ is readable") {
        let path = entry.expect("tests/ entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let is_test_file = path.extension().is_some_and(|e| e == "rs") && stem != "integration";
        if is_test_file && !listed.lines().any(|l| l == format!("mod {stem};")) {
            missing.push(stem.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "tests/{{{}}}.rs: not a module of tests/integration.rs",
        missing.join(",")
    );
}
