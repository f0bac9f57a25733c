//! `skillc bench build`: time of `skillc build` in memory (load + parse + resolve,
//! distill, emit; no writing), per stage, for the example trajectory, synthetic
//! trajectories and any directories given. Best of `--iters` runs.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::cli::build::Built;
use crate::cli::EXIT_USAGE;
use crate::distill::{self, Input};
use crate::emit;
use crate::graph;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Extra trajectory directories to time, each built on its own.
    pub dirs: Vec<PathBuf>,
    /// Runs per input; the table shows the fastest.
    #[arg(long, default_value_t = 3)]
    pub iters: u32,
}

/// Stage times of one build.
#[derive(Debug, Clone, Copy, Default)]
struct Times {
    load: Duration,
    distill: Duration,
    emit: Duration,
}

impl Times {
    fn total(&self) -> Duration {
        self.load + self.distill + self.emit
    }
}

struct Row {
    input: String,
    entries: usize,
    files: usize,
    times: Times,
}

fn time_once(dir: &PathBuf) -> Result<(Times, usize, Built), String> {
    let start = Instant::now();
    let loaded = graph::load_dirs(std::slice::from_ref(dir)).map_err(|e| e.to_string())?;
    if loaded.error_count() > 0 {
        return Err(format!(
            "{}: {} errors",
            dir.display(),
            loaded.error_count()
        ));
    }
    let load = start.elapsed();
    let start = Instant::now();
    let shared = distill::shared_ids(loaded.trajectories.iter().map(|(_, g)| g));
    let name = dir.file_name().map_or_else(
        || "bundle".to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let inputs: Vec<Input> = loaded
        .trajectories
        .iter()
        .map(|(_, graph)| Input {
            dir_name: &name,
            graph,
            sources: &loaded.sources,
            shared_ids: &shared,
        })
        .collect();
    let distilled = distill::distill(&name, &inputs);
    let distill_time = start.elapsed();
    let start = Instant::now();
    let rendered = emit::render(&distilled.ir).map_err(|e| e.to_string())?;
    let emit_time = start.elapsed();
    let entries = loaded
        .trajectories
        .iter()
        .map(|(_, g)| g.node_count())
        .sum();
    Ok((
        Times {
            load,
            distill: distill_time,
            emit: emit_time,
        },
        entries,
        Built {
            distilled,
            rendered,
        },
    ))
}

fn measure(input: String, dir: &PathBuf, iters: u32) -> Result<Row, String> {
    let mut best: Option<(Times, usize, usize)> = None;
    for _ in 0..iters.max(1) {
        let (times, entries, built) = time_once(dir)?;
        if best.is_none_or(|(b, _, _)| times.total() < b.total()) {
            best = Some((times, entries, built.rendered.files.len()));
        }
    }
    let (times, entries, files) = best.ok_or("no run")?;
    Ok(Row {
        input,
        entries,
        files,
        times,
    })
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

pub fn run(args: Args) -> ExitCode {
    let mut inputs: Vec<(String, PathBuf)> = vec![(
        "trajectories/example".to_string(),
        PathBuf::from("trajectories/example"),
    )];
    inputs.extend(
        args.dirs
            .iter()
            .map(|d| (crate::syntax::display_path(d), d.clone())),
    );
    println!(
        "| input | entries | load+parse+resolve ms | distill ms | emit ms | total ms | files |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, dir) in inputs {
        match measure(name, &dir, args.iters) {
            Ok(row) => println!(
                "| {} | {} | {} | {} | {} | {} | {} |",
                row.input,
                row.entries,
                ms(row.times.load),
                ms(row.times.distill),
                ms(row.times.emit),
                ms(row.times.total()),
                row.files
            ),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(EXIT_USAGE);
            }
        }
    }
    println!(
        "\nthreads: {} (RAYON_NUM_THREADS); best of {} runs; reproduce: skillc bench build --iters {}",
        rayon::current_num_threads(),
        args.iters,
        args.iters
    );
    ExitCode::SUCCESS
}
