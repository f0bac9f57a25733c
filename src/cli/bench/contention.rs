//! `skillc bench contention`: how a deploy degrades on a busy machine. Each job
//! (the README's main job; a config-only Qwen2.5-0.5B deploy) runs as a fresh
//! `skillc deploy` process, first on its own, then beside `--busy` processes that
//! spin on a core each, in the same bench run; the table gives both wall times,
//! their ratio against the target (at most 2.5× beside two busy processes on two
//! cores: a fair share of the cores is 2×), the CPU time and each phase's wall
//! time, so the phases that lose most under contention show. `--rounds` repeats
//! the pair, alternating, to see the noise of a shared machine; the load average
//! at the start of each run is printed with it.
//!
//! The children run with this process's thread count (`--threads`,
//! `RAYON_NUM_THREADS`); `--program` times another build of skillc (e.g. the
//! main branch's) in the same run, for a before/after on the same load.
//!
//! Run with `cargo run --release -- bench contention` from the repository root
//! (about 4 minutes idle on 2 cores); `--job main` for the main job alone.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use skillc_runtime::exec::artifacts::record::DeployReport;
use skillc_runtime::threads;

use super::deploy::{cpu_seconds, load_average};
use super::BenchError;

/// The target of issue 31: beside two busy processes on two cores, at most
/// this many times the idle wall time.
pub const TARGET_RATIO: f64 = 2.5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Job {
    /// SmolLM2-135M Q4_1 (GGUF, trained weights) with a chat prompt.
    Main,
    /// Qwen2.5-0.5B from its config alone (seeded random weights).
    Qwen,
}

impl Job {
    fn name(self) -> &'static str {
        match self {
            Job::Main => "smollm2-135m q4_1 --chat",
            Job::Qwen => "qwen2.5-0.5b config-only",
        }
    }

    fn deploy_args(self, models: &Path) -> Vec<String> {
        let model = |m: &str| models.join(m).display().to_string();
        match self {
            Job::Main => vec![
                "--model".into(),
                model("smollm2-135m-instruct-q4_1"),
                "--chat".into(),
                "What is the capital of France?".into(),
            ],
            Job::Qwen => vec!["--model".into(), model("qwen2.5-0.5b")],
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The jobs to time [default: both].
    #[arg(long = "job", value_enum)]
    pub jobs: Vec<Job>,
    /// Busy processes beside the second run of each pair.
    #[arg(long, default_value_t = 2)]
    pub busy: usize,
    /// Idle/busy pairs per job.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// The skillc to time [default: this one].
    #[arg(long)]
    pub program: Option<PathBuf>,
    /// The skill bundle (relative to the current directory).
    #[arg(long, default_value = "generated-skills/llama1b")]
    pub bundle: PathBuf,
    /// Directory holding the models (relative to the current directory).
    #[arg(long, default_value = "../shared/models")]
    pub models: PathBuf,
    /// Where the deploys write (relative to the current directory).
    #[arg(long, default_value = "target/bench-contention")]
    pub out: PathBuf,
    /// The figures as JSON on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// Processes spinning on a core each until dropped.
struct Busy(Vec<Child>);

impl Busy {
    fn start(program: &Path, n: usize) -> Result<Self, BenchError> {
        let mut children = Vec::with_capacity(n);
        for _ in 0..n {
            let child = Command::new(program)
                .args(["bench", "spin"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .map_err(BenchError::Executable)?;
            children.push(child);
        }
        Ok(Self(children))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `skillc bench spin` (hidden): one busy process, until killed.
pub fn spin() -> ! {
    let mut x = 0u64;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

struct Run {
    wall_s: f64,
    cpu_s: Option<f64>,
    load: String,
    verdict: String,
    phases: Vec<f64>,
}

fn deploy_once(args: &Args, program: &Path, job: Job, out: &Path) -> Result<Run, BenchError> {
    let load = load_average();
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let status = Command::new(program)
        .arg("deploy")
        .arg(&args.bundle)
        .args(job.deploy_args(&args.models))
        .arg("--out")
        .arg(out)
        .args(["--force", "--quiet"])
        .env(threads::ENV_VAR, threads::current().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(BenchError::Executable)?;
    let wall_s = started.elapsed().as_secs_f64();
    let cpu_s = cpu_seconds().zip(cpu_before).map(|(a, b)| a - b);
    let report: Option<DeployReport> = std::fs::read_to_string(out.join("report.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let verdict = match (&report, status.code()) {
        (Some(r), _) => r.verdict.label().to_string(),
        (None, code) => format!("no report (exit {code:?})"),
    };
    let phases = report
        .map(|r| r.phases.iter().map(|p| p.wall_s).collect())
        .unwrap_or_default();
    Ok(Run {
        wall_s,
        cpu_s,
        load,
        verdict,
        phases,
    })
}

pub fn bench(args: &Args) -> Result<(), BenchError> {
    let me = std::env::current_exe().map_err(BenchError::Executable)?;
    let program = args.program.clone().unwrap_or_else(|| me.clone());
    let jobs = if args.jobs.is_empty() {
        vec![Job::Main, Job::Qwen]
    } else {
        args.jobs.clone()
    };
    let mut out = super::Output::new("contention", args.json);
    out.set("program", program.display().to_string());
    out.set("threads", threads::current());
    out.set("busy", args.busy);
    out.set("cores", threads::available_cores().get());
    out.line(&format!(
        "{} on {} thread(s), {} core(s) this process may use; busy processes: {}",
        program.display(),
        threads::current(),
        threads::available_cores(),
        args.busy
    ));
    out.line("| job | round | idle wall s | busy wall s | ratio (target) | idle CPU s | busy CPU s | load idle/busy | verdicts | phase 0..7 wall s idle | phase 0..7 wall s busy |");
    out.line("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut worst: f64 = 0.0;
    for job in jobs {
        for round in 1..=args.rounds {
            let dir = |what: &str| args.out.join(format!("{job:?}-{what}").to_lowercase());
            let idle = deploy_once(args, &program, job, &dir("idle"))?;
            let busy = {
                let _busy = Busy::start(&me, args.busy)?;
                deploy_once(args, &program, job, &dir("busy"))?
            };
            let ratio = busy.wall_s / idle.wall_s.max(1e-9);
            worst = worst.max(ratio);
            let within = if ratio <= TARGET_RATIO { "≤" } else { ">" };
            let cpu = |r: &Run| r.cpu_s.map_or("-".into(), |c| format!("{c:.1}"));
            let phases = |r: &Run| {
                r.phases
                    .iter()
                    .map(|w| format!("{w:.1}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            out.line(&format!(
                "| {} | {round} | {:.1} | {:.1} | {ratio:.2}× ({within} {TARGET_RATIO}×) | {} | {} | {}/{} | {}/{} | {} | {} |",
                job.name(),
                idle.wall_s,
                busy.wall_s,
                cpu(&idle),
                cpu(&busy),
                idle.load,
                busy.load,
                idle.verdict,
                busy.verdict,
                phases(&idle),
                phases(&busy),
            ));
            out.row(serde_json::json!({
                "job": job.name(),
                "round": round,
                "idle_wall_s": idle.wall_s,
                "busy_wall_s": busy.wall_s,
                "ratio": ratio,
                "idle_cpu_s": idle.cpu_s,
                "busy_cpu_s": busy.cpu_s,
                "idle_load": idle.load,
                "busy_load": busy.load,
                "idle_verdict": idle.verdict,
                "busy_verdict": busy.verdict,
                "idle_phase_wall_s": idle.phases,
                "busy_phase_wall_s": busy.phases,
            }));
        }
    }
    out.set("worst_ratio", worst);
    out.line(&format!(
        "worst ratio {worst:.2}× (target ≤ {TARGET_RATIO}× beside two busy processes on two cores). Wall times are measured on this machine; load is the 1-minute load average when each run started, and any load but the bench's own makes `idle` not idle."
    ));
    out.finish();
    Ok(())
}
