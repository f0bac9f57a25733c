//! Front end of the compiler: loads `.traj` files and parses them into the typed AST
//! ([`ast`]) with a [`Span`] on every node. Language reference: grammar/README.md.
//!
//! A trajectory is a directory: its `.traj` files, in file-name order, form one
//! trajectory. Typical use:
//!
//! ```no_run
//! # use std::path::Path;
//! let sources = skillc::syntax::load_dir(Path::new("grammar/example"))?;
//! let (parsed, diagnostics) = skillc::syntax::parse_sources(&sources, 0);
//! let (graph, more) = skillc::graph::build(parsed);
//! # Ok::<(), skillc::syntax::LoadError>(())
//! ```
//!
//! Several directories load together by concatenating their `SourceFile` lists and
//! giving each directory's first file id to [`parse_sources`]; file ids then index the
//! combined list, which is what the renderer needs.

pub mod ast;
mod errors;
mod parser;
pub mod print;
mod span;
pub mod split;

use std::path::{Path, PathBuf};

use rayon::prelude::*;

pub use ast::*;
pub use parser::dedent;
pub use span::{FileId, LineIndex, Span};

use crate::diag::Diagnostic;

/// The extension of trajectory files.
pub const EXTENSION: &str = "traj";

/// A file's text and the path it is shown under (as given, `/`-separated).
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: String,
    pub text: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {}", skillc_runtime::input::describe(.source))]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: a symbolic link to `{target}`, {why}")]
    BadLink {
        path: String,
        target: String,
        why: String,
    },
    #[error("{0}")]
    Input(#[from] skillc_runtime::input::InputError),
    #[error("{path}: not a directory")]
    NotADirectory { path: String },
    #[error("{path}: no .{EXTENSION} files in this directory")]
    Empty { path: String },
    #[error("{path}: not valid UTF-8")]
    NotUtf8 { path: String },
}

/// Shows a path with `/` separators whatever the platform.
pub fn display_path(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

/// Reads the `.traj` files directly inside `dir`, sorted by file name. A symbolic
/// link is followed to the file it names; one that leads nowhere (dangling, or a
/// loop) is an error, never skipped, and so is a `.traj` that is not a regular
/// file (a FIFO would block the build).
pub fn load_dir(dir: &Path) -> Result<Vec<SourceFile>, LoadError> {
    let shown = display_path(dir);
    if !dir.is_dir() {
        return Err(if dir.exists() {
            LoadError::NotADirectory { path: shown }
        } else {
            LoadError::Io {
                path: shown,
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            }
        });
    }
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in walkdir::WalkDir::new(dir)
        .min_depth(1)
        .max_depth(1)
        .sort_by_file_name()
    {
        let entry = entry.map_err(|e| LoadError::Io {
            path: shown.clone(),
            source: e.into(),
        })?;
        let path = entry.path();
        if path.extension().is_some_and(|e| e == EXTENSION) && !entry.file_type().is_dir() {
            if entry.path_is_symlink() {
                check_link(path)?;
            }
            paths.push(path.to_path_buf());
        }
    }
    if paths.is_empty() {
        return Err(LoadError::Empty { path: shown });
    }
    paths.iter().map(|path| load_file(path)).collect()
}

/// A symbolic link that leads to something: dangling links and loops are named.
fn check_link(path: &Path) -> Result<(), LoadError> {
    let Err(e) = std::fs::metadata(path) else {
        return Ok(());
    };
    let target = std::fs::read_link(path)
        .map(|t| display_path(&t))
        .unwrap_or_default();
    let why = if e.kind() == std::io::ErrorKind::NotFound {
        "which does not exist (a dangling link)".to_string()
    } else if is_link_loop(&e) {
        "which leads back to itself (a loop of symbolic links)".to_string()
    } else {
        format!(
            "which cannot be followed: {}",
            skillc_runtime::input::describe(&e)
        )
    };
    Err(LoadError::BadLink {
        path: display_path(path),
        target,
        why,
    })
}

#[cfg(unix)]
fn is_link_loop(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

#[cfg(not(unix))]
fn is_link_loop(_e: &std::io::Error) -> bool {
    false
}

/// Reads one file (a regular file, or a link to one).
pub fn load_file(path: &Path) -> Result<SourceFile, LoadError> {
    let shown = display_path(path);
    let bytes = skillc_runtime::input::read(path)?;
    let mut text = String::from_utf8(bytes).map_err(|_| LoadError::NotUtf8 {
        path: shown.clone(),
    })?;
    // Editors on some platforms start UTF-8 files with a byte-order mark; it is not text.
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    Ok(SourceFile { path: shown, text })
}

/// Parses one file's text as file `file`.
pub fn parse_file(file: FileId, source: &SourceFile) -> (ParsedFile, Vec<Diagnostic>) {
    parser::parse_text(file, &source.path, &source.text)
}

/// Parses files in parallel; file `i` of `sources` gets id `first_id + i`. Results
/// and diagnostics come back in file order whatever the thread count.
pub fn parse_sources(sources: &[SourceFile], first_id: u32) -> (Vec<ParsedFile>, Vec<Diagnostic>) {
    let results: Vec<_> = sources
        .par_iter()
        .enumerate()
        .map(|(i, source)| parse_file(FileId(first_id + i as u32), source))
        .collect();
    let mut parsed = Vec::with_capacity(results.len());
    let mut diagnostics = Vec::new();
    for (file, diags) in results {
        parsed.push(file);
        diagnostics.extend(diags);
    }
    (parsed, diagnostics)
}

/// One trajectory directory, loaded and parsed.
#[derive(Debug)]
pub struct ParsedDir {
    /// File `i` has `FileId(i)`.
    pub sources: Vec<SourceFile>,
    pub files: Vec<ParsedFile>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Loads and parses one trajectory directory (file ids start at 0).
pub fn parse_dir(dir: &Path) -> Result<ParsedDir, LoadError> {
    let sources = load_dir(dir)?;
    let (files, diagnostics) = parse_sources(&sources, 0);
    Ok(ParsedDir {
        sources,
        files,
        diagnostics,
    })
}
