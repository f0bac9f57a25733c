//! Progress on stderr for the long commands (deploy, replay, bench): on a terminal
//! a status line redrawn in place, otherwise one line per event stamped with the
//! elapsed seconds, so a log or a CI job shows where a run is; nothing at all with
//! `--quiet`. Results go to stdout, so progress never mixes with them.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use skillc_runtime::exec::artifacts::record::PhaseStatus;
use skillc_runtime::exec::gates::gate::GateCheck;
use skillc_runtime::exec::Progress;
use skillc_runtime::phase::DeployPhase;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A terminal: transient lines are redrawn in place.
    Redraw,
    /// A pipe or a file: every event is a line.
    Lines,
    Quiet,
}

#[derive(Debug)]
pub struct Display {
    mode: Mode,
    started: Instant,
    /// A transient line is on screen and must be cleared first.
    dirty: bool,
}

impl Display {
    pub fn new(quiet: bool) -> Self {
        let mode = if quiet {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            Mode::Redraw
        } else {
            Mode::Lines
        };
        Self {
            mode,
            started: Instant::now(),
            dirty: false,
        }
    }

    /// Whether transient lines are redrawn in place (a terminal).
    pub fn redraws(&self) -> bool {
        self.mode == Mode::Redraw
    }

    fn stamp(&self) -> String {
        format!("[{:7.1} s]", self.started.elapsed().as_secs_f64())
    }

    fn clear(&mut self) {
        if self.dirty {
            eprint!("\r\x1b[2K");
            self.dirty = false;
        }
    }

    /// A line that stays, unless quiet.
    pub fn line(&mut self, text: &str) {
        if self.mode != Mode::Quiet {
            self.clear();
            eprintln!("{} {text}", self.stamp());
        }
    }

    /// What the run is doing now: redrawn on a terminal, a line elsewhere.
    pub fn status(&mut self, text: &str) {
        match self.mode {
            Mode::Quiet => {}
            Mode::Lines => eprintln!("{}   {text}", self.stamp()),
            Mode::Redraw => {
                self.clear();
                eprint!("  {text}");
                let _ = std::io::stderr().flush();
                self.dirty = true;
            }
        }
    }

    /// Something the user must see even with `--quiet` (e.g. waiting for a lock).
    pub fn note(&mut self, text: &str) {
        self.clear();
        eprintln!("{text}…");
    }
}

impl Drop for Display {
    fn drop(&mut self) {
        self.clear();
    }
}

impl Progress for Display {
    fn estimate(&mut self, estimate: &skillc_runtime::exec::estimate::RunEstimate) {
        self.line(&format!("model: {}", estimate.summary()));
    }

    fn phase(&mut self, phase: DeployPhase, title: &str) {
        self.line(&format!("phase {phase}: {title}"));
    }

    fn step(&mut self, text: &str) {
        self.status(text);
    }

    fn gate(&mut self, gate: &GateCheck) {
        if let Some(tried) = gate.attempt_summary() {
            self.line(&format!("  {tried}"));
        } else if !gate.passed {
            self.line(&format!("  FAIL {}: {}", gate.name, gate.summary()));
        }
    }

    fn phase_done(&mut self, phase: DeployPhase, status: PhaseStatus, wall_s: f64) {
        let word = if status == PhaseStatus::Passed {
            "passed"
        } else {
            "FAILED"
        };
        self.line(&format!("phase {phase} {word} in {wall_s:.1} s"));
    }
}
