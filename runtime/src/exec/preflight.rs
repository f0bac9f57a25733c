//! What a deploy checks before phase 0 starts, so that inputs that cannot work
//! together are refused in a second instead of after minutes of work: the
//! model's files against each other (`model::consistency`: tokenizer against
//! embedding, reference token ids against the vocabulary), every prompt the
//! run will verify, with the tokens it generates, against the context length,
//! and the memory of the whole run against what the process may still take
//! (`model::memory::DeployEstimate`).
//!
//! A model that cannot be located or whose architecture cannot be read is left
//! to phase 0, which reports it as a failed gate.

use super::gates::topk::GATE_N_TOKENS;
use super::phases::prompts::default_prompts;
use super::{DeployError, DeployOptions};
use std::path::Path;

use crate::model::arch::Architecture;
use crate::model::consistency::{check_context, check_reference_ids, check_tokenizer};
use crate::model::default_estimate;
use crate::model::memory::{available_memory, DeployEstimate};
use crate::model::oracle::compare::{ReferenceTensors, REFERENCE_FILE};
use crate::model::prompt::ModelText;
use crate::model::source::ModelSource;

/// A model whose files passed the preflight, and the memory its whole run was
/// checked for: the loaders inside the run skip their own checks, and the run
/// states this estimate (`estimate::RunEstimate`) before it starts.
pub(crate) struct Checked {
    pub arch: Architecture,
    pub memory: DeployEstimate,
}

/// `None` when the model could not be read: phase 0 reports that, and each
/// loader checks its own memory.
pub(crate) fn preflight(options: &DeployOptions) -> Result<Option<Checked>, DeployError> {
    let Ok(source) = ModelSource::locate(&options.model_dir) else {
        return Ok(None);
    };
    let Ok(arch) = source.architecture() else {
        return Ok(None);
    };
    let dir = source.companion_dir();
    let text = ModelText::for_model(&options.model_dir, source.gguf());
    check_tokenizer(&text, &dir, &arch)?;
    let reference_path = dir.join(REFERENCE_FILE);
    // A reference that cannot be read is phase 0's to report.
    let reference = crate::input::is_regular_file(&reference_path)
        .then(|| ReferenceTensors::read(&reference_path).ok())
        .flatten();
    let mut reference_prompts = Vec::new();
    if let Some(reference) = &reference {
        check_reference_ids(reference, &reference_path, &arch)?;
        for prompt in reference.prompts() {
            if let Ok(ids) = reference.token_ids(&ReferenceTensors::key(&prompt, "input_ids")) {
                reference_prompts.push(ids);
            }
        }
    }
    let prompts = match &options.prompts {
        Some(given) => given.clone(),
        None => default_prompts(&arch, options.seed, reference_prompts),
    };
    check_context(&prompts, GATE_N_TOKENS, &arch)?;
    let files = file_bytes(&source, &dir);
    // The source's map is released before the headroom is read: the run maps
    // the file again, and the estimate counts it.
    drop(source);
    let memory = DeployEstimate::new(default_estimate(&arch), files);
    match available_memory() {
        Some(available) if memory.total() > available.bytes => Err(DeployError::Memory {
            estimate: memory,
            available,
        }),
        _ => Ok(Some(Checked { arch, memory })),
    }
}

/// Bytes of the model files a run maps or reads whole: the weights (a GGUF
/// twice when a transformers reference is beside it: phase 0 compares the
/// exact weights from a second map) and the reference.
fn file_bytes(source: &ModelSource, dir: &Path) -> u64 {
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let reference = size(&dir.join(REFERENCE_FILE));
    match source {
        ModelSource::Gguf { path, .. } => {
            let maps = if reference > 0 { 2 } else { 1 };
            size(path) * maps + reference
        }
        ModelSource::Directory(dir) => std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
                    .map(|p| size(&p))
                    .sum()
            })
            .unwrap_or(0),
    }
}
