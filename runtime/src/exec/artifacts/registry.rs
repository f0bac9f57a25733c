//! The kernel registry file: every kernel × shape × configuration a run validated,
//! with its numbers, the way the reference system's registry records them (shape,
//! configuration, tolerance, mismatches, mean_rel_L1, who uses it, where the
//! configuration came from). A later run given the file (`--registry`) tries its
//! passing configurations first; the output registry keeps the rows it was given.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::exec::gates::validate::{CheckOutcome, KernelCheck};
use crate::exec::DeployError;
use crate::xdna2::plan::Launch;

pub const REGISTRY_SCHEMA: &str = "skillc.kernel-registry/1";

/// Why a file is not a registry this runtime reads.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("not a kernel registry ({}:{}: {source})", source.line(), source.column())]
    Syntax { source: serde_json::Error },
    #[error("registry schema `{0}`, expected `{REGISTRY_SCHEMA}`")]
    Schema(String),
    #[error("{0}")]
    Unreadable(crate::input::Problem),
    #[error(
        "recorded on device `{found}`; this runtime validates kernels for `{expected}`, and \
         another device's configurations prove nothing here"
    )]
    Device { found: String, expected: String },
}

/// Largest registry read: a run records a few hundred rows of about 1 KB.
pub const MAX_REGISTRY_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registry {
    pub schema_version: String,
    pub device: String,
    /// By site key and configuration, in key order.
    pub rows: Vec<RegistryRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegistryRow {
    /// `gemm 2048x2048x512`.
    pub key: String,
    /// The production launch (spec and buffer names).
    pub launch: Launch,
    pub check: KernelCheck,
    /// Where the configuration came from (bundle step, transfer, search, lesson).
    pub source: String,
    /// Models that use it.
    pub used_by: Vec<String>,
}

impl RegistryRow {
    pub fn passed(&self) -> bool {
        self.check.passed()
    }

    fn identity(&self) -> String {
        format!(
            "{}|{}",
            self.key,
            serde_json::to_string(&spec_only(&self.launch)).unwrap_or_default()
        )
    }
}

/// A launch's spec without buffer names (what identifies a configuration).
pub fn spec_only(launch: &Launch) -> serde_json::Value {
    let mut v = serde_json::to_value(launch).unwrap_or_default();
    if let Some(obj) = v.as_object_mut() {
        obj.retain(|k, _| k == "kernel" || k == "spec");
    }
    v
}

impl Registry {
    pub fn new() -> Self {
        Registry {
            schema_version: REGISTRY_SCHEMA.to_string(),
            device: "npu2".to_string(),
            rows: Vec::new(),
        }
    }

    /// Reads a registry given with `--registry`: a regular file (a FIFO would
    /// block, a device never end) of at most [`MAX_REGISTRY_BYTES`], of this
    /// schema, recorded on the device this runtime emulates.
    pub fn load(path: &Path) -> Result<Self, DeployError> {
        let invalid = |source| DeployError::Registry {
            path: path.to_path_buf(),
            source,
        };
        let text = crate::input::read_to_string_at_most(path, MAX_REGISTRY_BYTES)
            .map_err(|e| invalid(RegistryError::Unreadable(e.problem)))?;
        let registry: Registry = serde_json::from_str(&text)
            .map_err(|e| invalid(RegistryError::Syntax { source: e }))?;
        if registry.schema_version != REGISTRY_SCHEMA {
            return Err(invalid(RegistryError::Schema(registry.schema_version)));
        }
        let device = Registry::new().device;
        if registry.device != device {
            return Err(invalid(RegistryError::Device {
                found: registry.device,
                expected: device,
            }));
        }
        Ok(registry)
    }

    /// Adds or replaces the row for the same key and configuration, merging users.
    pub fn record(&mut self, mut row: RegistryRow) {
        let id = row.identity();
        if let Some(existing) = self.rows.iter_mut().find(|r| r.identity() == id) {
            let mut users: Vec<String> = existing.used_by.drain(..).chain(row.used_by).collect();
            users.sort();
            users.dedup();
            row.used_by = users;
            *existing = row;
        } else {
            self.rows.push(row);
        }
        self.rows.sort_by_key(|r| r.identity());
    }

    /// The first passing configuration recorded for `key`.
    pub fn passing(&self, key: &str) -> Option<&RegistryRow> {
        self.rows.iter().find(|r| r.key == key && r.passed())
    }

    /// Whether this exact launch configuration passed.
    pub fn validated(&self, key: &str, launch: &Launch) -> bool {
        let spec = spec_only(launch);
        self.rows
            .iter()
            .any(|r| r.key == key && r.passed() && spec_only(&r.launch) == spec)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// Rows by kernel, for reports.
    pub fn by_kernel(&self) -> BTreeMap<&str, usize> {
        let mut m = BTreeMap::new();
        for r in &self.rows {
            *m.entry(r.check.kernel.as_str()).or_insert(0) += 1;
        }
        m
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

/// Mismatches of a check, or the element count for a refused one (for tables).
pub fn mismatches(check: &KernelCheck) -> Option<usize> {
    match check.outcome {
        CheckOutcome::Compared { mismatches, .. } => Some(mismatches),
        CheckOutcome::Refused { .. } => None,
    }
}
