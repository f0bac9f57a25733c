//! `skillc reference`: runs the CPU f32 reference on a model directory, prints
//! the greedy continuation and, when the directory holds a
//! `reference.safetensors` (the shared fixtures do), the per-tensor error table
//! against it with PASS/FAIL (exit 0/1).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use skillc_runtime::model::checkpoint::WeightsError;
use skillc_runtime::model::config::{load_config, ConfigError};
use skillc_runtime::model::gguf::GgufError;
use skillc_runtime::model::memory::human_bytes;
use skillc_runtime::model::oracle::compare::{
    check_all, ReferenceCheck, ReferenceTensors, DEFAULT_TOLERANCE, REFERENCE_FILE,
};
use skillc_runtime::model::oracle::{blocks, LogitRows, Reference};
use skillc_runtime::model::scope::check_scope;
use skillc_runtime::model::tokenizer::TextTokenizer;
use skillc_runtime::model::{gguf_source, Model, ModelError, WeightOrigin};

use crate::cli::{EXIT_FAILED, EXIT_USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Model directory: config.json, *.safetensors (or none, with --seed),
    /// optionally tokenizer.json and reference.safetensors.
    #[arg(long)]
    pub model: PathBuf,
    /// Config file to use instead of MODEL/config.json (e.g. config.transformers5.json).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Prompt token ids, comma-separated.
    #[arg(long, value_delimiter = ',', conflicts_with = "prompt")]
    pub prompt_ids: Option<Vec<u32>>,
    /// Prompt text (needs tokenizer.json and a build with the `tokenizer` feature).
    #[arg(long)]
    pub prompt: Option<String>,
    #[arg(long, default_value_t = 16)]
    pub max_new_tokens: usize,
    /// Seed for random weights when the directory holds none.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Bound on max |Δ| / max |ref| per tensor for the reference check.
    #[arg(long, default_value_t = DEFAULT_TOLERANCE)]
    pub tolerance: f64,
    /// Show the k most likely next tokens after the prompt.
    #[arg(long, default_value_t = 5)]
    pub top_k: usize,
}

pub fn run(args: Args) -> ExitCode {
    match execute(&args) {
        Ok(code) => code,
        Err((code, message)) => {
            eprintln!("{message}");
            ExitCode::from(code)
        }
    }
}

type Failure = (u8, String);

fn execute(args: &Args) -> Result<ExitCode, Failure> {
    let model = load_model(args)?;
    print_summary(&args.model, &model);

    let reference_path = reference_dir(&args.model).join(REFERENCE_FILE);
    let reference = if reference_path.is_file() {
        Some(
            ReferenceTensors::read(&reference_path)
                .map_err(|e| (EXIT_FAILED, format!("error: {e}")))?,
        )
    } else {
        None
    };
    let tokenizer = TextTokenizer::load(&args.model).ok();
    let prompt = prompt_ids(args, reference.as_ref(), tokenizer.as_ref())?;
    run_greedy(args, &model, &prompt, tokenizer.as_ref())?;

    let Some(reference) = reference else {
        return Ok(ExitCode::SUCCESS);
    };
    let checks = check_all(&model, &reference, args.tolerance)
        .map_err(|e| (EXIT_FAILED, format!("error: {e}")))?;
    for check in &checks {
        print_check(check);
    }
    Ok(if checks.iter().all(ReferenceCheck::passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    })
}

/// The model `--model` names: a GGUF file (or a directory holding one and no
/// config.json), else a Hugging Face directory read with `--config` or its
/// config.json.
fn load_model(args: &Args) -> Result<Model, Failure> {
    if args.config.is_none() {
        let gguf = gguf_source(&args.model).map_err(|e| (gguf_exit(&e), format!("error: {e}")))?;
        if let Some(file) = gguf {
            return Model::from_gguf(&file).map_err(model_failure);
        }
    }
    let config_path = args
        .config
        .clone()
        .unwrap_or_else(|| args.model.join("config.json"));
    let arch = load_config(&config_path).map_err(|e| config_failure(&config_path, &e))?;
    Model::load_with_arch(arch, &args.model, args.seed).map_err(model_failure)
}

/// A file that cannot be opened is a usage error; a malformed one a failure.
fn gguf_exit(err: &GgufError) -> u8 {
    match err {
        GgufError::Io { .. } => EXIT_USAGE,
        _ => EXIT_FAILED,
    }
}

/// The directory the model's companion files (tokenizer, reference) sit in.
fn reference_dir(model: &Path) -> PathBuf {
    if model.is_file() {
        model.parent().map(Path::to_path_buf).unwrap_or_default()
    } else {
        model.to_path_buf()
    }
}

/// The prompt: ids given, else text through the tokenizer, else the reference
/// file's prompt.
fn prompt_ids(
    args: &Args,
    reference: Option<&ReferenceTensors>,
    tokenizer: Option<&TextTokenizer>,
) -> Result<Vec<u32>, Failure> {
    if let Some(ids) = &args.prompt_ids {
        return Ok(ids.clone());
    }
    if let Some(text) = &args.prompt {
        let loaded;
        let tokenizer = match tokenizer {
            Some(t) => t,
            None => {
                loaded = TextTokenizer::load(&args.model)
                    .map_err(|e| (EXIT_USAGE, format!("error: {e}")))?;
                &loaded
            }
        };
        return tokenizer
            .encode(text, true)
            .map_err(|e| (EXIT_USAGE, format!("error: {e}")));
    }
    match reference {
        Some(reference) => reference
            .token_ids(&ReferenceTensors::key(
                &reference.prompts().into_iter().next().unwrap_or_default(),
                "input_ids",
            ))
            .map_err(|e| (EXIT_FAILED, format!("error: {e}"))),
        None => Err((
            EXIT_USAGE,
            "error: no prompt: give --prompt-ids (or --prompt with a tokenizer)".into(),
        )),
    }
}

fn print_summary(dir: &Path, model: &Model) {
    let arch = &model.arch;
    let origin = match &model.origin {
        WeightOrigin::Checkpoint { files } => files.join(", "),
        WeightOrigin::Random { seed } => format!("random bf16 weights, seed {seed}"),
        WeightOrigin::Gguf { file, formats } => {
            let counts: Vec<String> = formats.iter().map(|(f, n)| format!("{n} {f}")).collect();
            format!(
                "{file} ({}; {} as stored)",
                counts.join(", "),
                human_bytes(model.weights.stored_bytes())
            )
        }
    };
    println!(
        "model {}: {} — {} layers, hidden {}, {} heads / {} kv × {}, ffn {}, vocab {}, {} parameters",
        dir.display(),
        arch.class_name,
        arch.num_layers,
        arch.hidden_size,
        arch.num_heads,
        arch.num_kv_heads,
        arch.head_dim,
        arch.intermediate_size,
        arch.vocab_size,
        arch.parameter_count()
    );
    println!("weights: {origin}");
    for note in check_scope(arch).notes {
        println!("  - {note}");
    }
}

fn run_greedy(
    args: &Args,
    model: &Model,
    prompt: &[u32],
    tokenizer: Option<&TextTokenizer>,
) -> Result<(), Failure> {
    let failure =
        |e: skillc_runtime::model::oracle::ReferenceError| (EXIT_FAILED, format!("error: {e}"));
    let mut reference = Reference::new(model).map_err(failure)?;
    println!("prompt ({} tokens): {}", prompt.len(), join(prompt));
    let prefill = reference
        .prefill(prompt, LogitRows::Last)
        .map_err(failure)?;
    let logits = prefill.logits.last_row();
    let top: Vec<String> = blocks::top_k(logits, args.top_k)
        .iter()
        .map(|(id, logit)| format!("{id} ({logit:.3})"))
        .collect();
    println!("top-{} after the prompt: {}", args.top_k, top.join(", "));
    let mut tokens = Vec::with_capacity(args.max_new_tokens);
    if args.max_new_tokens > 0 {
        tokens.push(blocks::argmax(logits) as u32);
    }
    while tokens.len() < args.max_new_tokens {
        let last = tokens[tokens.len() - 1];
        let next = reference.decode_step(last).map_err(failure)?;
        tokens.push(blocks::argmax(&next) as u32);
    }
    println!("greedy ({} tokens): {}", tokens.len(), join(&tokens));
    if let Some(text) = tokenizer.and_then(|t| t.decode(&tokens).ok()) {
        println!("text: {text:?}");
    }
    Ok(())
}

fn print_check(check: &ReferenceCheck) {
    let name = if check.name.is_empty() {
        String::new()
    } else {
        format!("`{}` ", check.name)
    };
    println!(
        "\nreference check against {REFERENCE_FILE} ({name}prompt of {} tokens, tolerance max|Δ| ≤ {:e} · max|ref|)",
        check.prompt.len(),
        check.tolerance
    );
    println!(
        "{:<34} {:>9} {:>11} {:>10} {:>10}  verdict",
        "tensor", "elements", "max|Δ|", "max|ref|", "ratio"
    );
    for row in &check.rows {
        println!(
            "{:<34} {:>9} {:>11.3e} {:>10.4} {:>10.3e}  {}",
            row.name,
            row.elements,
            row.max_abs_error,
            row.max_abs_reference,
            row.ratio,
            if row.pass { "ok" } else { "FAIL" }
        );
    }
    let agree = check
        .tokens
        .iter()
        .zip(&check.expected_tokens)
        .filter(|(a, b)| a == b)
        .count();
    println!(
        "{:<34} {:>9} {:>11}",
        "greedy tokens",
        check.expected_tokens.len(),
        format!("{agree}/{} equal", check.expected_tokens.len())
    );
    if !check.tokens_match() {
        println!("  expected: {}", join(&check.expected_tokens));
        println!("  got:      {}", join(&check.tokens));
    }
    println!(
        "{}: worst ratio {:.3e}",
        if check.passed() { "PASS" } else { "FAIL" },
        check.worst_ratio()
    );
}

fn join(ids: &[u32]) -> String {
    ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// `file:line:col: error: message`, the source line and a caret, when the
/// error points into the config.
fn config_failure(path: &Path, err: &ConfigError) -> Failure {
    if let ConfigError::Io { .. } = err {
        return (EXIT_USAGE, format!("error: {err}"));
    }
    let Some(at) = err.location() else {
        return (EXIT_FAILED, format!("{}: error: {err}", path.display()));
    };
    let source = std::fs::read_to_string(path).unwrap_or_default();
    let line = source.lines().nth(at.line - 1).unwrap_or("");
    let caret = format!("{}^", " ".repeat(at.column.saturating_sub(1)));
    (
        EXIT_FAILED,
        format!(
            "{}:{}:{}: error: {err}\n{:>5} | {line}\n      | {caret}",
            path.display(),
            at.line,
            at.column,
            at.line
        ),
    )
}

fn model_failure(err: ModelError) -> Failure {
    let code = match &err {
        ModelError::Weights(WeightsError::Io { .. }) | ModelError::NoWeights => EXIT_USAGE,
        _ => EXIT_FAILED,
    };
    (code, format!("error: {err}"))
}
