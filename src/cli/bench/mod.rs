//! `skillc bench …`: benchmarks that print a table. Speed targets live here, never
//! in timed tests; every figure comes with the command that reproduces it.

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {}

pub fn run(cmd: BenchCommand) -> ExitCode {
    match cmd {}
}
