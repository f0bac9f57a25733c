//! Config parsing over every real config in `shared/models` and
//! `tests/data/models` (the model families' public configs) and both layouts of
//! every fixture: the resolved architectures are snapshotted, and the two
//! layouts of one fixture must resolve to the same architecture.

use std::path::{Path, PathBuf};

use skillc_runtime::model::config::load_config;

fn shared(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared")
        .join(sub)
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The model folders described by a Hugging Face `config.json` (the GGUF
/// model carries its config in the file's metadata instead).
fn config_models() -> Vec<PathBuf> {
    subdirs(&shared("models"))
        .into_iter()
        .filter(|dir| dir.join("config.json").is_file())
        .collect()
}

#[test]
fn real_configs_resolve() {
    let models = config_models();
    assert!(models.len() >= 10, "expected the ten shared configs");
    for dir in models {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let arch = load_config(&dir.join("config.json")).unwrap_or_else(|e| panic!("{name}: {e}"));
        insta::assert_json_snapshot!(format!("model_{name}"), arch);
    }
}

/// The model families' public configs (`tests/data/models`, sources in its
/// SOURCES.md).
fn family_models() -> Vec<PathBuf> {
    subdirs(&crate::test_support::workspace_root().join("tests/data/models"))
}

#[test]
fn family_configs_resolve() {
    let models = family_models();
    assert_eq!(models.len(), 5, "Mistral, Phi-3, StableLM-2, OLMo, Gemma-2");
    for dir in models {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let arch = load_config(&dir.join("config.json")).unwrap_or_else(|e| panic!("{name}: {e}"));
        insta::assert_json_snapshot!(format!("model_{name}"), arch);
    }
}

#[test]
fn fixture_layouts_agree() {
    let mut fixtures = subdirs(&shared("fixtures"));
    assert_eq!(fixtures.len(), 7, "the seven transformers-checked fixtures");
    fixtures.extend(
        crate::test_support::FAMILY_FIXTURES
            .iter()
            .map(|name| crate::test_support::fixture_dir(name)),
    );
    for dir in fixtures {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let classic = load_config(&dir.join("config.json")).unwrap();
        let newer = load_config(&dir.join("config.transformers5.json")).unwrap();
        assert_eq!(classic, newer, "{name}: the two layouts disagree");
        insta::assert_json_snapshot!(format!("fixture_{name}"), classic);
    }
}

#[test]
fn scope_of_real_configs() {
    let mut report = std::collections::BTreeMap::new();
    for dir in config_models().into_iter().chain(family_models()) {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let arch = load_config(&dir).unwrap();
        report.insert(name, skillc_runtime::model::scope::check_scope(&arch));
    }
    insta::assert_json_snapshot!("scope", report);
}

/// The real Gemma-2-2B config resolves, the NPU plans place every feature of
/// it, and it states its size,
/// memory and time before a run: its parameter count is the published one
/// (2,614,341,888: the 256000 × 2304 embedding tied to the head, counted once,
/// and 26 layers of 77,865,984), so the estimate is computed from the right
/// model.
#[test]
fn the_real_gemma2_config_states_its_size_memory_and_time() {
    use skillc_runtime::exec::estimate::RunEstimate;
    use skillc_runtime::model::memory::DeployEstimate;
    let dir = crate::test_support::workspace_root().join("tests/data/models/gemma-2-2b");
    let arch = load_config(&dir.join("config.json")).unwrap();
    assert!(skillc_runtime::xdna2::builder::unsupported_features(&arch).is_empty());
    let memory = DeployEstimate::new(skillc_runtime::model::default_estimate(&arch), 0);
    let estimate = RunEstimate::of(&arch, &memory);
    assert_eq!(estimate.parameters, 2_614_341_888);
    assert_eq!(estimate.weight_bytes, 2 * 2_614_341_888);
    assert!(estimate.memory_bytes > estimate.weight_bytes);
    let text = estimate.summary();
    assert!(
        text.contains("2.61 B parameters") && text.contains("min"),
        "{text}"
    );
    eprintln!("gemma-2-2b: {text}");
}
