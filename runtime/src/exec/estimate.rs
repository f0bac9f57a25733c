//! What a deploy states before it starts: the model's size, the memory the
//! run will need and how long it will take, from the architecture alone (the
//! config, before any weight is read), so a multi-gigabyte run never starts
//! silently.
//!
//! The memory is the whole deploy's estimate (`model::memory::DeployEstimate`),
//! the one number the preflight checks against the memory available: the
//! reference's bf16 weights, f32 KV cache and prefill activations, the model
//! files the run maps, and the run's own working set; the emulator borrows the
//! weights (`xdna2::interpreter::weights`), so the peak is close to it (6.7 GB
//! peak RSS measured for Llama-3.2-3B's 6.4 GB of weights, README's fault
//! bench). The time is an estimate, not a measurement: a line through wall
//! times measured on an idle 2-core machine of this kind (the tiny fixtures
//! in about 3 s, Qwen2.5-0.5B from its config in 78 s, README), which the
//! machine's load stretches several-fold.

use serde::{Deserialize, Serialize};

use crate::model::arch::Architecture;
use crate::model::memory::{available_memory, human_bytes, DeployEstimate};

/// Wall seconds of a run whatever the model's size (the fixtures' runs).
const FIXED_S: f64 = 3.0;
/// Wall seconds per billion parameters on an idle 2-core machine: Qwen2.5-0.5B
/// (0.494 B) from its config, 78 s measured, less the fixed part.
const S_PER_BILLION: f64 = (78.0 - FIXED_S) / 0.494;

/// The size, memory and time of a run, stated before it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEstimate {
    /// Parameters (a tied LM head counted once).
    pub parameters: u64,
    /// The weights in bf16, as the reference and the NPU path hold them.
    pub weight_bytes: u64,
    /// Memory the run needs: weights, KV cache, activations, the model files
    /// mapped and the run's own working set.
    pub memory_bytes: u64,
    pub kv_cache_bytes: u64,
    pub activation_bytes: u64,
    /// Model files mapped or read whole (a GGUF twice beside a transformers
    /// reference); absent in reports written before it was counted.
    #[serde(default)]
    pub file_bytes: u64,
    /// The run's own working set (plans, kernel checks, reports).
    #[serde(default)]
    pub runtime_bytes: u64,
    /// Memory this process may still take, when it can be read. Printed, never written to
    /// report.json: it is the machine's state, and two runs of one deploy write the same report.
    #[serde(skip)]
    pub available_bytes: Option<u64>,
    /// Estimated wall time on an idle 2-core machine.
    pub wall_s: f64,
    /// How `wall_s` was obtained (it is an estimate, never a measurement).
    pub basis: String,
}

impl RunEstimate {
    /// The estimate of a run of `arch` whose memory the preflight checked as
    /// `memory`.
    pub fn of(arch: &Architecture, memory: &DeployEstimate) -> Self {
        let parameters = arch.parameter_count();
        let reference = &memory.reference;
        RunEstimate {
            parameters,
            weight_bytes: reference.weights,
            memory_bytes: memory.total(),
            kv_cache_bytes: reference.kv_cache,
            activation_bytes: reference.activations,
            file_bytes: memory.files,
            runtime_bytes: memory.runtime,
            available_bytes: available_memory().map(|a| a.bytes),
            wall_s: FIXED_S + S_PER_BILLION * parameters as f64 / 1e9,
            basis: format!(
                "estimate: {FIXED_S} s + {S_PER_BILLION:.0} s per billion parameters, a line \
                 through runs measured on an idle 2-core machine (tiny fixtures ~3 s, \
                 Qwen2.5-0.5B 78 s); load on the machine stretches it"
            ),
        }
    }

    /// One line for a person: size, memory, time.
    pub fn summary(&self) -> String {
        let available = self
            .available_bytes
            .map(|b| format!(" of {} available", human_bytes(b)))
            .unwrap_or_default();
        format!(
            "{} parameters ({} in bf16); needs about {} of memory{available}; about {} \
             (estimated, idle 2-core machine)",
            human_count(self.parameters),
            human_bytes(self.weight_bytes),
            human_bytes(self.memory_bytes),
            human_duration(self.wall_s)
        )
    }
}

fn human_count(n: u64) -> String {
    match n {
        n if n >= 1_000_000_000 => format!("{:.2} B", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.1} M", n as f64 / 1e6),
        n => format!("{:.1} k", n as f64 / 1e3),
    }
}

fn human_duration(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else {
        format!("{:.0} min", s / 60.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::parse_config;

    fn deploy(arch: &Architecture) -> DeployEstimate {
        DeployEstimate::new(crate::model::default_estimate(arch), 0)
    }

    /// The line meets its two measured points, and a 7B model states
    /// gigabytes and minutes.
    #[test]
    fn the_estimate_follows_size() {
        let tiny = parse_config(
            r#"{"model_type":"llama","num_hidden_layers":2,"hidden_size":128,
                "intermediate_size":384,"num_attention_heads":4,"vocab_size":512}"#,
        )
        .unwrap();
        let small = RunEstimate::of(&tiny, &deploy(&tiny));
        assert!((small.wall_s - FIXED_S).abs() < 0.5, "{}", small.wall_s);
        let mistral = parse_config(
            r#"{"model_type":"mistral","num_hidden_layers":32,"hidden_size":4096,
                "intermediate_size":14336,"num_attention_heads":32,"num_key_value_heads":8,
                "vocab_size":32000,"sliding_window":4096}"#,
        )
        .unwrap();
        let big = RunEstimate::of(&mistral, &deploy(&mistral));
        assert_eq!(big.parameters, 7_241_732_096);
        assert!(big.weight_bytes > 14_000_000_000, "{}", big.weight_bytes);
        assert!(big.memory_bytes > big.weight_bytes);
        assert!(big.wall_s > 600.0, "{}", big.wall_s);
        let text = big.summary();
        assert!(
            text.contains("7.24 B parameters") && text.contains("min"),
            "{text}"
        );
    }
}
