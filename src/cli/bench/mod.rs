//! `skillc bench …`: benchmarks that print a table. Speed targets live here, never
//! in timed tests; every figure comes with the command that reproduces it.

use std::process::ExitCode;

use clap::Subcommand;

pub mod build;
pub mod deploy;
pub mod emulator;
pub mod oracle;
pub mod parse;

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
    /// Deploy the nine models from their configs; print wall time, phases and modeled figures.
    Deploy(deploy::Args),
}

pub fn run(cmd: BenchCommand) -> ExitCode {
    match cmd {
        BenchCommand::Parse(args) => parse::run(args),
        BenchCommand::Build(args) => build::run(args),
        BenchCommand::Oracle(args) => exit_code(oracle::measure(&args)),
        BenchCommand::Emulator(args) => exit_code(emulator::bench(&args)),
        BenchCommand::Deploy(args) => exit_code(deploy::bench(&args)),
    }
}

/// A bench that could not run (a missing model, an unreadable bundle) is a usage
/// problem: its message on stderr, exit 2.
fn exit_code(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(crate::cli::EXIT_USAGE)
        }
    }
}
