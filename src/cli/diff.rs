//! `skillc diff OLD NEW`: a semantic diff of two bundles (directories or their
//! `bundle.json`) for review: phases, steps, gates, targets, dead ends, lessons and
//! skills added, removed or changed, each with its trajectory provenance.
//!
//! Exit codes: 0 no semantic difference, 1 differences, 2 unreadable input.
//! `--json` prints the same changes as one JSON document.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use skillc_runtime::bundle::Bundle;

use super::{EXIT_FAILED, EXIT_USAGE};
use crate::emit::{semantic_diff, BUNDLE_JSON};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The bundle before (a bundle directory or its bundle.json).
    pub old: PathBuf,
    /// The bundle after.
    pub new: PathBuf,
    /// Print the changes as JSON (`sections`, each with `title` and `changes`:
    /// `sign`, `text`, `provenance`) instead of text.
    #[arg(long)]
    pub json: bool,
}

fn read_bundle(path: &Path) -> Result<Bundle, String> {
    let file = if path.is_dir() {
        path.join(BUNDLE_JSON)
    } else {
        path.to_path_buf()
    };
    let shown = crate::syntax::display_path(&file);
    let text = skillc_runtime::input::read_to_string(&file).map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| format!("{shown}: not a bundle: {e}"))
}

pub fn run(args: Args) -> ExitCode {
    let (old, new) = match (read_bundle(&args.old), read_bundle(&args.new)) {
        (Ok(old), Ok(new)) => (old, new),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let diff = semantic_diff::diff(&old, &new);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&diff).unwrap_or_default()
        );
    } else {
        print!("{}", diff.render());
    }
    if diff.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    }
}
