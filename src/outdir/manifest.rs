//! Manifests: the SHA-256 of every file skillc wrote into a folder, by relative
//! `/`-separated path, and the comparison of a folder with one. The same check
//! proves a folder is skillc's to replace and that a bundle is as it was built.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};
use walkdir::WalkDir;

use crate::digest::sha256_hex;

/// Relative path → lowercase hex SHA-256 of the file's bytes.
pub type Hashes = BTreeMap<String, String>;

/// How a folder differs from its manifest, each list sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verification {
    /// Listed, present, with other content.
    pub changed: Vec<String>,
    /// Listed, absent (or not a regular file any more).
    pub missing: Vec<String>,
    /// Present, not listed (a directory is named once, not file by file).
    pub unlisted: Vec<String>,
}

impl Verification {
    pub fn is_clean(&self) -> bool {
        self.changed.is_empty() && self.missing.is_empty() && self.unlisted.is_empty()
    }

    /// `changed: a, b; missing: c; not listed: d`, each list cut after `max`.
    pub fn summary(&self, max: usize) -> String {
        let mut parts = Vec::new();
        for (label, paths) in [
            ("changed", &self.changed),
            ("missing", &self.missing),
            ("not listed", &self.unlisted),
        ] {
            if !paths.is_empty() {
                parts.push(format!("{label}: {}", shortlist(paths, max)));
            }
        }
        parts.join("; ")
    }
}

/// `a, b, c and 4 more`.
pub fn shortlist(items: &[String], max: usize) -> String {
    let mut text = items
        .iter()
        .take(max)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > max {
        text.push_str(&format!(" and {} more", items.len() - max));
    }
    text
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// The hash of every regular file under `dir` except `skip` (symbolic links are
/// not followed: skillc never writes one).
pub fn hash_tree(dir: &Path, skip: &[&str]) -> io::Result<Hashes> {
    let mut hashes = Hashes::new();
    for entry in WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let entry = entry.map_err(io::Error::other)?;
        if entry.file_type().is_file() {
            let path = relative(dir, entry.path());
            if !skip.contains(&path.as_str()) {
                hashes.insert(path, sha256_hex(&fs::read(entry.path())?));
            }
        }
    }
    Ok(hashes)
}

/// Compares `dir` with `listed`; the files in `own` (the manifest itself) are
/// neither listed nor foreign.
pub fn verify(dir: &Path, listed: &Hashes, own: &[&str]) -> io::Result<Verification> {
    let mut expected: BTreeSet<String> = own.iter().map(|s| s.to_string()).collect();
    for path in listed.keys() {
        let mut prefix = String::new();
        for part in path.split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            expected.insert(prefix.clone());
        }
    }
    let mut result = Verification::default();
    let mut present = BTreeSet::new();
    let mut walk = WalkDir::new(dir)
        .min_depth(1)
        .sort_by_file_name()
        .into_iter();
    while let Some(entry) = walk.next() {
        let entry = entry.map_err(io::Error::other)?;
        let path = relative(dir, entry.path());
        if !expected.contains(&path) {
            if entry.file_type().is_dir() {
                walk.skip_current_dir();
                result.unlisted.push(format!("{path}/"));
            } else {
                result.unlisted.push(path);
            }
            continue;
        }
        let Some(hash) = listed.get(&path) else {
            continue;
        };
        if !entry.file_type().is_file() {
            continue;
        }
        present.insert(path.clone());
        if &sha256_hex(&fs::read(entry.path())?) != hash {
            result.changed.push(path);
        }
    }
    result.missing = listed
        .keys()
        .filter(|p| !present.contains(*p))
        .cloned()
        .collect();
    Ok(result)
}

/// The file names of the two manifests skillc keeps.
pub const BUNDLE_MANIFEST: &str = skillc_runtime::bundle::FILE_NAME;
pub const OWNED_MANIFEST: &str = ".skillc-owned.json";

/// `.skillc-owned.json`: what a deploy run wrote (a bundle's own manifest is
/// bundle.json's `files`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnedManifest {
    pub schema_version: String,
    pub written_by: String,
    pub files: Hashes,
}

pub const OWNED_SCHEMA: &str = "skillc.owned/1";

/// The part of bundle.json that lists its files.
#[derive(Debug, Deserialize)]
struct BundleFiles {
    schema_version: String,
    files: Hashes,
}

/// bundle.json's `files`, when `dir/bundle.json` is a skillc bundle manifest.
pub fn read_bundle_hashes(dir: &Path) -> Option<Hashes> {
    let text = skillc_runtime::input::read_to_string(&dir.join(BUNDLE_MANIFEST)).ok()?;
    let parsed: BundleFiles = serde_json::from_str(&text).ok()?;
    parsed
        .schema_version
        .starts_with("skillc.bundle/")
        .then_some(parsed.files)
}

/// `.skillc-owned.json`'s `files`, when it is one.
pub fn read_owned_hashes(dir: &Path) -> Option<Hashes> {
    let text = skillc_runtime::input::read_to_string(&dir.join(OWNED_MANIFEST)).ok()?;
    let parsed: OwnedManifest = serde_json::from_str(&text).ok()?;
    (parsed.schema_version == OWNED_SCHEMA).then_some(parsed.files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("skillc-manifest-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("a")).expect("temp dir");
        fs::write(dir.join("a/one.md"), "one").expect("write");
        fs::write(dir.join("two.json"), "two").expect("write");
        dir
    }

    #[test]
    fn a_folder_matches_its_own_hashes_and_nothing_else() {
        let dir = temp("clean");
        let hashes = hash_tree(&dir, &[]).expect("hash");
        assert_eq!(hashes.keys().collect::<Vec<_>>(), ["a/one.md", "two.json"]);
        assert!(verify(&dir, &hashes, &[]).expect("verify").is_clean());

        fs::write(dir.join("a/one.md"), "edited").expect("write");
        fs::remove_file(dir.join("two.json")).expect("remove");
        fs::create_dir_all(dir.join("mine/deep")).expect("mkdir");
        fs::write(dir.join("mine/deep/notes.txt"), "mine").expect("write");
        fs::write(dir.join("a/extra.md"), "extra").expect("write");
        let found = verify(&dir, &hashes, &[]).expect("verify");
        assert_eq!(
            found,
            Verification {
                changed: vec!["a/one.md".into()],
                missing: vec!["two.json".into()],
                unlisted: vec!["a/extra.md".into(), "mine/".into()],
            }
        );
        assert_eq!(
            found.summary(1),
            "changed: a/one.md; missing: two.json; not listed: a/extra.md and 1 more"
        );
        fs::remove_dir_all(&dir).ok();
    }
}
