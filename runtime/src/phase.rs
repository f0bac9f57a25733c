//! The eight phases of a deployment as a type: the bundle's phases, the executor's phase
//! loop, the report's phase numbers and `--stop-after` all name a phase with a
//! [`DeployPhase`], never a bare number. Its number (0 to 7) is what the files carry:
//! it serializes as that number, so `report.json` reads as before.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One of the eight phases of a deployment, in the order they run; its number
/// (`index`) is the bundle's and the report's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "u8", try_from = "u8")]
pub enum DeployPhase {
    Reference,
    Kernels,
    Block,
    Model,
    Prefill,
    Decode,
    Finalize,
    Evaluate,
}

impl DeployPhase {
    /// Every phase, in order.
    pub const ALL: [DeployPhase; 8] = [
        DeployPhase::Reference,
        DeployPhase::Kernels,
        DeployPhase::Block,
        DeployPhase::Model,
        DeployPhase::Prefill,
        DeployPhase::Decode,
        DeployPhase::Finalize,
        DeployPhase::Evaluate,
    ];

    /// The phase's number, 0 to 7.
    pub const fn index(self) -> u8 {
        self as u8
    }

    /// The phase numbered `index`, if there is one.
    pub fn from_index(index: u8) -> Option<DeployPhase> {
        DeployPhase::ALL.get(usize::from(index)).copied()
    }

    /// The phase before this one (none before phase 0).
    pub fn previous(self) -> Option<DeployPhase> {
        self.index()
            .checked_sub(1)
            .and_then(DeployPhase::from_index)
    }

    /// The phase after this one (none after phase 7).
    pub fn next(self) -> Option<DeployPhase> {
        DeployPhase::from_index(self.index() + 1)
    }
}

impl fmt::Display for DeployPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.index())
    }
}

impl From<DeployPhase> for u8 {
    fn from(phase: DeployPhase) -> u8 {
        phase.index()
    }
}

/// A number that names no phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0} is not in 0..=7")]
pub struct NoSuchPhase(pub i64);

impl TryFrom<u8> for DeployPhase {
    type Error = NoSuchPhase;

    fn try_from(index: u8) -> Result<DeployPhase, NoSuchPhase> {
        DeployPhase::from_index(index).ok_or(NoSuchPhase(i64::from(index)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_is_its_number_in_json_and_nothing_else_is_a_phase() {
        for (i, phase) in DeployPhase::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(phase.index()), i);
            assert_eq!(serde_json::to_string(&phase).unwrap(), i.to_string());
            assert_eq!(
                serde_json::from_str::<DeployPhase>(&i.to_string()).unwrap(),
                phase
            );
        }
        let err = serde_json::from_str::<DeployPhase>("8").unwrap_err();
        assert!(err.to_string().contains("8 is not in 0..=7"), "{err}");
        assert_eq!(DeployPhase::Reference.previous(), None);
        assert_eq!(
            DeployPhase::Evaluate.previous(),
            Some(DeployPhase::Finalize)
        );
        assert_eq!(DeployPhase::Reference.next(), Some(DeployPhase::Kernels));
        assert_eq!(DeployPhase::Evaluate.next(), None);
    }
}
