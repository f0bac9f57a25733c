//! The eight phases every bundle has, whatever the trajectory recorded: directory
//! names, titles and the purpose each phase serves. The order and the names mirror
//! the published reference skill system (shared/reference/skill-system.md §2); the
//! wording is ours.

/// Fixed facts about one phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseSpec {
    pub index: u8,
    /// Agent Skills directory name.
    pub name: &'static str,
    pub title: &'static str,
    /// What the phase establishes, for the SKILL.md purpose and description.
    pub purpose: &'static str,
}

pub const PHASES: [PhaseSpec; 8] = [
    PhaseSpec {
        index: 0,
        name: "phase-0-build-cpu-reference",
        title: "Build the CPU reference",
        purpose: "Load the model's configuration and weights, refuse architectures outside \
                  scope, and build the f32 CPU reference that every later gate compares against.",
    },
    PhaseSpec {
        index: 1,
        name: "phase-1-kernel-validation",
        title: "Kernel validation",
        purpose: "Derive every kernel and shape the model needs, choose a tiling and herd for \
                  each, and prove each one element-wise against the f32 reference before it is \
                  wired into a block.",
    },
    PhaseSpec {
        index: 2,
        name: "phase-2-single-block-validation",
        title: "Single-block validation",
        purpose: "Wire one decoder block from validated kernels and compare it with the \
                  reference, catching layout, transpose, padding and bias mistakes on one layer.",
    },
    PhaseSpec {
        index: 3,
        name: "phase-3-full-model-validation",
        title: "Full-model validation",
        purpose: "Chain every block and the LM head and check greedy generation against the \
                  reference; per-layer cosines localise a failing layer but do not gate.",
    },
    PhaseSpec {
        index: 4,
        name: "phase-4-prefill-optimization",
        title: "Prefill optimization",
        purpose: "Make prefill faster with the optimization skills while the full-model check \
                  keeps passing after every change; a change that breaks it is reverted.",
    },
    PhaseSpec {
        index: 5,
        name: "phase-5-decode-optimization",
        title: "Decode optimization",
        purpose: "Make per-token decode faster with the optimization skills while the \
                  full-model check keeps passing after every change.",
    },
    PhaseSpec {
        index: 6,
        name: "phase-6-finalize-and-learn",
        title: "Finalize and learn",
        purpose: "Write the production plan, report and trajectory of the run, re-check the \
                  final configuration and record what was learned for the next build.",
    },
    PhaseSpec {
        index: 7,
        name: "phase-7-independent-evaluator",
        title: "Independent evaluation",
        purpose: "Re-derive the verdict in a fresh process from the written artifacts alone, \
                  without trusting the earlier phases' records.",
    },
];

/// The entry skill that orchestrates the phases.
pub const ENTRY_SKILL: &str = "deploy-new-llm";

/// Prefix of optimization skill directories.
pub const OPT_PREFIX: &str = "opt-";
/// Prefix of debugging skill directories.
pub const DEBUG_PREFIX: &str = "debug-";

pub fn phase(index: u8) -> Option<&'static PhaseSpec> {
    PHASES.get(usize::from(index))
}
