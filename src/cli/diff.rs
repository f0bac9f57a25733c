//! `skillc diff OLD NEW`: a semantic diff of two bundles (directories or their
//! `bundle.json`) for review: phases, steps, gates, targets, dead ends, lessons and
//! skills added, removed or changed, each with its trajectory provenance.
//!
//! Exit codes: 0 no semantic difference, 1 differences, 2 unreadable input.
//! `--json` prints the same changes as one JSON document. Edited prose shows as
//! the word diff of its changed sentences, `--full` as the whole texts.

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
    /// Show edited prose (a lesson's cause or fix in words, a SKILL.md page)
    /// whole, line by line, instead of its changed sentences as word diffs.
    #[arg(long)]
    pub full: bool,
}

/// Why one side of the diff cannot be read.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error(transparent)]
    Input(#[from] skillc_runtime::input::InputError),
    #[error("{}: not a bundle: {source}", crate::syntax::display_path(file))]
    NotABundle {
        file: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

fn read_bundle(path: &Path) -> Result<Bundle, ReadError> {
    let file = if path.is_dir() {
        path.join(BUNDLE_JSON)
    } else {
        path.to_path_buf()
    };
    let text = skillc_runtime::input::read_to_string(&file)?;
    serde_json::from_str(&text).map_err(|source| ReadError::NotABundle { file, source })
}

pub fn run(args: Args) -> ExitCode {
    let (old, new) = match (read_bundle(&args.old), read_bundle(&args.new)) {
        (Ok(old), Ok(new)) => (old, new),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut diff =
        semantic_diff::diff(&old, &new, args.full).with_texts(&args.old, &args.new, args.full);
    if !args.full {
        cap_texts(&mut diff);
    }
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

/// Longest change text printed: a hand-made bundle may hold a 100 MB name, and
/// a review needs its first words, not all of it.
const CHANGE_MAX_CHARS: usize = 1000;

fn cap_texts(diff: &mut semantic_diff::SemanticDiff) {
    for section in &mut diff.sections {
        cap(&mut section.title);
        for change in &mut section.changes {
            cap(&mut change.text);
        }
    }
}

fn cap(text: &mut String) {
    if let std::borrow::Cow::Owned(cut) = skillc_runtime::input::capped(text, CHANGE_MAX_CHARS) {
        *text = cut;
    }
}
