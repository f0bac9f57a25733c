//! Per-feature proof of a model that has no transformers outputs of its own
//! (a config with seeded random weights, or a checkpoint without
//! `reference.safetensors`). Its code paths (`model::features`) are matched with
//! the transformers fixtures that take the same paths; each of those fixtures runs
//! through the CPU reference against its own transformers outputs, so a path is
//! proven by a fixture that matches, disproven by one that does not (phase 0
//! fails), and merely trusted when no fixture takes it (a warning naming it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use crate::model::features::{features, Feature};
use crate::model::oracle::compare::{
    check_all, Agreement, CompareError, ReferenceTensors, REFERENCE_FILE,
};
use crate::model::{Model, ModelError};

/// One fixture's match against its transformers outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct FixtureMatch {
    /// The fixture directory's name.
    pub fixture: String,
    pub features: BTreeSet<Feature>,
    /// `Err` when the fixture could not be loaded or compared.
    pub agreement: Result<Agreement, FixtureError>,
}

/// Why a fixture proves nothing: it does not load, or its reference does not
/// compare.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FixtureError {
    #[error(transparent)]
    Load(#[from] ModelError),
    #[error(transparent)]
    Compare(#[from] CompareError),
}

impl FixtureMatch {
    pub fn holds(&self, tolerance: f64) -> bool {
        self.agreement.as_ref().is_ok_and(|a| a.holds(tolerance))
    }
}

/// Which fixtures prove one of the model's paths (empty: none takes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureProof {
    pub feature: Feature,
    pub fixtures: Vec<String>,
}

/// Every fixture of `dir` that holds transformers outputs, each checked against
/// them at `tolerance`, in name order. Checked once per process and directory
/// (the fixtures are tiny, but a test binary deploys many config-only models).
pub fn fixture_matches(dir: &Path, tolerance: f64) -> Arc<Vec<FixtureMatch>> {
    type Cache = Mutex<BTreeMap<PathBuf, Arc<Vec<FixtureMatch>>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(BTreeMap::new()));
    let key = dir.join(format!("@{tolerance:e}"));
    if let Some(hit) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return hit;
    }
    let matches = Arc::new(check_fixtures(dir, tolerance));
    if let Ok(mut c) = cache.lock() {
        c.insert(key, matches.clone());
    }
    matches
}

fn check_fixtures(dir: &Path, tolerance: f64) -> Vec<FixtureMatch> {
    fixture_dirs(dir)
        .iter()
        .filter_map(|d| check_fixture(d, tolerance))
        .collect()
}

/// The fixtures of `dir`, sorted: its folders holding a config.json and a
/// transformers `reference.safetensors`.
pub fn fixture_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(REFERENCE_FILE).is_file() && p.join("config.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

fn check_fixture(dir: &Path, tolerance: f64) -> Option<FixtureMatch> {
    let fixture = dir.file_name()?.to_string_lossy().into_owned();
    let model = match Model::load(dir, None) {
        Ok(m) => m,
        Err(e) => {
            return Some(FixtureMatch {
                fixture,
                features: BTreeSet::new(),
                agreement: Err(e.into()),
            })
        }
    };
    let agreement = ReferenceTensors::read(&dir.join(REFERENCE_FILE))
        .and_then(|r| check_all(&model, &r, tolerance))
        .map(|checks| Agreement::of(&checks))
        .map_err(FixtureError::from);
    Some(FixtureMatch {
        fixture,
        features: features(&model.arch),
        agreement,
    })
}

/// For each of `used`, the fixtures among `matches` that take it and match
/// transformers.
pub fn proofs(
    used: &BTreeSet<Feature>,
    matches: &[FixtureMatch],
    tolerance: f64,
) -> Vec<FeatureProof> {
    used.iter()
        .map(|&feature| FeatureProof {
            feature,
            fixtures: matches
                .iter()
                .filter(|m| m.features.contains(&feature) && m.holds(tolerance))
                .map(|m| m.fixture.clone())
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures")
    }

    #[test]
    fn every_shipped_fixture_matches_and_llama3_scaling_is_proven_by_the_llama_fixtures() {
        let matches = fixture_matches(&fixtures(), 1e-4);
        assert!(matches.len() >= 4, "{matches:?}");
        for m in matches.iter() {
            assert!(m.holds(1e-4), "{m:?}");
        }
        let used = BTreeSet::from([Feature::RopeLlama3, Feature::UntiedEmbeddings]);
        let p = proofs(&used, &matches, 1e-4);
        assert_eq!(p[0].feature, Feature::RopeLlama3);
        assert!(p[0].fixtures.contains(&"llama32-tiny".to_string()), "{p:?}");
        assert!(
            p[1].fixtures.is_empty(),
            "no shipped fixture is untied: {p:?}"
        );
    }

    /// A fixture that disagrees with transformers proves nothing: at a tolerance
    /// no f32 reference meets, every path is left unproven.
    #[test]
    fn a_fixture_outside_its_tolerance_proves_nothing() {
        let matches = fixture_matches(&fixtures(), 1e-12);
        assert!(matches.iter().all(|m| !m.holds(1e-12)));
        let used = BTreeSet::from([Feature::RopeDefault]);
        assert!(proofs(&used, &matches, 1e-12)[0].fixtures.is_empty());
    }
}
