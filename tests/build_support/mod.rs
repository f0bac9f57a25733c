//! Shared helpers of the `build*` integration tests: build trajectory directories in
//! memory, scratch directories, copies.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use skillc::cli::build::{build_loaded, Built};
use skillc::cli::render::{self, Sources};

pub fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Builds trajectory directories in memory; returns the build and its diagnostics
/// rendered as the CLI prints them (paths as given, so relative to the repo).
pub fn build(dirs: &[PathBuf], name: Option<&str>) -> (Built, String) {
    let loaded = skillc::graph::load_dirs(dirs).expect("trajectories load");
    assert_eq!(
        loaded.error_count(),
        0,
        "{}",
        render::human(&loaded.diagnostics, &mut Sources::new(&loaded.sources))
    );
    let built = build_loaded(&loaded, name).expect("build");
    let mut diagnostics = loaded.diagnostics.clone();
    diagnostics.extend(built.distilled.diagnostics.iter().cloned());
    skillc::diag::sort(&mut diagnostics);
    let text = render::human(&diagnostics, &mut Sources::new(&loaded.sources));
    let root = format!("{}/", env!("CARGO_MANIFEST_DIR"));
    (built, text.replace(&root, ""))
}

/// A fresh empty directory under the system temp dir, unique to this process and call
/// (the test modules share one process, so two of them may ask for the same name at once).
pub fn scratch(name: &str) -> PathBuf {
    let id = next_scratch_id();
    let dir = std::env::temp_dir().join(format!("skillc-test-{}-{id}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Copies the files directly inside `from` into a new directory `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create copy");
    for entry in fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("file type").is_file() {
            fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
}

/// Subdirectories of `dir`, sorted.
pub fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn next_scratch_id() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
