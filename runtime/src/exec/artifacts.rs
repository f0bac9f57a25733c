//! Small helpers for the files a run reads and writes.

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
