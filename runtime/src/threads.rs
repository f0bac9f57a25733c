//! How many threads the runtime's parallel work runs on, and the one pool it
//! runs in.
//!
//! On a machine that is doing other work, a fork-join waits for its slowest
//! worker, and a worker that the scheduler has taken off its core stalls every
//! other one at the next join. So parallel work here is shaped to degrade
//! gracefully: one rayon pool (no library brings a pool of its own), the thread
//! that starts the work is one of the pool's workers (it computes its share and
//! takes back what nobody stole, instead of sleeping until woken), each task is
//! given enough work ([`min_len`]) that small products run on the calling thread
//! without a fork at all, and the pool is as large as the cores this process may
//! use: its CPU affinity mask and its cgroup's CPU quota (`cpu.max`, or
//! `cpu.cfs_quota_us` under cgroup v1), which is what
//! [`std::thread::available_parallelism`] reads on Linux. `--threads N` or
//! `RAYON_NUM_THREADS` overrides the count.
//!
//! Every parallel computation of the runtime gives each item its own result and
//! collects them in item order, so results are bit-identical whatever the count
//! (`runtime/tests/threads.rs` deploys a fixture at 1, 2 and 4 threads).

use std::fmt;
use std::num::NonZeroUsize;

/// The environment variable that sets the thread count when `--threads` does
/// not: rayon's own, so a user who knows rayon finds it where they expect.
pub const ENV_VAR: &str = "RAYON_NUM_THREADS";

/// The least work one parallel task is given, in inner-loop operations (a
/// multiply-add, one element of an elementwise kernel): about 50 µs on one
/// core. Below twice this a computation runs on the calling thread; above it,
/// each task is at least this big, so a join waits for a task of that size
/// at most, not for a worker the scheduler has parked.
pub const MIN_TASK_WORK: usize = 1 << 18;

/// Items per parallel task for items of `work_per_item` operations each (for
/// rayon's `with_min_len`): at least one, at least [`MIN_TASK_WORK`] in all.
pub fn min_len(work_per_item: usize) -> usize {
    MIN_TASK_WORK.div_ceil(work_per_item.max(1)).max(1)
}

/// Where the thread count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `--threads N`.
    Flag,
    /// [`ENV_VAR`].
    Environment,
    /// The cores this process may use (affinity mask and cgroup quota).
    Cores,
}

/// The thread count chosen for this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threads {
    pub count: NonZeroUsize,
    pub source: Source,
}

impl fmt::Display for Threads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.source {
            Source::Flag => "--threads",
            Source::Environment => ENV_VAR,
            Source::Cores => "the cores this process may use",
        };
        let s = if self.count.get() == 1 { "" } else { "s" };
        write!(f, "{} thread{s} ({why})", self.count)
    }
}

/// Why the thread count could not be chosen or the pool not started.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ThreadsError {
    #[error("{ENV_VAR}={0:?} is not a thread count (a whole number; 0 or unset: one per core this process may use)")]
    Environment(String),
    #[error(
        "the thread pool was already started with {running} threads; cannot start it with {wanted}"
    )]
    AlreadyStarted { running: usize, wanted: usize },
}

/// The thread count: `flag` when given, else [`ENV_VAR`] when set to a
/// positive number, else the cores this process may use. `0` (flag or
/// variable) means the last of these, as it does to rayon.
pub fn choose(flag: Option<usize>) -> Result<Threads, ThreadsError> {
    let env = std::env::var(ENV_VAR).ok();
    choose_from(flag, env.as_deref(), available_cores)
}

fn choose_from(
    flag: Option<usize>,
    env: Option<&str>,
    cores: impl Fn() -> NonZeroUsize,
) -> Result<Threads, ThreadsError> {
    if let Some(count) = flag.and_then(NonZeroUsize::new) {
        return Ok(Threads {
            count,
            source: Source::Flag,
        });
    }
    let from_env = match env.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| ThreadsError::Environment(v.to_string()))?,
        None => 0,
    };
    Ok(match NonZeroUsize::new(from_env) {
        Some(count) => Threads {
            count,
            source: Source::Environment,
        },
        None => Threads {
            count: cores(),
            source: Source::Cores,
        },
    })
}

/// The cores this process may run on at once: its affinity mask, capped by
/// its cgroup's CPU quota (rounded up), as the standard library reads them.
pub fn available_cores() -> NonZeroUsize {
    std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN)
}

/// Starts the process's one pool with `threads`, the calling thread being one
/// of its workers; call it once, before any parallel work. Starting it again
/// with the same count is a no-op (a test binary's tests share one pool).
pub fn start(threads: Threads) -> Result<(), ThreadsError> {
    let wanted = threads.count.get();
    let built = rayon::ThreadPoolBuilder::new()
        .num_threads(wanted)
        .use_current_thread()
        .thread_name(|i| format!("skillc-worker-{i}"))
        .build_global();
    match built {
        Ok(()) => Ok(()),
        Err(_) if rayon::current_num_threads() == wanted => Ok(()),
        Err(_) => Err(ThreadsError::AlreadyStarted {
            running: rayon::current_num_threads(),
            wanted,
        }),
    }
}

/// The pool's thread count as seen from here (what a child process inherits).
pub fn current() -> usize {
    rayon::current_num_threads()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> NonZeroUsize {
        NonZeroUsize::new(2).unwrap()
    }

    #[test]
    fn the_flag_wins_then_the_variable_then_the_cores() {
        let t = choose_from(Some(3), Some("5"), two).unwrap();
        assert_eq!((t.count.get(), t.source), (3, Source::Flag));
        let t = choose_from(None, Some("5"), two).unwrap();
        assert_eq!((t.count.get(), t.source), (5, Source::Environment));
        let t = choose_from(None, None, two).unwrap();
        assert_eq!((t.count.get(), t.source), (2, Source::Cores));
    }

    #[test]
    fn zero_and_empty_mean_the_cores() {
        for (flag, env) in [(Some(0), None), (None, Some("0")), (None, Some(" "))] {
            let t = choose_from(flag, env, two).unwrap();
            assert_eq!((t.count.get(), t.source), (2, Source::Cores));
        }
        let t = choose_from(Some(0), Some("4"), two).unwrap();
        assert_eq!((t.count.get(), t.source), (4, Source::Environment));
    }

    #[test]
    fn a_variable_that_is_not_a_count_is_refused() {
        assert_eq!(
            choose_from(None, Some("two"), two),
            Err(ThreadsError::Environment("two".into()))
        );
        assert_eq!(
            choose_from(None, Some("-1"), two),
            Err(ThreadsError::Environment("-1".into()))
        );
    }

    #[test]
    fn tasks_get_at_least_the_minimum_work() {
        assert_eq!(min_len(1), MIN_TASK_WORK);
        assert_eq!(min_len(MIN_TASK_WORK), 1);
        assert_eq!(min_len(MIN_TASK_WORK * 8), 1);
        assert_eq!(min_len(0), MIN_TASK_WORK);
        assert!(min_len(1000) * 1000 >= MIN_TASK_WORK);
    }

    #[test]
    fn it_reads_as_count_and_source() {
        let t = Threads {
            count: NonZeroUsize::MIN,
            source: Source::Environment,
        };
        assert_eq!(t.to_string(), "1 thread (RAYON_NUM_THREADS)");
    }
}
