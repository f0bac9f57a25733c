//! Models: the architecture description, config parsing, weight loading and the
//! CPU f32 reference that every numerical gate compares against.
//!
//! - [`config`]: `config.json` (either Hugging Face layout) → [`arch::Architecture`];
//!   [`scope`]: what the reference can execute.
//! - [`checkpoint`] reads safetensors files (single or sharded, memory-mapped);
//!   [`weights`] arranges them per layer as bf16 [`tensor::BfTensor`]s;
//!   [`random`] makes seeded weights from a config alone; [`memory`] refuses
//!   what would not fit.
//! - [`oracle`]: the reference forward pass, its building blocks, and the
//!   comparison with a fixture's `reference.safetensors`.
//! - [`tokenizer`]: text prompts via `tokenizer.json` (cargo feature `tokenizer`).
//!
//! A [`Model`] is the architecture plus its weights:
//! `Model::load(dir, seed)` reads `dir/config.json` and the weights in `dir`,
//! or draws random weights under `seed` when `dir` holds none;
//! `Model::random(arch, seed)` needs no directory.

pub mod arch;
pub mod chat;
pub mod checkpoint;
pub mod config;
pub mod consistency;
pub mod features;
pub mod gguf;
pub mod memory;
pub mod oracle;
pub mod prompt;
pub mod quant;
pub mod random;
pub mod scope;
pub mod seeded_quant;
pub mod source;
pub mod tensor;
pub mod tokenizer;
pub mod weights;

use std::collections::BTreeMap;
use std::path::Path;

use thiserror::Error;

use arch::Architecture;
use checkpoint::{Checkpoint, WeightsError};
use config::ConfigError;
use gguf::{GgufError, GgufFile};
use memory::{available_memory, human_bytes, Available, MemoryEstimate};
use weights::Weights;

/// Why a model could not be made.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ModelError {
    #[error("config: {0}")]
    Config(#[from] ConfigError),
    #[error("weights: {0}")]
    Weights(#[from] WeightsError),
    #[error("{0}")]
    Gguf(#[from] GgufError),
    #[error("no *.safetensors weights in the model directory; give a seed to use random weights")]
    NoWeights,
    #[error("seeded 4-bit weights replace a config-only model's random weights; this model stores its own")]
    SeededQuantOfStored,
    #[error("seeded 4-bit weights: {0}")]
    SeededQuant(#[from] seeded_quant::SeededQuantError),
    #[error(
        "the model would not fit in memory: it needs about {} ({} weights + {} KV cache for \
         {} positions + {} activations) but {} is {}",
        human_bytes(.estimate.total()),
        human_bytes(.estimate.weights),
        human_bytes(.estimate.kv_cache),
        .estimate.context,
        human_bytes(.estimate.activations),
        human_bytes(.available.bytes),
        .available.limit.describe()
    )]
    TooLarge {
        estimate: MemoryEstimate,
        available: Available,
    },
}

/// Where the weights came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WeightOrigin {
    /// Safetensors files, relative to the model directory.
    Checkpoint { files: Vec<String> },
    Random {
        seed: u64,
        /// The format the decoder projections were quantized to in memory
        /// (`seeded_quant`), when they were.
        quantized: Option<quant::WeightFormat>,
    },
    /// A GGUF file (its name), with the count of tensors per stored format.
    Gguf {
        file: String,
        formats: BTreeMap<String, usize>,
    },
}

/// An architecture with its weights, ready for the reference.
#[derive(Debug, Clone)]
pub struct Model {
    pub arch: Architecture,
    pub weights: Weights,
    pub origin: WeightOrigin,
}

impl Model {
    /// Reads `dir/config.json`, then the weights in `dir`; with no weight files
    /// there, draws random weights under `seed` (an error without one). Either
    /// way a model whose reference would not fit in memory is refused first.
    pub fn load(dir: &Path, seed: Option<u64>) -> Result<Self, ModelError> {
        let arch = config::load_config(&dir.join("config.json"))?;
        Self::load_with_arch(arch, dir, seed)
    }

    /// A model source: a `.gguf` file, a directory holding one (and no
    /// config.json), or a Hugging Face directory (see [`Model::load`]).
    pub fn open(path: &Path, seed: Option<u64>) -> Result<Self, ModelError> {
        match gguf_source(path)? {
            Some(file) => Self::from_gguf(&file),
            None => Self::load(path, seed),
        }
    }

    /// The architecture from the file's metadata and its tensors, mapped.
    pub fn from_gguf(file: &GgufFile) -> Result<Self, ModelError> {
        let arch = gguf::config::architecture(file)?;
        check_fits(default_estimate(&arch), available_memory())?;
        let weights = gguf::weights::weights(&arch, file)?;
        let mut formats = BTreeMap::new();
        for tensor in weights.tensors() {
            *formats
                .entry(tensor.format().name().to_string())
                .or_insert(0) += 1;
        }
        Ok(Self {
            arch,
            weights,
            origin: WeightOrigin::Gguf {
                file: file.name.clone(),
                formats,
            },
        })
    }

    /// Like [`Model::load`] with an architecture parsed elsewhere (e.g. from
    /// `config.transformers5.json`).
    pub fn load_with_arch(
        arch: Architecture,
        dir: &Path,
        seed: Option<u64>,
    ) -> Result<Self, ModelError> {
        match Checkpoint::open(dir)? {
            Some(checkpoint) => {
                check_fits(default_estimate(&arch), available_memory())?;
                let weights = Weights::from_checkpoint(&arch, &checkpoint)?;
                let files = checkpoint.files().iter().map(|f| f.to_string()).collect();
                Ok(Self {
                    arch,
                    weights,
                    origin: WeightOrigin::Checkpoint { files },
                })
            }
            None => match seed {
                Some(seed) => Self::random(arch, seed),
                None => Err(ModelError::NoWeights),
            },
        }
    }

    /// Seeded random bf16 weights for `arch` (see [`random`]), refused up front
    /// when the estimate exceeds the available memory.
    pub fn random(arch: Architecture, seed: u64) -> Result<Self, ModelError> {
        check_fits(default_estimate(&arch), available_memory())?;
        let weights = random::random_weights(&arch, seed);
        Ok(Self {
            arch,
            weights,
            origin: WeightOrigin::Random {
                seed,
                quantized: None,
            },
        })
    }

    /// This seeded random model with its decoder projections quantized to
    /// the 4-bit `format` (see [`seeded_quant`]); a model read from a file
    /// keeps the weights it stores and is refused.
    pub fn with_seeded_quant(self, format: quant::WeightFormat) -> Result<Self, ModelError> {
        let WeightOrigin::Random { seed, .. } = self.origin else {
            return Err(ModelError::SeededQuantOfStored);
        };
        let weights = seeded_quant::quantize_projections(&self.weights, format)?;
        Ok(Self {
            weights,
            origin: WeightOrigin::Random {
                seed,
                quantized: Some(format),
            },
            ..self
        })
    }
}

/// The GGUF file `path` stands for, opened: `path` itself when it is a file,
/// or the one `*.gguf` of a directory without a config.json. `Ok(None)` for
/// a Hugging Face directory.
pub fn gguf_source(path: &Path) -> Result<Option<GgufFile>, GgufError> {
    if path.is_dir() && path.join("config.json").exists() {
        refuse_two_sources(path)?;
        return Ok(None);
    }
    gguf::weights::open(path)
}

/// A directory with a config.json and a GGUF file describes two models; which
/// one runs must not depend on a rule the user cannot see.
fn refuse_two_sources(dir: &Path) -> Result<(), GgufError> {
    let Some(gguf) = gguf::in_dir(dir).into_iter().next() else {
        return Ok(());
    };
    let name = gguf
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    Err(GgufError::Unsupported {
        file: dir.display().to_string(),
        message: format!(
            "holds both a Hugging Face model (config.json) and a GGUF file ({name}); name the \
             one to run (--model {}) or move the other out",
            dir.join(&name).display()
        ),
    })
}

/// The directory a model's companion files (tokenizer, chat template,
/// transformers reference) sit in: `path` itself, or a file's directory.
pub fn companion_dir(path: &Path) -> std::path::PathBuf {
    if path.is_file() {
        path.parent().map(Path::to_path_buf).unwrap_or_default()
    } else {
        path.to_path_buf()
    }
}

/// What running the reference on `arch` takes at the default context.
pub fn default_estimate(arch: &Architecture) -> MemoryEstimate {
    MemoryEstimate::for_reference(arch, memory::DEFAULT_CONTEXT, memory::DEFAULT_PREFILL_ROWS)
}

/// Refuses an estimate above the available memory (when that is known).
pub fn check_fits(
    estimate: MemoryEstimate,
    available: Option<Available>,
) -> Result<(), ModelError> {
    if memory::is_checked_as_a_whole() {
        return Ok(());
    }
    match available {
        Some(available) if estimate.total() > available.bytes => Err(ModelError::TooLarge {
            estimate,
            available,
        }),
        _ => Ok(()),
    }
}
