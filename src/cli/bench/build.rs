//! `skillc bench build`: `skillc build` in memory (parse + resolve, distill, emit; no
//! file reading or writing), per stage, for the example trajectory, synthetic
//! trajectories (`synth::generate_files`) of 10k and 100k entries, and any
//! directories given. Each input runs `--runs` times and the fastest run is
//! reported, with the CPU time all threads spent on it: the machine may be shared,
//! and CPU time is what the work costs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use super::parse::cpu_time;
use super::BenchError;
use crate::cli::{EXIT_FAILED, EXIT_USAGE};
use crate::distill::{self, Input};
use crate::emit;
use crate::graph;
use crate::syntax::{self, SourceFile};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Synthetic trajectory sizes in entries.
    #[arg(long, value_delimiter = ',', default_values_t = [10_000, 100_000])]
    pub sizes: Vec<usize>,
    /// Files each synthetic trajectory is split into.
    #[arg(long, default_value_t = 8)]
    pub files: usize,
    /// Percent of the synthetic steps that fail their gate and teach a lesson
    /// (100: about one lesson per five entries).
    #[arg(long, default_value_t = crate::synth::DEFAULT_FAILING_PERCENT, value_parser = clap::value_parser!(u64).range(0..=100))]
    pub failing: u64,
    /// Seed of the synthetic trajectories.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Timed runs per input; the fastest is reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// More trajectory directories to time, each built on its own.
    pub dirs: Vec<PathBuf>,
    /// The figures as JSON on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// One trajectory held in memory.
struct Case {
    label: String,
    dir_name: String,
    sources: Vec<SourceFile>,
}

/// Wall and CPU time of one stage.
#[derive(Debug, Clone, Copy, Default)]
struct Timed {
    wall: Duration,
    cpu: Option<Duration>,
}

impl Timed {
    fn show(&self) -> String {
        let cpu = self.cpu.map_or_else(|| "-".to_string(), ms);
        format!("{} / {cpu}", ms(self.wall))
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "wall_s": self.wall.as_secs_f64(),
            "cpu_s": self.cpu.map(|c| c.as_secs_f64()),
        })
    }
}

/// Runs `work`, timing it.
fn timed<T>(work: impl FnOnce() -> T) -> (T, Timed) {
    let cpu_before = cpu_time();
    let start = Instant::now();
    let value = work();
    let wall = start.elapsed();
    let cpu = cpu_time()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    (value, Timed { wall, cpu })
}

#[derive(Debug, Clone, Copy)]
struct Run {
    entries: usize,
    lessons: usize,
    files: usize,
    front: Timed,
    distill: Timed,
    emit: Timed,
}

impl Run {
    fn total(&self) -> Timed {
        let stages = [self.front, self.distill, self.emit];
        Timed {
            wall: stages.iter().map(|s| s.wall).sum(),
            cpu: stages.iter().map(|s| s.cpu).sum(),
        }
    }
}

fn directory_case(dir: &Path) -> Result<Case, BenchError> {
    let sources = syntax::load_dir(dir)?;
    let dir_name = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "trajectory".to_string());
    Ok(Case {
        label: syntax::display_path(dir),
        dir_name,
        sources,
    })
}

fn synthetic_case(entries: usize, files: usize, seed: u64, failing: u64) -> Case {
    let label = if failing == crate::synth::DEFAULT_FAILING_PERCENT {
        format!("synthetic {entries}")
    } else {
        format!("synthetic {entries}, {failing}% failing")
    };
    Case {
        label,
        dir_name: "synthetic".to_string(),
        sources: crate::synth::generate_failing(entries, seed, files, failing)
            .into_iter()
            .map(|(path, text)| SourceFile { path, text })
            .collect(),
    }
}

fn run_once(case: &Case) -> Result<Run, BenchError> {
    let ((graph, diagnostics), front) = timed(|| {
        let (parsed, mut diagnostics) = syntax::parse_sources(&case.sources, 0);
        let (graph, more) = graph::build(parsed);
        diagnostics.extend(more);
        (graph, diagnostics)
    });
    let errors = crate::diag::error_count(&diagnostics);
    if errors > 0 {
        return Err(BenchError::Diagnostics {
            label: case.label.clone(),
            errors,
        });
    }
    let shared = distill::shared_ids([&graph]);
    let input = Input {
        dir_name: &case.dir_name,
        graph: &graph,
        sources: &case.sources,
        shared_ids: &shared,
    };
    let (distilled, distill) = timed(|| distill::distill(&case.dir_name, &[input]));
    let (rendered, emit) = timed(|| emit::render(&distilled.ir));
    let rendered = rendered?;
    Ok(Run {
        entries: graph.node_count(),
        lessons: graph
            .nodes()
            .filter(|(_, n)| n.kind == crate::syntax::ast::EntryKind::Lesson)
            .count(),
        files: rendered.files.len(),
        front,
        distill,
        emit,
    })
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

pub fn run(args: Args) -> ExitCode {
    let mut cases = Vec::new();
    for dir in
        std::iter::once(Path::new("grammar/example")).chain(args.dirs.iter().map(PathBuf::as_path))
    {
        match directory_case(dir) {
            Ok(case) => cases.push(case),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(EXIT_USAGE);
            }
        }
    }
    cases.extend(
        args.sizes
            .iter()
            .map(|&n| synthetic_case(n, args.files, args.seed, args.failing)),
    );
    let threads = rayon::current_num_threads();
    let mut out = super::Output::new("build", args.json);
    out.set("threads", threads);
    out.line(&format!(
        "skillc build in memory: parse + resolve, distill, emit ({threads} thread{}; fastest of {} runs)",
        if threads == 1 { "" } else { "s" },
        args.runs.max(1)
    ));
    out.line("each stage: wall ms / CPU ms of all threads");
    out.line(&format!(
        "{:<22} {:>8} {:>17} {:>15} {:>15} {:>17} {:>6}",
        "input", "entries", "parse+resolve", "distill", "emit", "total", "files"
    ));
    let mut synthetic = Vec::new();
    for case in &cases {
        let mut best: Option<Run> = None;
        for _ in 0..args.runs.max(1) {
            match run_once(case) {
                Ok(run) if best.is_none_or(|b| run.total().wall < b.total().wall) => {
                    best = Some(run)
                }
                Ok(_) => {}
                Err(error) => {
                    eprintln!("error: {error}");
                    return ExitCode::from(EXIT_FAILED);
                }
            }
        }
        let Some(run) = best else { continue };
        out.line(&format!(
            "{:<22} {:>8} {:>17} {:>15} {:>15} {:>17} {:>6}",
            case.label,
            run.entries,
            run.front.show(),
            run.distill.show(),
            run.emit.show(),
            run.total().show(),
            run.files
        ));
        out.row(serde_json::json!({
            "input": case.label,
            "entries": run.entries,
            "lessons": run.lessons,
            "files": run.files,
            "parse_resolve": run.front.json(),
            "distill": run.distill.json(),
            "emit": run.emit.json(),
            "total": run.total().json(),
        }));
        if case.dir_name == "synthetic" {
            synthetic.push(run);
        }
    }
    let scaling = scaling(&synthetic);
    for step in &scaling {
        out.line(&step.line());
    }
    out.set(
        "scaling",
        serde_json::Value::Array(scaling.iter().map(Scaling::json).collect()),
    );
    out.line("reproduce: cargo run --release -- bench build");
    out.finish();
    ExitCode::SUCCESS
}

/// How the cost grew from one synthetic size to the next: linear work grows
/// as the entries do, quadratic work as their square.
struct Scaling {
    from: usize,
    to: usize,
    lessons: (usize, usize),
    wall: f64,
    cpu: Option<f64>,
}

impl Scaling {
    fn line(&self) -> String {
        let cpu = self
            .cpu
            .map_or_else(|| "-".to_string(), |c| format!("{c:.1}×"));
        format!(
            "{} → {} entries ({:.1}× the entries; lessons {} → {}): {:.1}× the wall time, {cpu} the CPU time",
            self.from,
            self.to,
            self.to as f64 / self.from.max(1) as f64,
            self.lessons.0,
            self.lessons.1,
            self.wall
        )
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "from_entries": self.from,
            "to_entries": self.to,
            "wall_ratio": self.wall,
            "cpu_ratio": self.cpu,
        })
    }
}

fn scaling(runs: &[Run]) -> Vec<Scaling> {
    runs.windows(2)
        .map(|pair| {
            let (a, b) = (pair[0].total(), pair[1].total());
            let ratio = |x: Duration, y: Duration| y.as_secs_f64() / x.as_secs_f64().max(1e-9);
            Scaling {
                from: pair[0].entries,
                to: pair[1].entries,
                lessons: (pair[0].lessons, pair[1].lessons),
                wall: ratio(a.wall, b.wall),
                cpu: a.cpu.zip(b.cpu).map(|(x, y)| ratio(x, y)),
            }
        })
        .collect()
}
