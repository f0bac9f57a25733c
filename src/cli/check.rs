//! `skillc check DIR...`: parse, resolve and validate trajectories and print every
//! diagnostic. Exit 0 without errors (warnings allowed), 1 with errors, 2 when a
//! directory cannot be read.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use super::render::{self, Sources};
use super::{Format, EXIT_FAILED, EXIT_USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trajectory directories; each directory's `.traj` files form one trajectory.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Print the diagnostics as one JSON document.
    #[arg(long)]
    pub json: bool,
    /// The older spelling of `--json` (`--format json`).
    #[arg(long, value_enum, default_value = "human", hide = true)]
    pub format: Format,
}

pub fn run(args: Args) -> ExitCode {
    let loaded = match crate::graph::load_dirs(&args.dirs) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut sources = Sources::new(&loaded.sources);
    let text = match Format::chosen(args.json, args.format) {
        Format::Human => {
            let entries: usize = loaded
                .trajectories
                .iter()
                .map(|(_, g)| g.node_count())
                .sum();
            let trajectories = loaded.trajectories.len();
            format!(
                "{}checked {} trajector{} ({} files, {} entries): {}\n",
                render::human(&loaded.diagnostics, &mut sources),
                trajectories,
                if trajectories == 1 { "y" } else { "ies" },
                loaded.sources.len(),
                entries,
                render::summary(&loaded.diagnostics)
            )
        }
        Format::Json => render::json(&loaded.diagnostics, &sources),
    };
    if std::io::stdout().write_all(text.as_bytes()).is_err() {
        return ExitCode::from(EXIT_USAGE);
    }
    if loaded.error_count() > 0 {
        ExitCode::from(EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}
