//! The GGUF corpus (`tests/data/gguf/*.gguf`, written by its `generate.py`):
//! `ok-*` controls that must load, and malformed files with exactly one thing
//! wrong each, whose refusal is snapshotted. A panic fails the test, and so
//! would an allocation sized by a lying count (the `*-past-end` cases declare
//! up to 2^62 entries in files of a few KiB).

use std::path::Path;

use skillc_runtime::model::oracle::{LogitRows, Reference};
use skillc_runtime::model::quant::WeightFormat;
use skillc_runtime::model::{Model, WeightOrigin};

fn outcome(path: &Path) -> String {
    match Model::open(path, None) {
        Ok(model) => {
            let WeightOrigin::Gguf { formats, .. } = &model.origin else {
                return "ok but not read as GGUF".into();
            };
            format!(
                "ok: {} ({} layers), formats {formats:?}, {} bytes as stored",
                model.arch.class_name,
                model.arch.num_layers,
                model.weights.stored_bytes()
            )
        }
        Err(e) => e.to_string(),
    }
}

#[test]
fn malformed_gguf_files_are_refused_with_a_clear_message() {
    let mut cases = 0;
    insta::glob!("data/gguf/*.gguf", |path| {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = outcome(path);
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

/// The controls run through the oracle: finite logits, and a packed tensor's
/// bf16 view is its exact values rounded once.
#[test]
fn control_models_run_and_round_once_to_bf16() {
    for name in ["ok-micro", "ok-q4_0", "ok-qwen2-f16", "ok-bf16"] {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/gguf/{name}.gguf"));
        let model = Model::open(&path, None).unwrap();
        let logits = Reference::new(&model)
            .unwrap()
            .prefill(&[1, 5, 9], LogitRows::Last)
            .unwrap()
            .logits;
        assert!(logits.data.iter().all(|v| v.is_finite()), "{name}");
        let q = &model.weights.layers[0].q_proj;
        assert_ne!(q.format(), WeightFormat::F32, "{name}");
        let exact = q.values();
        let rounded: Vec<u16> = exact
            .iter()
            .map(|&v| skillc_runtime::bf16::from_f32(v))
            .collect();
        assert_eq!(q.bits(), &rounded[..], "{name}");
    }
}
