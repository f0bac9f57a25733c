//! What a run writes and reads back: the report record (`record`) and its Markdown
//! (`report_md`), the run's trajectory (`trajectory`, timestamped by `clock`), the
//! modeled roofline and trace (`perf`), `plan.json` (`production`) and the kernel
//! registry (`registry`), with bundle and model texts escaped for Markdown
//! (`markdown`); this module holds the small helpers for those files.

pub mod clock;
pub mod markdown;
pub mod perf;
pub mod production;
pub mod record;
pub mod registry;
pub mod report_md;
pub mod trajectory;
pub mod weight_path;

use std::path::Path;

use sha2::{Digest, Sha256};

use super::DeployError;

/// Lowercase hex sha256 of a file's bytes.
pub fn sha256_file(path: &Path) -> Result<String, DeployError> {
    let bytes = std::fs::read(path).map_err(|e| DeployError::io(path, e))?;
    Ok(sha256_hex(&bytes))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
