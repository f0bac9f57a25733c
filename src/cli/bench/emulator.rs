//! `skillc bench emulator`: host speed of the XDNA 2 emulator's functional
//! execution of a full-size decode step (Llama-3.2-1B by default, seeded
//! random weights) next to the CPU f32 reference's decode step, measured
//! interleaved in one process (sequential A/B runs disagree by up to 15 %,
//! calibration §0), plus the emulated NPU's modeled time for the same step.
//!
//! Run with `cargo run --release -- bench emulator`.

use std::path::PathBuf;
use std::time::Instant;

use skillc_runtime::model::config::load_config;
use skillc_runtime::model::memory::human_bytes;
use skillc_runtime::model::oracle::{blocks::argmax, Reference};
use skillc_runtime::model::Model;
use skillc_runtime::xdna2::builder::plan_for;
use skillc_runtime::xdna2::cost::time_plan;
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::fit::{committed_params, FittedFile};
use skillc_runtime::xdna2::interpreter::{Interpreter, NpuPath};
use skillc_runtime::xdna2::numerics::cosine;
use skillc_runtime::xdna2::plan::{Phase, PlanOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Model config (file or directory; relative to the current directory); random
    /// weights are drawn for it.
    #[arg(long, default_value = "../shared/models/llama-3.2-1b")]
    pub config: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Decode steps timed on each side, from an empty KV cache.
    #[arg(long, default_value_t = 8)]
    pub steps: usize,
    /// The figures as JSON on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// Context the decode plan is built for (positions its RoPE table covers).
const CONTEXT: usize = 128;

struct Step {
    emulator_s: f64,
    reference_s: f64,
    cosine: f64,
    same_argmax: bool,
}

pub fn bench(args: &Args) -> Result<(), String> {
    let arch = load_config(&args.config).map_err(|e| format!("{}: {e}", args.config.display()))?;
    let steps = args.steps.clamp(1, CONTEXT);
    let device = Device::npu2();
    let plan = plan_for(
        "bench",
        &arch,
        &device,
        Phase::Decode,
        CONTEXT,
        &PlanOptions::reference(),
    )
    .map_err(|e| e.to_string())?;
    let model = Model::random(arch, args.seed).map_err(|e| e.to_string())?;
    let mut session = Interpreter::new(&device, &model.arch, &model.weights, NpuPath::CORRECT);
    let mut reference = Reference::new(&model).map_err(|e| e.to_string())?;
    let mut token = 1u32;
    let mut results = Vec::with_capacity(steps);
    let mut progress = crate::cli::progress::Display::new(false);
    for step in 0..steps {
        progress.status(&format!(
            "decode step {}/{steps}: emulator, then reference",
            step + 1
        ));
        let start = Instant::now();
        let emulated = session.decode(&plan, token).map_err(|e| e.to_string())?;
        let emulator_s = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let expected = reference.decode_step(token).map_err(|e| e.to_string())?;
        let reference_s = start.elapsed().as_secs_f64();
        results.push(Step {
            emulator_s,
            reference_s,
            cosine: cosine(&emulated, &expected),
            same_argmax: argmax(&emulated) == argmax(&expected),
        });
        token = argmax(&expected) as u32;
    }
    drop(progress);
    let params = committed_params();
    let modeled = time_plan(&plan, &device, &params);
    let mut out = super::Output::new("emulator", args.json);
    print_table(&mut out, args, &model, &results, modeled.total_s);
    out.finish();
    Ok(())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn print_table(
    out: &mut super::Output,
    args: &Args,
    model: &Model,
    steps: &[Step],
    modeled_s: f64,
) {
    let emulator = median(steps.iter().map(|s| s.emulator_s).collect());
    let reference = median(steps.iter().map(|s| s.reference_s).collect());
    let worst_cosine = steps.iter().map(|s| s.cosine).fold(1.0, f64::min);
    let agree = steps.iter().filter(|s| s.same_argmax).count();
    out.set("config", args.config.display().to_string());
    out.set("threads", rayon::current_num_threads());
    out.set("emulator_step_s_median", emulator);
    out.set("reference_step_s_median", reference);
    out.set("emulator_over_reference", emulator / reference);
    out.set("modeled_npu_step_s", modeled_s);
    out.set("modeled", true);
    out.set("worst_cosine", worst_cosine);
    for s in steps {
        out.row(serde_json::json!({
            "emulator_s": s.emulator_s,
            "reference_s": s.reference_s,
            "cosine": s.cosine,
            "same_argmax": s.same_argmax,
        }));
    }
    out.line(&format!(
        "skillc bench emulator --config {} --seed {} --steps {}",
        args.config.display(),
        args.seed,
        steps.len()
    ));
    out.line(&format!(
        "model: {} layers, hidden {}, {} of bf16 weights (random, seed {}), {} threads",
        model.arch.num_layers,
        model.arch.hidden_size,
        human_bytes(model.weights.bytes()),
        args.seed,
        rayon::current_num_threads()
    ));
    out.line("");
    out.line(&format!(
        "  {:<44} {:>12}",
        "decode step (from position 0, interleaved)", "median"
    ));
    out.line(&format!(
        "  {:<44} {:>9.1} ms",
        "emulator, functional (host time)",
        emulator * 1e3
    ));
    out.line(&format!(
        "  {:<44} {:>9.1} ms",
        "CPU f32 reference (host time)",
        reference * 1e3
    ));
    out.line(&format!(
        "  {:<44} {:>11.2}x",
        "emulator / reference",
        emulator / reference
    ));
    out.line(&format!(
        "  {:<44} {:>9.1} ms",
        "emulated NPU, modeled at context 128",
        modeled_s * 1e3
    ));
    out.line("");
    out.line(&format!(
        "logits vs reference: worst cosine {worst_cosine:.5}, argmax agrees on {agree}/{} steps",
        steps.len()
    ));
    out.line(&format!("NPU time is {}", FittedFile::committed().note()));
}
