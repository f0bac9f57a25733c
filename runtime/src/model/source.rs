//! A model source as a user names it with `--model`: a GGUF file, a
//! directory holding one (and no config.json), or a Hugging Face directory
//! (config.json, *.safetensors or none). One place says where the
//! architecture comes from, which file identifies the model (hashed into
//! plans), and how the weights are loaded, so the deploy executor, the
//! evaluator and the CLIs agree.

use std::path::{Path, PathBuf};

use super::arch::Architecture;
use super::config::load_config;
use super::gguf::{GgufError, GgufFile};
use super::{gguf_source, Model, ModelError};

/// Where a model's architecture and weights come from.
#[derive(Debug)]
pub enum ModelSource {
    /// A Hugging Face directory (or a config alone).
    Directory(PathBuf),
    /// A GGUF file, parsed; `path` is the file itself.
    Gguf { path: PathBuf, file: GgufFile },
}

impl ModelSource {
    /// The source `path` names; a malformed GGUF file is an error here.
    pub fn locate(path: &Path) -> Result<Self, GgufError> {
        match gguf_source(path)? {
            Some(file) => {
                let path = if path.is_file() {
                    path.to_path_buf()
                } else {
                    path.join(&file.name)
                };
                Ok(Self::Gguf { path, file })
            }
            None => Ok(Self::Directory(path.to_path_buf())),
        }
    }

    /// The file that identifies the model: config.json, or the GGUF file.
    pub fn identity(&self) -> PathBuf {
        match self {
            Self::Directory(dir) => dir.join("config.json"),
            Self::Gguf { path, .. } => path.clone(),
        }
    }

    /// The directory of the companion files (tokenizer, transformers reference).
    pub fn companion_dir(&self) -> PathBuf {
        match self {
            Self::Directory(dir) => dir.clone(),
            Self::Gguf { path, .. } => super::companion_dir(path),
        }
    }

    pub fn gguf(&self) -> Option<&GgufFile> {
        match self {
            Self::Gguf { file, .. } => Some(file),
            Self::Directory(_) => None,
        }
    }

    /// The architecture: config.json, or the GGUF metadata.
    pub fn architecture(&self) -> Result<Architecture, ModelError> {
        match self {
            Self::Directory(dir) => Ok(load_config(&dir.join("config.json"))?),
            Self::Gguf { file, .. } => Ok(super::gguf::config::architecture(file)?),
        }
    }

    /// The weights for `arch`: the checkpoint (random under `seed` without
    /// one), or the GGUF tensors, packed and mapped.
    pub fn load(&self, arch: Architecture, seed: Option<u64>) -> Result<Model, ModelError> {
        match self {
            Self::Directory(dir) => Model::load_with_arch(arch, dir, seed),
            Self::Gguf { file, .. } => Model::from_gguf(file),
        }
    }
}

impl Model {
    /// True when some tensor is packed (read from a GGUF file in its format).
    pub fn is_packed(&self) -> bool {
        self.weights
            .tensors()
            .iter()
            .any(|t| t.packed_rows().is_some())
    }

    /// The model the bf16 NPU path runs, and its gates' oracle with it: packed
    /// weights rounded to bf16 once; a bf16 model unchanged.
    pub fn for_bf16_path(self) -> Model {
        if !self.is_packed() {
            return self;
        }
        Model {
            weights: self.weights.rounded_to_bf16(),
            ..self
        }
    }
}
