//! `skillc deploy BUNDLE --model DIR`: runs a skill bundle on a model with the
//! runtime's executor, phase by phase on the emulated XDNA 2 backend, and writes the
//! plan, the reports, the trace, the kernel registry and the run's trajectory.
//!
//! The bundle is read through [`bundle_file`] (hashes checked, texts capped); the
//! output folder is claimed through [`crate::outdir`], so the run writes into a
//! fresh sibling that replaces the folder whole at the end, and a second deploy
//! into the same folder waits.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use skillc_runtime::exec::artifacts::clock;
use skillc_runtime::exec::artifacts::record::PhaseStatus;
use skillc_runtime::exec::fault::UnknownFault;
use skillc_runtime::exec::{self, DeployOptions, EvaluatorLaunch, Fault, Verdict};

use skillc_runtime::model::gguf::GgufError;
use skillc_runtime::model::prompt::{ModelText, PromptError, PromptInput};
use skillc_runtime::model::source::ModelSource;
use skillc_runtime::phase::DeployPhase;
use skillc_runtime::threads::Threads;
use skillc_runtime::xdna2::packing::UnknownWeightPath;

use super::bundle_file;
use super::progress::Display;
use super::{EXIT_FAILED, EXIT_STOPPED, EXIT_USAGE};
use crate::outdir::overlap::{refuse_overlap, Overlap};
use crate::outdir::{Claim, Kind, OutError};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The skill bundle: a directory holding bundle.json (e.g. generated-skills/llama1b)
    /// or the bundle.json file itself.
    pub bundle: PathBuf,
    /// The model: a GGUF file or a directory holding one, a Hugging Face folder
    /// (config.json, optional *.safetensors and reference.safetensors) or a
    /// config alone (seeded random weights).
    #[arg(long)]
    pub model: PathBuf,
    /// Output directory [default: deploy-<model directory name>, in the current
    /// directory].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seed of random weights and of the drawn verification prompts.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// A verification prompt as comma-separated token ids; repeat for several.
    #[arg(long = "prompt-ids", value_name = "IDS")]
    pub prompt_ids: Vec<String>,
    /// A verification prompt as text (the model's tokenizer); repeat for several.
    #[arg(long = "prompt", value_name = "TEXT")]
    pub prompt_text: Vec<String>,
    /// A verification prompt as a user message through the model's chat
    /// template; repeat for several.
    #[arg(long = "chat", value_name = "TEXT")]
    pub chat: Vec<String>,
    /// A kernel registry from an earlier run whose configurations are tried first.
    #[arg(long)]
    pub registry: Option<PathBuf>,
    /// A folder of transformers fixtures (folders with reference.safetensors) that
    /// prove, code path by code path, a model without transformers outputs of its
    /// own; repeat for several [default: ../shared/fixtures and tests/data/fixtures,
    /// those that exist].
    #[arg(long)]
    pub fixtures: Vec<PathBuf>,
    /// Print report.json on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// No progress on stderr (by default a status line on a terminal, one line per
    /// event with elapsed seconds otherwise).
    #[arg(long, short)]
    pub quiet: bool,
    /// Replace the output directory even when it holds files skillc did not write
    /// (or changed since).
    #[arg(long)]
    pub force: bool,
    /// Run a bundle whose files differ from bundle.json's hashes (hand-edited or
    /// incomplete); the report lists the differences.
    #[arg(long)]
    pub allow_modified: bool,
    /// Plant a fault in the NPU path, never in the CPU reference, to see a gate
    /// catch it (repeatable): gemm-n-not-multiple,
    /// drop-qkv-bias, no-llama3-rope, skip-qk-norm, l1-overflow,
    /// decode-rope-off-by-one, kv-wrong-slot, stale-kv, gqa-mapping,
    /// drop-lm-head-partition, silu-for-gelu, window-off-by-one, and on the
    /// 4-bit weight path packed-nibble-order.
    #[arg(long = "plant", value_name = "FAULT")]
    pub plant: Vec<String>,
    /// Which weights the decode GEMVs read: `packed` keeps a GGUF's Q4_0/Q4_1
    /// blocks as stored (unpacked inside the GEMV) wherever the plan allows it
    /// and is refused on a model with no 4-bit weights; `bf16` rounds every
    /// weight to bf16 once; `auto` is `packed` on a 4-bit model, `bf16`
    /// otherwise.
    #[arg(long, value_name = "PATH", default_value = "auto", value_parser = ["auto", "bf16", "packed"])]
    pub weights: String,
    /// A config-only model's decoder projections drawn as usual, then
    /// quantized in memory to llama.cpp's 4-bit blocks (`q4_1` or `q4_0`), so
    /// it deploys on the 4-bit weight path; refused on a model with weights.
    #[arg(long, value_name = "FORMAT", value_parser = ["q4_1", "q4_0"])]
    pub seeded_weights: Option<String>,
    /// Stop after this phase (0-7); the verdict is FAIL at gate `stop-after` and
    /// the exit code 3 when every phase up to it passed.
    #[arg(long, value_name = "PHASE", value_parser = stop_after_parser())]
    pub stop_after: Option<DeployPhase>,
}

/// `--stop-after`: a phase number, 0 to 7 (clap's range check words the error).
fn stop_after_parser() -> impl clap::builder::TypedValueParser<Value = DeployPhase> {
    use clap::builder::TypedValueParser;
    clap::value_parser!(u8)
        .range(0..=7)
        .try_map(DeployPhase::try_from)
}

/// Why `deploy` could not run or write its result (exit 2).
#[derive(Debug, thiserror::Error)]
enum CommandError {
    #[error(transparent)]
    Bundle(#[from] bundle_file::BundleFileError),
    #[error(transparent)]
    Fault(#[from] UnknownFault),
    #[error(transparent)]
    WeightPath(#[from] UnknownWeightPath),
    #[error(transparent)]
    SeededFormat(#[from] skillc_runtime::ops::formats::UnknownFormat),
    #[error("--prompt-ids: `{0}` is not a token id (expected e.g. 128000,791,6864)")]
    PromptIds(String),
    #[error(transparent)]
    Model(#[from] GgufError),
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error("cannot locate skillc itself: {0}")]
    Executable(#[source] std::io::Error),
    #[error(transparent)]
    Out(#[from] OutError),
    #[error(transparent)]
    Overlap(#[from] Overlap),
    #[error("{0}")]
    Fixtures(String),
    #[error(transparent)]
    Deploy(#[from] exec::DeployError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

pub fn run(args: Args, threads: Threads) -> ExitCode {
    match execute(&args, threads) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn execute(args: &Args, threads: Threads) -> Result<ExitCode, CommandError> {
    let loaded = bundle_file::load(&args.bundle)?;
    let bundle_notes = match loaded.report_notes(args.allow_modified) {
        Ok(notes) => notes,
        Err(refusal) => {
            eprintln!("error: {refusal}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    let bundle_dir = loaded.dir.clone();
    let bundle = loaded.bundle;
    let faults = args
        .plant
        .iter()
        .map(|f| f.parse::<Fault>())
        .collect::<Result<Vec<_>, _>>()?;
    let prompts = prompts(args)?;
    let model_name = args
        .model
        .file_name()
        .map_or_else(|| "model".into(), |n| n.to_string_lossy().into_owned());
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("deploy-{model_name}")));
    for dir in &args.fixtures {
        check_fixtures_dir(dir)?;
    }
    let fixtures = if args.fixtures.is_empty() {
        default_fixtures()
    } else {
        args.fixtures.clone()
    };
    refuse_overlap(&out, &inputs(args, &bundle_dir, &fixtures))?;
    let program = std::env::current_exe().map_err(CommandError::Executable)?;
    let mut progress = Display::new(args.quiet);
    progress.line(&format!("running on {threads}"));
    let claim = Claim::new(&out, Kind::Deploy, args.force, &mut |m| progress.note(m))?;
    let options = DeployOptions {
        model_dir: args.model.clone(),
        out_dir: claim.staging().to_path_buf(),
        seed: args.seed,
        prompts,
        faults,
        started: clock::now(),
        evaluator: EvaluatorLaunch::Process(program),
        registry: args.registry.clone(),
        fixtures,
        stop_after: args.stop_after,
        weights: args.weights.parse()?,
        seeded_quant: args
            .seeded_weights
            .as_deref()
            .map(skillc_runtime::ops::formats::parse)
            .transpose()?,
        bundle_notes,
    };
    let outcome = exec::deploy(&bundle, &options, &mut progress)?;
    claim.commit()?;
    if args.json {
        let json = serde_json::to_string_pretty(&outcome.report)?;
        println!("{json}");
    } else {
        print_summary(&outcome.report, &out);
    }
    Ok(ExitCode::from(exit_code(&outcome.report)))
}

/// A run's exit code: 0 passed, 1 a gate failed, 2 the model was refused (out
/// of scope), 3 stopped where `--stop-after` asked.
fn exit_code(report: &exec::DeployReport) -> u8 {
    match report.verdict {
        Verdict::Pass | Verdict::PassWithWarnings => 0,
        Verdict::Refused => EXIT_USAGE,
        Verdict::Fail
            if report
                .stop
                .as_ref()
                .is_some_and(|s| s.gate == exec::STOP_AFTER_GATE) =>
        {
            EXIT_STOPPED
        }
        Verdict::Fail => EXIT_FAILED,
    }
}

/// `--fixtures` names a folder that holds at least one fixture: a wrong path
/// would otherwise leave config-only models unproven without a word.
fn check_fixtures_dir(dir: &Path) -> Result<(), CommandError> {
    let why = if !dir.exists() {
        "no such file or directory"
    } else if !dir.is_dir() {
        "not a directory"
    } else if skillc_runtime::exec::gates::features::fixture_dirs(dir).is_empty() {
        "holds no transformers fixture (a folder with config.json and reference.safetensors)"
    } else {
        return Ok(());
    };
    Err(CommandError::Fixtures(format!(
        "--fixtures {}: {why}",
        dir.display()
    )))
}

/// Everything a deploy reads, by role: its output may be none of them.
fn inputs<'a>(
    args: &'a Args,
    bundle_dir: &'a Path,
    fixtures: &'a [PathBuf],
) -> Vec<(&'static str, &'a Path)> {
    let mut inputs = vec![
        ("skill bundle", bundle_dir),
        ("model", args.model.as_path()),
    ];
    if args.model.is_file() {
        if let Some(dir) = args.model.parent().filter(|d| !d.as_os_str().is_empty()) {
            inputs.push(("model's folder", dir));
        }
    }
    inputs.extend(args.registry.as_deref().map(|r| ("kernel registry", r)));
    inputs.extend(fixtures.iter().map(|f| ("fixtures folder", f.as_path())));
    inputs
}

/// The verification prompts given (ids, text, chat messages, in that order),
/// or `None` for the default ones.
fn prompts(args: &Args) -> Result<Option<Vec<Vec<u32>>>, CommandError> {
    let mut inputs: Vec<PromptInput> = args
        .prompt_ids
        .iter()
        .map(|p| parse_ids(p).map(PromptInput::Ids))
        .collect::<Result<_, _>>()?;
    inputs.extend(args.prompt_text.iter().cloned().map(PromptInput::Text));
    inputs.extend(args.chat.iter().cloned().map(PromptInput::Chat));
    if inputs.is_empty() {
        return Ok(None);
    }
    let source = ModelSource::locate(&args.model)?;
    let text = ModelText::for_model(&args.model, source.gguf());
    let mut prompts = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        let encoded = text.encode(input)?;
        for warning in &encoded.warnings {
            eprintln!("warning: prompt {}: {warning}", i + 1);
        }
        prompts.push(encoded.ids);
    }
    Ok(Some(prompts))
}

fn parse_ids(text: &str) -> Result<Vec<u32>, CommandError> {
    text.split(',')
        .map(|t| {
            t.trim()
                .parse::<u32>()
                .map_err(|_| CommandError::PromptIds(t.to_string()))
        })
        .collect()
}

fn print_summary(report: &exec::DeployReport, out: &Path) {
    let mut stdout = std::io::stdout().lock();
    let name = report
        .model
        .as_ref()
        .map_or(report.model_dir.as_str(), |m| m.name.as_str());
    let _ = writeln!(stdout, "{name}: {}", report.verdict.label());
    for p in &report.phases {
        let status = match p.status {
            PhaseStatus::Passed => "passed",
            PhaseStatus::Failed => "FAILED",
            PhaseStatus::NotRun => "not run",
        };
        let _ = writeln!(
            stdout,
            "  phase {} {:<28} {status:<8} {:>6.1} s",
            p.index, p.title, p.wall_s
        );
    }
    if let Some(stop) = &report.stop {
        let _ = writeln!(
            stdout,
            "  stopped: phase {} gate `{}`: {} = {} (threshold {} {}); {}",
            stop.phase,
            stop.gate,
            stop.metric,
            exec::gates::gate::format_value(stop.value),
            stop.comparison.symbol(),
            exec::gates::gate::format_value(stop.threshold),
            stop.reason
        );
        for t in &stop.tried {
            let _ = writeln!(stdout, "    tried {t}");
        }
    }
    for t in &report.texts {
        print_text(&mut stdout, t);
    }
    if let Some(perf) = &report.performance {
        let _ = writeln!(
            stdout,
            "  modeled at seq {}: TTFT {:.2} s, decode {:.1} tok/s ({:.1} ms/token), calls/layer {}/{}; {}",
            perf.production.seq_len,
            perf.production.ttft_s,
            perf.production.tok_s,
            perf.production.ms_per_token,
            perf.production.calls_per_layer_prefill,
            perf.production.calls_per_layer_decode,
            perf.calibration
        );
        if let Some(c) = &perf.published_context_decode {
            let _ = writeln!(
                stdout,
                "  modeled decode at context {} (the published figures' context): {:.1} tok/s ({:.1} ms/token)",
                c.context, c.tok_s, c.ms_per_token
            );
        }
    }
    let _ = writeln!(
        stdout,
        "  wall time {:.1} s; report: {}",
        report.wall_s,
        out.join(exec::files::REPORT_MD).display()
    );
}

/// What the deployed model said: the final plan's free-running text for one
/// prompt, and the oracle's beside it only where the two differ, then the first
/// step where they differ with both sides' top-5 (one line each, newlines shown
/// as ⏎ as in report.md).
fn print_text(stdout: &mut impl Write, t: &exec::artifacts::record::PromptText) {
    let line = |s: &str| s.trim_end().replace('\n', "⏎");
    let npu = line(&t.npu_text);
    let label = format!("text, prompt {} (final plan, free-running)", t.prompt);
    if t.npu_text == t.oracle_text {
        let _ = writeln!(stdout, "  {label}: {npu} (the CPU oracle's too)");
    } else {
        let _ = writeln!(stdout, "  {label}: {npu}");
        let _ = writeln!(stdout, "    CPU oracle: {}", line(&t.oracle_text));
    }
    if let Some(d) = &t.first_difference {
        let top = |c: &[exec::gates::free_run::Candidate]| {
            c.iter()
                .map(|c| format!("{} {:?} {:.3}", c.token, c.text, c.logit))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            stdout,
            "    first difference at step {} (oracle top-1/top-2 gap {:.3}, tie margin {:.3}):",
            d.step, d.oracle_gap, d.tie_margin
        );
        let _ = writeln!(stdout, "      CPU oracle top-5: {}", top(&d.oracle));
        let _ = writeln!(stdout, "      NPU top-5: {}", top(&d.npu));
    }
}

/// `../shared/fixtures` and the families' `tests/data/fixtures` from the
/// current directory (the repository root), those that exist.
pub fn default_fixtures() -> Vec<PathBuf> {
    ["../shared/fixtures", "tests/data/fixtures"]
        .into_iter()
        .map(PathBuf::from)
        .filter(|dir| dir.is_dir())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::print_text;
    use skillc_runtime::exec::artifacts::record::PromptText;
    use skillc_runtime::exec::gates::free_run::{Candidate, FirstDifference};

    fn text(oracle: &str, npu: &str, first_difference: Option<FirstDifference>) -> String {
        let t = PromptText {
            prompt: 1,
            prompt_text: "Q".into(),
            oracle_tokens: Vec::new(),
            oracle_text: oracle.into(),
            npu_tokens: Vec::new(),
            npu_text: npu.into(),
            first_difference,
        };
        let mut out = Vec::new();
        print_text(&mut out, &t);
        String::from_utf8(out).expect("utf-8")
    }

    fn candidate(token: u32, text: &str, logit: f32) -> Candidate {
        Candidate {
            token,
            logit,
            text: text.into(),
        }
    }

    #[test]
    fn the_oracle_text_is_printed_only_where_it_differs() {
        assert_eq!(
            text("Paris.\n", "Paris.\n", None),
            "  text, prompt 1 (final plan, free-running): Paris. (the CPU oracle's too)\n"
        );
        let d = FirstDifference {
            step: 0,
            oracle: vec![candidate(7, "Paris", 9.5), candidate(8, "Lyon", 9.0)],
            npu: vec![candidate(8, "Lyon", 9.25), candidate(7, "Paris", 9.125)],
            oracle_gap: 0.5,
            tie_margin: 1.0,
        };
        assert_eq!(
            text("Paris.\nThe", "Lyon.\nThe", Some(d)),
            "  text, prompt 1 (final plan, free-running): Lyon.⏎The\n    CPU oracle: Paris.⏎The\n    first difference at step 0 (oracle top-1/top-2 gap 0.500, tie margin 1.000):\n      CPU oracle top-5: 7 \"Paris\" 9.500, 8 \"Lyon\" 9.000\n      NPU top-5: 8 \"Lyon\" 9.250, 7 \"Paris\" 9.125\n"
        );
    }
}
