//! `plan.json`: the production deployment as the evaluator reloads it — which model
//! (config hash, weights), the verification prompts, the design the plans are built
//! from, the plans themselves, their numerics fingerprint and modeled figures.

use serde::{Deserialize, Serialize};

use super::record::ModeledTimes;
use crate::exec::design::{Design, Plans};

pub const PLAN_SCHEMA: &str = "skillc.production-plan/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProductionPlan {
    pub schema_version: String,
    pub model: ModelRef,
    pub prompts: Vec<Vec<u32>>,
    /// Greedy tokens per prompt and top-k of the verification gate.
    pub tokens: usize,
    pub top_k: usize,
    pub design: Design,
    pub fingerprint: String,
    pub modeled: ModeledTimes,
    /// The cost model's calibration note.
    pub calibration: String,
    pub plans: Plans,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRef {
    pub name: String,
    pub class_name: String,
    /// sha256 of config.json.
    pub config_sha256: String,
    pub weights: WeightsRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "kebab-case")]
pub enum WeightsRef {
    /// Safetensors files or a GGUF file (name and size in bytes).
    Checkpoint { files: Vec<(String, u64)> },
    Random {
        seed: u64,
        /// The 4-bit format the projections were quantized to in memory
        /// (`--seeded-weights`), when they were.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quantized: Option<String>,
    },
}
