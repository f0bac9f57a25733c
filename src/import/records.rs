//! The records an import reads, and how each is cited: the importer's only I/O.
//! Files are taken as given; folders are walked in sorted order, hidden entries
//! (`.git`, `.claude`) left out. A file is a record by its extension (`.md`, `.py`,
//! C and C++ sources and headers) or, for `.txt` and files without one, by holding
//! commit messages (`=== <sha> <date>`); the rest is listed as skipped with the
//! reason. A record is cited as `NAME:relative/path` under a `--cite-as NAME=DIR`
//! root, else by the path as given, never by an absolute path.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use thiserror::Error;

use super::comments::Language;
use super::{commits, Format, Record};
use crate::syntax::display_path;

/// Longest record citation, leaving room for the line range within the 1000
/// characters a `source` may have.
const MAX_CITATION_CHARS: usize = 900;

/// Largest record read; a bigger file is skipped.
pub const MAX_RECORD_BYTES: u64 = 8 << 20;

/// `--cite-as NAME=DIR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiteRoot {
    pub name: String,
    pub dir: PathBuf,
}

#[derive(Debug, Error)]
pub enum ReadError {
    #[error("--cite-as `{0}`: write NAME=DIR, NAME a word such as `mlir-air`")]
    BadCiteAs(String),
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{0}: would be cited by its absolute path; pass --cite-as NAME=DIR for a folder that holds it")]
    AbsoluteCitation(String),
}

/// A file left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    pub path: String,
    pub why: String,
}

#[derive(Debug, Default)]
pub struct Read {
    pub records: Vec<Record>,
    pub skipped: Vec<Skipped>,
}

impl CiteRoot {
    pub fn parse(spec: &str) -> Result<CiteRoot, ReadError> {
        let bad = || ReadError::BadCiteAs(spec.to_string());
        let (name, dir) = spec.split_once('=').ok_or_else(bad)?;
        let word = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !word || dir.is_empty() {
            return Err(bad());
        }
        Ok(CiteRoot {
            name: name.to_string(),
            dir: PathBuf::from(dir),
        })
    }
}

fn io_error(path: &Path, e: impl std::fmt::Display) -> ReadError {
    ReadError::Io {
        path: display_path(path),
        message: e.to_string(),
    }
}

fn canonical(path: &Path) -> Result<PathBuf, ReadError> {
    path.canonicalize()
        .map_err(|e| io_error(path, skillc_runtime::input::describe(&e)))
}

/// Reads every record under `inputs`, each once, cited through `roots`.
pub fn read(inputs: &[PathBuf], roots: &[CiteRoot]) -> Result<Read, ReadError> {
    let roots: Vec<(String, PathBuf)> = roots
        .iter()
        .map(|r| Ok((r.name.clone(), canonical(&r.dir)?)))
        .collect::<Result<_, ReadError>>()?;
    let mut seen = BTreeSet::new();
    let mut out = Read::default();
    for input in inputs {
        for (path, shown) in files(input)? {
            let real = canonical(&path)?;
            if seen.insert(real.clone()) {
                let cite = citation(&real, &shown, &roots)?;
                one(&path, cite, &mut out);
            }
        }
    }
    Ok(out)
}

/// The files of an input (itself, or a folder's, walked in name order) with the
/// path each is shown under.
fn files(input: &Path) -> Result<Vec<(PathBuf, PathBuf)>, ReadError> {
    let metadata = std::fs::metadata(input)
        .map_err(|e| io_error(input, skillc_runtime::input::describe(&e)))?;
    if !metadata.is_dir() {
        return Ok(vec![(input.to_path_buf(), input.to_path_buf())]);
    }
    let mut out = Vec::new();
    let walk = walkdir::WalkDir::new(input)
        .min_depth(1)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| !e.file_name().to_string_lossy().starts_with('.'));
    for entry in walk {
        let entry = entry.map_err(|e| io_error(input, e))?;
        if !entry.file_type().is_dir() {
            let path = entry.path().to_path_buf();
            out.push((path.clone(), path));
        }
    }
    Ok(out)
}

/// `NAME:relative/path` under the deepest root holding `real`, else the path as
/// shown, without `./`.
fn citation(real: &Path, shown: &Path, roots: &[(String, PathBuf)]) -> Result<String, ReadError> {
    let under = roots
        .iter()
        .filter_map(|(name, dir)| real.strip_prefix(dir).ok().map(|rel| (dir, name, rel)))
        .max_by_key(|(dir, _, _)| dir.components().count());
    if let Some((_, name, rel)) = under {
        return Ok(format!("{name}:{}", slashes(rel)));
    }
    if shown.is_absolute() {
        return Err(ReadError::AbsoluteCitation(display_path(shown)));
    }
    Ok(slashes(shown))
}

fn slashes(path: &Path) -> String {
    path.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Reads one file as a record, or records why it is skipped.
fn one(path: &Path, cite: String, out: &mut Read) {
    let skip = |why: &str, out: &mut Read| {
        out.skipped.push(Skipped {
            path: cite.clone(),
            why: why.to_string(),
        })
    };
    // Its entries' `source` must be a valid citation (`graph::check`, E0061).
    if cite.chars().any(char::is_control) || cite.chars().count() > MAX_CITATION_CHARS {
        return skip(
            "its path cannot be cited (a control character, or too long)",
            out,
        );
    }
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let by_extension = match extension.as_str() {
        "md" | "markdown" => Some(Format::Markdown),
        "py" => Some(Format::Code(Language::Python)),
        "c" | "cc" | "cpp" | "cxx" | "h" | "hh" | "hpp" => Some(Format::Code(Language::CFamily)),
        "txt" | "" => None,
        _ => {
            return skip(
                "not a record format (Markdown, Python, C/C++ or commit messages)",
                out,
            )
        }
    };
    if std::fs::metadata(path).is_ok_and(|m| m.len() > MAX_RECORD_BYTES) {
        return skip("larger than a record can be (8 MiB)", out);
    }
    let text = match skillc_runtime::input::read_to_string(path) {
        Ok(text) => text,
        Err(e) => return skip(&e.problem.to_string(), out),
    };
    let format = match by_extension {
        Some(format) => format,
        None if commits::is_commit_file(&text) => Format::Commits,
        None => return skip(
            "not a record format (Markdown, Python, C/C++ or commit messages `=== <sha> <date>`)",
            out,
        ),
    };
    out.records.push(Record { cite, text, format });
}

/// A slug per citation, unique among them: the file's stem, lowercased, with
/// parent folders prepended (`qwen25_0_5b.readme`) while two would be equal, then
/// the extension.
pub fn slugs<'a>(cites: impl Iterator<Item = &'a str>) -> Vec<String> {
    let parts: Vec<Vec<String>> = cites
        .map(|cite| {
            let path = cite.split_once(':').map_or(cite, |(_, p)| p);
            path.split('/').map(sanitize).collect()
        })
        .collect();
    let stem = |p: &[String], depth: usize, ext: bool| {
        let mut last = p.last().cloned().unwrap_or_default();
        if !ext {
            if let Some((s, _)) = last.rsplit_once('.') {
                last = s.to_string();
            }
        }
        let start = p.len().saturating_sub(depth + 1);
        let mut words: Vec<String> = p[start..p.len().saturating_sub(1)].to_vec();
        words.push(last);
        words.join(".")
    };
    let mut out: Vec<String> = parts.iter().map(|p| stem(p, 0, false)).collect();
    for round in 1..=64 {
        let clashing: Vec<bool> = out
            .iter()
            .map(|s| out.iter().filter(|t| *t == s).count() > 1)
            .collect();
        if !clashing.contains(&true) {
            break;
        }
        for (i, clash) in clashing.into_iter().enumerate() {
            if clash {
                let depth = round.min(parts[i].len());
                out[i] = stem(&parts[i], depth, round > parts[i].len());
            }
        }
    }
    out.into_iter()
        .map(|s| {
            if s.starts_with(|c: char| c.is_ascii_alphabetic()) {
                s
            } else {
                format!("r{s}")
            }
        })
        .collect()
}

fn sanitize(part: &str) -> String {
    part.chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_grow_until_unique() {
        let cites = [
            "mlir-air:llms/a/README.md",
            "mlir-air:llms/b/README.md",
            "notes/x.py",
            "notes/x.md",
            "2024.md",
        ];
        assert_eq!(
            slugs(cites.iter().copied()),
            vec!["a.readme", "b.readme", "notes.x.py", "notes.x.md", "r2024"]
        );
    }

    #[test]
    fn cite_as_takes_a_word_and_a_folder() {
        assert_eq!(
            CiteRoot::parse("mlir-air=../shared").unwrap(),
            CiteRoot {
                name: "mlir-air".into(),
                dir: PathBuf::from("../shared")
            }
        );
        assert!(CiteRoot::parse("no-equals").is_err());
        assert!(CiteRoot::parse("a b=dir").is_err());
        assert!(CiteRoot::parse("x=").is_err());
    }
}
