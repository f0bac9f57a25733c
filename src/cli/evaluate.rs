//! `skillc evaluate OUT --model DIR` (hidden): phase 7's independent evaluator, run
//! by `skillc deploy` as a fresh process. It reloads only the artifacts in OUT and
//! the model directory, audits them, re-runs verification and exits 0 for PASS or
//! PASS-with-warnings, 1 for FAIL.

use std::path::PathBuf;
use std::process::ExitCode;

use skillc_runtime::exec::evaluate::evaluate;

use super::{EXIT_FAILED, EXIT_USAGE};
use crate::outdir::overlap::refuse_overlap;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The output directory of a deploy run.
    pub out: PathBuf,
    /// The model directory the run deployed.
    #[arg(long)]
    pub model: PathBuf,
}

pub fn run(args: Args) -> ExitCode {
    // The evaluation files are written into OUT: never into the model it audits.
    if let Err(error) = refuse_overlap(&args.out, &[("model directory", &args.model)]) {
        eprintln!("error: {error}");
        return ExitCode::from(EXIT_USAGE);
    }
    match evaluate(&args.out, &args.model) {
        Ok(e) => {
            println!("{}", e.verdict);
            if e.exit_code == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_FAILED)
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
