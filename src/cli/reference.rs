//! `skillc reference`: runs the CPU f32 reference on a model directory, prints
//! the greedy continuation and, when the directory holds a
//! `reference.safetensors` (the shared fixtures do), the per-tensor error table
//! against it with PASS/FAIL (exit 0/1).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use skillc_runtime::model::checkpoint::WeightsError;
use skillc_runtime::model::config::{load_config, ConfigError};
use skillc_runtime::model::consistency::{
    check_context, check_reference_ids, check_tokenizer, ConsistencyError,
};
use skillc_runtime::model::gguf::{GgufError, GgufFile};
use skillc_runtime::model::memory::human_bytes;
use skillc_runtime::model::oracle::compare::{
    check_all, ReferenceCheck, ReferenceTensors, DEFAULT_TOLERANCE, REFERENCE_FILE,
};
use skillc_runtime::model::oracle::{blocks, Reference, ReferenceError};
use skillc_runtime::model::prompt::{EncodedPrompt, ModelText, PromptInput};
use skillc_runtime::model::scope::check_scope;
use skillc_runtime::model::{companion_dir, gguf_source, Model, ModelError, WeightOrigin};

use crate::cli::storage_table::{self, ResidualPoint};
use crate::cli::{EXIT_FAILED, EXIT_USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The model: a GGUF file, a directory holding one, or a Hugging Face
    /// directory (config.json, *.safetensors or none with --seed); tokenizer.json
    /// and reference.safetensors are read from beside it.
    #[arg(long)]
    pub model: PathBuf,
    /// Config file to use instead of MODEL/config.json (e.g. config.transformers5.json).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Prompt token ids, comma-separated.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["prompt", "chat"])]
    pub prompt_ids: Option<Vec<u32>>,
    /// Prompt text, tokenized as it stands.
    #[arg(long, conflicts_with = "chat")]
    pub prompt: Option<String>,
    /// A user message, put through the model's chat template (with the
    /// assistant's generation prompt).
    #[arg(long)]
    pub chat: Option<String>,
    /// Tokens to generate at most.
    #[arg(long, default_value_t = 32)]
    pub max_new_tokens: usize,
    /// Keep generating past the end-of-sequence token.
    #[arg(long)]
    pub ignore_eos: bool,
    /// Seed for random weights when the directory holds none.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Bound on max |Δ| / max |ref| per tensor for the reference check.
    #[arg(long, default_value_t = DEFAULT_TOLERANCE)]
    pub tolerance: f64,
    /// Show the k most likely next tokens after the prompt.
    #[arg(long, default_value_t = 5)]
    pub top_k: usize,
    /// Print the result (model, prompt, top-k, greedy tokens and text and, with a
    /// reference file, every tensor's error and the verdict) as one JSON document.
    #[arg(long)]
    pub json: bool,
    /// Also print how much error bf16 storage between kernels costs on this
    /// model and prompt: the oracle re-run storing the residual stream, Q/K,
    /// attention and MLP outputs, … in bf16, fed the same teacher-forced
    /// tokens, against the plain oracle (the decode gates' floor is one row).
    #[arg(long, conflicts_with = "json")]
    pub bf16_storage_table: bool,
    /// With --bf16-storage-table: also show one residual-stream value,
    /// LAYER,POSITION,CHANNEL (0-based).
    #[arg(long, value_delimiter = ',', requires = "bf16_storage_table")]
    pub residual_at: Option<Vec<usize>>,
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
    let (model, gguf) = load_model(args)?;
    if !args.json {
        print_summary(&args.model, &model);
    }
    let text = ModelText::for_model(&args.model, gguf.as_ref());

    let reference_path = companion_dir(&args.model).join(REFERENCE_FILE);
    // `exists`: a reference that is not a regular file is refused, not skipped.
    let reference = if reference_path.exists() {
        Some(
            ReferenceTensors::read(&reference_path)
                .map_err(|e| (EXIT_FAILED, format!("error: {e}")))?,
        )
    } else {
        None
    };
    let prompt = prompt(args, reference.as_ref(), &text)?;
    check_consistency(args, &model, &text, reference.as_ref(), &prompt)?;
    let greedy = run_greedy(args, &model, &prompt, &text)?;
    let checks = match &reference {
        Some(reference) => check_all(&model, reference, args.tolerance)
            .map_err(|e| (EXIT_FAILED, format!("error: {e}")))?,
        None => Vec::new(),
    };
    if args.json {
        print_json(&args.model, &model, &greedy, &checks);
    } else {
        print_greedy(args.top_k, &greedy);
        for check in &checks {
            print_check(check);
        }
    }
    if args.bf16_storage_table {
        let at = match &args.residual_at {
            None => None,
            Some(list) => Some(ResidualPoint::from_list(list).ok_or_else(|| {
                (
                    EXIT_USAGE,
                    "error: --residual-at takes LAYER,POSITION,CHANNEL".to_string(),
                )
            })?),
        };
        storage_table::print(&model, &prompt.ids, at)
            .map_err(|e| (EXIT_FAILED, format!("error: {e}")))?;
    }
    Ok(if checks.iter().all(ReferenceCheck::passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    })
}

/// The reference's greedy run on the prompt.
#[derive(Debug, serde::Serialize)]
struct Greedy {
    prompt: Vec<u32>,
    /// How the prompt was given: ids, text or chat.
    prompt_kind: String,
    prompt_text: Option<String>,
    /// The most likely next tokens after the prompt, with their logits.
    top_k: Vec<(usize, f32)>,
    tokens: Vec<u32>,
    stopped_at_eos: bool,
    text: Option<String>,
}

fn print_json(dir: &Path, model: &Model, greedy: &Greedy, checks: &[ReferenceCheck]) {
    let arch = &model.arch;
    let weights = match &model.origin {
        WeightOrigin::Checkpoint { files } => serde_json::json!({ "files": files }),
        WeightOrigin::Random { seed, .. } => serde_json::json!({ "random_seed": seed }),
        WeightOrigin::Gguf { file, formats } => {
            serde_json::json!({ "gguf": file, "formats": formats })
        }
    };
    let checks: Vec<serde_json::Value> = checks
        .iter()
        .map(|c| {
            serde_json::json!({
                "passed": c.passed(),
                "worst_ratio": c.worst_ratio(),
                "detail": c,
            })
        })
        .collect();
    let doc = serde_json::json!({
        "model": {
            "path": dir.display().to_string(),
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
        "checks": checks,
    });
    println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
}

/// The model `--model` names: a GGUF file (or a directory holding one and no
/// config.json), else a Hugging Face directory read with `--config` or its
/// config.json.
fn load_model(args: &Args) -> Result<(Model, Option<GgufFile>), Failure> {
    if !args.model.exists() {
        return Err((
            EXIT_USAGE,
            format!("error: {}: no such file or directory", args.model.display()),
        ));
    }
    if args.config.is_none() {
        let gguf = gguf_source(&args.model).map_err(|e| (gguf_exit(&e), format!("error: {e}")))?;
        if let Some(file) = gguf {
            let model = Model::from_gguf(&file).map_err(model_failure)?;
            return Ok((model, Some(file)));
        }
    }
    let config_path = args
        .config
        .clone()
        .unwrap_or_else(|| args.model.join("config.json"));
    let arch = load_config(&config_path).map_err(|e| config_failure(&config_path, &e))?;
    let model = Model::load_with_arch(arch, &args.model, args.seed).map_err(model_failure)?;
    Ok((model, None))
}

/// The model's files against each other and the prompt with the tokens to
/// generate against the context, before the reference runs (exit 2).
fn check_consistency(
    args: &Args,
    model: &Model,
    text: &ModelText,
    reference: Option<&ReferenceTensors>,
    prompt: &EncodedPrompt,
) -> Result<(), Failure> {
    let dir = companion_dir(&args.model);
    let refuse = |e: ConsistencyError| (EXIT_USAGE, format!("error: {e}"));
    check_tokenizer(text, &dir, &model.arch).map_err(refuse)?;
    if let Some(reference) = reference {
        check_reference_ids(reference, &dir.join(REFERENCE_FILE), &model.arch).map_err(refuse)?;
    }
    check_context(
        std::slice::from_ref(&prompt.ids),
        args.max_new_tokens,
        &model.arch,
    )
    .map_err(refuse)
}

/// A file that cannot be opened is a usage error; a malformed one a failure.
fn gguf_exit(err: &GgufError) -> u8 {
    match err {
        GgufError::Io { .. } => EXIT_USAGE,
        _ => EXIT_FAILED,
    }
}

/// The prompt: ids given, else text (plain or chat) through the model's
/// tokenizer, else the reference file's first prompt.
fn prompt(
    args: &Args,
    reference: Option<&ReferenceTensors>,
    text: &ModelText,
) -> Result<EncodedPrompt, Failure> {
    let input = match (&args.prompt_ids, &args.prompt, &args.chat) {
        (Some(ids), _, _) => PromptInput::Ids(ids.clone()),
        (_, Some(t), _) => PromptInput::Text(t.clone()),
        (_, _, Some(message)) => PromptInput::Chat(message.clone()),
        _ => match reference {
            Some(reference) => {
                let first = reference.prompts().into_iter().next().unwrap_or_default();
                let ids = reference
                    .token_ids(&ReferenceTensors::key(&first, "input_ids"))
                    .map_err(|e| (EXIT_FAILED, format!("error: {e}")))?;
                PromptInput::Ids(ids)
            }
            None => {
                return Err((
                    EXIT_USAGE,
                    "error: no prompt: give --prompt TEXT, --chat TEXT or --prompt-ids".into(),
                ))
            }
        },
    };
    let encoded = text
        .encode(&input)
        .map_err(|e| (EXIT_USAGE, format!("error: {e}")))?;
    for warning in &encoded.warnings {
        eprintln!("warning: --chat: {warning}");
    }
    Ok(encoded)
}

fn print_summary(dir: &Path, model: &Model) {
    let arch = &model.arch;
    let origin = match &model.origin {
        WeightOrigin::Checkpoint { files } => files.join(", "),
        WeightOrigin::Random { seed, .. } => format!("random bf16 weights, seed {seed}"),
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
    prompt: &EncodedPrompt,
    text: &ModelText,
) -> Result<Greedy, Failure> {
    let failure = |e: ReferenceError| (EXIT_FAILED, format!("error: {e}"));
    let mut reference = Reference::new(model).map_err(failure)?;
    let stop: Vec<u32> = if args.ignore_eos {
        Vec::new()
    } else {
        model
            .arch
            .eos_token_ids
            .iter()
            .map(|&id| id as u32)
            .collect()
    };
    let generation = reference
        .generate(&prompt.ids, args.max_new_tokens, &stop)
        .map_err(failure)?;
    Ok(Greedy {
        prompt: prompt.ids.clone(),
        prompt_kind: prompt.kind.to_string(),
        prompt_text: prompt.text.clone(),
        top_k: blocks::top_k(&generation.first_logits, args.top_k),
        text: text.decode(&generation.tokens),
        stopped_at_eos: generation.stopped,
        tokens: generation.tokens,
    })
}

fn print_greedy(k: usize, greedy: &Greedy) {
    println!(
        "prompt ({} tokens, as {}): {}",
        greedy.prompt.len(),
        greedy.prompt_kind,
        join(&greedy.prompt)
    );
    if let Some(t) = &greedy.prompt_text {
        println!("prompt text: {t:?}");
    }
    let top: Vec<String> = greedy
        .top_k
        .iter()
        .map(|(id, logit)| format!("{id} ({logit:.3})"))
        .collect();
    println!("top-{k} after the prompt: {}", top.join(", "));
    let end = if greedy.stopped_at_eos {
        ", stopped at end-of-sequence"
    } else {
        ""
    };
    println!(
        "greedy ({} tokens{end}): {}",
        greedy.tokens.len(),
        join(&greedy.tokens)
    );
    if let Some(output) = &greedy.text {
        println!("output:\n{output}");
    }
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
