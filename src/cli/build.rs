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
use crate::emit::{self, check, write, Rendered};
use crate::graph::{self, Loaded};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trajectory directories; each directory's `.traj` files form one trajectory.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Bundle directory to write [default: generated-skills/<name>].
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

/// Distills and renders loaded trajectories (no I/O).
pub fn build_loaded(loaded: &Loaded, name: Option<&str>) -> Result<Built, BuildError> {
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
    let name = match name {
        Some(name) => name.to_string(),
        None => {
            let mut sorted = names.clone();
            sorted.sort();
            sorted.join("+")
        }
    };
    let distilled = distill::distill(&name, &inputs);
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
    if loaded.error_count() > 0 {
        eprint!("{}", render::human(&loaded.diagnostics, &mut sources));
        eprintln!(
            "error: not building: {}",
            render::summary(&loaded.diagnostics)
        );
        return ExitCode::from(EXIT_FAILED);
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
    eprint!("{}", render::human(&diagnostics, &mut sources));
    if crate::diag::error_count(&diagnostics) > 0 {
        eprintln!("error: not building: {}", render::summary(&diagnostics));
        return ExitCode::from(EXIT_FAILED);
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("generated-skills").join(&built.distilled.ir.name));
    if args.check {
        return check_only(&out, &built.rendered);
    }
    if let Err(error) = write::write_bundle(&out, &built.rendered) {
        eprintln!("error: {error}");
        return ExitCode::from(EXIT_USAGE);
    }
    println!(
        "wrote {}: {} files, {} skills; {} ({})",
        crate::syntax::display_path(&out),
        built.rendered.files.len(),
        built.rendered.skill_dirs().len(),
        crate::distill::placement::account(&built.distilled.ir).summary(),
        render::summary(&diagnostics)
    );
    ExitCode::SUCCESS
}

fn check_only(out: &Path, rendered: &Rendered) -> ExitCode {
    let shown = crate::syntax::display_path(out);
    match check::compare(out, rendered) {
        Err(error) => {
            eprintln!("error: cannot read {shown}: {error}");
            ExitCode::from(EXIT_USAGE)
        }
        Ok(differences) if differences.is_empty() => {
            println!("{shown} is up to date");
            ExitCode::SUCCESS
        }
        Ok(differences) => {
            print!("{}", check::report(&differences, 40, 10));
            println!(
                "error: {shown} is stale: {} file(s) differ from what the trajectories produce; run `skillc build` without --check and commit the result",
                differences.len()
            );
            ExitCode::from(EXIT_FAILED)
        }
    }
}
