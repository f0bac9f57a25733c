//! Progress events of a run (phase, step, gate), for a display. The runtime only
//! emits them; the command line decides how to show them.

use super::artifacts::record::PhaseStatus;
use super::gates::gate::GateCheck;
use crate::phase::DeployPhase;

pub trait Progress {
    /// The run's size, memory and time, stated before phase 0 starts.
    fn estimate(&mut self, _estimate: &super::estimate::RunEstimate) {}
    fn phase(&mut self, _phase: DeployPhase, _title: &str) {}
    fn step(&mut self, _text: &str) {}
    fn gate(&mut self, _gate: &GateCheck) {}
    fn phase_done(&mut self, _phase: DeployPhase, _status: PhaseStatus, _wall_s: f64) {}
}

/// Shows nothing.
#[derive(Debug, Default)]
pub struct Silent;

impl Progress for Silent {}
