//! Reading a skill bundle for `deploy` and `bench deploy`: bundle.json parsed,
//! every file checked against the SHA-256 bundle.json lists for it and bundle.json
//! against its own digest (a tampered or incomplete bundle is refused unless
//! `--allow-modified`), a key written twice refused outright, and the bundle's texts
//! capped before they are copied into reports. A trajectory directory given where
//! a bundle belongs gets a hint to build it first.

use std::path::{Path, PathBuf};

use serde_json::Value;
use skillc_runtime::bundle::Bundle;
use skillc_runtime::bundle_integrity::{self, DigestCheck};
use skillc_runtime::input;

use crate::outdir::manifest::{self, Verification};

/// Longest text of bundle.json kept as it is (longer ones are cut, with a note).
const TEXT_MAX_CHARS: usize = 16 * 1024;
/// Longest bundle or trajectory name shown in a report.
const NAME_MAX_CHARS: usize = 200;
/// How many paths a refusal names.
const NAMED: usize = 10;

/// Why a bundle cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum BundleFileError {
    #[error(
        "{}: a trajectory directory, not a skill bundle; run `skillc build {}` first and \
         deploy the bundle it writes (generated-skills/<name>)",
        crate::syntax::display_path(.0),
        crate::syntax::display_path(.0)
    )]
    Trajectories(PathBuf),
    #[error(transparent)]
    Input(#[from] input::InputError),
    #[error("{}:{}:{}: not a skill bundle: {source}", file.display(), source.line(), source.column())]
    NotJson {
        file: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: not a skill bundle: {source}", file.display())]
    NotABundle {
        file: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: {}", dir.display(), input::describe(source))]
    Files {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{}: the bundle's files differ from the hashes in its bundle.json ({found}); it was \
         edited or is incomplete. Rebuild it with `skillc build`, or pass --allow-modified \
         to run it as it is (the report says so)",
        crate::syntax::display_path(dir)
    )]
    Modified { dir: PathBuf, found: String },
    #[error(
        "{}: {problem}; rebuild it with `skillc build`, or pass --allow-modified to run it as \
         it is (the report says so)",
        crate::syntax::display_path(dir)
    )]
    Undigested { dir: PathBuf, problem: String },
    #[error("{}:{line}:{column}: not a usable skill bundle: {duplicate}", file.display())]
    DuplicateKey {
        file: PathBuf,
        line: usize,
        column: usize,
        duplicate: bundle_integrity::DuplicateKey,
    },
}

/// A bundle read from disk and what was found while reading it.
#[derive(Debug)]
pub struct Loaded {
    /// The bundle directory (holding bundle.json).
    pub dir: PathBuf,
    pub bundle: Bundle,
    /// The bundle's files against bundle.json's hashes.
    pub verification: Verification,
    /// bundle.json against its own digest.
    pub digest: DigestCheck,
    /// Texts that were shortened, as sentences for the report.
    pub shortened: Vec<String>,
}

impl Loaded {
    /// The notes a run's report carries about its bundle, or the refusal when the
    /// files differ from their hashes and that was not allowed.
    pub fn report_notes(&self, allow_modified: bool) -> Result<Vec<String>, BundleFileError> {
        let mut notes = self.shortened.clone();
        if !self.verification.is_clean() {
            let found = self.verification.summary(NAMED);
            if !allow_modified {
                return Err(BundleFileError::Modified {
                    dir: self.dir.clone(),
                    found,
                });
            }
            notes.insert(
                0,
                format!(
                    "run with --allow-modified: the bundle's files differ from bundle.json's hashes ({found})"
                ),
            );
        }
        if let Some(problem) = self.digest.problem() {
            if !allow_modified {
                return Err(BundleFileError::Undigested {
                    dir: self.dir.clone(),
                    problem,
                });
            }
            notes.insert(0, format!("run with --allow-modified: {problem}"));
        }
        Ok(notes)
    }
}

/// Reads `bundle.json` from a bundle directory or a file path, and checks the
/// bundle's files against it.
pub fn load(path: &Path) -> Result<Loaded, BundleFileError> {
    let (dir, file) = if path.is_dir() {
        (path.to_path_buf(), path.join("bundle.json"))
    } else {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        (dir.to_path_buf(), path.to_path_buf())
    };
    if path.is_dir() && !file.exists() && holds_trajectories(path) {
        return Err(BundleFileError::Trajectories(path.to_path_buf()));
    }
    let text = input::read_to_string(&file)?;
    let mut value: Value =
        serde_json::from_str(&text).map_err(|source| BundleFileError::NotJson {
            file: file.clone(),
            source,
        })?;
    if let Err((duplicate, line, column)) = bundle_integrity::find_duplicate_key(&text) {
        return Err(BundleFileError::DuplicateKey {
            file,
            line,
            column,
            duplicate,
        });
    }
    let digest = DigestCheck::of(&value);
    let mut shortened = Vec::new();
    cap_names(&mut value, &mut shortened);
    cap_texts(&mut value, "", &mut shortened);
    let bundle: Bundle =
        serde_json::from_value(value).map_err(|source| BundleFileError::NotABundle {
            file: file.clone(),
            source,
        })?;
    let verification =
        manifest::verify(&dir, &bundle.files, &["bundle.json"]).map_err(|source| {
            BundleFileError::Files {
                dir: dir.clone(),
                source,
            }
        })?;
    Ok(Loaded {
        dir,
        bundle,
        verification,
        digest,
        shortened,
    })
}

fn holds_trajectories(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|e| {
            e.path()
                .extension()
                .is_some_and(|x| x == crate::syntax::EXTENSION)
        })
    })
}

/// Cuts every string of bundle.json longer than [`TEXT_MAX_CHARS`].
fn cap_texts(value: &mut Value, at: &str, shortened: &mut Vec<String>) {
    match value {
        Value::String(text) => {
            if let std::borrow::Cow::Owned(cut) = input::capped(text, TEXT_MAX_CHARS) {
                shortened.push(format!(
                    "bundle.json `{at}`: a text of {} characters, shortened to {TEXT_MAX_CHARS} in this run",
                    text.chars().count()
                ));
                *text = cut;
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                cap_texts(item, &format!("{at}[{i}]"), shortened);
            }
        }
        Value::Object(fields) => {
            for (key, item) in fields.iter_mut() {
                let key = input::capped(key, 64);
                let at = if at.is_empty() {
                    key.into_owned()
                } else {
                    format!("{at}.{key}")
                };
                cap_texts(item, &at, shortened);
            }
        }
        _ => {}
    }
}

/// Names are shown in headings and summaries: shorter still.
fn cap_names(value: &mut Value, shortened: &mut Vec<String>) {
    let mut cap = |text: Option<&mut Value>, what: String| {
        let Some(Value::String(text)) = text else {
            return;
        };
        if let std::borrow::Cow::Owned(cut) = input::capped(text, NAME_MAX_CHARS) {
            shortened.push(format!(
                "bundle.json `{what}`: a name of {} characters, shortened to {NAME_MAX_CHARS} in this run",
                text.chars().count()
            ));
            *text = cut;
        }
    };
    cap(value.get_mut("name"), "name".into());
    if let Some(Value::Array(sources)) = value.get_mut("sources") {
        for (i, source) in sources.iter_mut().enumerate() {
            cap(
                source.get_mut("trajectory"),
                format!("sources[{i}].trajectory"),
            );
            cap(source.get_mut("model"), format!("sources[{i}].model"));
        }
    }
}
