//! `skillc reference`: runs the CPU f32 reference on a model directory, prints
//! the greedy continuation and, when the directory holds a
//! `reference.safetensors` (the shared fixtures do), the per-tensor error table
//! against it with PASS/FAIL (exit 0/1).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use skillc_runtime::model::checkpoint::WeightsError;
use skillc_runtime::model::config::{load_config, ConfigError};
use skillc_runtime::model::oracle::compare::{
    check_reference, ReferenceCheck, ReferenceTensors, DEFAULT_TOLERANCE, REFERENCE_FILE,
};
use skillc_runtime::model::oracle::{blocks, LogitRows, Reference};
use skillc_runtime::model::scope::check_scope;
use skillc_runtime::model::tokenizer::TextTokenizer;
use skillc_runtime::model::{Model, ModelError, WeightOrigin};

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
    /// Print the result (model, prompt, top-k, greedy tokens and, with a
    /// reference file, every tensor's error and the verdict) as one JSON document.
    #[arg(long)]
    pub json: bool,
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
    let config_path = args
        .config
        .clone()
        .unwrap_or_else(|| args.model.join("config.json"));
    let arch = load_config(&config_path).map_err(|e| config_failure(&config_path, &e))?;
    let model = Model::load_with_arch(arch, &args.model, args.seed).map_err(model_failure)?;
    if !args.json {
        print_summary(&args.model, &model);
    }

    let reference_path = args.model.join(REFERENCE_FILE);
    let reference = if reference_path.exists() {
        Some(
            ReferenceTensors::read(&reference_path)
                .map_err(|e| (EXIT_FAILED, format!("error: {e}")))?,
        )
    } else {
        None
    };
    let tokenizer = TextTokenizer::load(&args.model).ok();
    let prompt = prompt_ids(args, reference.as_ref(), tokenizer.as_ref())?;
    let greedy = run_greedy(args, &model, &prompt, tokenizer.as_ref())?;
    let check = match &reference {
        Some(reference) => Some(
            check_reference(&model, reference, args.tolerance)
                .map_err(|e| (EXIT_FAILED, format!("error: {e}")))?,
        ),
        None => None,
    };
    if args.json {
        print_json(&args.model, &model, &greedy, check.as_ref());
    } else {
        print_greedy(args.top_k, &greedy);
        if let Some(check) = &check {
            print_check(check);
        }
    }
    Ok(if check.as_ref().is_none_or(ReferenceCheck::passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    })
}

/// The reference's greedy run on the prompt.
#[derive(Debug, serde::Serialize)]
struct Greedy {
    prompt: Vec<u32>,
    /// The most likely next tokens after the prompt, with their logits.
    top_k: Vec<(usize, f32)>,
    tokens: Vec<u32>,
    text: Option<String>,
}

fn print_json(dir: &Path, model: &Model, greedy: &Greedy, check: Option<&ReferenceCheck>) {
    let arch = &model.arch;
    let weights = match &model.origin {
        WeightOrigin::Checkpoint { files } => serde_json::json!({ "files": files }),
        WeightOrigin::Random { seed } => serde_json::json!({ "random_seed": seed }),
    };
    let doc = serde_json::json!({
        "model": {
            "dir": dir.display().to_string(),
            "class_name": arch.class_name,
            "layers": arch.num_layers,
            "hidden_size": arch.hidden_size,
            "heads": arch.num_heads,
            "kv_heads": arch.num_kv_heads,
            "head_dim": arch.head_dim,
            "intermediate_size": arch.intermediate_size,
            "vocab_size": arch.vocab_size,
            "parameters": arch.parameter_count(),
            "weights": weights,
        },
        "greedy": greedy,
        "check": check.map(|c| serde_json::json!({
            "passed": c.passed(),
            "worst_ratio": c.worst_ratio(),
            "detail": c,
        })),
    });
    println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
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
            .token_ids("input_ids")
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
) -> Result<Greedy, Failure> {
    let failure =
        |e: skillc_runtime::model::oracle::ReferenceError| (EXIT_FAILED, format!("error: {e}"));
    let mut reference = Reference::new(model).map_err(failure)?;
    let prefill = reference
        .prefill(prompt, LogitRows::Last)
        .map_err(failure)?;
    let logits = prefill.logits.last_row();
    let top_k = blocks::top_k(logits, args.top_k);
    let mut tokens = Vec::with_capacity(args.max_new_tokens);
    if args.max_new_tokens > 0 {
        tokens.push(blocks::argmax(logits) as u32);
    }
    while tokens.len() < args.max_new_tokens {
        let last = tokens[tokens.len() - 1];
        let next = reference.decode_step(last).map_err(failure)?;
        tokens.push(blocks::argmax(&next) as u32);
    }
    let text = tokenizer.and_then(|t| t.decode(&tokens).ok());
    Ok(Greedy {
        prompt: prompt.to_vec(),
        top_k,
        tokens,
        text,
    })
}

fn print_greedy(k: usize, greedy: &Greedy) {
    println!(
        "prompt ({} tokens): {}",
        greedy.prompt.len(),
        join(&greedy.prompt)
    );
    let top: Vec<String> = greedy
        .top_k
        .iter()
        .map(|(id, logit)| format!("{id} ({logit:.3})"))
        .collect();
    println!("top-{k} after the prompt: {}", top.join(", "));
    println!(
        "greedy ({} tokens): {}",
        greedy.tokens.len(),
        join(&greedy.tokens)
    );
    if let Some(text) = &greedy.text {
        println!("text: {text:?}");
    }
}

fn print_check(check: &ReferenceCheck) {
    println!(
        "\nreference check against {REFERENCE_FILE} (prompt of {} tokens, tolerance max|Δ| ≤ {:e} · max|ref|)",
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
