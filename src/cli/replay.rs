//! `skillc replay DIR --model MODEL`: re-executes a trajectory on the XDNA 2
//! emulator and prints, for every recorded measurement, the recorded figure, the
//! replayed one and whether they agree. Exit 0 when nothing disagrees, 1 when
//! something does or the trajectory has errors, 2 on usage or I/O problems.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use super::progress::Display;
use super::render::{self, Sources};
use super::{Format, EXIT_FAILED, EXIT_USAGE};
use crate::replay::{self, kind, Functional, Outcome, Report, RowKind};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The trajectory directory.
    pub dir: PathBuf,
    /// Model directory (config.json; weights optional), e.g. ../shared/models/llama-3.2-1b.
    #[arg(long)]
    pub model: PathBuf,
    /// Numerical work redone: `kernels` runs every kernel validation at its
    /// recorded shape on seeded inputs (1.5-3 minutes for llama1b on 2 cores);
    /// `full` also runs the model-level checks (weights, the transformers
    /// comparison when the model directory has reference.safetensors, and the
    /// block, diagnosis and verify gates with the emulator executing the plans);
    /// `none` keeps to constraint checks and the cost model (under a second).
    #[arg(long, value_enum, default_value = "kernels")]
    pub functional: Functional,
    /// Seed of the kernel harness inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print only the rows that do not agree (and the summary).
    #[arg(long)]
    pub problems_only: bool,
    /// Print the report (every row, its kind and verdict, the summary) as one
    /// JSON document.
    #[arg(long)]
    pub json: bool,
    /// The older spelling of `--json` (`--format json`).
    #[arg(long, value_enum, default_value = "human", hide = true)]
    pub format: Format,
    /// No progress on stderr (by default the entry being replayed, redrawn on a
    /// terminal, otherwise a line every few seconds).
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(args: Args) -> ExitCode {
    let started = Instant::now();
    let loaded = match crate::graph::load_dirs(std::slice::from_ref(&args.dir)) {
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
            "error: the trajectory has errors ({}); fix them before replaying",
            render::summary(&loaded.diagnostics)
        );
        return ExitCode::from(EXIT_FAILED);
    }
    let Some((_, graph)) = loaded.trajectories.first() else {
        return ExitCode::from(EXIT_USAGE);
    };
    let options = replay::Options {
        model_dir: args.model.clone(),
        functional: args.functional,
        seed: args.seed,
    };
    let mut display = Display::new(args.quiet);
    let mut last_line = Instant::now();
    let mut progress = |done: usize, total: usize, id: &str| {
        let text = format!("replaying entry {id} ({}/{total})", done + 1);
        // A pipe gets a line every few seconds, not one per entry.
        if display.redraws() || last_line.elapsed().as_secs() >= 5 || done == 0 {
            display.status(&text);
            last_line = Instant::now();
        }
    };
    let report = match replay::replay_with_progress(graph, &options, &mut progress) {
        Ok(report) => report,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    drop(display);
    let text = match Format::chosen(args.json, args.format) {
        Format::Human => human(&report, args.problems_only, started.elapsed().as_secs_f64()),
        Format::Json => serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
    };
    match std::io::stdout().write_all(text.as_bytes()) {
        // `| head` stopped reading: not a failure.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return ExitCode::SUCCESS,
        Err(_) => return ExitCode::from(EXIT_USAGE),
        Ok(()) => {}
    }
    if report.agrees() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    }
}

/// The rows by kind (out-of-sample first: the evidence), each kind's table,
/// then the reasons of the rows that did not agree, then the summary with the
/// out-of-sample count as its headline.
pub fn human(report: &Report, problems_only: bool, seconds: f64) -> String {
    let mut out = String::new();
    for kind in RowKind::ALL {
        let rows: Vec<&replay::Row> = report
            .rows
            .iter()
            .filter(|r| r.kind == kind && (!problems_only || r.outcome != Outcome::Agree))
            .collect();
        if rows.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!(
            "{} rows ({}): {}\n",
            kind.label(),
            report.counts.of(kind).rows,
            kind.meaning()
        ));
        out.push_str(&table(&rows));
    }
    let notes: Vec<&replay::Row> = report
        .rows
        .iter()
        .filter(|r| r.outcome != Outcome::Agree)
        .collect();
    if !notes.is_empty() {
        out.push('\n');
        for r in notes {
            out.push_str(&format!(
                "{}: {} {} [{}]: {}\n",
                r.location,
                r.entry,
                r.metric,
                r.outcome.label(),
                r.reason
            ));
        }
    }
    out.push('\n');
    out.push_str(&summary(report, seconds));
    out
}

/// One kind's rows as a table; a timing row's band is in its replayed cell.
fn table(rows: &[&replay::Row]) -> String {
    let header = ["entry", "metric", "recorded", "replayed", "verdict"];
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            [
                r.entry.clone(),
                r.metric.clone(),
                r.recorded.clone(),
                match &r.point {
                    Some(point) => format!("{} = {point}", r.replayed),
                    None => r.replayed.clone(),
                },
                r.outcome.label().to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String; 5]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("  {c:<w$}"))
            .collect();
        padded.concat().trim_end().to_string() + "\n"
    };
    let mut out = line(&header.map(String::from));
    out.push_str(&line(&widths.map(|w| "-".repeat(w))));
    for row in &cells {
        out.push_str(&line(row));
    }
    out
}

fn summary(report: &Report, seconds: f64) -> String {
    let c = &report.counts;
    let b = &report.band;
    let evidence = c.of(RowKind::OutOfSample);
    let mut out = format!(
        "out-of-sample: {} of {} rows agree, {} disagree, {} outside the emulator, {} not run\n",
        evidence.agree, evidence.rows, evidence.disagree, evidence.outside, evidence.not_run
    );
    let others: Vec<String> = RowKind::ALL[1..]
        .iter()
        .map(|&kind| {
            let k = c.of(kind);
            format!(
                "{} {} ({} agree, {} disagree)",
                k.rows,
                kind.label(),
                k.agree,
                k.disagree
            )
        })
        .collect();
    out.push_str(&format!("not evidence: {}\n", others.join(", ")));
    out.push_str(&format!(
        "replayed {} on {} (--functional {}): {} entries compared ({} observations, {} lessons' fixes): \
         {} agree, {} disagree, {} outside the emulator, {} not run; {} actions executed; \
         {} lessons without an applied fix and {} notes/decisions not compared\n",
        report.trajectory,
        report.model,
        match report.functional {
            Functional::Full => "full",
            Functional::Kernels => "kernels",
            Functional::None => "none",
        },
        c.compared,
        c.observations,
        c.lessons_checked,
        c.agree,
        c.disagree,
        c.outside,
        c.not_run,
        c.actions,
        c.lessons - c.lessons_checked,
        c.text,
    ));
    out.push_str(&format!(
        "bands: a timing row that is a calibration point, within that point's own error (+{:.1}% for a copied figure's rounding); \
         any other, ±{:.0}% (stated); cost model: fit median {:.1}%, worst {:.1}% ({}) over {} points, \
         held-out median {:.1}% (signed {:+.1}%) over {}; {:.1} s\n",
        100.0 * kind::SAME_FIGURE,
        100.0 * b.stated,
        100.0 * b.fit_median,
        100.0 * b.fit_worst,
        b.fit_worst_point,
        b.fit_points,
        100.0 * b.held_out_median,
        100.0 * b.held_out_signed,
        b.held_out_points,
        seconds
    ));
    out
}
