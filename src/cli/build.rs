//! `skillc build DIR…`: distill trajectories into a skill bundle and write it
//! atomically to `generated-skills/<name>/` (or `--out DIR`); with `--check`, write
//! nothing and exit 1 with a short diff when the bundle on disk is stale.
//!
//! Exit codes: 0 built (or up to date), 1 errors in the trajectories or a stale
//! bundle under `--check`, 2 usage or I/O problems.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::render::{self, Sources};
use super::{EXIT_FAILED, EXIT_USAGE};
use crate::distill::{self, Distilled, Input};
use crate::emit::{self, on_disk, write, Rendered};
use crate::graph::{self, Loaded};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trajectory directories; each directory's `.traj` files form one trajectory.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Bundle directory to write [default: generated-skills/<name> beside the
    /// `trajectories/` folder the first directory is in, else in the current
    /// directory].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Bundle name [default: the trajectory directory's name; several are joined
    /// with `+` in name order].
    #[arg(long)]
    pub name: Option<String>,
    /// Write nothing; exit 1 with a short diff when the bundle on disk differs from
    /// what the trajectories produce.
    #[arg(long)]
    pub check: bool,
    /// Replace the output directory even when it holds files skillc did not write
    /// (or changed since).
    #[arg(long)]
    pub force: bool,
    /// Print the result (bundle path, files, skills, diagnostics; with --check the
    /// differences) as one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Everything a build produces in memory, before anything is written.
pub struct Built {
    pub distilled: Distilled,
    pub rendered: Rendered,
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Load(#[from] crate::syntax::LoadError),
    #[error("cannot name the bundle after `{0}`; pass --name")]
    NoName(PathBuf),
    #[error("bundle name {name:?} {why}; --name takes a name, not a path (e.g. --name llama1b)")]
    BadName { name: String, why: &'static str },
    #[error(transparent)]
    Emit(#[from] emit::EmitError),
}

/// The directory's own name, resolving `.` and `..` through the file system.
fn dir_name(dir: &Path) -> Option<String> {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    name.or_else(|| {
        dir.canonicalize()
            .ok()?
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    })
}

/// Longest bundle name accepted (several trajectory names joined with `+` fit).
const NAME_MAX_CHARS: usize = 128;

/// A bundle name is one directory name under `generated-skills/`: it must not
/// climb out of it, point elsewhere, hide itself or carry control characters.
pub fn check_name(name: &str) -> Result<(), BuildError> {
    let why = if name.is_empty() {
        Some("is empty")
    } else if name.contains(['/', '\\']) {
        Some("holds a path separator")
    } else if name.starts_with('.') {
        Some("starts with `.`")
    } else if name.contains(':') {
        Some("holds `:`")
    } else if name.chars().any(char::is_control) {
        Some("holds a control character")
    } else if name.trim() != name {
        Some("starts or ends with white space")
    } else if name.chars().count() > NAME_MAX_CHARS {
        Some("is longer than 128 characters")
    } else {
        None
    };
    match why {
        Some(why) => Err(BuildError::BadName {
            name: name.chars().take(NAME_MAX_CHARS).collect(),
            why,
        }),
        None => Ok(()),
    }
}

/// The trajectories of `loaded` as the distiller's inputs, named after their
/// directories and sharing one set of shared ids, handed to `f` with those names.
pub fn with_inputs<T>(
    loaded: &Loaded,
    f: impl FnOnce(&[Input], &[String]) -> T,
) -> Result<T, BuildError> {
    let mut names = Vec::new();
    for (dir, _) in &loaded.trajectories {
        names.push(dir_name(dir).ok_or_else(|| BuildError::NoName(dir.clone()))?);
    }
    let shared = distill::shared_ids(loaded.trajectories.iter().map(|(_, g)| g));
    let inputs: Vec<Input> = loaded
        .trajectories
        .iter()
        .zip(&names)
        .map(|((_, graph), dir_name)| Input {
            dir_name,
            graph,
            sources: &loaded.sources,
            shared_ids: &shared,
        })
        .collect();
    Ok(f(&inputs, &names))
}

/// Distills and renders loaded trajectories (no I/O).
pub fn build_loaded(loaded: &Loaded, name: Option<&str>) -> Result<Built, BuildError> {
    let distilled = with_inputs(loaded, |inputs, names| {
        let name = match name {
            Some(name) => name.to_string(),
            None => {
                let mut sorted = names.to_vec();
                sorted.sort();
                sorted.join("+")
            }
        };
        check_name(&name).map(|()| distill::distill(&name, inputs))
    })??;
    let rendered = emit::render(&distilled.ir)?;
    Ok(Built {
        distilled,
        rendered,
    })
}

pub fn run(args: Args) -> ExitCode {
    let loaded = match graph::load_dirs(&args.dirs) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut sources = Sources::new(&loaded.sources);
    let mut report = Report::new(args.json);
    if loaded.error_count() > 0 {
        return report.not_built(&loaded.diagnostics, &mut sources);
    }
    let built = match build_loaded(&loaded, args.name.as_deref()) {
        Ok(built) => built,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut diagnostics = loaded.diagnostics.clone();
    diagnostics.extend(built.distilled.diagnostics.iter().cloned());
    crate::diag::sort(&mut diagnostics);
    if crate::diag::error_count(&diagnostics) > 0 {
        return report.not_built(&diagnostics, &mut sources);
    }
    report.diagnostics(&diagnostics, &mut sources);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out(&args.dirs[0], &built.distilled.ir.name));
    report.bundle(&out, &built);
    if args.check {
        return check_only(&out, &built.rendered, report);
    }
    let inputs: Vec<(&'static str, &Path)> = args
        .dirs
        .iter()
        .map(|d| ("trajectory directory", d.as_path()))
        .collect();
    if let Err(error) = crate::outdir::overlap::refuse_overlap(&out, &inputs) {
        eprintln!("error: {error}");
        return ExitCode::from(EXIT_USAGE);
    }
    let mut waiting = |message: &str| eprintln!("{message}…");
    if let Err(error) = write::write_bundle(&out, &built.rendered, args.force, &mut waiting) {
        eprintln!("error: {error}");
        return ExitCode::from(EXIT_USAGE);
    }
    let placement = crate::distill::placement::account(&built.distilled.ir);
    report.json["written"] = true.into();
    report.finish(
        &format!(
            "wrote {}: {} files, {} skills; {} ({})",
            crate::syntax::display_path(&out),
            built.rendered.files.len(),
            built.rendered.skill_dirs().len(),
            placement.summary(),
            render::summary(&diagnostics)
        ),
        false,
        ExitCode::SUCCESS,
    )
}

/// What `build` tells: human lines (diagnostics on stderr, the result on stdout),
/// or with `--json` one JSON document on stdout.
struct Report {
    as_json: bool,
    json: serde_json::Value,
}

impl Report {
    fn new(as_json: bool) -> Self {
        Self {
            as_json,
            json: serde_json::json!({ "written": false }),
        }
    }

    fn diagnostics(&mut self, diagnostics: &[crate::diag::Diagnostic], sources: &mut Sources<'_>) {
        if self.as_json {
            self.json["diagnostics"] = render::json_value(diagnostics, sources);
        } else {
            eprint!("{}", render::human(diagnostics, sources));
        }
    }

    fn not_built(
        mut self,
        diagnostics: &[crate::diag::Diagnostic],
        sources: &mut Sources<'_>,
    ) -> ExitCode {
        self.diagnostics(diagnostics, sources);
        let line = format!("error: not building: {}", render::summary(diagnostics));
        self.finish(&line, true, ExitCode::from(EXIT_FAILED))
    }

    fn bundle(&mut self, out: &Path, built: &Built) {
        self.json["bundle"] = crate::syntax::display_path(out).into();
        self.json["name"] = built.distilled.ir.name.clone().into();
        self.json["files"] = built.rendered.files.len().into();
        self.json["skills"] = built.rendered.skill_dirs().len().into();
        let placement = crate::distill::placement::account(&built.distilled.ir);
        let count = |c: crate::distill::placement::Count| serde_json::json!({ "placed": c.placed, "recorded": c.recorded });
        self.json["placed"] = serde_json::json!({
            "notes": count(placement.notes),
            "lessons": count(placement.lessons),
            "dead_ends": count(placement.dead_ends),
        });
    }

    /// Prints the result line (on stderr when `on_stderr`) or the JSON document.
    fn finish(self, line: &str, on_stderr: bool, code: ExitCode) -> ExitCode {
        if self.as_json {
            println!(
                "{}",
                serde_json::to_string_pretty(&self.json).unwrap_or_default()
            );
        } else if on_stderr {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
        code
    }
}

/// `generated-skills/<name>` of the repository the trajectory is in: a trajectory
/// at `ROOT/trajectories/NAME` builds into `ROOT/generated-skills/`, wherever the
/// command runs from; any other directory builds into the current directory's.
fn default_out(first_dir: &Path, name: &str) -> PathBuf {
    let absolute = first_dir.canonicalize().ok();
    let parent = absolute.as_deref().and_then(Path::parent);
    let root = parent
        .filter(|p| p.file_name().is_some_and(|n| n == "trajectories"))
        .and_then(Path::parent);
    let Some(root) = root else {
        return Path::new("generated-skills").join(name);
    };
    // Shown relative to the current directory when the repository is inside it.
    let cwd = std::env::current_dir().ok();
    let base = match cwd.as_deref().and_then(|c| root.strip_prefix(c).ok()) {
        Some(relative) => relative.to_path_buf(),
        None => root.to_path_buf(),
    };
    base.join("generated-skills").join(name)
}

fn check_only(out: &Path, rendered: &Rendered, mut report: Report) -> ExitCode {
    let shown = crate::syntax::display_path(out);
    if !out.exists() {
        report.json["up_to_date"] = false.into();
        let line = format!(
            "error: there is no bundle at {shown} to check; run `skillc build` without --check to write it there, or pass --out"
        );
        return report.finish(&line, true, ExitCode::from(EXIT_FAILED));
    }
    let differences = match on_disk::compare(out, rendered) {
        Err(error) => {
            eprintln!(
                "error: cannot read {shown}: {}",
                skillc_runtime::input::describe(&error)
            );
            return ExitCode::from(EXIT_USAGE);
        }
        Ok(differences) => differences,
    };
    report.json["up_to_date"] = differences.is_empty().into();
    report.json["differences"] = differences
        .iter()
        .map(|d| {
            let (kind, path) = match d {
                on_disk::Difference::Missing(p) => ("missing", p),
                on_disk::Difference::Extra(p) => ("extra", p),
                on_disk::Difference::Changed { path, .. } => ("changed", path),
            };
            serde_json::json!({ "kind": kind, "path": path })
        })
        .collect();
    if differences.is_empty() {
        return report.finish(&format!("{shown} is up to date"), false, ExitCode::SUCCESS);
    }
    if !report.as_json {
        print!("{}", on_disk::report(&differences, 40, 10));
    }
    let line = format!(
        "error: {shown} is stale: {} file(s) differ from what the trajectories produce; run `skillc build` without --check and commit the result",
        differences.len()
    );
    report.finish(&line, false, ExitCode::from(EXIT_FAILED))
}
