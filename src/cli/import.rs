//! `skillc import RECORDS... --out trajectories/<name>`: drafts a trajectory from a
//! deployment's records (Markdown, code comments, commit messages) and writes it
//! atomically through `outdir`, refusing to replace a folder it did not write and to
//! write into or over an input. Prints what each record drafted, then checks the
//! result as `skillc check` would: drafts are warnings (W0061) to finish by hand.
//!
//! Exit codes: 0 written, 1 the written trajectory has errors (an importer bug),
//! 2 usage or I/O problems.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::render::{self, Sources};
use super::{EXIT_FAILED, EXIT_USAGE};
use crate::import::records::{self, CiteRoot, Skipped};
use crate::import::{self, Imported, Options, RecordSummary};
use crate::outdir::overlap::refuse_overlap;
use crate::outdir::{Claim, Kind};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Record files and folders: Markdown, Python and C/C++ sources, commit-message
    /// files (`=== <sha> <date>` then the message).
    #[arg(required = true)]
    pub records: Vec<PathBuf>,
    /// The trajectory directory to write, e.g. `trajectories/qwen25-0.5b`; its name
    /// is the trajectory's.
    #[arg(long)]
    pub out: PathBuf,
    /// Cite records under DIR as `NAME:<path under DIR>:<line>` (repeatable), e.g.
    /// `--cite-as mlir-air=../shared/records/mlir-air`.
    #[arg(long = "cite-as", value_name = "NAME=DIR")]
    pub cite_as: Vec<String>,
    /// The header's model [default: the trajectory's name].
    #[arg(long)]
    pub model: Option<String>,
    /// The header's baseline: what the recorded work started from.
    #[arg(long, default_value = "none")]
    pub baseline: String,
    /// The date (YYYY-MM-DD) of sessions whose records carry none [default: the
    /// latest date written in the records].
    #[arg(long)]
    pub date: Option<String>,
    /// Replace the output directory even when it holds files skillc did not write
    /// (or changed since).
    #[arg(long)]
    pub force: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, thiserror::Error)]
enum ImportCommandError {
    #[error(transparent)]
    Read(#[from] records::ReadError),
    #[error(transparent)]
    Import(#[from] import::ImportError),
    #[error(transparent)]
    Out(#[from] crate::outdir::OutError),
    #[error(transparent)]
    Overlap(#[from] crate::outdir::overlap::Overlap),
    #[error("{0}")]
    Name(String),
    #[error("cannot write `{path}`: {message}")]
    Write { path: String, message: String },
}

pub fn run(args: Args) -> ExitCode {
    let (imported, skipped) = match import_and_write(&args) {
        Ok(done) => done,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let loaded = match crate::graph::load_dirs(std::slice::from_ref(&args.out)) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let shown = crate::syntax::display_path(&args.out);
    if args.json {
        let json = serde_json::json!({
            "out": shown,
            "records": imported.summary,
            "skipped": skipped,
            "check": render::summary(&loaded.diagnostics),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&json).unwrap_or_default()
        );
    } else {
        print!("{}", report(&imported.summary, &skipped));
        println!(
            "wrote {shown}: {} files; skillc check: {}",
            imported.files.len(),
            render::summary(&loaded.diagnostics)
        );
        if totals(&imported.summary).draft_count() > 0 {
            println!("finish the drafts by hand: `skillc check {shown}` lists each (W0061) with what it reads like");
        }
    }
    if loaded.error_count() > 0 {
        let mut sources = Sources::new(&loaded.sources);
        eprint!("{}", render::human(&loaded.diagnostics, &mut sources));
        return ExitCode::from(EXIT_FAILED);
    }
    ExitCode::SUCCESS
}

fn import_and_write(args: &Args) -> Result<(Imported, Vec<Skipped>), ImportCommandError> {
    let roots = args
        .cite_as
        .iter()
        .map(|spec| CiteRoot::parse(spec))
        .collect::<Result<Vec<_>, _>>()?;
    let inputs: Vec<(&'static str, &Path)> = args
        .records
        .iter()
        .map(|record| ("record", record.as_path()))
        .collect();
    refuse_overlap(&args.out, &inputs)?;
    let name = trajectory_name(&args.out)?;
    let read = records::read(&args.records, &roots)?;
    let model = args.model.clone().unwrap_or_else(|| name.clone());
    let imported = import::import(
        &read.records,
        &Options {
            name: &name,
            model: &model,
            baseline: &args.baseline,
            date: args.date.as_deref(),
        },
    )?;
    let claim = Claim::new(&args.out, Kind::Import, args.force, &mut |m| {
        eprintln!("{m}…")
    })?;
    for (file, text) in &imported.files {
        let path = claim.staging().join(file);
        std::fs::write(&path, text).map_err(|e| ImportCommandError::Write {
            path: crate::syntax::display_path(&path),
            message: skillc_runtime::input::describe(&e),
        })?;
    }
    claim.commit()?;
    Ok((imported, read.skipped))
}

/// The output folder's name, which names the trajectory.
fn trajectory_name(out: &Path) -> Result<String, ImportCommandError> {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    super::build::check_name(&name).map_err(|e| ImportCommandError::Name(e.to_string()))?;
    Ok(name)
}

/// One line per record, totals, and the files left out.
fn report(summary: &[RecordSummary], skipped: &[Skipped]) -> String {
    let mut out = String::new();
    for s in summary {
        out.push_str(&format!("{}\n  {}\n", s.record, line(s)));
    }
    out.push_str(&format!("total: {}\n", line(&totals(summary))));
    for skip in skipped {
        out.push_str(&format!("skipped {}: {}\n", skip.path, skip.why));
    }
    out
}

fn line(s: &RecordSummary) -> String {
    let drafts: Vec<String> = s.drafts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let entries = s.entries();
    let drafted_notes: usize = s.drafts.values().sum();
    format!(
        "{} sessions ({} draft, holding {} entries), {} observations, {} notes, {} draft notes{}; {} of {} entries left as drafts{}",
        s.sessions,
        s.draft_sessions,
        s.in_draft_sessions,
        s.observations,
        s.notes,
        drafted_notes,
        if drafts.is_empty() {
            String::new()
        } else {
            format!(" ({})", drafts.join(", "))
        },
        drafted_notes,
        entries,
        if s.left_out > 0 {
            format!("; {} code blocks or comments left out", s.left_out)
        } else {
            String::new()
        }
    )
}

fn totals(summary: &[RecordSummary]) -> RecordSummary {
    let mut t = RecordSummary::default();
    let mut drafts = BTreeMap::new();
    for s in summary {
        t.sessions += s.sessions;
        t.draft_sessions += s.draft_sessions;
        t.in_draft_sessions += s.in_draft_sessions;
        t.observations += s.observations;
        t.notes += s.notes;
        t.left_out += s.left_out;
        for (k, n) in &s.drafts {
            *drafts.entry(k.clone()).or_insert(0) += n;
        }
    }
    t.drafts = drafts;
    t
}
