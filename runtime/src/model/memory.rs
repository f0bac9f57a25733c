//! Memory the reference needs for a model, estimated before anything is
//! allocated, and the machine's available memory (`MemAvailable` in
//! `/proc/meminfo`), so a model that would not fit is refused up front with the
//! numbers rather than killed by the OOM killer halfway through.

use serde::Serialize;

use super::arch::Architecture;

/// Positions the estimate provisions for when no context length is given.
pub const DEFAULT_CONTEXT: usize = 2048;
/// Prompt rows the estimate provisions activations for.
pub const DEFAULT_PREFILL_ROWS: usize = 512;

/// Bytes by purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemoryEstimate {
    /// bf16 weights held in memory (generated or converted; mapped bf16 files
    /// are counted too, since the page cache must hold them to run at speed).
    pub weights: u64,
    /// f32 keys and values for `context` positions in every layer (at most
    /// the window on sliding-window layers).
    pub kv_cache: u64,
    /// Prefill activations for `prefill_rows` rows (with the GEMM's transposed
    /// output), per-layer outputs kept for the gates and the logits rows.
    pub activations: u64,
    pub context: usize,
    pub prefill_rows: usize,
}

impl MemoryEstimate {
    pub fn for_reference(arch: &Architecture, context: usize, prefill_rows: usize) -> Self {
        let f32_bytes = 4u64;
        let (l, h, f, v) = (
            arch.num_layers as u64,
            arch.hidden_size as u64,
            arch.intermediate_size as u64,
            arch.vocab_size as u64,
        );
        let (q, kv) = (arch.q_dim() as u64, arch.kv_dim() as u64);
        let rows = prefill_rows as u64;
        let per_row = 3 * h + q + 2 * kv + q + 4 * f;
        let activations = f32_bytes * (rows * per_row + l * rows * h + rows * v);
        // Sliding-window layers hold at most their window (see the oracle's cache).
        let held: u64 = (0..arch.num_layers)
            .map(|layer| match arch.window_of(layer) {
                Some(sw) => (sw.window as usize).min(context) as u64,
                None => context as u64,
            })
            .sum();
        Self {
            weights: 2 * arch.parameter_count(),
            kv_cache: f32_bytes * 2 * kv * held,
            activations,
            context,
            prefill_rows,
        }
    }

    pub fn total(&self) -> u64 {
        self.weights + self.kv_cache + self.activations
    }
}

/// `MemAvailable` from `/proc/meminfo`, in bytes; `None` where it cannot be read
/// (not Linux), in which case nothing is refused.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&text)
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let value: u64 = words.next()?.parse().ok()?;
    let unit = match words.next() {
        Some("kB") => 1024,
        Some(_) => return None,
        None => 1,
    };
    Some(value * unit)
}

/// Renders bytes as GiB with two decimals (MiB below one GiB).
pub fn human_bytes(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    let mib = bytes as f64 / MIB;
    if mib >= 1024.0 {
        format!("{:.2} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mem_available_in_kib() {
        let text = "MemTotal:       24576000 kB\nMemFree: 1 kB\nMemAvailable:   1000 kB\n";
        assert_eq!(parse_mem_available(text), Some(1_024_000));
        assert_eq!(parse_mem_available("MemTotal: 5 kB\n"), None);
    }
}
