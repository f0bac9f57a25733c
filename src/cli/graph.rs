//! `skillc graph DIR [--json]`: the resolved action/lesson graph of one
//! trajectory, for Graphviz or for tools. Diagnostics go to stderr; with errors no
//! graph is written and the exit code is 1.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use super::render::{self, Sources};
use super::{EXIT_FAILED, EXIT_USAGE};
use crate::graph::export;
use crate::outdir::overlap::refuse_overlap;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    Dot,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The trajectory directory.
    pub dir: PathBuf,
    /// Print JSON (every node and edge and its position) instead of Graphviz DOT.
    #[arg(long)]
    pub json: bool,
    /// The older spelling: `--format dot|json`.
    #[arg(long, value_enum, default_value = "dot", hide = true)]
    pub format: Format,
    /// Write to this file instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

pub fn run(args: Args) -> ExitCode {
    let loaded = match crate::graph::load_dirs(std::slice::from_ref(&args.dir)) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if !loaded.diagnostics.is_empty() {
        let mut sources = Sources::new(&loaded.sources);
        eprint!("{}", render::human(&loaded.diagnostics, &mut sources));
    }
    if loaded.error_count() > 0 {
        eprintln!(
            "error: no graph written: {}",
            render::summary(&loaded.diagnostics)
        );
        return ExitCode::from(EXIT_FAILED);
    }
    let Some((_, graph)) = loaded.trajectories.first() else {
        return ExitCode::from(EXIT_USAGE);
    };
    let format = if args.json { Format::Json } else { args.format };
    let text = match format {
        Format::Dot => export::to_dot(graph),
        Format::Json => export::to_json(graph),
    };
    let written = match &args.output {
        Some(path) => refuse_overlap(path, &[("trajectory directory", &args.dir)])
            .map_err(|e| e.to_string())
            .and_then(|()| write_file(path, &text)),
        None => match std::io::stdout().write_all(text.as_bytes()) {
            // `| head` stopped reading: not a failure.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            other => other.map_err(|e| skillc_runtime::input::describe(&e)),
        },
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn write_file(path: &std::path::Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| {
        format!(
            "{}: {}",
            path.display(),
            skillc_runtime::input::describe(&e)
        )
    })
}
