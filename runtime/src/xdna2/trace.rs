//! A Chrome-trace / Perfetto timeline (Trace Event Format JSON) of a modeled
//! run: the NPU process has one track per call group (`rms_gemms_rope`,
//! `flash_attn`, …) with each call's launches nested inside it, the host
//! process one track per host op. Layers are laid out one after another;
//! several timings (a prefill, then decode steps) follow each other. Every
//! time in it is modeled; the calibration note travels in `otherData`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::cost::{CallTiming, HostTiming, StepTiming, Timing};
use super::plan::Section;

const NPU_PID: u32 = 1;
const HOST_PID: u32 = 2;

/// Microseconds, rounded to the nanosecond so the file is stable.
fn us(seconds: f64) -> f64 {
    (seconds * 1e9).round() / 1e3
}

struct Timeline {
    events: Vec<Value>,
    tracks: BTreeMap<(u32, String), u32>,
    clock: f64,
}

impl Timeline {
    fn track(&mut self, pid: u32, name: &str) -> u32 {
        let next = self.tracks.len() as u32 + 1;
        *self.tracks.entry((pid, name.to_string())).or_insert(next)
    }

    fn call(&mut self, call: &CallTiming, run: &str, layer: Option<usize>) {
        let tid = self.track(NPU_PID, &call.group);
        let start = self.clock;
        let label = layer.map_or(call.name.clone(), |l| format!("{} L{l}", call.name));
        self.events.push(json!({
            "name": label, "cat": run, "ph": "X", "pid": NPU_PID, "tid": tid,
            "ts": us(start), "dur": us(call.total_s),
            "args": {
                "dispatch_us": us(call.dispatch_s), "write_us": us(call.write_s),
                "read_us": us(call.read_s), "sync_us": us(call.sync_s),
                "bytes_written": call.bytes_written, "bytes_read": call.bytes_read,
                "launches": call.launches.len(),
            }
        }));
        let mut t = start + call.dispatch_s + call.write_s + call.sync_s;
        for launch in &call.launches {
            self.events.push(json!({
                "name": format!("{} {}", launch.kernel.name(), launch.shape),
                "cat": "launch", "ph": "X", "pid": NPU_PID, "tid": tid,
                "ts": us(t), "dur": us(launch.total_s),
                "args": {
                    "tiles": launch.tiles, "compute_us": us(launch.compute_s),
                    "data_us": us(launch.data_s), "gflop": launch.flops / 1e9,
                    "dram_mb": launch.dram_bytes / 1e6,
                }
            }));
            t += launch.total_s;
        }
        self.clock = start + call.total_s;
    }

    fn host(&mut self, host: &HostTiming, run: &str, layer: Option<usize>) {
        let tid = self.track(HOST_PID, &host.op);
        let label = layer.map_or(host.op.clone(), |l| format!("{} L{l}", host.op));
        self.events.push(json!({
            "name": label, "cat": run, "ph": "X", "pid": HOST_PID, "tid": tid,
            "ts": us(self.clock), "dur": us(host.seconds),
        }));
        self.clock += host.seconds;
    }

    fn step(&mut self, step: &StepTiming, run: &str, layer: Option<usize>) {
        match step {
            StepTiming::Call(c) => self.call(c, run, layer),
            StepTiming::Host(h) => self.host(h, run, layer),
        }
    }

    fn run(&mut self, timing: &Timing, run: &str) {
        let section = |s: Section| timing.steps.iter().filter(move |st| st.section() == s);
        for step in section(Section::Prologue) {
            self.step(step, run, None);
        }
        for layer in 0..timing.num_layers {
            for step in section(Section::Layer) {
                self.step(step, run, Some(layer));
            }
        }
        for step in section(Section::Epilogue) {
            self.step(step, run, None);
        }
    }
}

/// The timeline of `runs` (name, timing) played one after another.
pub fn chrome_trace(runs: &[(&str, &Timing)], calibration_note: &str) -> Value {
    let mut timeline = Timeline {
        events: Vec::new(),
        tracks: BTreeMap::new(),
        clock: 0.0,
    };
    for (name, timing) in runs {
        timeline.run(timing, name);
    }
    let mut events = vec![
        json!({"name": "process_name", "ph": "M", "pid": NPU_PID, "args": {"name": "npu2 (modeled)"}}),
        json!({"name": "process_name", "ph": "M", "pid": HOST_PID, "args": {"name": "host (modeled)"}}),
    ];
    for ((pid, name), tid) in &timeline.tracks {
        events.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}));
    }
    events.extend(timeline.events);
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "modeled": true,
            "calibration": calibration_note,
            "runs": runs.iter().map(|(name, t)| json!({
                "name": name, "model": t.model, "phase": t.phase, "seq_len": t.seq_len,
                "total_ms": us(t.total_s) / 1e3,
            })).collect::<Vec<_>>(),
        }
    })
}
