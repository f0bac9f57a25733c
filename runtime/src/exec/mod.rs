//! The deploy executor: runs a skill bundle on a model it has never seen, phase by
//! phase, on the emulated XDNA 2 backend, never advancing past a failed gate.
//!
//! `deploy(bundle, options, progress)` loads the model (phase 0), validates every
//! kernel × shape it needs (1), one block (2), the whole model by greedy decode (3),
//! applies the bundle's optimizations one at a time (4, 5), writes the production
//! plan, the report and a trajectory of the run (6), and hands the written artifacts
//! to an independent evaluator in a fresh process (7). A failed gate is matched
//! against the bundle's debugging lessons ([`gates::remedy`]); fixes are applied in order
//! and re-checked; when none works the run stops with a report naming the phase,
//! gate, value, threshold and what was tried.
//!
//! Module map: `run` drives the phases over the shared state; `phases/` holds one
//! runner per phase (`reference` … `full_model`, `optimize` for 4 and 5, `finalize` for 6,
//! `evaluate`) and `steps`, which accounts for the bundle steps they leave; [`design`]
//! turns the executor's decisions into the builder's plans, which the backend's plan
//! interpreter (`xdna2::interpreter`) runs over the model's weights; [`fault`] plants
//! the faults the gate tests use; [`gates`] is the checking machinery (gates, the top-k gate,
//! verification, phase 1's kernel harness, remedies); [`artifacts`] writes what
//! happened (report, trajectory, roofline and trace, `plan.json`, the kernel
//! registry); [`evaluate`] is phase 7's fresh-process evaluator.

use crate::model::memory::human_bytes;

pub mod artifacts;
pub mod design;
pub mod estimate;
pub mod evaluate;
pub mod fault;
pub mod gates;
mod phase_loop;
mod phases;
mod preflight;
pub mod progress;
mod run;

use std::path::PathBuf;

use crate::phase::DeployPhase;

pub use artifacts::record::{DeployReport, Verdict};
pub use fault::Fault;
pub use phase_loop::deploy;
pub use phases::prompts::PromptCheckError;
pub use progress::{Progress, Silent};

/// Files a run writes into its output directory.
pub mod files {
    pub const PLAN: &str = "plan.json";
    pub const REPORT_JSON: &str = "report.json";
    pub const REPORT_MD: &str = "report.md";
    pub const TRACE: &str = "trace.json";
    pub const REGISTRY: &str = "kernel-registry.json";
    pub const TRAJECTORY_DIR: &str = "trajectory";
    pub const TRAJECTORY_FILE: &str = "00-deploy.traj";
    pub const EVALUATION_JSON: &str = "evaluation.json";
    pub const EVALUATION_MD: &str = "evaluation.md";
}

/// The subcommand of the `skillc` program that runs the independent evaluator,
/// named after the operation it carries out (phase 7's `evaluate`): phase 7 starts
/// it and the command line defines it from this one name.
pub const EVALUATOR_COMMAND: &str = crate::ops::OpKind::Evaluate.name();

/// The stop record's gate of a run stopped by [`DeployOptions::stop_after`].
pub const STOP_AFTER_GATE: &str = "stop-after";

/// How phase 7 starts the independent evaluator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvaluatorLaunch {
    /// Run `program evaluate OUT_DIR --model MODEL_DIR` as a fresh process
    /// ([`EVALUATOR_COMMAND`]).
    Process(PathBuf),
}

/// What a deploy run is asked to do.
#[derive(Debug, Clone)]
pub struct DeployOptions {
    pub model_dir: PathBuf,
    pub out_dir: PathBuf,
    /// Seed of random weights (when the model directory has none) and of the
    /// verification prompts.
    pub seed: u64,
    /// Verification prompts as token ids; drawn under the seed when absent.
    pub prompts: Option<Vec<Vec<u32>>>,
    /// Faults planted in the NPU path (tests of the gates).
    pub faults: Vec<Fault>,
    /// Timestamp of the run's trajectory sessions (`YYYY-MM-DDTHH:MMZ`).
    pub started: String,
    pub evaluator: EvaluatorLaunch,
    /// A kernel registry written by an earlier run, whose configurations this run
    /// tries first.
    pub registry: Option<PathBuf>,
    /// Stop after this phase (the planted-fault bench stops after the phase that
    /// must catch its fault); the report then ends at gate [`STOP_AFTER_GATE`].
    pub stop_after: Option<DeployPhase>,
    /// Folders of transformers fixtures (`shared/fixtures`, the families'
    /// `tests/data/fixtures`) that prove, path by path, a model without
    /// transformers outputs of its own; none: every path unproven.
    pub fixtures: Vec<PathBuf>,
    /// Which weights the decode GEMVs read: the 4-bit blocks as stored where
    /// the packing decision allows it, or bf16 (`xdna2::packing`).
    pub weights: crate::xdna2::packing::WeightPath,
    /// A config-only model's decoder projections quantized in memory to this
    /// 4-bit format after they are drawn (`model::seeded_quant`).
    pub seeded_quant: Option<crate::model::quant::WeightFormat>,
    /// What the caller found wrong with the bundle and ran anyway (files changed
    /// since it was built, texts shortened), for the report.
    pub bundle_notes: Vec<String>,
}

/// Problems that keep a run from starting or from writing its results (exit 2),
/// as opposed to a failed gate (a report, exit 1). Each keeps the error it came
/// from as its source.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error("bundle: {0}")]
    Bundle(#[from] crate::bundle::BundleError),
    /// Model files that do not fit together, or prompts past the context.
    #[error(transparent)]
    Inconsistent(#[from] crate::model::consistency::ConsistencyError),
    /// The whole run would not fit in the memory the process may still take.
    #[error(
        "the deploy would not fit in memory: it needs about {} ({} weights + {} model files \
         mapped or read + {} KV cache for {} positions + {} activations + {} of the run's own) \
         but {} is {}",
        human_bytes(.estimate.total()),
        human_bytes(.estimate.reference.weights),
        human_bytes(.estimate.files),
        human_bytes(.estimate.reference.kv_cache),
        .estimate.reference.context,
        human_bytes(.estimate.reference.activations),
        human_bytes(.estimate.runtime),
        human_bytes(.available.bytes),
        .available.limit.describe()
    )]
    Memory {
        estimate: crate::model::memory::DeployEstimate,
        available: crate::model::memory::Available,
    },
    /// A file that could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file the input reader refused (not a regular file, unreadable, not text).
    #[error("{}: {source}", path.display())]
    Input {
        path: PathBuf,
        #[source]
        source: crate::input::Problem,
    },
    /// A JSON file that does not parse as what it should be.
    #[error("{}: {}:{}: {source}", path.display(), source.line(), source.column())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A value that does not serialize into the file it is written to.
    #[error("{}: {source}", path.display())]
    Serialize {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: {source}", path.display())]
    Registry {
        path: PathBuf,
        #[source]
        source: artifacts::registry::RegistryError,
    },
    /// A model (or the config phase 7 re-reads) that cannot be read.
    #[error("{}: {source}", path.display())]
    Model {
        path: PathBuf,
        #[source]
        source: Box<crate::model::ModelError>,
    },
    /// The transformers reference shipped beside a model.
    #[error("{}: {source}", path.display())]
    Fixture {
        path: PathBuf,
        #[source]
        source: crate::model::oracle::compare::CompareError,
    },
    #[error("{}: cannot start the evaluator: {source}", program.display())]
    Evaluator {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Prompts(#[from] phases::prompts::PromptCheckError),
    #[error(transparent)]
    Design(#[from] design::DesignError),
    #[error(transparent)]
    Reference(#[from] crate::model::oracle::ReferenceError),
    #[error(transparent)]
    Load(Box<crate::model::ModelError>),
    #[error(transparent)]
    Compare(#[from] crate::model::oracle::compare::CompareError),
    /// Phase 7's evaluator cannot open the model the plan was made for.
    #[error("the model cannot be {doing}: {source}")]
    EvaluatedModel {
        doing: &'static str,
        #[source]
        source: Box<crate::model::ModelError>,
    },
    #[error(transparent)]
    Npu(#[from] crate::xdna2::interpreter::ExecError),
    #[error(transparent)]
    Harness(#[from] crate::xdna2::harness::HarnessError),
    /// `--weights packed` on a model that stores no 4-bit blocks.
    #[error("--weights packed: the model stores no Q4_0 or Q4_1 weights ({stored}); use --weights bf16 or auto")]
    NotFourBit { stored: String },
    #[error(
        "{}: no config.json and no GGUF file (a model is a .gguf file, or a directory holding \
         config.json and, optionally, *.safetensors)",
        dir.display()
    )]
    NoModel { dir: PathBuf },
    /// What a phase needs from the ones before it was not there: a bug of the executor.
    #[error(transparent)]
    Internal(#[from] Internal),
}

/// A state the phase order rules out; reaching one is a bug of the executor, reported
/// as an error rather than a panic.
#[derive(Debug, thiserror::Error)]
pub enum Internal {
    #[error("{key} disappeared from the plans")]
    SiteDisappeared { key: String },
    #[error("the NPU block produced no output")]
    NoBlockOutput,
    #[error("no prompt or reference run")]
    NoPromptOrReference,
    #[error("no prompt")]
    NoPrompt,
}

// Boxed: a model error is several times the size of the others.
impl From<crate::model::ModelError> for DeployError {
    fn from(e: crate::model::ModelError) -> Self {
        DeployError::Load(Box::new(e))
    }
}

impl DeployError {
    pub fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        DeployError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The result of a run that got far enough to write a report.
#[derive(Debug, Clone)]
pub struct DeployOutcome {
    pub report: DeployReport,
    /// 0 when the verdict is PASS or PASS-with-warnings, 1 otherwise.
    pub exit_code: u8,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{Bundle, BundleError};

    /// The typed refusals print what the string ones printed, word for word: the
    /// command line shows these texts.
    #[test]
    fn refusals_read_as_before() {
        let cases: Vec<(DeployError, &str)> = vec![
            (
                DeployError::NotFourBit {
                    stored: "bf16 safetensors".into(),
                },
                "--weights packed: the model stores no Q4_0 or Q4_1 weights (bf16 safetensors); use --weights bf16 or auto",
            ),
            (
                DeployError::NoModel { dir: "models/x".into() },
                "models/x: no config.json and no GGUF file (a model is a .gguf file, or a directory holding config.json and, optionally, *.safetensors)",
            ),
            (
                Internal::SiteDisappeared { key: "gemm 1x2".into() }.into(),
                "gemm 1x2 disappeared from the plans",
            ),
            (Internal::NoPrompt.into(), "no prompt"),
            (
                BundleError::SchemaVersion {
                    found: "skillc.bundle/0".into(),
                }
                .into(),
                "bundle: schema version `skillc.bundle/0`, this runtime executes `skillc.bundle/1`",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }

    #[test]
    fn a_bundle_without_its_eight_phases_is_refused_by_name() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../generated-skills/llama1b/bundle.json"
        );
        let text = std::fs::read_to_string(path).expect("the committed bundle");
        let mut bundle: Bundle = serde_json::from_str(&text).expect("it parses");
        bundle.phases.swap(2, 3);
        let error = DeployError::from(bundle.check().expect_err("refused"));
        assert_eq!(
            error.to_string(),
            "bundle: expected phases 0 to 7 in order, found [0, 1, 3, 2, 4, 5, 6, 7]"
        );
        assert!(std::error::Error::source(&error).is_some());
    }
}
