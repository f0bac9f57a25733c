//! The oracle on real weights: SmolLM2-135M-Instruct as llama.cpp's Q4_1 GGUF
//! (`shared/models/smollm2-135m-instruct-q4_1`) against the float32 outputs
//! transformers computed on the same dequantized weights, both prompts:
//! embeddings, every layer, prefill logits and 32 teacher-forced decode steps
//! within 1e-4 of each tensor's scale, greedy tokens identical. The same
//! weights rounded to bf16 must fail that bound: the check sees a weight
//! that is off by one bf16 rounding.

use std::path::PathBuf;

use skillc_runtime::model::chat::ChatTemplate;
use skillc_runtime::model::oracle::compare::{
    check_all, check_prompt, ReferenceTensors, DEFAULT_TOLERANCE,
};
use skillc_runtime::model::tokenizer::TextTokenizer;
use skillc_runtime::model::Model;

fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/models/smollm2-135m-instruct-q4_1")
}

#[test]
fn the_oracle_on_the_gguf_weights_matches_transformers() {
    let dir = model_dir();
    let model = Model::open(&dir, None).unwrap();
    assert!(
        model.weights.embed_tokens.is_mapped(),
        "weights stay in the file"
    );
    let reference = ReferenceTensors::read(&dir.join("reference.safetensors")).unwrap();
    assert_eq!(reference.prompts(), ["chat", "plain"]);
    let checks = check_all(&model, &reference, DEFAULT_TOLERANCE).unwrap();
    for check in &checks {
        for row in &check.rows {
            assert!(
                row.pass,
                "{}: {} ratio {:e}",
                check.name, row.name, row.ratio
            );
        }
        assert!(check.tokens_match(), "{}: {:?}", check.name, check.tokens);
        assert!(
            check.worst_ratio() < 1e-5,
            "{}: {:e}",
            check.name,
            check.worst_ratio()
        );
    }

    let rounded = Model {
        weights: model.weights.rounded_to_bf16(),
        ..model
    };
    let check = check_prompt(&rounded, &reference, "plain", DEFAULT_TOLERANCE).unwrap();
    assert!(
        !check.passed(),
        "bf16-rounded weights must fail the 1e-4 bound: worst {:e}",
        check.worst_ratio()
    );
}

/// Text: the chat template renders the reference's chat prompt, and the
/// tokenizer built from the GGUF vocabulary encodes both prompts as
/// tokenizer.json (and transformers) do and decodes the greedy answer.
#[test]
fn text_through_the_gguf_vocabulary_and_chat_template() {
    let dir = model_dir();
    let file = skillc_runtime::model::gguf_source(&dir).unwrap().unwrap();
    let facts: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap())
            .unwrap();
    let prompt = |name: &str, key: &str| facts["prompts"][name][key].clone();
    let chat = ChatTemplate::from_gguf(&file).unwrap();
    let rendered = chat.render_user("What is the capital of France?").unwrap();
    assert_eq!(rendered, prompt("chat", "text").as_str().unwrap());

    let from_gguf = TextTokenizer::from_gguf(&file).unwrap();
    let from_json = TextTokenizer::load(&dir).unwrap();
    for name in ["plain", "chat"] {
        let text = prompt(name, "text");
        let ids: Vec<u32> = serde_json::from_value(prompt(name, "input_ids")).unwrap();
        for tokenizer in [&from_gguf, &from_json] {
            assert_eq!(
                tokenizer.encode(text.as_str().unwrap(), true).unwrap(),
                ids,
                "{name}"
            );
        }
    }
    let greedy: Vec<u32> = serde_json::from_value(prompt("chat", "greedy_tokens")).unwrap();
    let answer = &greedy[..greedy.iter().position(|&t| t == 2).unwrap()];
    for tokenizer in [&from_gguf, &from_json] {
        assert_eq!(
            tokenizer.decode(answer).unwrap(),
            "The capital of France is Paris."
        );
    }
}
