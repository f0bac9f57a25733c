//! Modeled performance for readers: the roofline table of the production plans (per
//! call, the achieved fraction of the bound that limits it) and the Perfetto /
//! Chrome-trace timeline of one prefill and one decode step. Every figure here
//! comes from the cost model and is labelled modeled.

use serde_json::{json, Value as Json};

use super::design::Plans;
use super::record::RooflineRow;
use crate::xdna2::cost::{time_plan, Params, StepTiming, Timing};
use crate::xdna2::device::Device;

/// One row per NPU call of the prologue, one layer and the epilogue of each plan.
pub fn roofline(plans: &Plans, device: &Device, params: &Params) -> Vec<RooflineRow> {
    let mut rows = Vec::new();
    for plan in [&plans.prefill, &plans.decode] {
        let timing = time_plan(plan, device, params);
        for call in timing.calls() {
            let flops: f64 = call.launches.iter().map(|l| l.flops).sum();
            let bytes: f64 = call.launches.iter().map(|l| l.dram_bytes).sum();
            let peak = call.launches.iter().map(|l| l.peak_flops).fold(0.0, f64::max);
            let t = call.total_s.max(f64::MIN_POSITIVE);
            let compute = if peak > 0.0 { flops / (t * peak) } else { 0.0 };
            let memory = bytes / (t * device.dram_peak_bytes_per_s);
            let (fraction, bound) = if compute >= memory {
                (compute, "compute")
            } else {
                (memory, "DRAM bandwidth")
            };
            rows.push(RooflineRow {
                phase: format!("{:?}", plan.phase).to_lowercase(),
                name: call.name.clone(),
                ms: call.total_s * 1e3,
                fraction,
                bound: bound.to_string(),
            });
        }
    }
    rows
}

/// The Chrome trace (Perfetto opens it): one process per plan, an NPU and a host
/// track, every call and host op of one prefill and one decode step in order.
pub fn trace(plans: &Plans, device: &Device, params: &Params, calibration: &str) -> Json {
    let mut events = Vec::new();
    for (pid, plan) in [&plans.prefill, &plans.decode].into_iter().enumerate() {
        let timing = time_plan(plan, device, params);
        let name = format!("{:?} at seq {} (modeled)", plan.phase, plan.seq_len);
        events.push(json!({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}}));
        events.push(json!({"ph": "M", "pid": pid, "tid": 0, "name": "thread_name", "args": {"name": "NPU"}}));
        events.push(json!({"ph": "M", "pid": pid, "tid": 1, "name": "thread_name", "args": {"name": "host"}}));
        timeline(&timing, pid, &mut events);
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "metadata": {"modeled": true, "calibration": calibration},
    })
}

fn timeline(timing: &Timing, pid: usize, events: &mut Vec<Json>) {
    let mut at_us = 0.0f64;
    let sections: [(crate::xdna2::plan::Section, usize); 3] = [
        (crate::xdna2::plan::Section::Prologue, 1),
        (crate::xdna2::plan::Section::Layer, timing.num_layers),
        (crate::xdna2::plan::Section::Epilogue, 1),
    ];
    for (section, repeats) in sections {
        for layer in 0..repeats {
            for step in timing.steps.iter().filter(|s| s.section() == section) {
                let dur = step.seconds() * 1e6;
                let (tid, name, args) = match step {
                    StepTiming::Call(c) => (
                        0,
                        c.name.clone(),
                        json!({
                            "launches": c.launches.iter().map(|l| format!("{} {}", l.kernel.name(), l.shape)).collect::<Vec<_>>(),
                            "write_ms": c.write_s * 1e3,
                            "read_ms": c.read_s * 1e3,
                            "dispatch_ms": c.dispatch_s * 1e3,
                        }),
                    ),
                    StepTiming::Host(h) => (1, h.op.clone(), json!({})),
                };
                let label = if section == crate::xdna2::plan::Section::Layer {
                    format!("L{layer} {name}")
                } else {
                    name
                };
                events.push(json!({
                    "ph": "X", "pid": pid, "tid": tid, "name": label,
                    "ts": (at_us * 1000.0).round() / 1000.0,
                    "dur": (dur * 1000.0).round() / 1000.0,
                    "args": args,
                }));
                at_us += dur;
            }
        }
    }
}
