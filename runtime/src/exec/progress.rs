//! Progress events of a run (phase, step, gate), for a display. The runtime only
//! emits them; the command line decides how to show them.

use super::artifacts::record::PhaseStatus;
use super::checks::gate::GateCheck;

pub trait Progress {
    fn phase(&mut self, _index: u8, _title: &str) {}
    fn step(&mut self, _text: &str) {}
    fn gate(&mut self, _gate: &GateCheck) {}
    fn phase_done(&mut self, _index: u8, _status: PhaseStatus, _wall_s: f64) {}
}

/// Shows nothing.
#[derive(Debug, Default)]
pub struct Silent;

impl Progress for Silent {}
