//! Memory the reference needs for a model, estimated before anything is
//! allocated, and the memory this process may still take: the tightest of the
//! machine's (`MemAvailable`), its cgroup's and its address-space limit's
//! (`ulimit -v`), so a model that would not fit is refused up front with the
//! numbers and the limit, rather than killed or aborted halfway through.

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

/// What a whole deploy takes beyond the process itself, checked once before
/// phase 0. The reference's estimate alone left two gaps, found by running
/// deploys under `ulimit -v` and reading their peak address space (VmPeak):
/// the model files mapped (a GGUF twice when phase 0 compares its exact
/// weights with transformers) and the run's own working set (the plan, the
/// kernel checks at validation scale, the reports): at most 17 MiB above the
/// reference on the seven transformers fixtures, against 1 to 3 MiB their
/// reference needs. (The third gap, malloc's per-thread arenas, is closed by
/// [`one_arena_under_address_limit`], not estimated.) Phase 1's kernel checks
/// run at validation scale, after the reference's prefill arrays are released;
/// they are provisioned by the reference's activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DeployEstimate {
    pub reference: MemoryEstimate,
    /// Model files mapped or read whole (weights, a transformers reference).
    pub files: u64,
    /// The run's working set besides the model: [`RUNTIME_WORKING_SET`].
    pub runtime: u64,
}

/// Provisioned for a deploy's own working set (measured: at most 17 MiB).
pub const RUNTIME_WORKING_SET: u64 = 32 << 20;

impl DeployEstimate {
    pub fn new(reference: MemoryEstimate, files: u64) -> Self {
        Self {
            reference,
            files,
            runtime: RUNTIME_WORKING_SET,
        }
    }

    pub fn total(&self) -> u64 {
        self.reference.total() + self.files + self.runtime
    }
}

thread_local! {
    /// Set while a run whose memory was checked as a whole is under way.
    static CHECKED_AS_A_WHOLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `work` after its memory was checked as a whole (a deploy's
/// [`DeployEstimate`]): the model loaders inside skip their own check, which
/// would count again what the run already holds (phase 0's second, exact copy
/// of a GGUF model was refused at 900 MB of address space by a deploy that
/// peaks at 575 MB).
pub fn checked_as_a_whole<T>(work: impl FnOnce() -> T) -> T {
    let before = CHECKED_AS_A_WHOLE.with(|c| c.replace(true));
    let result = work();
    CHECKED_AS_A_WHOLE.with(|c| c.set(before));
    result
}

/// Whether the current run's memory was checked as a whole.
pub fn is_checked_as_a_whole() -> bool {
    CHECKED_AS_A_WHOLE.with(std::cell::Cell::get)
}

/// What limits the memory a run may still take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limit {
    /// `MemAvailable` in `/proc/meminfo`: the machine's free and reclaimable memory.
    Machine,
    /// The memory limit of the process's control group (a container or a
    /// systemd slice), less what the group already uses.
    Cgroup,
    /// The process's address-space limit (`ulimit -v`, RLIMIT_AS), less the
    /// address space already mapped; mapped weight files count against it.
    AddressSpace,
}

impl Limit {
    pub fn describe(self) -> &'static str {
        match self {
            Limit::Machine => "available on this machine (MemAvailable)",
            Limit::Cgroup => "left under this process's cgroup memory limit",
            Limit::AddressSpace => "left under this process's address-space limit (ulimit -v)",
        }
    }
}

/// Memory a run may still take, and the limit that sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Available {
    pub bytes: u64,
    pub limit: Limit,
}

/// The tightest of the machine's available memory, the cgroup's headroom and the
/// address-space headroom; `None` where none can be read (not Linux), in which
/// case nothing is refused.
pub fn available_memory() -> Option<Available> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    tightest(&read)
}

fn tightest(read: &dyn Fn(&str) -> Option<String>) -> Option<Available> {
    let candidates = [
        (
            Limit::Machine,
            read("/proc/meminfo").and_then(|t| parse_mem_available(&t)),
        ),
        (Limit::Cgroup, cgroup_headroom(read)),
        (Limit::AddressSpace, address_space_headroom(read)),
    ];
    candidates
        .into_iter()
        .filter_map(|(limit, bytes)| {
            Some(Available {
                bytes: bytes?,
                limit,
            })
        })
        .min_by_key(|a| a.bytes)
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    kib_field(meminfo, "MemAvailable:")
}

/// A `Name:   123 kB` line of a `/proc` file, in bytes.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let mut words = line.split_whitespace().skip(1);
    let value: u64 = words.next()?.parse().ok()?;
    let unit = match words.next() {
        Some("kB") => 1024,
        Some(_) => return None,
        None => 1,
    };
    Some(value * unit)
}

/// Limits at or above this are "no limit" (cgroup v1 writes 2^63 rounded to a page).
const UNLIMITED: u64 = 1 << 62;

/// The smallest `limit − usage` over the process's memory cgroup and its
/// ancestors, cgroup v2 (`memory.max`, `memory.current`) or v1
/// (`memory.limit_in_bytes`, `memory.usage_in_bytes`).
fn cgroup_headroom(read: &dyn Fn(&str) -> Option<String>) -> Option<u64> {
    let membership = read("/proc/self/cgroup")?;
    let mut best: Option<u64> = None;
    for line in membership.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (root, limit_file, usage_file) = if controllers.is_empty() {
            ("/sys/fs/cgroup", "memory.max", "memory.current")
        } else if controllers.split(',').any(|c| c == "memory") {
            (
                "/sys/fs/cgroup/memory",
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        } else {
            continue;
        };
        let mut dir = path.trim_end_matches('/').to_string();
        loop {
            let at = |file: &str| read(&format!("{root}{dir}/{file}"));
            let limit = at(limit_file).and_then(|t| t.trim().parse::<u64>().ok());
            let usage = at(usage_file).and_then(|t| t.trim().parse::<u64>().ok());
            if let (Some(limit), Some(usage)) = (limit, usage) {
                if limit < UNLIMITED {
                    let headroom = limit.saturating_sub(usage);
                    best = Some(best.map_or(headroom, |b| b.min(headroom)));
                }
            }
            match dir.rfind('/') {
                Some(cut) => dir.truncate(cut),
                None => break,
            }
        }
    }
    best
}

/// The soft RLIMIT_AS (`Max address space` in `/proc/self/limits`) less the
/// address space already mapped (`VmSize` in `/proc/self/status`).
fn address_space_headroom(read: &dyn Fn(&str) -> Option<String>) -> Option<u64> {
    let limits = read("/proc/self/limits")?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    let soft: u64 = line
        .trim_start_matches("Max address space")
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let mapped = read("/proc/self/status").and_then(|t| kib_field(&t, "VmSize:"))?;
    Some(soft.saturating_sub(mapped))
}

/// Under an address-space limit (`ulimit -v`), makes every thread allocate from
/// one malloc arena. glibc gives a thread that allocates while another does an
/// arena of its own and reserves 64 MiB of address space for it (twice that
/// while aligning it): reservations that hold no data, that no estimate can
/// predict (whether a thread gets one depends on timing), and that count
/// against the limit. A run that fitted the pre-check could then abort when a
/// late arena took the headroom (deploy of qwen25-tiny: 231 MiB of address
/// space at its peak, 35 MiB with one arena). Without a limit nothing changes.
/// Returns whether the arenas were limited; call it before any thread starts.
pub fn one_arena_under_address_limit() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given; mallopt takes plain ints.
        let limited = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0
            && limit.rlim_cur != libc::RLIM_INFINITY;
        limited && unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) } == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
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

    fn fake(files: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let files: std::collections::HashMap<String, String> = files
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
        move |path| files.get(path).cloned()
    }

    const MEMINFO: &str = "MemTotal: 24576000 kB\nMemAvailable: 20000000 kB\n";

    #[test]
    fn the_tightest_limit_wins() {
        let machine = fake(&[("/proc/meminfo", MEMINFO)]);
        assert_eq!(
            tightest(&machine),
            Some(Available {
                bytes: 20_000_000 * 1024,
                limit: Limit::Machine
            })
        );
        let ulimit = fake(&[
            ("/proc/meminfo", MEMINFO),
            (
                "/proc/self/limits",
                "Max cpu time  unlimited  unlimited  seconds\nMax address space         8192000000           unlimited            bytes\n",
            ),
            ("/proc/self/status", "Name: skillc\nVmSize:   192000 kB\n"),
        ]);
        assert_eq!(
            tightest(&ulimit),
            Some(Available {
                bytes: 8_192_000_000 - 192_000 * 1024,
                limit: Limit::AddressSpace
            })
        );
    }

    #[test]
    fn cgroup_limits_are_read_up_the_hierarchy() {
        let v2 = fake(&[
            ("/proc/self/cgroup", "0::/user.slice/job\n"),
            ("/sys/fs/cgroup/user.slice/job/memory.max", "max\n"),
            ("/sys/fs/cgroup/user.slice/job/memory.current", "100\n"),
            ("/sys/fs/cgroup/user.slice/memory.max", "4294967296\n"),
            ("/sys/fs/cgroup/user.slice/memory.current", "1073741824\n"),
        ]);
        assert_eq!(cgroup_headroom(&v2), Some(3 << 30));
        let v1 = fake(&[
            ("/proc/self/cgroup", "5:cpu:/\n4:memory:/docker/abc\n"),
            (
                "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
                "2147483648\n",
            ),
            (
                "/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes",
                "1073741824\n",
            ),
            (
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            ("/sys/fs/cgroup/memory/memory.usage_in_bytes", "5\n"),
        ]);
        assert_eq!(cgroup_headroom(&v1), Some(1 << 30));
        let unlimited = fake(&[("/proc/self/cgroup", "0::/\n")]);
        assert_eq!(cgroup_headroom(&unlimited), None);
    }

    #[test]
    fn reads_mem_available_in_kib() {
        let text = "MemTotal:       24576000 kB\nMemFree: 1 kB\nMemAvailable:   1000 kB\n";
        assert_eq!(parse_mem_available(text), Some(1_024_000));
        assert_eq!(parse_mem_available("MemTotal: 5 kB\n"), None);
    }
}
