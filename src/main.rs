//! The `skillc` command line.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    skillc::cli::run(skillc::cli::Cli::parse())
}
