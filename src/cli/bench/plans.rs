//! `skillc bench plans`: a digest of every plan the phases can build for the nine
//! model configs and the fixtures, one per model and one of them all, so that a
//! change meant to move code without changing a plan can be checked by running the
//! command on two commits and comparing the lines. Nothing is timed; the figures
//! are the plans themselves (their `plan.json` text), or the builder's refusal.
//!
//! The option sets are what the executor reaches: phase 3's baseline, with and
//! without each padding phase 1 may turn on (`pad-heads`, `pad-dims`); on each,
//! every technique step of the bundle's phases 4 and 5 alone, and all of them in
//! bundle order (what phases 4 and 5 keep when each one helps); and the published
//! plans' options. Each set is built for prefill and decode at three lengths.
//! Per-site tilings (phase 1's kernel choices) are not varied.

use std::path::{Path, PathBuf};

use skillc_runtime::bundle::Bundle;
use skillc_runtime::exec::design::{self, Design};
use skillc_runtime::model::arch::Architecture;
use skillc_runtime::model::config::load_config;
use skillc_runtime::ops::Op;
use skillc_runtime::xdna2::builder::plan_for;
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::plan::{Phase, PlanOptions};

use super::deploy::{Inputs, MODELS};
use super::{BenchError, Output};
use crate::cli::bundle_file;
use crate::digest::sha256_hex;

/// Prompt rows (prefill) and cached context (decode) each option set is built at.
const LENGTHS: [usize; 3] = [1, 128, design::SEQ_LEN];

/// The bundle phases whose technique steps are tried (prefill and decode).
const TECHNIQUE_PHASES: [u8; 2] = [4, 5];

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The bundle (whose phase 4 and 5 steps make the option sets) and the nine configs.
    #[command(flatten)]
    pub inputs: Inputs,
    /// Directory of the fixtures, each a directory with a config.json.
    #[arg(long, default_value = "../shared/fixtures")]
    pub fixtures: PathBuf,
    /// The digests as JSON on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// One model's plans, digested.
struct Digest {
    plans: usize,
    refused: usize,
    sha256: String,
}

pub fn bench(args: &Args) -> Result<(), BenchError> {
    let bundle = bundle_file::load(&args.inputs.bundle)?.bundle;
    let device = Device::npu2();
    let mut out = Output::new("plans", args.json);
    out.line("| model | option sets | plans | refused | sha256 of the plans |");
    out.line("|---|---|---|---|---|");
    let mut all = String::new();
    let (mut plans, mut refused) = (0, 0);
    for (name, config) in subjects(args)? {
        let arch = load_config(&config).map_err(|e| BenchError::config(&config, e))?;
        let sets = option_sets(&bundle, &arch, &device);
        let digest = digest(&name, &arch, &device, &sets);
        out.line(&format!(
            "| {name} | {} | {} | {} | {} |",
            sets.len(),
            digest.plans,
            digest.refused,
            digest.sha256
        ));
        out.row(serde_json::json!({
            "model": name,
            "option_sets": sets.len(),
            "plans": digest.plans,
            "refused": digest.refused,
            "sha256": digest.sha256,
        }));
        all.push_str(&format!("{name} {}\n", digest.sha256));
        plans += digest.plans;
        refused += digest.refused;
    }
    let total = sha256_hex(all.as_bytes());
    out.line(&format!(
        "\ntotal: {plans} plans ({refused} refused), sha256 {total}"
    ));
    out.set("plans", plans);
    out.set("refused", refused);
    out.set("sha256", total);
    out.finish();
    Ok(())
}

/// The nine configs in the bench's order, then the fixtures by name.
fn subjects(args: &Args) -> Result<Vec<(String, PathBuf)>, BenchError> {
    let mut subjects = Vec::new();
    for model in MODELS {
        let config = args.inputs.models.join(model).join("config.json");
        if !config.is_file() {
            return Err(BenchError::NoConfig(args.inputs.models.join(model)));
        }
        subjects.push((model.to_string(), config));
    }
    let mut fixtures: Vec<(String, PathBuf)> = std::fs::read_dir(&args.fixtures)
        .map(|dir| {
            dir.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("config.json").is_file())
                .map(|p| (file_name(&p), p.join("config.json")))
                .collect()
        })
        .unwrap_or_default();
    if fixtures.is_empty() {
        return Err(BenchError::NoConfig(args.fixtures.clone()));
    }
    fixtures.sort();
    subjects.extend(fixtures);
    Ok(subjects)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The labelled option sets of one model (see the module comment).
fn option_sets(
    bundle: &Bundle,
    arch: &Architecture,
    device: &Device,
) -> Vec<(String, PlanOptions)> {
    let techniques: Vec<Op> = bundle
        .phases
        .iter()
        .filter(|p| TECHNIQUE_PHASES.contains(&p.index))
        .flat_map(|p| &p.steps)
        .filter_map(|s| Op::read(s.op, &s.params).ok())
        .collect();
    let mut sets = Vec::new();
    for (pad_heads, pad_dims) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut base = Design::baseline();
        base.options.pad_heads = pad_heads;
        base.options.pad_dims = pad_dims;
        let label = format!("pad_heads={pad_heads} pad_dims={pad_dims}");
        let mut cumulative = base.clone();
        for op in &techniques {
            let mut alone = base.clone();
            // An operation that does not change plan options (a measurement, a
            // tiling that needs a failing site) or that this model refuses adds no set.
            if design::apply_change(&mut alone, arch, device, op, None).is_ok() {
                sets.push((format!("{label} + {}", op.kind()), alone.options));
            }
            // What the model refuses is skipped in the sequence too, as phase 4 or 5
            // would record it not kept and go on.
            let _ = design::apply_change(&mut cumulative, arch, device, op, None);
        }
        sets.push((label.clone(), base.options));
        sets.push((format!("{label} + every technique"), cumulative.options));
    }
    sets.push(("published".to_string(), PlanOptions::reference()));
    sets
}

/// Every plan of every set at every length, in order, as its `plan.json` text or
/// the builder's refusal, hashed together.
fn digest(
    model: &str,
    arch: &Architecture,
    device: &Device,
    sets: &[(String, PlanOptions)],
) -> Digest {
    let mut text = String::new();
    let (mut plans, mut refused) = (0, 0);
    for (label, options) in sets {
        for phase in [Phase::Prefill, Phase::Decode] {
            for len in LENGTHS {
                let built = plan_for(model, arch, device, phase, len, options);
                let body = match built {
                    Ok(plan) => serde_json::to_string(&plan).unwrap_or_default(),
                    Err(e) => {
                        refused += 1;
                        format!("refused: {e}")
                    }
                };
                plans += 1;
                text.push_str(&format!("{label} {phase:?} {len}\n{body}\n"));
            }
        }
    }
    Digest {
        plans,
        refused,
        sha256: sha256_hex(text.as_bytes()),
    }
}
