//! Synthetic trajectories for benchmarks: any number of entries, deterministic for a
//! seed, shaped like real ones. Sessions walk the phases 0 to 7 in order; each step
//! is an action of the phase's vocabulary and the observation that measures it; about
//! one step in ten fails its gate and is followed by a lesson (symptom, cause,
//! executable fix, evidence) and a corrected action that supersedes the failed one and
//! `fixes … by` the lesson; every lesson joins one declared skill; notes, decisions
//! that revert, and explicit `after` edges are sprinkled in. The output checks clean (no errors, no warnings), which a test
//! holds it to.

use std::fmt::Write;

use skillc_runtime::ops::OpKind;

/// Small deterministic generator (SplitMix64): benchmarks must not depend on a crate's
/// random stream changing between versions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// One trajectory of exactly `entries` entries in a single file's text.
pub fn generate(entries: usize, seed: u64) -> String {
    generate_files(entries, seed, 1)
        .into_iter()
        .map(|(_, text)| text)
        .collect()
}

/// One trajectory of exactly `entries` entries split into `files` files (at session
/// boundaries, about evenly), as `(file name, text)` in order. File names sort in
/// trajectory order.
pub fn generate_files(entries: usize, seed: u64, files: usize) -> Vec<(String, String)> {
    generate_failing(entries, seed, files, DEFAULT_FAILING_PERCENT)
}

/// About one step in ten fails and teaches a lesson.
pub const DEFAULT_FAILING_PERCENT: u64 = 10;

/// Like [`generate_files`], with `failing` percent of the steps failing their
/// gate and followed by a lesson (100: a lesson-heavy trajectory, about one
/// lesson per five entries).
pub fn generate_failing(
    entries: usize,
    seed: u64,
    files: usize,
    failing: u64,
) -> Vec<(String, String)> {
    let files = files.max(1);
    let mut writer = Writer {
        failing,
        rng: Rng(seed),
        out: String::with_capacity(entries * 110),
        next_id: 1,
        written: 0,
        session: 0,
        declared: false,
    };
    writer.out.push_str(
        "trajectory \"synthetic\"\n  model \"meta-llama/Llama-3.2-1B\"\n  target npu2\n  baseline \"none\"\n  weights bf16\n",
    );
    let mut result = Vec::with_capacity(files);
    let per_file = entries.div_ceil(files);
    while writer.written < entries {
        writer.session(entries);
        let boundary = per_file * (result.len() + 1);
        if writer.written >= boundary && result.len() + 1 < files {
            let text = std::mem::take(&mut writer.out);
            result.push((file_name(result.len()), text));
        }
    }
    result.push((file_name(result.len()), writer.out));
    result
}

fn file_name(index: usize) -> String {
    format!("{index:04}.traj")
}

struct Writer {
    /// Percent of steps that fail and teach a lesson.
    failing: u64,
    rng: Rng,
    out: String,
    next_id: u64,
    written: usize,
    session: u64,
    /// Whether the skill the lessons join has been declared (just before the first).
    declared: bool,
}

/// One step's action: operation and parameters, plus what a failure of it looks like
/// and how the lesson fixes it.
struct Step {
    op: OpKind,
    params: String,
}

impl Writer {
    fn id(&mut self, prefix: char) -> String {
        let id = format!("{prefix}{}", self.next_id);
        self.next_id += 1;
        id
    }

    fn room(&self, entries: usize) -> usize {
        entries - self.written
    }

    fn session(&mut self, entries: usize) {
        let phase = self.session % 8;
        let minutes = self.session * 47;
        let (day, hour, minute) = (1 + (minutes / 1440) % 28, (minutes / 60) % 24, minutes % 60);
        let month = 1 + (minutes / (1440 * 28)) % 12;
        let year = 2026 + minutes / (1440 * 28 * 12);
        let _ = writeln!(
            self.out,
            "\nsession {year:04}-{month:02}-{day:02}T{hour:02}:{minute:02} phase {phase} \"synthetic session {}\"",
            self.session
        );
        self.session += 1;
        let steps = 20 + self.rng.below(60) as usize;
        let mut last_action: Option<String> = None;
        for _ in 0..steps {
            let room = self.room(entries);
            if room < 2 {
                if room == 1 {
                    self.note(last_action.as_deref());
                }
                return;
            }
            let step = self.step(phase);
            let action = self.action(&step, None, last_action.as_deref());
            let room = self.room(entries);
            if room >= 5 && self.rng.chance(self.failing) {
                let failed = self.observation(phase, false, &action);
                let lesson = self.lesson(phase, &step, &failed);
                let fixed_step = self.step(phase);
                let fixed = self.action(
                    &fixed_step,
                    Some((action.as_str(), failed.as_str(), lesson.as_str())),
                    None,
                );
                self.observation(phase, true, &fixed);
                last_action = Some(fixed);
            } else {
                self.observation(phase, true, &action);
                last_action = Some(action);
            }
            let room = self.room(entries);
            if room >= 3 && self.rng.chance(4) {
                self.note(last_action.as_deref());
            } else if room >= 3 && self.rng.chance(2) {
                // Try something, see it fail, revert it: a dead end.
                let step = self.step(phase);
                let tried = self.action(&step, None, None);
                let observation = self.observation(phase, false, &tried);
                let id = self.id('d');
                let _ = writeln!(
                    self.out,
                    "{id} decision \"{} did not help, see {observation}\" reverts {tried}",
                    step.op
                );
                self.written += 1;
            }
        }
    }

    fn step(&mut self, phase: u64) -> Step {
        let rng = &mut self.rng;
        let (op, params) = match phase {
            0 => match rng.below(3) {
                0 => (
                    OpKind::LoadWeights,
                    format!("source=checkpoint seed={}", rng.below(100)),
                ),
                1 => (OpKind::BuildReference, String::new()),
                _ => (
                    OpKind::CompareReference,
                    "against=transformers tol=1e-3".to_string(),
                ),
            },
            1 => {
                let shape = shape(rng);
                match rng.below(3) {
                    0 => (
                        OpKind::SelectTiling,
                        format!(
                            "kernel={} shape={shape} herd=[8,4] tile=[64,256,32,{}]",
                            rng.pick(&["gemm", "gemv"]),
                            32 << rng.below(3)
                        ),
                    ),
                    1 => (
                        OpKind::ValidateKernel,
                        format!("kernel=gemm shape={shape} rtol=1.6e-2 atol=4e-2"),
                    ),
                    _ => (OpKind::RegisterKernel, format!("kernel=gemm shape={shape}")),
                }
            }
            2 => match rng.below(2) {
                0 => (OpKind::BuildBlock, format!("layer={}", rng.below(16))),
                _ => (
                    OpKind::ValidateBlock,
                    format!("layer={} cosine_min=0.99 position_min=0.98", rng.below(16)),
                ),
            },
            3 => match rng.below(2) {
                0 => (OpKind::BuildModel, String::new()),
                _ => (OpKind::VerifyModel, "tokens=32 top_k=5".to_string()),
            },
            4 => match rng.below(3) {
                0 => (
                    OpKind::MergeLaunches,
                    format!(
                        "group={}",
                        rng.pick(&["rms_gemms_rope", "o_ffn", "attn_out"])
                    ),
                ),
                1 => (
                    OpKind::TuneTiling,
                    format!(
                        "kernel=gemm tile=[64,256,32,{}] herd=[8,4]",
                        32 << rng.below(3)
                    ),
                ),
                _ => (
                    OpKind::ProfilePrefill,
                    "seq_len=2048 warmup=5 iters=20".to_string(),
                ),
            },
            5 => match rng.below(4) {
                0 => (OpKind::GemvDecode, "herd=[8,1]".to_string()),
                1 => (
                    OpKind::PartitionLmHead,
                    format!("parts={}", 2 << rng.below(3)),
                ),
                2 => (OpKind::CascadeFfn, "rows=4".to_string()),
                _ => (
                    OpKind::ProfileDecode,
                    format!("tokens={}", 20 + rng.below(100)),
                ),
            },
            6 => match rng.below(3) {
                0 => (OpKind::WriteArtifacts, String::new()),
                1 => (OpKind::RecordLessons, String::new()),
                _ => (OpKind::ProfileDecode, "tokens=100".to_string()),
            },
            _ => match rng.below(2) {
                0 => (OpKind::Evaluate, "fresh_process=true".to_string()),
                _ => (OpKind::VerifyModel, "tokens=32 top_k=5".to_string()),
            },
        };
        Step { op, params }
    }

    /// Writes an action; `fixing` = (superseded action, failed observation, lesson).
    fn action(
        &mut self,
        step: &Step,
        fixing: Option<(&str, &str, &str)>,
        after: Option<&str>,
    ) -> String {
        let id = self.id('a');
        let _ = write!(self.out, "{id} action {}", step.op);
        if !step.params.is_empty() {
            let _ = write!(self.out, " {}", step.params);
        }
        if let Some((superseded, failed, lesson)) = fixing {
            let _ = write!(
                self.out,
                "\n    supersedes {superseded}\n    fixes {failed} by {lesson}"
            );
        } else if let Some(after) = after.filter(|_| self.rng.chance(20)) {
            let _ = write!(self.out, " after {after}");
        }
        self.out.push('\n');
        self.written += 1;
        id
    }

    fn observation(&mut self, phase: u64, pass: bool, action: &str) -> String {
        let id = self.id('o');
        let r = self.rng.below(1000) as f64 / 1000.0;
        let body = match (phase, pass) {
            (0, true) => format!("max_abs = {:.1e} <= 1e-3", 1e-4 + r * 5e-4),
            (0, false) => format!("max_abs = {:.1e} <= 1e-3", 2e-3 + r * 1e-3),
            (1, true) => format!(
                "mismatches = 0 == 0  mean_rel_l1 = {:.2e} < 1e-2",
                3e-3 + r * 5e-3
            ),
            (1, false) => format!("mismatches = {} == 0", 1 + self.rng.below(1 << 20)),
            (2, true) => format!("cosine = {:.4} >= 0.99", 0.991 + r * 0.008),
            (2, false) => format!("cosine = {:.4} >= 0.99", 0.5 + r * 0.4),
            (3, true) | (7, true) => "top_k_agree = 2 >= 2".to_string(),
            (3, false) | (7, false) => "top_k_agree = 1 >= 2".to_string(),
            (4, true) => format!("kernel_ms = {:.1} ms < 410 ms", 200.0 + r * 150.0),
            (4, false) => format!("kernel_ms = {:.1} ms < 410 ms", 420.0 + r * 150.0),
            (5, true) => format!(
                "ms_per_token = {:.1} ms < 80 ms  tok_s = {:.1} tok/s",
                50.0 + r * 20.0,
                1000.0 / (50.0 + r * 20.0)
            ),
            (5, false) => format!("ms_per_token = {:.1} ms < 80 ms", 85.0 + r * 20.0),
            (_, true) => format!("ttft_s = {:.2} s < 1 s", 0.3 + r * 0.5),
            (_, false) => format!("ttft_s = {:.2} s < 1 s", 1.2 + r * 0.5),
        };
        let provenance = if self.rng.chance(30) {
            "modeled"
        } else {
            "measured"
        };
        let verdict = if pass { "pass" } else { "fail" };
        let _ = write!(self.out, "{id} observe {provenance} {body}");
        if self.rng.chance(30) {
            let _ = write!(
                self.out,
                "\n    when seq_len={} model=\"synthetic\"",
                128 << self.rng.below(5)
            );
        }
        let _ = write!(self.out, "\n    -> {verdict}");
        if self.rng.chance(50) {
            let _ = write!(self.out, " after {action}");
        }
        self.out.push('\n');
        self.written += 1;
        id
    }

    fn lesson(&mut self, phase: u64, step: &Step, evidence: &str) -> String {
        let id = self.id('l');
        let (symptom, cause, fix) = match phase {
            0 => (
                "with max_abs > 1e-3",
                "\"tolerance tighter than bf16 noise\" tol < 1e-3",
                "compare-reference tol=(tol * 2)",
            ),
            1 => (
                "with mismatches > 0",
                "\"N not a multiple of tile_n*herd_n\" N % (tile_n * herd_n) != 0",
                "select-tiling tile_n=divisor(N / herd_n)",
            ),
            2 => (
                "with cosine < 0.99",
                "\"layout mismatch between kernels\"",
                "pad-heads multiple=128",
            ),
            3 | 7 => (
                "with top_k_agree < 2",
                "\"greedy divergence outside the top-5\"",
                "verify-model top_k=(top_k + 1)",
            ),
            4 => (
                "with kernel_ms >= 410 ms",
                "\"tile too small for this shape\" tile_n < 64",
                "tune-tiling tile_n=min(256, (tile_n * 2))",
            ),
            5 => (
                "with ms_per_token >= 80 ms",
                "\"LM head partitions overflow L2\" vocab_size / parts > 16384",
                "partition-lm-head parts=ceil_div(vocab_size, 16384)",
            ),
            _ => (
                "with ttft_s >= 1 s",
                "\"too few tokens to amortise setup\"",
                "profile-decode tokens=(tokens * 2)",
            ),
        };
        if !self.declared {
            self.declared = true;
            self.out.push_str(
                "skill debug-synthetic debug \"Repair the gates a synthetic session fails\"\n  trigger \"a synthetic gate fails\"\n",
            );
        }
        let _ = writeln!(
            self.out,
            "{id} lesson \"{} needs care in synthetic session {}\"\n    symptom {} fails {symptom}\n    cause {cause}\n    fix {fix}\n    evidence {evidence}\n    in debug-synthetic",
            step.op, self.session, step.op
        );
        self.written += 1;
        id
    }

    fn note(&mut self, about: Option<&str>) {
        let id = self.id('n');
        let _ = write!(
            self.out,
            "{id} note \"\"\"\n    Free text kept as written: tile sweep {} placed, {} did not.\n    \"\"\"",
            32 << self.rng.below(3),
            1024 << self.rng.below(2)
        );
        if let Some(about) = about {
            let _ = write!(self.out, " about {about}");
        }
        self.out.push('\n');
        self.written += 1;
    }
}

fn shape(rng: &mut Rng) -> String {
    let dims = [896u64, 1024, 2048, 4096, 8192];
    let m = 1 + rng.below(2048);
    let k = dims[rng.below(dims.len() as u64) as usize];
    let n = dims[rng.below(dims.len() as u64) as usize];
    format!("[{m},{k},{n}]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::SourceFile;

    fn check(files: Vec<(String, String)>) -> (usize, Vec<String>) {
        let sources: Vec<SourceFile> = files
            .into_iter()
            .map(|(path, text)| SourceFile { path, text })
            .collect();
        let (parsed, mut diagnostics) = crate::syntax::parse_sources(&sources, 0);
        let (graph, more) = crate::graph::build(parsed);
        diagnostics.extend(more);
        let messages = diagnostics
            .iter()
            .map(|d| {
                format!(
                    "{}: {} {}",
                    graph.location(d.span),
                    d.code.as_str(),
                    d.message
                )
            })
            .collect();
        (graph.node_count(), messages)
    }

    #[test]
    fn synthetic_trajectories_check_clean_with_exact_size() {
        for (entries, files) in [(1, 1), (7, 1), (500, 1), (3000, 5)] {
            let (count, messages) = check(generate_files(entries, 7, files));
            assert!(messages.is_empty(), "{entries} entries: {messages:#?}");
            assert_eq!(count, entries);
        }
    }

    #[test]
    fn same_seed_same_text() {
        assert_eq!(generate(300, 3), generate(300, 3));
        assert_ne!(generate(300, 3), generate(300, 4));
    }

    #[test]
    fn files_split_at_sessions() {
        let files = generate_files(2000, 1, 4);
        assert_eq!(files.len(), 4);
        for (_, text) in &files[1..] {
            assert!(text.trim_start().starts_with("session"));
        }
    }
}
