//! Modeled performance for readers, from the emulator's cost model: the roofline
//! rows of the production plans (per kernel, the achieved fraction of the bound that
//! limits it) and the Perfetto / Chrome-trace timeline of one prefill and one
//! decode step. Every figure here is modeled and carries the calibration note.

use serde_json::Value as Json;

use super::record::RooflineRow;
use crate::exec::design::Plans;
use crate::xdna2::cost::{time_plan, Params};
use crate::xdna2::device::Device;
use crate::xdna2::roofline::{roofline as kernel_roofline, Bound};
use crate::xdna2::trace::chrome_trace;

/// One row per kernel of each plan, by descending modeled time.
pub fn roofline(plans: &Plans, device: &Device, params: &Params, note: &str) -> Vec<RooflineRow> {
    let mut rows = Vec::new();
    for plan in [&plans.prefill, &plans.decode] {
        let timing = time_plan(plan, device, params);
        for r in kernel_roofline(&timing, params, note).rows {
            let (fraction, bound) = match r.bound {
                Bound::Compute => (r.compute_fraction(), "compute"),
                Bound::Memory => (r.bandwidth_fraction(), "DRAM bandwidth"),
            };
            rows.push(RooflineRow {
                phase: format!("{:?}", plan.phase).to_lowercase(),
                name: format!("{} x{}", r.kernel.name(), r.launches),
                ms: r.seconds * 1e3,
                fraction,
                bound: bound.to_string(),
            });
        }
    }
    rows
}

/// The timeline of one prefill at seq 2048 followed by one decode step.
pub fn trace(plans: &Plans, device: &Device, params: &Params, calibration: &str) -> Json {
    let prefill = time_plan(&plans.prefill, device, params);
    let decode = time_plan(&plans.decode, device, params);
    chrome_trace(
        &[("prefill", &prefill), ("decode step", &decode)],
        calibration,
    )
}
