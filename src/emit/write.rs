//! Writing a rendered bundle so that a failed or interrupted build leaves the
//! previous bundle intact: everything is written into a sibling staging directory
//! first, then the old directory is renamed aside, the staging one renamed into
//! place, and the old one removed. Between the two renames the previous bundle
//! exists under its aside name; the next write puts it back if it finds it there
//! without a bundle in place.
//!
//! A directory that exists but holds no `bundle.json` is never replaced: `--out .`
//! must not wipe a repository.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::{Rendered, BUNDLE_JSON};

#[derive(Debug, Error)]
pub enum WriteError {
    #[error("refusing to replace `{0}`: it exists and is not a skillc bundle (no bundle.json)")]
    NotABundle(PathBuf),
    #[error("`{0}` has no file name to derive the staging directory from")]
    NoFileName(PathBuf),
    #[error("{action} `{path}`: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> WriteError + 'a {
    move |source| WriteError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Sibling paths used during the swap: `.<name>.skillc-new` and `.<name>.skillc-old`.
fn siblings(out: &Path) -> Result<(PathBuf, PathBuf), WriteError> {
    let name = out
        .file_name()
        .ok_or_else(|| WriteError::NoFileName(out.to_path_buf()))?
        .to_string_lossy();
    let parent = out.parent().unwrap_or(Path::new(""));
    Ok((
        parent.join(format!(".{name}.skillc-new")),
        parent.join(format!(".{name}.skillc-old")),
    ))
}

/// Replaces the bundle directory `out` with `rendered`.
pub fn write_bundle(out: &Path, rendered: &Rendered) -> Result<(), WriteError> {
    let (staging, aside) = siblings(out)?;
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(io_err("cannot create", parent))?;
    }
    recover(out, &aside)?;
    if out.exists() && !is_bundle_or_empty(out)? {
        return Err(WriteError::NotABundle(out.to_path_buf()));
    }
    if staging.exists() {
        fs::remove_dir_all(&staging).map_err(io_err("cannot remove stale", &staging))?;
    }
    if let Err(e) = write_tree(&staging, rendered) {
        // Best effort: the error being reported matters more than the cleanup's.
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    swap(out, &staging, &aside)
}

/// Puts back a previous bundle left aside by an interrupted swap.
fn recover(out: &Path, aside: &Path) -> Result<(), WriteError> {
    if aside.exists() {
        if out.exists() {
            fs::remove_dir_all(aside).map_err(io_err("cannot remove stale", aside))?;
        } else {
            fs::rename(aside, out).map_err(io_err("cannot restore", aside))?;
        }
    }
    Ok(())
}

fn is_bundle_or_empty(dir: &Path) -> Result<bool, WriteError> {
    if dir.join(BUNDLE_JSON).is_file() {
        return Ok(true);
    }
    let mut entries = fs::read_dir(dir).map_err(io_err("cannot read", dir))?;
    Ok(entries.next().is_none())
}

fn write_tree(root: &Path, rendered: &Rendered) -> Result<(), WriteError> {
    fs::create_dir_all(root).map_err(io_err("cannot create", root))?;
    for (relative, content) in &rendered.files {
        let path = root.join(relative);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io_err("cannot create", dir))?;
        }
        fs::write(&path, content).map_err(io_err("cannot write", &path))?;
    }
    Ok(())
}

fn swap(out: &Path, staging: &Path, aside: &Path) -> Result<(), WriteError> {
    let had_previous = out.exists();
    if had_previous {
        fs::rename(out, aside).map_err(io_err("cannot move aside", out))?;
    }
    if let Err(source) = fs::rename(staging, out) {
        if had_previous {
            let _ = fs::rename(aside, out);
        }
        let _ = fs::remove_dir_all(staging);
        return Err(WriteError::Io {
            action: "cannot move into place",
            path: staging.to_path_buf(),
            source,
        });
    }
    if had_previous {
        fs::remove_dir_all(aside).map_err(io_err("cannot remove", aside))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn rendered(files: &[(&str, &str)]) -> Rendered {
        Rendered {
            files: files
                .iter()
                .map(|(p, c)| (p.to_string(), c.to_string()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("skillc-write-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn a_failed_write_leaves_the_previous_bundle_intact() {
        let root = temp_dir("failed");
        let out = root.join("demo");
        write_bundle(
            &out,
            &rendered(&[("bundle.json", "{}\n"), ("a/SKILL.md", "old\n")]),
        )
        .expect("first write");
        // `x` as both a file and a directory cannot be written.
        let broken = rendered(&[
            ("bundle.json", "{}\n"),
            ("x", "file"),
            ("x/SKILL.md", "dir"),
        ]);
        assert!(write_bundle(&out, &broken).is_err());
        assert_eq!(
            fs::read_to_string(out.join("a/SKILL.md")).ok().as_deref(),
            Some("old\n")
        );
        let leftovers: Vec<_> = fs::read_dir(&root).expect("read").collect();
        assert_eq!(leftovers.len(), 1, "staging directory removed");
        fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn an_interrupted_swap_is_recovered() {
        let root = temp_dir("recover");
        let out = root.join("demo");
        let (_, aside) = siblings(&out).expect("siblings");
        // As if the process died between the two renames.
        write_tree(
            &aside,
            &rendered(&[("bundle.json", "{}\n"), ("a/SKILL.md", "old\n")]),
        )
        .expect("aside");
        write_bundle(
            &out,
            &rendered(&[("bundle.json", "{}\n"), ("b/SKILL.md", "new\n")]),
        )
        .expect("write");
        assert!(!aside.exists());
        assert!(!out.join("a").exists());
        assert_eq!(
            fs::read_to_string(out.join("b/SKILL.md")).ok().as_deref(),
            Some("new\n")
        );
        fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn a_directory_that_is_not_a_bundle_is_never_replaced() {
        let root = temp_dir("foreign");
        fs::write(root.join("precious.txt"), "keep").expect("write");
        let err = write_bundle(&root, &rendered(&[("bundle.json", "{}\n")]));
        assert!(matches!(err, Err(WriteError::NotABundle(_))));
        assert!(root.join("precious.txt").exists());
        fs::remove_dir_all(&root).ok();
    }
}
