//! The malformed-input corpus (`tests/data/malformed/<case>/`, written by its
//! `generate.py`): each case is a model directory with exactly one thing wrong,
//! loaded with `Model::load`; the error message, with its config location when
//! there is one, is snapshotted. The `ok-*` controls must load, which shows the
//! weights cases fail because of their one mutation. A panic fails the test.

use std::path::Path;

use skillc_runtime::model::{Model, ModelError};

fn outcome(dir: &Path) -> String {
    match Model::load(dir, None) {
        Ok(model) => format!(
            "ok: {} tensors, {} bytes of bf16 weights",
            model.weights.tensors().len(),
            model.weights.bytes()
        ),
        Err(ModelError::Config(e)) => match e.location() {
            Some(at) => format!("config.json:{}:{}: {e}", at.line, at.column),
            None => format!("config.json: {e}"),
        },
        Err(e) => e.to_string(),
    }
}

#[test]
fn malformed_inputs_are_refused_with_a_clear_message() {
    let mut cases = 0;
    insta::glob!("data/malformed/*/config.json", |config| {
        let dir = config.parent().unwrap();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let text = outcome(dir);
        assert_eq!(
            name.starts_with("ok-"),
            text.starts_with("ok:"),
            "{name}: {text}"
        );
        insta::assert_snapshot!(text);
        cases += 1;
    });
    assert!(cases >= 30, "only {cases} cases found");
}
