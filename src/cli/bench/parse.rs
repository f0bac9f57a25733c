//! `skillc bench parse`: front-end throughput on synthetic trajectories
//! (`synth::generate_files`) of 10k, 100k and 1M entries: parse, then resolve and
//! validate, with MB/s and the growth ratio between sizes. Each size runs `--runs`
//! times (the largest once) and the fastest run is reported, with the CPU time all
//! threads spent on it (the machine may be shared; CPU time is what the work costs).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::syntax::SourceFile;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trajectory sizes in entries.
    #[arg(long, value_delimiter = ',', default_values_t = [10_000, 100_000, 1_000_000])]
    pub sizes: Vec<usize>,
    /// Files each trajectory is split into (parsed in parallel).
    #[arg(long, default_value_t = 8)]
    pub files: usize,
    /// Timed runs per size below 1M entries; the fastest is reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seed of the synthetic trajectories.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The figures as JSON on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
}

struct Row {
    entries: usize,
    bytes: usize,
    parse: Duration,
    resolve: Duration,
    /// CPU time of all threads over parse + resolve, when the OS reports it.
    cpu: Option<Duration>,
    errors: usize,
}

impl Row {
    fn total(&self) -> Duration {
        self.parse + self.resolve
    }
}

pub fn run(args: Args) -> ExitCode {
    let mut out = super::Output::new("parse", args.json);
    out.set("threads", rayon::current_num_threads());
    out.line(&format!(
        "front end: parse + resolve + validate of synthetic trajectories ({} files each, seed {}, {} thread{})",
        args.files,
        args.seed,
        rayon::current_num_threads(),
        if rayon::current_num_threads() == 1 { "" } else { "s" }
    ));
    out.line(&format!(
        "{:>9} {:>9} {:>10} {:>12} {:>10} {:>8} {:>12} {:>8}",
        "entries", "MB", "parse ms", "resolve ms", "total ms", "MB/s", "entries/s", "cpu ms"
    ));
    let mut rows: Vec<Row> = Vec::new();
    for &entries in &args.sizes {
        let sources: Vec<SourceFile> = crate::synth::generate_files(entries, args.seed, args.files)
            .into_iter()
            .map(|(path, text)| SourceFile { path, text })
            .collect();
        let runs = if entries >= 1_000_000 {
            1
        } else {
            args.runs.max(1)
        };
        let row = (0..runs)
            .map(|_| measure(&sources, entries))
            .min_by_key(Row::total)
            .unwrap_or_else(|| measure(&sources, entries));
        let mb = row.bytes as f64 / 1e6;
        let total = row.total().as_secs_f64();
        let cpu = row
            .cpu
            .map_or("-".to_string(), |c| format!("{:.0}", c.as_secs_f64() * 1e3));
        out.line(&format!(
            "{:>9} {:>9.1} {:>10.1} {:>12.1} {:>10.1} {:>8.1} {:>12.0} {:>8}",
            row.entries,
            mb,
            row.parse.as_secs_f64() * 1e3,
            row.resolve.as_secs_f64() * 1e3,
            total * 1e3,
            mb / total,
            row.entries as f64 / total,
            cpu
        ));
        out.row(serde_json::json!({
            "entries": row.entries,
            "bytes": row.bytes,
            "parse_s": row.parse.as_secs_f64(),
            "resolve_s": row.resolve.as_secs_f64(),
            "total_s": total,
            "cpu_s": row.cpu.map(|c| c.as_secs_f64()),
        }));
        if row.errors > 0 {
            eprintln!("error: the synthetic trajectory had {} errors", row.errors);
            return ExitCode::from(super::super::EXIT_FAILED);
        }
        rows.push(row);
    }
    for pair in rows.windows(2) {
        let (small, large) = (&pair[0], &pair[1]);
        out.line(&format!(
            "{}/{} entries: time ratio {:.2} for a size ratio {:.1} (linear = {:.1})",
            large.entries,
            small.entries,
            large.total().as_secs_f64() / small.total().as_secs_f64(),
            large.entries as f64 / small.entries as f64,
            large.entries as f64 / small.entries as f64
        ));
    }
    out.line("reproduce: cargo run --release -- bench parse");
    out.finish();
    ExitCode::SUCCESS
}

fn measure(sources: &[SourceFile], entries: usize) -> Row {
    let cpu_before = cpu_time();
    let start = Instant::now();
    let (parsed, diagnostics) = crate::syntax::parse_sources(sources, 0);
    let parse = start.elapsed();
    let start = Instant::now();
    let (graph, more) = crate::graph::build(parsed);
    let resolve = start.elapsed();
    let cpu = cpu_time()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    let errors = crate::diag::error_count(&diagnostics) + crate::diag::error_count(&more);
    debug_assert_eq!(graph.node_count(), entries);
    Row {
        entries,
        bytes: sources.iter().map(|s| s.text.len()).sum(),
        parse,
        resolve,
        cpu,
        errors,
    }
}

/// CPU time consumed so far by all threads of this process (Linux: the sum of
/// `/proc/self/task/*/schedstat`, in nanoseconds). Wall time on a machine shared with
/// other work says little alone; CPU time says what the work itself cost.
pub(crate) fn cpu_time() -> Option<Duration> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut total = 0u64;
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}
