//! `skillc bench oracle`: host speed of the CPU f32 reference on a full-size
//! model with seeded random weights (Llama-3.2-1B by default), or on a real
//! model (`--model`: a GGUF file or a Hugging Face directory), beside the
//! machine's streaming-read bandwidth measured in the same run. Decode is
//! memory-bound (every weight is read once per token, as stored), so its
//! roofline is that bandwidth; the target is at least half of it. A model
//! with packed (GGUF) weights is timed twice: as stored, and as the bf16 copy
//! the bf16 NPU path runs on.
//!
//! Run with `cargo run --release -- bench oracle`.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::BenchError;
use rayon::prelude::*;
use skillc_runtime::model::arch::Architecture;
use skillc_runtime::model::config::load_config;
use skillc_runtime::model::memory::human_bytes;
use skillc_runtime::model::oracle::{linear, LogitRows, Reference};
use skillc_runtime::model::tensor::BfTensor;
use skillc_runtime::model::{Model, WeightOrigin};
use skillc_runtime::ops::Metric;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Model config (file or directory; relative to the current directory); random
    /// weights are drawn for it.
    #[arg(long, default_value = "../shared/models/llama-3.2-1b")]
    pub config: PathBuf,
    /// A model with real weights (GGUF file or directory, or a Hugging Face
    /// directory) instead of random weights for --config.
    #[arg(long)]
    pub model: Option<PathBuf>,
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
    /// The figures as JSON on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// Decode at or above this fraction of the measured bandwidth meets the target.
const TARGET_FRACTION: f64 = 0.5;
/// Prompt length before the timed decode steps.
const DECODE_PROMPT: usize = 8;

pub fn measure(args: &Args) -> Result<(), BenchError> {
    let load_at_start = load_average();
    let mut progress = crate::cli::progress::Display::new(false);
    progress.line(if args.model.is_some() {
        "mapping the weights"
    } else {
        "drawing random weights"
    });
    let generation = Instant::now();
    let model = match &args.model {
        Some(path) => Model::open(path, None).map_err(|source| BenchError::Model {
            path: path.clone(),
            source: Box::new(source),
        })?,
        None => {
            let arch =
                load_config(&args.config).map_err(|e| BenchError::config(&args.config, e))?;
            Model::random(arch, args.seed)?
        }
    };
    let generation = generation.elapsed();
    let packed = model
        .weights
        .tensors()
        .iter()
        .any(|t| t.packed_rows().is_some());
    let bf16 = Model {
        weights: model.weights.rounded_to_bf16(),
        ..model.clone()
    };
    progress.line("measuring the stream read bandwidth");
    let probe = StreamProbe::new(args.stream_mib << 20);
    let warm_up: Vec<f64> = (0..5).map(|_| probe.pass()).collect();
    progress.line(&format!("timing {} decode steps", args.decode_tokens));
    let decode = time_decode(&model, args.decode_tokens, &probe)?;
    let decode_bf16 = if packed {
        progress.line("timing the decode steps again on a bf16 copy of the weights");
        Some(time_decode(&bf16, args.decode_tokens, &probe)?)
    } else {
        None
    };
    progress.line(&format!("timing a {}-token prefill", args.prefill_tokens));
    let prefill = time_prefill(&model, args.prefill_tokens)?;
    progress.line("timing the GEMM kernels");
    let kernels = time_kernels(&bf16, args.prefill_tokens);
    drop(progress);
    let timings = Timings {
        generation,
        warm_up,
        decode,
        decode_bf16,
        prefill,
        load_at_start,
    };
    let mut out = super::Output::new("oracle", args.json);
    print_table(&mut out, args, &model, &timings);
    print_kernels(&mut out, &model, args.prefill_tokens, &kernels);
    out.finish();
    Ok(())
}

/// A buffer much larger than the caches, allocated like the random weights
/// (a generated bf16 tensor: huge pages requested), read as a parallel stream
/// of u16 sums with sixteen lanes: the machine's achievable read bandwidth
/// with the decode GEMV's access pattern and almost none of its arithmetic.
struct StreamProbe {
    buffer: BfTensor,
}

impl StreamProbe {
    fn new(bytes: usize) -> Self {
        let buffer = BfTensor::generate("stream", vec![bytes / 2], 1 << 16, |_, c| c.fill(1));
        Self { buffer }
    }

    /// One timed pass; bytes per second.
    fn pass(&self) -> f64 {
        const LANES: usize = 16;
        let start = Instant::now();
        let sum: u32 = self
            .buffer
            .bits()
            .par_chunks(1 << 16)
            .map(|chunk| {
                let mut acc = [0u32; LANES];
                for lanes in chunk.chunks_exact(LANES) {
                    for (a, &v) in acc.iter_mut().zip(lanes) {
                        *a = a.wrapping_add(v as u32);
                    }
                }
                acc.iter().fold(0u32, |s, &a| s.wrapping_add(a))
            })
            .reduce(|| 0, u32::wrapping_add);
        black_box(sum);
        (2 * self.buffer.len()) as f64 / start.elapsed().as_secs_f64()
    }
}

/// Decode steps, each right after a stream pass, so a step and its roofline
/// see the same competition from other processes.
struct DecodeTiming {
    /// Seconds per step, in step order.
    steps: Vec<f64>,
    /// Stream bandwidth (bytes/s) measured just before each step.
    stream: Vec<f64>,
    /// Bytes read per step: weights plus the KV cache at the mean position.
    bytes_per_token: f64,
}

impl DecodeTiming {
    fn median_step(&self) -> f64 {
        median(&self.steps)
    }

    fn best_step(&self) -> f64 {
        self.steps.iter().copied().fold(f64::MAX, f64::min)
    }

    /// Median over steps of (step bandwidth / stream bandwidth just before).
    fn median_paired_fraction(&self) -> f64 {
        let fractions: Vec<f64> = self
            .steps
            .iter()
            .zip(&self.stream)
            .map(|(step, stream)| self.bytes_per_token / step / stream)
            .collect();
        median(&fractions)
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

fn time_decode(
    model: &Model,
    steps: usize,
    probe: &StreamProbe,
) -> Result<DecodeTiming, BenchError> {
    let steps = steps.max(1);
    let mut reference = Reference::new(model)?;
    let prompt: Vec<u32> = (0..DECODE_PROMPT as u32).map(|i| 1 + i * 7).collect();
    let mut logits = reference.prefill(&prompt, LogitRows::Last)?.logits.data;
    let mut times = Vec::with_capacity(steps);
    let mut stream = Vec::with_capacity(steps);
    for _ in 0..steps {
        let next = skillc_runtime::model::oracle::blocks::argmax(&logits) as u32;
        stream.push(probe.pass());
        let start = Instant::now();
        logits = reference.decode_step(next)?;
        times.push(start.elapsed().as_secs_f64());
    }
    let arch = &model.arch;
    let mean_position = DECODE_PROMPT as f64 + steps as f64 / 2.0;
    let kv_bytes = 4.0 * 2.0 * (arch.num_layers * arch.kv_dim()) as f64 * mean_position;
    Ok(DecodeTiming {
        steps: times,
        stream,
        bytes_per_token: model.weights.stored_bytes() as f64 + kv_bytes,
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

fn time_prefill(model: &Model, t: usize) -> Result<Duration, BenchError> {
    let prompt: Vec<u32> = (0..t as u32)
        .map(|i| (i * 131 + 5) % model.arch.vocab_size as u32)
        .collect();
    let mut reference = Reference::new(model)?;
    let start = Instant::now();
    reference.prefill(&prompt, LogitRows::Last)?;
    Ok(start.elapsed())
}

/// One prefill kernel timed on the layer-0 gate projection.
struct KernelTiming {
    name: &'static str,
    /// Best wall-clock seconds of one call.
    best: f64,
    /// Process CPU seconds per call (all threads, spinning included), where
    /// the OS reports it: the cost independent of competing processes.
    cpu_per_call: Option<f64>,
}

type Kernel = fn(&[f32], usize, &BfTensor, &mut [f32]);

/// The blocked bf16 GEMM the reference uses against `matrixmultiply`'s sgemm
/// on f32 panels, at `t` rows, calls alternating so both see the same load.
fn time_kernels(model: &Model, t: usize) -> Vec<KernelTiming> {
    const CALLS: usize = 6;
    let w = &model.weights.layers[0].gate_proj;
    let x: Vec<f32> = (0..t * w.cols())
        .map(|i| ((i % 97) as f32 - 48.0) / 97.0)
        .collect();
    let mut y = vec![0.0f32; t * w.rows()];
    let kernels: [(&'static str, Kernel); 2] = [
        ("blocked bf16 GEMM (used)", linear::matmul),
        ("sgemm on f32 panels", linear::matmul_sgemm),
    ];
    let mut best = [f64::MAX; 2];
    let mut cpu = [Some(0.0f64); 2];
    for _ in 0..CALLS {
        for (i, (_, kernel)) in kernels.iter().enumerate() {
            let cpu_start = process_cpu_seconds();
            let start = Instant::now();
            kernel(&x, t, w, &mut y);
            best[i] = best[i].min(start.elapsed().as_secs_f64());
            cpu[i] = match (cpu[i], cpu_start, process_cpu_seconds()) {
                (Some(total), Some(a), Some(b)) => Some(total + (b - a)),
                _ => None,
            };
        }
    }
    kernels
        .iter()
        .zip(best.iter().zip(cpu))
        .map(|((name, _), (&best, cpu))| KernelTiming {
            name,
            best,
            cpu_per_call: cpu.map(|c| c / CALLS as f64),
        })
        .collect()
}

/// User + system CPU seconds of this process (Linux `/proc/self/stat`,
/// clock ticks of 1/100 s).
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

fn print_kernels(out: &mut super::Output, model: &Model, t: usize, kernels: &[KernelTiming]) {
    let w = &model.weights.layers[0].gate_proj;
    let flops = 2.0 * (t * w.rows() * w.cols()) as f64;
    for k in kernels {
        let per_cpu = k
            .cpu_per_call
            .filter(|&c| c > 0.0)
            .map_or("n/a".to_string(), |c| format!("{:.1}", flops / c / 1e9));
        out.line(&format!(
            "{:<38} {:.1} GFLOP/s best call, {per_cpu} GFLOP per CPU-second ({} x {:?})",
            format!("  kernel: {}", k.name),
            flops / k.best / 1e9,
            t,
            w.shape(),
        ));
        out.row(serde_json::json!({
            "kernel": k.name,
            "best_call_gflops": flops / k.best / 1e9,
            "gflop_per_cpu_s": k.cpu_per_call.filter(|&c| c > 0.0).map(|c| flops / c / 1e9),
        }));
    }
}

/// Everything one run measured.
struct Timings {
    generation: Duration,
    /// Stream passes before decoding (bytes/s).
    warm_up: Vec<f64>,
    decode: DecodeTiming,
    /// Decode on the bf16 rounding of packed weights.
    decode_bf16: Option<DecodeTiming>,
    prefill: Duration,
    load_at_start: Option<String>,
}

fn print_table(out: &mut super::Output, args: &Args, model: &Model, timings: &Timings) {
    let arch = &model.arch;
    let decode = &timings.decode;
    let gb = |bytes: f64| bytes / 1e9;
    let all_stream: Vec<f64> = timings
        .warm_up
        .iter()
        .chain(&decode.stream)
        .copied()
        .collect();
    let best_stream = all_stream.iter().copied().fold(0.0, f64::max);
    let median_step = decode.median_step();
    let flops = prefill_flops(arch, args.prefill_tokens);
    let prefill = timings.prefill.as_secs_f64();
    let source = weight_source(args, model);
    out.set("model", arch.class_name.clone());
    out.set("weights", source.clone());
    out.set("parameters", arch.parameter_count());
    out.set("threads", rayon::current_num_threads());
    out.set("load_at_start", timings.load_at_start.clone());
    out.set("generation_s", timings.generation.as_secs_f64());
    out.set("weights_stored_bytes", model.weights.stored_bytes());
    out.set("stream_bytes_per_s_median", median(&all_stream));
    out.set("decode_step_s_median", median_step);
    out.set("decode_bytes_per_token", decode.bytes_per_token);
    out.set("decode_fraction_of_stream", decode.median_paired_fraction());
    if let Some(bf16) = &timings.decode_bf16 {
        out.set("decode_bf16_step_s_median", bf16.median_step());
        out.set("decode_bf16_bytes_per_token", bf16.bytes_per_token);
        out.set(
            "decode_bf16_fraction_of_stream",
            bf16.median_paired_fraction(),
        );
    }
    out.set("prefill_tokens", args.prefill_tokens);
    out.set(Metric::PrefillS.name(), prefill);
    out.set("prefill_gflops", flops / prefill / 1e9);
    out.line(&format!(
        "oracle benchmark: {} ({source}, {} params), {} threads, cpu: {}",
        arch.class_name,
        arch.parameter_count(),
        rayon::current_num_threads(),
        cpu_features()
    ));
    if let Some(load) = &timings.load_at_start {
        out.line(&format!(
            "load average at start {load} (other processes on this machine compete for cores and memory)"
        ));
    }
    out.line(&format!("{:<38} value", "metric"));
    out.line(&format!(
        "{:<38} {:.2} s ({} as stored)",
        "weights: generated or mapped",
        timings.generation.as_secs_f64(),
        human_bytes(model.weights.stored_bytes())
    ));
    out.line(&format!(
        "{:<38} {:.1} GB/s median, {:.1} GB/s best ({} passes over {} MiB)",
        "stream read bandwidth (measured)",
        gb(median(&all_stream)),
        gb(best_stream),
        all_stream.len(),
        args.stream_mib
    ));
    let stored = if timings.decode_bf16.is_some() {
        "decode (weights as stored)"
    } else {
        "decode"
    };
    print_decode(out, stored, decode, best_stream);
    if let Some(bf16) = &timings.decode_bf16 {
        print_decode(out, "decode (bf16 copy of the weights)", bf16, best_stream);
        out.line(&format!(
            "{:<38} {:.2}x (bf16 copy / as stored, median step)",
            "speed-up of the stored format",
            bf16.median_step() / median_step
        ));
    }
    out.line(&format!(
        "{:<38} {:.2} s, {:.1} GFLOP/s ({:.1} GFLOP, last-row logits)",
        format!("prefill {} tokens", args.prefill_tokens),
        prefill,
        flops / prefill / 1e9,
        flops / 1e9
    ));
}

/// Where the benchmarked weights came from, in one phrase.
fn weight_source(args: &Args, model: &Model) -> String {
    match &model.origin {
        WeightOrigin::Random { seed, .. } => {
            format!(
                "{}, random bf16 weights, seed {seed}",
                args.config.display()
            )
        }
        WeightOrigin::Checkpoint { files } => format!("checkpoint {}", files.join(", ")),
        WeightOrigin::Gguf { file, formats } => {
            let counts: Vec<String> = formats.iter().map(|(f, n)| format!("{n} {f}")).collect();
            format!("{file}: {}", counts.join(", "))
        }
    }
}

fn print_decode(out: &super::Output, label: &str, decode: &DecodeTiming, best_stream: f64) {
    let gb = |bytes: f64| bytes / 1e9;
    let median_step = decode.median_step();
    let paired = decode.median_paired_fraction();
    out.line(&format!(
        "{label:<38} {:.2} tok/s (median of {} steps, {:.1} ms/token; best step {:.1} ms)",
        1.0 / median_step,
        decode.steps.len(),
        median_step * 1e3,
        decode.best_step() * 1e3
    ));
    out.line(&format!(
        "{:<38} {:.3} GB (weights as stored + KV cache)",
        "  bytes read per decode step",
        gb(decode.bytes_per_token)
    ));
    out.line(&format!(
        "{:<38} {:.1} GB/s median, {:.1} GB/s best step",
        "  decode achieved bandwidth",
        gb(decode.bytes_per_token / median_step),
        gb(decode.bytes_per_token / decode.best_step())
    ));
    out.line(&format!(
        "{:<38} {:.0} % (median over steps of step / stream pass just before; target >= {:.0} %: {})",
        "  decode / measured bandwidth",
        100.0 * paired,
        100.0 * TARGET_FRACTION,
        if paired >= TARGET_FRACTION { "met" } else { "NOT met" }
    ));
    out.line(&format!(
        "{:<38} {:.0} % (best step / best stream pass)",
        "",
        100.0 * decode.bytes_per_token / decode.best_step() / best_stream
    ));
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
