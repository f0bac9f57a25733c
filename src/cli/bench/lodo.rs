//! `skillc bench lodo DIR…`: leave one deployment out. The bundle of every trajectory
//! is distilled, then once without each; the table gives per deployment how many of
//! the bundle's lessons it taught and which of them no other deployment teaches (new
//! knowledge), and a second table lists those lessons. With `--json` the tables go to
//! stderr and the figures to stdout.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use super::Output;
use crate::cli::render::{self, Sources};
use crate::cli::{EXIT_FAILED, EXIT_USAGE};
use crate::distill::lodo::{self, LeftOut};
use crate::graph;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trajectory directories, one per deployment.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// The figures as JSON on stdout (the tables go to stderr).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> ExitCode {
    let loaded = match graph::load_dirs(&args.dirs) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if loaded.error_count() > 0 {
        let mut sources = Sources::new(&loaded.sources);
        eprint!("{}", render::human(&loaded.diagnostics, &mut sources));
        eprintln!(
            "error: not distilling: {}",
            render::summary(&loaded.diagnostics)
        );
        return ExitCode::from(EXIT_FAILED);
    }
    let rows =
        match crate::cli::build::with_inputs(&loaded, |inputs, _| lodo::leave_one_out(inputs)) {
            Ok(rows) => rows,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(EXIT_USAGE);
            }
        };
    let mut out = Output::new("lodo", args.json);
    print(&mut out, &rows);
    out.finish();
    ExitCode::SUCCESS
}

fn print(out: &mut Output, rows: &[LeftOut]) {
    out.line(&format!(
        "Leave one deployment out over {} trajectories: the lessons each deployment taught, and those no other deployment teaches.",
        rows.len()
    ));
    out.line("");
    out.line("| deployment | model | lessons | also taught elsewhere | new |");
    out.line("|---|---|---:|---:|---:|");
    for row in rows {
        out.line(&format!(
            "| {} | {} | {} | {} | {} |",
            row.deployment,
            cell(&row.model),
            row.lessons,
            row.lessons - row.new.len(),
            row.new.len()
        ));
        out.row(json!({
            "deployment": row.deployment,
            "model": row.model,
            "lessons": row.lessons,
            "new": row.new.iter().map(|l| json!({
                "id": l.id,
                "title": l.title,
                "skill": l.skill,
                "condition": l.condition,
            })).collect::<Vec<_>>(),
        }));
    }
    let total: usize = rows.iter().map(|r| r.new.len()).sum();
    out.set("new_lessons", total);
    if total == 0 {
        return;
    }
    out.line("");
    out.line("| deployment | new lesson | skill | for | title |");
    out.line("|---|---|---|---|---|");
    for row in rows {
        for l in &row.new {
            out.line(&format!(
                "| {} | `{}` | {} | {} | {} |",
                row.deployment,
                l.id,
                l.skill,
                l.condition
                    .as_deref()
                    .map_or_else(|| "every model".to_string(), |c| format!("`{}`", cell(c))),
                cell(&l.title)
            ));
        }
    }
}

/// Text for a table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}
