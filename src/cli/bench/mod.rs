//! `skillc bench …`: benchmarks that print a table. Speed targets live here, never
//! in timed tests; every figure comes with the command that reproduces it.

use std::process::ExitCode;

use clap::Subcommand;

pub mod build;
pub mod parse;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Front-end throughput: parse + resolve + validate 10k, 100k and 1M entries.
    Parse(parse::Args),
    /// Time `skillc build` per stage on the example and synthetic trajectories.
    Build(build::Args),
}

pub fn run(cmd: BenchCommand) -> ExitCode {
    match cmd {
        BenchCommand::Parse(args) => parse::run(args),
        BenchCommand::Build(args) => build::run(args),
    }
}
