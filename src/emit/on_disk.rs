//! `skillc build --check`: compares what the sources produce with the bundle on disk
//! without writing anything, and summarises the differences as a short unified diff
//! for CI logs.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use similar::TextDiff;
use walkdir::WalkDir;

use super::Rendered;

/// How one file differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// The sources produce it; the disk lacks it.
    Missing(String),
    /// On disk, but the sources no longer produce it.
    Extra(String),
    /// Both have it with different content (on disk, expected).
    Changed {
        path: String,
        on_disk: String,
        expected: String,
    },
}

/// Reads every file under `dir` (relative `/`-separated paths); a missing directory
/// reads as empty.
pub fn read_tree(dir: &Path) -> io::Result<BTreeMap<String, Vec<u8>>> {
    let mut files = BTreeMap::new();
    if !dir.exists() {
        return Ok(files);
    }
    for entry in WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.map_err(io::Error::other)?;
        if !entry.file_type().is_file() {
            continue;
        }
        let relative = entry
            .path()
            .strip_prefix(dir)
            .map_err(io::Error::other)?
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        files.insert(relative, fs::read(entry.path())?);
    }
    Ok(files)
}

/// Differences between the bundle on disk and the rendered one, by path.
pub fn compare(dir: &Path, rendered: &Rendered) -> io::Result<Vec<Difference>> {
    let on_disk = read_tree(dir)?;
    let mut differences = Vec::new();
    for (path, expected) in &rendered.files {
        match on_disk.get(path) {
            None => differences.push(Difference::Missing(path.clone())),
            Some(bytes) if bytes.as_slice() != expected.as_bytes() => {
                differences.push(Difference::Changed {
                    path: path.clone(),
                    on_disk: String::from_utf8_lossy(bytes).into_owned(),
                    expected: expected.clone(),
                })
            }
            Some(_) => {}
        }
    }
    differences.extend(
        on_disk
            .keys()
            .filter(|path| !rendered.files.contains_key(*path))
            .map(|path| Difference::Extra(path.clone())),
    );
    differences.sort_by(|a, b| path_of(a).cmp(path_of(b)));
    Ok(differences)
}

fn path_of(d: &Difference) -> &str {
    match d {
        Difference::Missing(p) | Difference::Extra(p) => p,
        Difference::Changed { path, .. } => path,
    }
}

/// A unified diff of every difference, each file's hunks cut after
/// `lines_per_file` lines, the whole after `max_files` files.
pub fn report(differences: &[Difference], lines_per_file: usize, max_files: usize) -> String {
    let mut out = String::new();
    for d in differences.iter().take(max_files) {
        match d {
            Difference::Missing(path) => out.push_str(&format!("missing: {path}\n")),
            Difference::Extra(path) => {
                out.push_str(&format!("not produced by the sources: {path}\n"))
            }
            Difference::Changed {
                path,
                on_disk,
                expected,
            } => {
                let diff = TextDiff::from_lines(on_disk.as_str(), expected.as_str());
                let text = diff
                    .unified_diff()
                    .context_radius(2)
                    .header(
                        &format!("a/{path} (on disk)"),
                        &format!("b/{path} (from sources)"),
                    )
                    .to_string();
                let lines: Vec<&str> = text.lines().collect();
                for line in lines.iter().take(lines_per_file) {
                    out.push_str(line);
                    out.push('\n');
                }
                if lines.len() > lines_per_file {
                    out.push_str(&format!(
                        "… {} more diff lines in {path}\n",
                        lines.len() - lines_per_file
                    ));
                }
            }
        }
    }
    if differences.len() > max_files {
        out.push_str(&format!(
            "… and {} more files differ\n",
            differences.len() - max_files
        ));
    }
    out
}
