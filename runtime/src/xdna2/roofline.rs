//! Roofline summary of a modeled run: per kernel, the time it takes, the
//! FLOP/s and DRAM bandwidth it achieves against the peak of the tiles it
//! uses and the bandwidth the NPU sees, and which side of the roofline bounds
//! it. Every figure is modeled.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::cost::{Params, StepTiming, Timing};
use super::kernels::Kernel;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    Compute,
    Memory,
}

/// One kernel's share of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RooflineRow {
    pub kernel: Kernel,
    /// Launches per run (layers counted).
    pub launches: usize,
    /// Modeled seconds per run, launch overhead included.
    pub seconds: f64,
    pub flops: f64,
    pub dram_bytes: f64,
    pub achieved_gflops: f64,
    pub peak_gflops: f64,
    pub achieved_gbps: f64,
    pub peak_gbps: f64,
    pub bound: Bound,
}

impl RooflineRow {
    pub fn compute_fraction(&self) -> f64 {
        if self.peak_gflops > 0.0 {
            self.achieved_gflops / self.peak_gflops
        } else {
            0.0
        }
    }

    pub fn bandwidth_fraction(&self) -> f64 {
        self.achieved_gbps / self.peak_gbps
    }
}

/// The roofline of one run, kernels by descending time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Roofline {
    pub model: String,
    pub rows: Vec<RooflineRow>,
    /// What the figures are (modeled, with the calibration error).
    pub note: String,
}

#[derive(Default)]
struct Sums {
    launches: usize,
    seconds: f64,
    body: f64,
    flops: f64,
    bytes: f64,
    peak_time: f64,
    compute_time: f64,
    data_time: f64,
}

pub fn roofline(timing: &Timing, params: &Params, note: &str) -> Roofline {
    let mut sums: BTreeMap<Kernel, Sums> = BTreeMap::new();
    for step in &timing.steps {
        let StepTiming::Call(call) = step else {
            continue;
        };
        for launch in &call.launches {
            let r = call.repeats;
            let s = sums.entry(launch.kernel).or_default();
            s.launches += r;
            s.seconds += launch.total_s * r as f64;
            s.body += launch.body_s * r as f64;
            s.flops += launch.flops * r as f64;
            s.bytes += launch.dram_bytes * r as f64;
            s.peak_time += launch.peak_flops * launch.body_s * r as f64;
            s.compute_time += launch.compute_s * r as f64;
            s.data_time += launch.data_s * r as f64;
        }
    }
    let mut rows: Vec<RooflineRow> = sums
        .into_iter()
        .map(|(kernel, s)| RooflineRow {
            kernel,
            launches: s.launches,
            seconds: s.seconds,
            flops: s.flops,
            dram_bytes: s.bytes,
            achieved_gflops: s.flops / s.seconds / 1e9,
            peak_gflops: if s.body > 0.0 {
                s.peak_time / s.body / 1e9
            } else {
                0.0
            },
            achieved_gbps: s.bytes / s.seconds / 1e9,
            peak_gbps: params.dram_bytes_per_s / 1e9,
            bound: if s.compute_time >= s.data_time {
                Bound::Compute
            } else {
                Bound::Memory
            },
        })
        .collect();
    rows.sort_by(|a, b| {
        b.seconds
            .total_cmp(&a.seconds)
            .then(a.kernel.cmp(&b.kernel))
    });
    Roofline {
        model: timing.model.clone(),
        rows,
        note: note.to_string(),
    }
}

impl fmt::Display for Roofline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "roofline of {} ({})", self.model, self.note)?;
        writeln!(
            f,
            "  {:<16} {:>8} {:>11} {:>10} {:>10} {:>8} {:>9} {:>8} {:>8}",
            "kernel", "launches", "ms", "GFLOP/s", "peak", "% peak", "GB/s", "% BW", "bound"
        )?;
        for r in &self.rows {
            let (gflops, peak, fraction) = if r.flops > 0.0 {
                (
                    format!("{:.1}", r.achieved_gflops),
                    format!("{:.1}", r.peak_gflops),
                    format!("{:.1}%", 100.0 * r.compute_fraction()),
                )
            } else {
                ("-".into(), "-".into(), "-".into())
            };
            writeln!(
                f,
                "  {:<16} {:>8} {:>11.3} {:>10} {:>10} {:>8} {:>9.1} {:>7.1}% {:>8}",
                r.kernel.name(),
                r.launches,
                r.seconds * 1e3,
                gflops,
                peak,
                fraction,
                r.achieved_gbps,
                100.0 * r.bandwidth_fraction(),
                match r.bound {
                    Bound::Compute => "compute",
                    Bound::Memory => "memory",
                }
            )?;
        }
        Ok(())
    }
}
