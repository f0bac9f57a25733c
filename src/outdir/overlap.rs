//! No command writes over what it reads. An output path that is an input,
//! contains one (replacing the folder would delete it) or lies inside one
//! (writing there changes it) is refused before anything is written, with or
//! without `--force`: `--force` lets skillc replace a folder it did not write,
//! never one it is reading.
//!
//! Paths are compared after resolving symbolic links and `..`: the part of the
//! output that does not exist yet is appended to its deepest existing ancestor,
//! resolved.

use std::path::{Component, Path, PathBuf};

use thiserror::Error;

/// An output refused because of an input.
#[derive(Debug, Error)]
#[error(
    "refusing to write `{output}`: it {relation} the {role} `{input}`; choose an output \
     outside every input (--force does not change this)"
)]
pub struct Overlap {
    pub output: String,
    pub relation: Relation,
    pub role: &'static str,
    pub input: String,
}

/// How an output path sits against an input path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    Is,
    Contains,
    LiesInside,
}

impl std::fmt::Display for Relation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Relation::Is => "is",
            Relation::Contains => "contains",
            Relation::LiesInside => "lies inside",
        })
    }
}

/// Refuses `output` when it is, contains or lies inside one of `inputs`
/// (each with the role it has in the command, e.g. `trajectory directory`).
pub fn refuse_overlap(output: &Path, inputs: &[(&'static str, &Path)]) -> Result<(), Overlap> {
    let resolved_output = resolve(output);
    for &(role, input) in inputs {
        let resolved_input = resolve(input);
        let relation = if resolved_output == resolved_input {
            Relation::Is
        } else if resolved_input.starts_with(&resolved_output) {
            Relation::Contains
        } else if resolved_output.starts_with(&resolved_input) {
            Relation::LiesInside
        } else {
            continue;
        };
        return Err(Overlap {
            output: crate::syntax::display_path(output),
            relation,
            role,
            input: crate::syntax::display_path(input),
        });
    }
    Ok(())
}

/// `path` made absolute with links resolved as far as it exists; the rest is
/// appended with `.` dropped and `..` taken lexically (a folder that does not
/// exist cannot be a link).
pub fn resolve(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    let mut existing = absolute.as_path();
    let mut tail = Vec::new();
    let base = loop {
        if let Ok(resolved) = existing.canonicalize() {
            break resolved;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name.to_os_string());
                existing = parent;
            }
            _ => break PathBuf::from("/"),
        }
    };
    let mut out = base;
    for part in tail.iter().rev() {
        for component in Path::new(part).components() {
            match component {
                Component::ParentDir => {
                    out.pop();
                }
                Component::Normal(name) => out.push(name),
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relation(output: &Path, input: &Path) -> Option<Relation> {
        refuse_overlap(output, &[("input", input)])
            .err()
            .map(|e| e.relation)
    }

    #[test]
    fn is_contains_and_lies_inside_are_told_apart() {
        let root = std::env::temp_dir().join(format!("skillc-overlap-{}", std::process::id()));
        let input = root.join("in");
        std::fs::create_dir_all(input.join("sub")).expect("dirs");
        assert_eq!(relation(&input, &input), Some(Relation::Is));
        assert_eq!(relation(&root, &input), Some(Relation::Contains));
        assert_eq!(
            relation(&input.join("new/deeper"), &input),
            Some(Relation::LiesInside)
        );
        assert_eq!(
            relation(&input.join("sub/../../in"), &input),
            Some(Relation::Is)
        );
        assert_eq!(relation(&root.join("out"), &input), None);
        assert_eq!(relation(&root.join("in-other"), &input), None);
        #[cfg(unix)]
        {
            let link = root.join("link");
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&input, &link).expect("link");
            assert_eq!(relation(&link, &input), Some(Relation::Is));
        }
        std::fs::remove_dir_all(&root).expect("cleanup");
    }
}
