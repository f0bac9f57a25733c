//! Command-line surface: one module per subcommand. Exit codes follow one rule
//! everywhere: 0 success, 1 failed (the input was checked and found wanting:
//! errors, failed gates, stale output), 2 refused (usage, I/O, an input not
//! accepted: a modified bundle, a model out of scope), 3 stopped by request
//! (`deploy --stop-after`).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use skillc_runtime::threads;

pub mod bench;
pub mod build;
pub mod bundle_file;
pub mod calibrate;
pub mod calibrate_packed;
pub mod check;
pub mod deploy;
pub mod diff;
pub mod evaluate;
pub mod graph;
pub mod import;
pub mod progress;
pub mod reference;
pub mod render;
pub mod replay;
pub mod storage_table;

/// The hidden `--format` of `check` and `replay` (kept as an alias of `--json`,
/// the spelling every command takes).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    Human,
    Json,
}

#[derive(Debug, Parser)]
#[command(
    name = "skillc",
    version,
    about = "Compile NPU deployment trajectories into agent skill bundles and run them on the XDNA 2 emulator"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Threads for the parallel work (the oracle, the emulator's kernels, the
    /// compiler's passes); phase 7's evaluator runs with as many [default:
    /// RAYON_NUM_THREADS, else one per core this process may use: its CPU
    /// affinity and cgroup quota].
    #[arg(long, global = true, value_name = "N")]
    pub threads: Option<usize>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Parse, resolve and validate trajectory directories; print every diagnostic.
    Check(check::Args),
    /// Print the action/lesson graph of a trajectory as Graphviz DOT or JSON.
    Graph(graph::Args),
    /// Draft a trajectory from a deployment's records (Markdown, code comments, commit messages).
    Import(import::Args),
    /// Distill trajectories into an eight-phase skill bundle (SKILL.md files and bundle.json).
    Build(build::Args),
    /// Semantic diff of two skill bundles: phases, steps, gates, lessons, skills.
    Diff(diff::Args),
    /// Re-execute a trajectory on the XDNA 2 emulator and check every recorded observation.
    Replay(replay::Args),
    /// Run a skill bundle on a model, phase by phase on the emulated XDNA 2 backend.
    Deploy(deploy::Args),
    /// Phase 7's independent evaluator (started by `deploy` as a fresh process).
    #[command(name = skillc_runtime::exec::EVALUATOR_COMMAND, hide = true)]
    Evaluate(evaluate::Args),
    /// Run the CPU f32 reference on a model directory; check it against reference.safetensors when present.
    Reference(reference::Args),
    /// Compare the XDNA 2 cost model with the reference system's measurements (--fit refits it).
    Calibrate(calibrate::Args),
    /// Benchmarks that print a table: one subcommand each, listed below (`--json` for the figures as data).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

impl Cli {
    /// Parses the command line, with the exit codes at the end of every
    /// command's `--help` (nested ones included: `bench faults --help`).
    pub fn parse_with_exit_codes() -> Cli {
        use clap::{CommandFactory, FromArgMatches};
        let matches = with_exit_codes(Cli::command()).get_matches();
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }
}

fn with_exit_codes(command: clap::Command) -> clap::Command {
    command
        .after_help(EXIT_CODES)
        .mut_subcommands(with_exit_codes)
}

pub fn run(cli: Cli) -> ExitCode {
    // Before anything runs in parallel: the one pool, with the calling thread
    // as one of its workers (see `skillc_runtime::threads`).
    let threads = match threads::choose(cli.threads).and_then(|t| threads::start(t).map(|()| t)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match cli.command {
        Command::Check(args) => check::run(args),
        Command::Graph(args) => graph::run(args),
        Command::Import(args) => import::run(args),
        Command::Build(args) => build::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Deploy(args) => deploy::run(args, threads),
        Command::Evaluate(args) => evaluate::run(args),
        Command::Reference(args) => reference::run(args),
        Command::Calibrate(args) => calibrate::run(args),
        Command::Bench(cmd) => bench::run(cmd),
    }
}

impl Format {
    /// The format asked for: `--json`, else the hidden `--format`.
    pub fn chosen(json: bool, format: Format) -> Format {
        if json {
            Format::Json
        } else {
            format
        }
    }
}

/// Exit code for "checked and found wanting" (a gate failed, errors, stale output).
pub const EXIT_FAILED: u8 = 1;
/// Exit code for a refused input: usage or I/O problems, a modified bundle, a
/// model out of scope.
pub const EXIT_USAGE: u8 = 2;
/// Exit code for a run stopped by request (`deploy --stop-after`).
pub const EXIT_STOPPED: u8 = 3;

/// The exit codes, as every command's `--help` ends.
pub const EXIT_CODES: &str =
    "Exit codes: 0 success; 1 failed (a gate failed, errors, stale output); \
2 refused (usage, unreadable input, a modified bundle, a model out of scope); \
3 stopped by request (deploy --stop-after).";
