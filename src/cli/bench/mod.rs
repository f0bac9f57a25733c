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
    /// Time `skillc build` per stage on the example and synthetic trajectories.
    Build(build::Args),
    /// `skillc deploy` on the nine target models: wall time, phases, modeled TTFT and tok/s beside mlir-air's.
    Deploy(deploy::Args),
    /// XDNA 2 emulator: functional decode step of a full-size model vs the CPU reference's, as a ratio.
    Emulator(emulator::Args),
    /// CPU f32 reference: decode tok/s against measured memory bandwidth, prefill GFLOP/s.
    Oracle(oracle::Args),
    /// Front-end throughput: parse + resolve + validate 10k, 100k and 1M entries.
    Parse(parse::Args),
}

pub fn run(cmd: BenchCommand) -> ExitCode {
    match cmd {
        BenchCommand::Build(args) => build::run(args),
        BenchCommand::Deploy(args) => deploy::run(args),
        BenchCommand::Emulator(args) => emulator::run(args),
        BenchCommand::Oracle(args) => oracle::run(args),
        BenchCommand::Parse(args) => parse::run(args),
    }
}
