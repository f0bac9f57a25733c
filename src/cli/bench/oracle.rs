//! `skillc bench oracle`: host speed of the CPU f32 reference on a full-size
//! model with seeded random weights (Llama-3.2-1B by default), beside the
//! machine's streaming-read bandwidth measured in the same run. Decode is
//! memory-bound (every bf16 weight is read once per token), so its roofline is
//! that bandwidth; the target is at least half of it.
//!
//! Run with `cargo run --release -- bench oracle`.

use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use rayon::prelude::*;
use skillc_runtime::model::arch::Architecture;
use skillc_runtime::model::config::load_config;
use skillc_runtime::model::memory::human_bytes;
use skillc_runtime::model::oracle::{linear, LogitRows, Reference};
use skillc_runtime::model::tensor::anonymous_buffer;
use skillc_runtime::model::tensor::BfTensor;
use skillc_runtime::model::Model;

use crate::cli::EXIT_USAGE;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Model config (file or directory); random weights are drawn for it.
    #[arg(long, default_value = "../shared/models/llama-3.2-1b")]
    pub config: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Decode steps timed (after a short prompt).
    #[arg(long, default_value_t = 16)]
    pub decode_tokens: usize,
    /// Prompt length of the timed prefill.
    #[arg(long, default_value_t = 128)]
    pub prefill_tokens: usize,
    /// Size of the buffer the bandwidth probe streams through, in MiB.
    #[arg(long, default_value_t = 1024)]
    pub stream_mib: usize,
}

/// Decode at or above this fraction of the measured bandwidth meets the target.
const TARGET_FRACTION: f64 = 0.5;
/// Prompt length before the timed decode steps.
const DECODE_PROMPT: usize = 8;

pub fn run(args: Args) -> ExitCode {
    let arch = match load_config(&args.config) {
        Ok(arch) => arch,
        Err(e) => {
            eprintln!("error: {}: {e}", args.config.display());
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let load_at_start = load_average();
    let generation = Instant::now();
    let model = match Model::random(arch, args.seed) {
        Ok(model) => model,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let generation = generation.elapsed();
    let stream = match stream_bandwidth(args.stream_mib << 20) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: stream buffer: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let decode = match time_decode(&model, args.decode_tokens) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let prefill = match time_prefill(&model, args.prefill_tokens) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let kernels = time_kernels(&model, args.prefill_tokens);
    let timings = Timings {
        generation,
        stream,
        decode,
        prefill,
        load_at_start,
    };
    print_table(&args, &model, &timings);
    print_kernels(&model, args.prefill_tokens, &kernels);
    ExitCode::SUCCESS
}

/// Bytes per second of a parallel streaming read (sum of u64 words) over a
/// buffer much larger than the caches, allocated like the random weights
/// (huge pages requested); best of five passes.
fn stream_bandwidth(bytes: usize) -> Result<f64, String> {
    let mut buffer = anonymous_buffer(bytes).map_err(|e| e.to_string())?;
    buffer.par_chunks_mut(1 << 16).for_each(|c| c.fill(1));
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        let sum: u64 = buffer
            .par_chunks(1 << 16)
            .map(|chunk| {
                let mut acc = [0u64; 8];
                for lanes in chunk.chunks_exact(64) {
                    for (a, word) in acc.iter_mut().zip(lanes.chunks_exact(8)) {
                        let w = u64::from_le_bytes(word.try_into().unwrap_or_default());
                        *a = a.wrapping_add(w);
                    }
                }
                acc.iter().fold(0u64, |s, &a| s.wrapping_add(a))
            })
            .reduce(|| 0, u64::wrapping_add);
        black_box(sum);
        best = best.min(start.elapsed().as_secs_f64());
    }
    Ok(buffer.len() as f64 / best)
}

struct DecodeTiming {
    /// Seconds per step, in step order.
    steps: Vec<f64>,
    /// Bytes read per step: weights plus the KV cache at the mean position.
    bytes_per_token: f64,
}

impl DecodeTiming {
    fn median(&self) -> f64 {
        let mut sorted = self.steps.clone();
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    }

    fn best(&self) -> f64 {
        self.steps.iter().copied().fold(f64::MAX, f64::min)
    }
}

fn time_decode(model: &Model, steps: usize) -> Result<DecodeTiming, String> {
    let steps = steps.max(1);
    let mut reference = Reference::new(model).map_err(|e| e.to_string())?;
    let prompt: Vec<u32> = (0..DECODE_PROMPT as u32).map(|i| 1 + i * 7).collect();
    let mut logits = reference
        .prefill(&prompt, LogitRows::Last)
        .map_err(|e| e.to_string())?
        .logits
        .data;
    let mut times = Vec::with_capacity(steps);
    for _ in 0..steps {
        let next = skillc_runtime::model::oracle::blocks::argmax(&logits) as u32;
        let start = Instant::now();
        logits = reference.decode_step(next).map_err(|e| e.to_string())?;
        times.push(start.elapsed().as_secs_f64());
    }
    let arch = &model.arch;
    let mean_position = DECODE_PROMPT as f64 + steps as f64 / 2.0;
    let kv_bytes = 4.0 * 2.0 * (arch.num_layers * arch.kv_dim()) as f64 * mean_position;
    Ok(DecodeTiming {
        steps: times,
        bytes_per_token: model.weights.bytes() as f64 + kv_bytes,
    })
}

/// Floating-point operations of a prefill of `t` tokens with logits for the
/// last row only (what the reference computes): projections, attention
/// scores and weighted sums over the causal triangle, the LM head.
fn prefill_flops(arch: &Architecture, t: usize) -> f64 {
    let (h, f, q, kv) = (
        arch.hidden_size as f64,
        arch.intermediate_size as f64,
        arch.q_dim() as f64,
        arch.kv_dim() as f64,
    );
    let t = t as f64;
    let projections = 2.0 * t * (h * q + 2.0 * h * kv + q * h + 3.0 * h * f);
    let attended_pairs = t * (t + 1.0) / 2.0;
    let attention = 2.0 * 2.0 * attended_pairs * q;
    let head = 2.0 * h * arch.vocab_size as f64;
    arch.num_layers as f64 * (projections + attention) + head
}

fn time_prefill(model: &Model, t: usize) -> Result<Duration, String> {
    let prompt: Vec<u32> = (0..t as u32)
        .map(|i| (i * 131 + 5) % model.arch.vocab_size as u32)
        .collect();
    let mut reference = Reference::new(model).map_err(|e| e.to_string())?;
    let start = Instant::now();
    reference
        .prefill(&prompt, LogitRows::Last)
        .map_err(|e| e.to_string())?;
    Ok(start.elapsed())
}

/// Seconds for the layer-0 gate projection at `t` rows through each prefill
/// kernel (best of three): the blocked bf16 GEMM the reference uses, and
/// `matrixmultiply`'s sgemm on f32 panels.
fn time_kernels(model: &Model, t: usize) -> [(&'static str, f64); 2] {
    let w = &model.weights.layers[0].gate_proj;
    let x: Vec<f32> = (0..t * w.cols())
        .map(|i| ((i % 97) as f32 - 48.0) / 97.0)
        .collect();
    let mut y = vec![0.0f32; t * w.rows()];
    let mut best = |kernel: fn(&[f32], usize, &BfTensor, &mut [f32])| {
        (0..3)
            .map(|_| {
                let start = Instant::now();
                kernel(&x, t, w, &mut y);
                start.elapsed().as_secs_f64()
            })
            .fold(f64::MAX, f64::min)
    };
    [
        ("blocked bf16 GEMM (used)", best(linear::matmul)),
        ("sgemm on f32 panels", best(linear::matmul_sgemm)),
    ]
}

fn print_kernels(model: &Model, t: usize, kernels: &[(&'static str, f64); 2]) {
    let w = &model.weights.layers[0].gate_proj;
    let flops = 2.0 * (t * w.rows() * w.cols()) as f64;
    for (name, seconds) in kernels {
        println!(
            "{:<38} {:.1} GFLOP/s ({} x {:?}, {:.1} ms)",
            format!("  kernel: {name}"),
            flops / seconds / 1e9,
            t,
            w.shape(),
            seconds * 1e3
        );
    }
}

/// Everything one run measured.
struct Timings {
    generation: Duration,
    stream: f64,
    decode: DecodeTiming,
    prefill: Duration,
    load_at_start: Option<String>,
}

fn print_table(args: &Args, model: &Model, timings: &Timings) {
    let Timings {
        generation,
        stream,
        decode,
        prefill,
        load_at_start,
    } = timings;
    let (stream, prefill) = (*stream, *prefill);
    let arch = &model.arch;
    let gb = |bytes: f64| bytes / 1e9;
    let median = decode.median();
    let achieved = decode.bytes_per_token / median;
    let fraction = achieved / stream;
    let flops = prefill_flops(arch, args.prefill_tokens);
    println!(
        "oracle benchmark: {} ({} params, random bf16 weights, seed {}), {} threads, cpu: {}",
        args.config.display(),
        arch.parameter_count(),
        args.seed,
        rayon::current_num_threads(),
        cpu_features()
    );
    if let Some(load) = load_at_start {
        println!(
            "load average at start {load} (other processes on this machine compete for cores and memory)"
        );
    }
    println!("{:<38} value", "metric");
    println!(
        "{:<38} {:.2} s ({})",
        "random weight generation",
        generation.as_secs_f64(),
        human_bytes(model.weights.bytes())
    );
    println!(
        "{:<38} {:.1} GB/s ({} MiB buffer, best of 5)",
        "stream read bandwidth (measured)",
        gb(stream),
        args.stream_mib
    );
    println!(
        "{:<38} {:.2} tok/s (median of {} steps, {:.1} ms/token; best step {:.1} ms)",
        "decode",
        1.0 / median,
        decode.steps.len(),
        median * 1e3,
        decode.best() * 1e3
    );
    println!(
        "{:<38} {:.3} GB (weights + KV cache)",
        "bytes read per decode step",
        gb(decode.bytes_per_token)
    );
    println!(
        "{:<38} {:.1} GB/s = {:.0} % of measured bandwidth (target >= {:.0} %: {})",
        "decode achieved bandwidth",
        gb(achieved),
        100.0 * fraction,
        100.0 * TARGET_FRACTION,
        if fraction >= TARGET_FRACTION {
            "met"
        } else {
            "NOT met"
        }
    );
    println!(
        "{:<38} {:.2} s, {:.1} GFLOP/s ({:.1} GFLOP, last-row logits)",
        format!("prefill {} tokens", args.prefill_tokens),
        prefill.as_secs_f64(),
        flops / prefill.as_secs_f64() / 1e9,
        flops / 1e9
    );
}

/// The 1-minute load average, where the OS reports it.
fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next().map(str::to_string)
}

fn cpu_features() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        let mut found = Vec::new();
        if std::arch::is_x86_feature_detected!("avx2") {
            found.push("avx2");
        }
        if std::arch::is_x86_feature_detected!("fma") {
            found.push("fma");
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            found.push("avx512f");
        }
        if found.is_empty() {
            return "baseline x86-64".into();
        }
        found.join("+")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::env::consts::ARCH.to_string()
    }
}
