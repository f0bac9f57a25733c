//! Output folders skillc owns: `build`'s bundle and `deploy`'s run folder. A run
//! [`Claim`]s its target: it takes an exclusive lock on it ([`lock`]), checks that
//! the target may be replaced, and gets a fresh sibling to write into; at the end
//! it commits, swapping the sibling in atomically. Readers and concurrent runs see
//! the old folder or the new one, never a mix, and a run that fails before the
//! swap leaves the old folder exactly as it was.
//!
//! A target may be replaced when it is absent, an empty directory, or a folder
//! whose manifest ([`manifest`]) proves skillc wrote every file in it and none has
//! changed since: bundle.json's `files` for a bundle, `.skillc-owned.json` for a
//! deploy folder. A file named bundle.json proves nothing by itself; a folder
//! holding anything else is replaced only with `--force`, and something that is
//! not a directory never is.

pub mod lock;
pub mod manifest;
pub mod overlap;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use manifest::{OwnedManifest, Verification, OWNED_MANIFEST, OWNED_SCHEMA};
use skillc_runtime::input::describe;

/// What kind of folder a claim writes, which says where its manifest is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A skill bundle; bundle.json lists the files.
    Bundle,
    /// A deploy run's folder; skillc adds `.skillc-owned.json` on commit.
    Deploy,
    /// A trajectory drafted by `skillc import`; `.skillc-owned.json` too.
    Import,
}

impl Kind {
    fn manifest_file(self) -> &'static str {
        match self {
            Kind::Bundle => manifest::BUNDLE_MANIFEST,
            Kind::Deploy | Kind::Import => OWNED_MANIFEST,
        }
    }

    fn listed(self, dir: &Path) -> Option<manifest::Hashes> {
        match self {
            Kind::Bundle => manifest::read_bundle_hashes(dir),
            Kind::Deploy | Kind::Import => manifest::read_owned_hashes(dir),
        }
    }

    /// The subcommand that writes it.
    fn command(self) -> &'static str {
        match self {
            Kind::Bundle => "build",
            Kind::Deploy => "deploy",
            Kind::Import => "import",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::Bundle => "skill bundle",
            Kind::Deploy => "deploy folder",
            Kind::Import => "imported trajectory",
        }
    }
}

#[derive(Debug, Error)]
pub enum OutError {
    #[error("refusing to replace `{path}`: {why}; pass --force to replace it anyway")]
    NotOwned { path: String, why: String },
    #[error("refusing to replace `{path}`: it is {what}, not a directory")]
    NotADirectory { path: String, what: &'static str },
    #[error("`{0}` does not name a folder (give one such as `out/run1`)")]
    NoFileName(String),
    #[error("`{path}` changed while this run wrote it: {why}; the new output is in `{staging}`")]
    ChangedMeanwhile {
        path: String,
        why: String,
        staging: String,
    },
    #[error("cannot {action} `{path}`: {message}")]
    Io {
        action: &'static str,
        path: String,
        message: String,
    },
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> OutError + 'a {
    move |e| OutError::Io {
        action,
        path: shown(path),
        message: describe(&e),
    }
}

fn shown(path: &Path) -> String {
    crate::syntax::display_path(path)
}

/// How many paths a refusal names.
const NAMED: usize = 5;

/// An output folder being written: locked, with a fresh staging directory.
#[derive(Debug)]
pub struct Claim {
    target: PathBuf,
    staging: PathBuf,
    aside: PathBuf,
    kind: Kind,
    force: bool,
    done: bool,
    _lock: lock::Lock,
}

impl Claim {
    /// Locks `target` (telling `waiting` when another run holds it), checks it
    /// may be replaced (anything goes with `force`, except a non-directory), and
    /// makes an empty staging directory beside it.
    pub fn new(
        target: &Path,
        kind: Kind,
        force: bool,
        waiting: &mut dyn FnMut(&str),
    ) -> Result<Claim, OutError> {
        let name = target
            .file_name()
            .ok_or_else(|| OutError::NoFileName(shown(target)))?
            .to_string_lossy()
            .into_owned();
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        fs::create_dir_all(&parent).map_err(io_err("create", &parent))?;
        let sibling = |suffix: &str| parent.join(format!(".{name}.skillc-{suffix}"));
        let lock_path = sibling("lock");
        let lock = lock::acquire(&lock_path, &mut |owner| {
            let by = owner.map_or_else(String::new, |pid| format!(" (process {pid})"));
            waiting(&format!(
                "waiting for another skillc run{by} that is writing `{}`",
                shown(target)
            ));
        })
        .map_err(io_err("lock", &lock_path))?;
        let claim = Claim {
            target: target.to_path_buf(),
            staging: sibling("new"),
            aside: sibling("old"),
            kind,
            force,
            done: false,
            _lock: lock,
        };
        claim.recover()?;
        claim.check_replaceable()?;
        if claim.staging.exists() {
            fs::remove_dir_all(&claim.staging)
                .map_err(io_err("remove the stale", &claim.staging))?;
        }
        fs::create_dir(&claim.staging).map_err(io_err("create", &claim.staging))?;
        Ok(claim)
    }

    /// Where this run writes; it becomes the target on [`Claim::commit`].
    pub fn staging(&self) -> &Path {
        &self.staging
    }

    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Puts back a previous folder left aside by an interrupted two-step swap.
    fn recover(&self) -> Result<(), OutError> {
        if !self.aside.exists() {
            return Ok(());
        }
        if self.target.exists() {
            fs::remove_dir_all(&self.aside).map_err(io_err("remove the stale", &self.aside))
        } else {
            fs::rename(&self.aside, &self.target).map_err(io_err("restore", &self.aside))
        }
    }

    fn check_replaceable(&self) -> Result<(), OutError> {
        match why_not_replaceable(&self.target, self.kind)? {
            Some(why) if !self.force => Err(OutError::NotOwned {
                path: shown(&self.target),
                why,
            }),
            _ => Ok(()),
        }
    }

    /// Swaps the staging directory in for the target (adding the deploy manifest
    /// first). The target is checked again: whatever appeared in it during the
    /// run is not thrown away.
    pub fn commit(mut self) -> Result<(), OutError> {
        if matches!(self.kind, Kind::Deploy | Kind::Import) {
            self.write_owned_manifest()?;
        }
        if let Err(OutError::NotOwned { why, .. }) = self.check_replaceable() {
            self.done = true;
            return Err(OutError::ChangedMeanwhile {
                path: shown(&self.target),
                why,
                staging: shown(&self.staging),
            });
        }
        self.swap()?;
        self.done = true;
        Ok(())
    }

    fn write_owned_manifest(&self) -> Result<(), OutError> {
        let files = manifest::hash_tree(&self.staging, &[OWNED_MANIFEST])
            .map_err(io_err("read", &self.staging))?;
        let owned = OwnedManifest {
            schema_version: OWNED_SCHEMA.to_string(),
            written_by: format!(
                "skillc {} {}",
                env!("CARGO_PKG_VERSION"),
                self.kind.command()
            ),
            files,
        };
        let path = self.staging.join(OWNED_MANIFEST);
        let text = serde_json::to_string_pretty(&owned).unwrap_or_default() + "\n";
        fs::write(&path, text).map_err(io_err("write", &path))
    }

    fn swap(&self) -> Result<(), OutError> {
        if fs::symlink_metadata(&self.target).is_err() {
            return fs::rename(&self.staging, &self.target)
                .map_err(io_err("move into place", &self.staging));
        }
        if exchange(&self.staging, &self.target).is_ok() {
            // The staging path now holds the previous folder.
            return fs::remove_dir_all(&self.staging)
                .map_err(io_err("remove the previous", &self.staging));
        }
        // No atomic exchange here: two renames, repaired by `recover` if cut.
        fs::rename(&self.target, &self.aside).map_err(io_err("move aside", &self.target))?;
        if let Err(e) = fs::rename(&self.staging, &self.target) {
            let _ = fs::rename(&self.aside, &self.target);
            return Err(io_err("move into place", &self.staging)(e));
        }
        fs::remove_dir_all(&self.aside).map_err(io_err("remove the previous", &self.aside))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.done {
            // A run that did not commit leaves nothing behind.
            let _ = fs::remove_dir_all(&self.staging);
        }
    }
}

/// Why `target` may not be replaced without `--force`; `None` when it may. A
/// non-directory is an error either way.
pub fn why_not_replaceable(target: &Path, kind: Kind) -> Result<Option<String>, OutError> {
    let metadata = match fs::symlink_metadata(target) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("examine", target)(e)),
        Ok(m) => m,
    };
    if !metadata.is_dir() {
        let what = if metadata.file_type().is_symlink() {
            "a symbolic link"
        } else {
            "a file"
        };
        return Err(OutError::NotADirectory {
            path: shown(target),
            what,
        });
    }
    let mut entries = fs::read_dir(target).map_err(io_err("read", target))?;
    if entries.next().is_none() {
        return Ok(None);
    }
    let Some(listed) = kind.listed(target) else {
        return Ok(Some(format!(
            "it is not empty and nothing proves skillc wrote it (no {} manifest `{}`)",
            kind.noun(),
            kind.manifest_file()
        )));
    };
    let found: Verification = manifest::verify(target, &listed, &[kind.manifest_file()])
        .map_err(io_err("read", target))?;
    let why = if !found.unlisted.is_empty() {
        format!(
            "it holds files skillc did not write: {}",
            manifest::shortlist(&found.unlisted, NAMED)
        )
    } else if !found.changed.is_empty() {
        format!(
            "files changed since skillc wrote them: {}",
            manifest::shortlist(&found.changed, NAMED)
        )
    } else {
        return Ok(None);
    };
    Ok(Some(why))
}

/// Exchanges two paths atomically (Linux `renameat2(RENAME_EXCHANGE)`).
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    };
    let (a, b) = (c(a)?, c(b)?);
    // SAFETY: both pointers are valid NUL-terminated strings for the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}
