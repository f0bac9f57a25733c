//! `skillc bench faults`: the planted-fault matrix. Every fault is planted, one at
//! a time, in a deployment of each subject: the four transformers fixtures and the
//! nine models from their configs alone (seeded random weights). A planted run
//! stops after the phase whose gates must catch the fault (`Fault::catching_phase`),
//! which keeps full-size runs affordable; a fault that nothing caught by then is a
//! miss. Then each subject deploys unplanted with three seeds, as far as the last
//! catching phase (the fixtures to the end): any failing check gate is a false alarm.
//! The bench prints the matrix as Markdown, the false alarms and its wall time.
//!
//! Full-size models take several GB each: run it under the shared memory lock,
//! `flock /work/wt/bigmem.lock cargo run --release -- bench faults`, or
//! `--no-models` for the fixtures alone.

use std::path::PathBuf;
use std::time::Instant;

use skillc_runtime::exec::artifacts::record::DeployReport;
use skillc_runtime::exec::{self, DeployOptions, EvaluatorLaunch, Fault};
use skillc_runtime::model::config::load_config;
use skillc_runtime::phase::DeployPhase;

use super::deploy::{load_average, selected_models};
use super::BenchError;
use crate::cli::bundle_file;
use crate::cli::progress::Display;
use crate::outdir::{Claim, Kind};

/// The transformers fixtures of the matrix (one per family the nine come from).
pub const FIXTURES: [&str; 4] = ["llama32-tiny", "qwen25-tiny", "qwen3-tiny", "smollm2-tiny"];

/// Gates whose failure on an unplanted deployment is a false alarm: the checks
/// a fault is caught by, and the evaluator's. (A transferred GEMM tiling that
/// fails its kernel check is a real catch repaired by a lesson, and an
/// optimization whose modeled time did not drop a decision, not an alarm.)
const CHECK_GATES: [&str; 8] = [
    "kernel rope",
    "block",
    "verify:",
    "probe:",
    "feature proof",
    "transformers match",
    "reference sanity",
    "evaluator",
];

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The skill bundle to deploy (relative paths: from the current directory).
    #[arg(long, default_value = "generated-skills/llama1b")]
    pub bundle: PathBuf,
    /// The transformers fixtures.
    #[arg(long, default_value = "../shared/fixtures")]
    pub fixtures: PathBuf,
    /// Directory holding the nine model configs.
    #[arg(long, default_value = "../shared/models")]
    pub models: PathBuf,
    /// More fixture folders: every subfolder of DIR holding a config.json joins
    /// the subjects (e.g. tests/data/fixtures, or ../shared/fixtures for the
    /// fixtures beyond the four).
    #[arg(long = "more-fixtures", value_name = "DIR")]
    pub more_fixtures: Vec<PathBuf>,
    /// Only these of the nine models (directory names); all nine by default.
    #[arg(long = "model")]
    pub only: Vec<String>,
    /// The fixtures only, none of the nine models.
    #[arg(long)]
    pub no_models: bool,
    /// Only these faults; all by default.
    #[arg(long = "fault")]
    pub faults: Vec<String>,
    /// How many seeds the unplanted runs take (`--first-seed`, the next, …).
    #[arg(long, default_value_t = 3)]
    pub seeds: u64,
    /// The first seed of the unplanted runs, so that more seeds can be added to an
    /// earlier run's without repeating it.
    #[arg(long, default_value_t = 0)]
    pub first_seed: u64,
    /// No planted run: only the unplanted (false-alarm) half, still stopping where the
    /// full matrix's last catching phase would.
    #[arg(long, conflicts_with = "faults")]
    pub no_faults: bool,
    /// Where each run's output directory goes.
    #[arg(long, default_value = "target/bench-faults")]
    pub out: PathBuf,
    /// The figures as JSON on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// A deployment subject: a fixture (with its transformers outputs) or one of the
/// nine (its config alone).
struct Subject {
    name: String,
    dir: PathBuf,
    full_size: bool,
}

/// What a planted run showed.
enum Cell {
    Caught {
        phase: DeployPhase,
        gate: String,
        value: f64,
    },
    Missed {
        first_failure: Option<String>,
    },
    Inert(&'static str),
}

impl Cell {
    fn text(&self) -> String {
        match self {
            Cell::Caught { phase, gate, value } => {
                format!("phase {phase}, {gate} {}", short(*value))
            }
            Cell::Missed {
                first_failure: None,
            } => "MISSED".into(),
            Cell::Missed {
                first_failure: Some(f),
            } => format!("MISSED (first failure: {f})"),
            Cell::Inert(why) => format!("n/a ({why})"),
        }
    }
}

fn short(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

pub fn bench(args: &Args) -> Result<(), BenchError> {
    let started = Instant::now();
    let loaded = bundle_file::load(&args.bundle)?;
    let notes = loaded.report_notes(false)?;
    let bundle = loaded.bundle;
    let faults = if args.no_faults {
        Vec::new()
    } else {
        chosen_faults(&args.faults, teaches_fused_decode(&bundle))?
    };
    let subjects = subjects(args)?;
    let program = std::env::current_exe().map_err(BenchError::Executable)?;
    let mut progress = Display::new(false);
    let mut deploy =
        |subject: &Subject, fault: Option<Fault>, seed: u64, stop: Option<DeployPhase>| {
            let tag = fault.map_or(format!("unplanted-{seed}"), |f| f.to_string());
            progress.line(&format!("{}: {tag}", subject.name));
            let out = args.out.join(&subject.name).join(&tag);
            // The bench's own folders, replaced whatever is in them, unless
            // they hold what the bench reads.
            crate::outdir::overlap::refuse_overlap(
                &out,
                &[
                    ("skill bundle", args.bundle.as_path()),
                    ("fixtures folder", args.fixtures.as_path()),
                    ("models folder", args.models.as_path()),
                ],
            )?;
            let claim = Claim::new(&out, Kind::Deploy, true, &mut |m| progress.note(m))?;
            let options = DeployOptions {
                model_dir: subject.dir.clone(),
                out_dir: claim.staging().to_path_buf(),
                seed,
                prompts: None,
                faults: fault.into_iter().collect(),
                started: exec::artifacts::clock::now(),
                evaluator: EvaluatorLaunch::Process(program.clone()),
                registry: None,
                fixtures: std::iter::once(&args.fixtures)
                    .chain(&args.more_fixtures)
                    .cloned()
                    .collect(),
                stop_after: stop,
                weights: Default::default(),
                seeded_quant: None,
                bundle_notes: notes.clone(),
            };
            let outcome = exec::deploy(&bundle, &options, &mut progress).map_err(|source| {
                BenchError::Deploy {
                    subject: format!("{} {tag}", subject.name),
                    source,
                }
            })?;
            claim.commit()?;
            Ok::<DeployReport, BenchError>(outcome.report)
        };
    let mut matrix = Vec::new();
    for fault in &faults {
        let mut cells = Vec::new();
        for subject in &subjects {
            let arch = load_config(&subject.dir.join("config.json")).map_err(|source| {
                BenchError::Config {
                    subject: subject.name.clone(),
                    source: Box::new(source),
                }
            })?;
            let cell = match fault.inert_on(&arch) {
                Some(why) => Cell::Inert(why),
                None => {
                    let report = deploy(subject, Some(*fault), 0, Some(fault.catching_phase()))?;
                    judge(*fault, &report)
                }
            };
            cells.push(cell);
        }
        matrix.push((*fault, cells));
    }
    // With no planted run the unplanted ones stop where the full matrix's would.
    let stop_set: &[Fault] = if faults.is_empty() {
        &Fault::ALL
    } else {
        &faults
    };
    let last_catch = stop_set
        .iter()
        .map(|f| f.catching_phase())
        .max()
        .unwrap_or(DeployPhase::Evaluate);
    let mut alarms = Vec::new();
    for subject in &subjects {
        let stop = subject.full_size.then_some(last_catch);
        let mut found = Vec::new();
        for seed in args.first_seed..args.first_seed + args.seeds {
            let report = deploy(subject, None, seed, stop)?;
            found.extend(
                false_alarms(&report)
                    .into_iter()
                    .map(|a| format!("seed {seed}: {a}")),
            );
        }
        alarms.push((subject, stop, found));
    }
    let mut out = super::Output::new("faults", args.json);
    let seeds = args.first_seed..args.first_seed + args.seeds;
    print(&mut out, &subjects, &matrix, &alarms, seeds);
    let wall = started.elapsed().as_secs_f64();
    out.line(&format!(
        "\nwall time {wall:.0} s on this machine (load average {} at the end)",
        load_average()
    ));
    out.set("wall_s", wall);
    out.finish();
    Ok(())
}

/// Whether the bundle's phase 5 has the single-dispatch fused decode among its
/// techniques (then its scoped faults join the matrix).
fn teaches_fused_decode(bundle: &skillc_runtime::bundle::Bundle) -> bool {
    bundle
        .phases
        .iter()
        .flat_map(|p| &p.steps)
        .any(|s| s.op == skillc_runtime::ops::OpKind::FusedDecode)
}

fn chosen_faults(names: &[String], fused: bool) -> Result<Vec<Fault>, BenchError> {
    if names.is_empty() {
        let mut all = Fault::ALL.to_vec();
        all.extend(Fault::PARAM);
        all.extend(Fault::LATE);
        if fused {
            all.extend(Fault::FUSED);
        }
        return Ok(all);
    }
    names.iter().map(|n| Ok(n.parse::<Fault>()?)).collect()
}

fn subjects(args: &Args) -> Result<Vec<Subject>, BenchError> {
    let mut out: Vec<Subject> = FIXTURES
        .iter()
        .map(|f| Subject {
            name: f.to_string(),
            dir: args.fixtures.join(f),
            full_size: false,
        })
        .collect();
    for dir in &args.more_fixtures {
        let entries = std::fs::read_dir(dir).map_err(|source| BenchError::FixtureDir {
            dir: dir.clone(),
            source,
        })?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("config.json").is_file())
            .collect();
        found.sort();
        for path in found {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if out.iter().all(|s| s.name != name) {
                out.push(Subject {
                    name,
                    dir: path,
                    full_size: false,
                });
            }
        }
    }
    if !args.no_models {
        out.extend(selected_models(&args.only)?.into_iter().map(|m| Subject {
            name: m.to_string(),
            dir: args.models.join(m),
            full_size: true,
        }));
    }
    for s in &out {
        if !s.dir.join("config.json").is_file() {
            return Err(BenchError::NoConfig(s.dir.clone()));
        }
    }
    Ok(out)
}

/// Caught when a gate of the fault's catching kind failed in its catching phase.
/// A fault of the fused decode has nothing to act on where phase 5 never ran
/// the fused plan's numerics (the bundle does not teach it, or the plan does
/// not place on this model: no probe of it).
fn judge(fault: Fault, report: &DeployReport) -> Cell {
    let phase = fault.catching_phase();
    if Fault::FUSED.contains(&fault)
        && !report
            .gates()
            .any(|(_, g)| g.name.starts_with(fault.catching_gate()))
    {
        return Cell::Inert(
            "no fused plan probed: the bundle does not teach it or it does not place",
        );
    }
    let caught = report
        .gates()
        .find(|(p, g)| !g.passed && *p == phase && g.name.starts_with(fault.catching_gate()));
    match caught {
        Some((p, g)) => Cell::Caught {
            phase: p,
            gate: g.metric.to_string(),
            value: g.value,
        },
        None => Cell::Missed {
            first_failure: report
                .gates()
                .find(|(_, g)| !g.passed)
                .map(|(p, g)| format!("phase {p} {}", g.name)),
        },
    }
}

/// The check gates that failed on an unplanted run, and a stop before the end.
fn false_alarms(report: &DeployReport) -> Vec<String> {
    let mut out: Vec<String> = report
        .gates()
        .filter(|(_, g)| !g.passed && CHECK_GATES.iter().any(|c| g.name.starts_with(c)))
        .map(|(p, g)| format!("phase {p} {}", g.summary()))
        .collect();
    if let Some(stop) = report
        .stop
        .as_ref()
        .filter(|s| s.gate != exec::STOP_AFTER_GATE)
    {
        out.push(format!("stopped in phase {} at {}", stop.phase, stop.gate));
    }
    out
}

fn print(
    out: &mut super::Output,
    subjects: &[Subject],
    matrix: &[(Fault, Vec<Cell>)],
    alarms: &[(&Subject, Option<DeployPhase>, Vec<String>)],
    seeds: std::ops::Range<u64>,
) {
    if !matrix.is_empty() {
        print_matrix(out, subjects, matrix);
    }
    let Some(last) = seeds.end.checked_sub(1).filter(|&l| l >= seeds.start) else {
        // Saying "0 false alarms" here would report runs that never happened.
        out.line("No unplanted runs (--seeds 0): false alarms not measured");
        return;
    };
    let seed_list = if last == seeds.start {
        format!("seed {last}")
    } else {
        format!("seeds {}-{last}", seeds.start)
    };
    out.line(&format!("Unplanted runs, {seed_list}:"));
    let mut total = 0;
    for (subject, stop, found) in alarms {
        total += found.len();
        let reach = stop.map_or("to the end".to_string(), |p| format!("through phase {p}"));
        let verdict = if found.is_empty() {
            "0 false alarms".to_string()
        } else {
            format!("{} false alarm(s): {}", found.len(), found.join("; "))
        };
        out.line(&format!("- {} ({reach}): {verdict}", subject.name));
    }
    out.set("false_alarms", total);
}

/// The planted half: one row per fault, one cell per subject, and the count.
fn print_matrix(out: &mut super::Output, subjects: &[Subject], matrix: &[(Fault, Vec<Cell>)]) {
    let names: Vec<&str> = subjects.iter().map(|s| s.name.as_str()).collect();
    out.line("skillc bench faults: each fault planted alone; fixtures with their transformers outputs, the nine from their configs (seeded random weights, seed 0); a run stops after the phase that must catch its fault");
    out.line("");
    out.line(&format!(
        "| fault (catching phase) | {} |",
        names.join(" | ")
    ));
    out.line(&format!("|---|{}", "---|".repeat(names.len())));
    let (mut caught, mut missed) = (0, 0);
    for (fault, cells) in matrix {
        let texts: Vec<String> = cells.iter().map(Cell::text).collect();
        out.line(&format!(
            "| `{fault}` ({}) | {} |",
            fault.catching_phase(),
            texts.join(" | ")
        ));
        for (subject, cell) in subjects.iter().zip(cells) {
            let (state, phase, metric, value) = match cell {
                Cell::Caught { phase, gate, value } => {
                    caught += 1;
                    ("caught", Some(*phase), Some(gate.clone()), Some(*value))
                }
                Cell::Missed { .. } => {
                    missed += 1;
                    ("missed", None, None, None)
                }
                Cell::Inert(_) => ("not-applicable", None, None, None),
            };
            out.row(serde_json::json!({
                "fault": fault.name(), "subject": subject.name, "outcome": state,
                "phase": phase, "metric": metric, "value": value, "cell": cell.text(),
            }));
        }
    }
    out.line("");
    out.line(&format!(
        "caught {caught} of {} applicable planted runs, {missed} missed",
        caught + missed
    ));
    out.line("");
    out.set("caught", caught);
    out.set("missed", missed);
}
