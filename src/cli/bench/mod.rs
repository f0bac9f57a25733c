//! `skillc bench …`: benchmarks that print a table. Speed targets live here, never
//! in timed tests; every figure comes with the command that reproduces it.

use std::process::ExitCode;

use clap::Subcommand;

pub mod oracle;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// CPU f32 reference: decode tok/s against measured memory bandwidth, prefill GFLOP/s.
    Oracle(oracle::Args),
}

pub fn run(cmd: BenchCommand) -> ExitCode {
    match cmd {
        BenchCommand::Oracle(args) => oracle::run(args),
    }
}
