//! `skillc bench …`: benchmarks that print a table. Speed targets live here, never
//! in timed tests; every figure comes with the command that reproduces it. With
//! `--json` a bench prints its table on stderr as it goes (progress) and one JSON
//! document on stdout at the end ([`Output`]).

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::Value;

pub mod build;
pub mod contention;
pub mod deploy;
pub mod emulator;
pub mod faults;
pub mod lodo;
pub mod oracle;
pub mod packed;
pub mod packed_svg;
pub mod parse;
pub mod plans;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Front-end throughput: parse + resolve + validate 10k, 100k and 1M entries.
    Parse(parse::Args),
    /// Time `skillc build` per stage on the example and synthetic trajectories.
    Build(build::Args),
    /// CPU f32 reference: decode tok/s against measured memory bandwidth, prefill GFLOP/s.
    Oracle(oracle::Args),
    /// XDNA 2 emulator: functional decode step of a full-size model vs the CPU reference's, as a ratio.
    Emulator(emulator::Args),
    /// Deploy the nine models from their configs; print wall time, phases and modeled figures, then the 4-bit deployments' plans against the published ones (`--four-bit`: only those, no deploy).
    Deploy(deploy::Args),
    /// The planted-fault matrix: each fault on the fixtures and the nine, caught in which phase and gate; unplanted runs with three seeds.
    Faults(faults::Args),
    /// A digest of every plan the phases can build for the nine configs and the fixtures: run it on two commits and compare.
    Plans(plans::Args),
    /// Leave one deployment out: build the bundle without each trajectory and list the lessons no other deployment teaches.
    Lodo(lodo::Args),
    /// The main job and a config-only Qwen2.5-0.5B deploy, idle and beside busy processes, in one run: wall times and their ratio.
    Contention(contention::Args),
    /// One busy process, until killed (the load `bench contention` runs beside).
    #[command(hide = true)]
    Spin,
}

pub fn run(cmd: BenchCommand) -> ExitCode {
    match cmd {
        BenchCommand::Parse(args) => parse::run(args),
        BenchCommand::Build(args) => build::run(args),
        BenchCommand::Oracle(args) => exit_code(oracle::measure(&args)),
        BenchCommand::Emulator(args) => exit_code(emulator::bench(&args)),
        BenchCommand::Deploy(args) => exit_code(deploy::bench(&args)),
        BenchCommand::Faults(args) => exit_code(faults::bench(&args)),
        BenchCommand::Plans(args) => exit_code(plans::bench(&args)),
        BenchCommand::Lodo(args) => lodo::run(args),
        BenchCommand::Contention(args) => exit_code(contention::bench(&args)),
        BenchCommand::Spin => contention::spin(),
    }
}

/// Why a bench could not run (a missing model, an unreadable bundle), each with
/// the error it came from.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Bundle(#[from] crate::cli::bundle_file::BundleFileError),
    #[error("cannot locate skillc itself: {0}")]
    Executable(#[source] std::io::Error),
    #[error(transparent)]
    Out(#[from] crate::outdir::OutError),
    #[error(transparent)]
    Overlap(#[from] crate::outdir::overlap::Overlap),
    /// One deploy of the bench (`subject` names the model, and the fault).
    #[error("{subject}: {source}")]
    Deploy {
        subject: String,
        #[source]
        source: skillc_runtime::exec::DeployError,
    },
    #[error("{subject}: {source}")]
    Config {
        subject: String,
        #[source]
        source: Box<skillc_runtime::model::config::ConfigError>,
    },
    #[error("{}: no config.json", .0.display())]
    NoConfig(std::path::PathBuf),
    #[error("cannot list the fixtures of {}: {source}", dir.display())]
    FixtureDir {
        dir: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`--model {name}` is not one of the nine models this bench runs ({known}); deploy another model with `skillc deploy` (and `--plant FAULT` for a fault)")]
    UnknownModel { name: String, known: String },
    #[error("{}: {source}", path.display())]
    Model {
        path: std::path::PathBuf,
        #[source]
        source: Box<skillc_runtime::model::ModelError>,
    },
    #[error(transparent)]
    RandomModel(Box<skillc_runtime::model::ModelError>),
    #[error(transparent)]
    Fault(#[from] skillc_runtime::exec::fault::UnknownFault),
    #[error(transparent)]
    Plan(#[from] skillc_runtime::xdna2::builder::PlanError),
    #[error(transparent)]
    Npu(#[from] skillc_runtime::xdna2::interpreter::ExecError),
    #[error(transparent)]
    Reference(#[from] skillc_runtime::model::oracle::ReferenceError),
    #[error(transparent)]
    Load(#[from] crate::syntax::LoadError),
    #[error("{label}: {errors} errors")]
    Diagnostics { label: String, errors: usize },
    #[error(transparent)]
    Emit(#[from] crate::emit::EmitError),
    #[error("calibration data: {0}")]
    Calibration(#[source] skillc_runtime::xdna2::calibration::CalibrationError),
    #[error(transparent)]
    Published(#[from] skillc_runtime::xdna2::published::PublishedError),
    /// The 4-bit section of `bench deploy`: a plan that does not build, or
    /// the plot that cannot be written.
    #[error("4-bit deployments: {0}")]
    Fused(String),
}

impl BenchError {
    /// A config that does not load, named by the path given.
    pub fn config(
        path: &std::path::Path,
        source: skillc_runtime::model::config::ConfigError,
    ) -> Self {
        BenchError::Config {
            subject: path.display().to_string(),
            source: Box::new(source),
        }
    }
}

// Boxed, like the config error: a model error is several times the size of the others.
impl From<skillc_runtime::model::ModelError> for BenchError {
    fn from(e: skillc_runtime::model::ModelError) -> Self {
        BenchError::RandomModel(Box::new(e))
    }
}

/// A bench that could not run (a missing model, an unreadable bundle) is a usage
/// problem: its message on stderr, exit 2.
fn exit_code(result: Result<(), BenchError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(crate::cli::EXIT_USAGE)
        }
    }
}

/// Where a bench's lines and figures go: the table on stdout; or, with `--json`,
/// the table on stderr as progress and `{"bench", "rows", …}` on stdout at the end.
#[derive(Debug)]
pub struct Output {
    json: bool,
    document: serde_json::Map<String, Value>,
    rows: Vec<Value>,
}

impl Output {
    pub fn new(bench: &str, json: bool) -> Self {
        let mut document = serde_json::Map::new();
        document.insert("bench".into(), bench.into());
        Self {
            json,
            document,
            rows: Vec::new(),
        }
    }

    /// A line of the human table.
    pub fn line(&self, text: &str) {
        if self.json {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    }

    /// One row of figures (what the table's row shows, as numbers).
    pub fn row(&mut self, row: Value) {
        self.rows.push(row);
    }

    /// A figure of the whole run.
    pub fn set(&mut self, key: &str, value: impl Into<Value>) {
        self.document.insert(key.to_string(), value.into());
    }

    /// Prints the JSON document (with `--json`).
    pub fn finish(mut self) {
        if self.json {
            self.document.insert("rows".into(), Value::Array(self.rows));
            let text = serde_json::to_string_pretty(&self.document).unwrap_or_default();
            println!("{text}");
        }
    }
}
