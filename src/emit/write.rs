//! Writing a rendered bundle into the folder [`crate::outdir`] claims for it: the
//! files go into the claim's fresh staging directory, which then replaces the
//! bundle atomically, so a failed or interrupted build leaves the previous bundle
//! intact and a concurrent build waits for this one.

use std::fs;
use std::path::Path;

use super::Rendered;
use crate::outdir::{Claim, Kind, OutError};

/// Replaces the bundle directory `out` with `rendered` (see [`crate::outdir`] for
/// when it may; `force` replaces any directory). `waiting` hears when another run
/// holds the folder.
pub fn write_bundle(
    out: &Path,
    rendered: &Rendered,
    force: bool,
    waiting: &mut dyn FnMut(&str),
) -> Result<(), OutError> {
    let claim = Claim::new(out, Kind::Bundle, force, waiting)?;
    write_tree(claim.staging(), rendered)?;
    claim.commit()
}

fn write_tree(root: &Path, rendered: &Rendered) -> Result<(), OutError> {
    let io = |action, path: &Path| {
        let path = crate::syntax::display_path(path);
        move |e: std::io::Error| OutError::Io {
            action,
            path,
            message: skillc_runtime::input::describe(&e),
        }
    };
    for (relative, content) in &rendered.files {
        let path = root.join(relative);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io("create", dir))?;
        }
        fs::write(&path, content).map_err(io("write", &path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use super::*;
    use crate::digest::sha256_hex;

    /// A rendered bundle whose bundle.json lists the other files, as emit makes it.
    fn rendered(files: &[(&str, &str)]) -> Rendered {
        let mut files: BTreeMap<String, String> = files
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect();
        let hashes: BTreeMap<&String, String> = files
            .iter()
            .map(|(p, c)| (p, sha256_hex(c.as_bytes())))
            .collect();
        let json = serde_json::json!({"schema_version": "skillc.bundle/1", "files": hashes});
        files.insert("bundle.json".into(), json.to_string());
        Rendered { files }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("skillc-write-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    fn write(out: &Path, rendered: &Rendered, force: bool) -> Result<(), OutError> {
        write_bundle(out, rendered, force, &mut |_| {})
    }

    #[test]
    fn a_failed_write_leaves_the_previous_bundle_intact() {
        let root = temp_dir("failed");
        let out = root.join("demo");
        write(&out, &rendered(&[("a/SKILL.md", "old\n")]), false).expect("first write");
        // `x` as both a file and a directory cannot be written.
        let broken = rendered(&[("x", "file"), ("x/SKILL.md", "dir")]);
        assert!(write(&out, &broken, false).is_err());
        assert_eq!(
            fs::read_to_string(out.join("a/SKILL.md")).ok().as_deref(),
            Some("old\n")
        );
        let leftovers: Vec<_> = fs::read_dir(&root).expect("read").collect();
        assert_eq!(leftovers.len(), 1, "staging directory and lock removed");
        fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn an_interrupted_swap_is_recovered() {
        let root = temp_dir("recover");
        let out = root.join("demo");
        let aside = root.join(".demo.skillc-old");
        // As if the process died between the two renames of the fallback swap.
        write(&aside, &rendered(&[("a/SKILL.md", "old\n")]), false).expect("aside");
        write(&out, &rendered(&[("b/SKILL.md", "new\n")]), false).expect("write");
        assert!(!aside.exists());
        assert!(!out.join("a").exists());
        assert_eq!(
            fs::read_to_string(out.join("b/SKILL.md")).ok().as_deref(),
            Some("new\n")
        );
        fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn a_directory_skillc_did_not_write_is_replaced_only_with_force() {
        let root = temp_dir("foreign");
        let out = root.join("demo");
        fs::create_dir_all(&out).expect("mkdir");
        fs::write(out.join("precious.txt"), "keep").expect("write");
        let bundle = rendered(&[("a/SKILL.md", "new\n")]);
        let err = write(&out, &bundle, false).expect_err("refused");
        assert!(matches!(err, OutError::NotOwned { .. }), "{err}");
        assert!(out.join("precious.txt").exists());
        write(&out, &bundle, true).expect("forced");
        assert!(!out.join("precious.txt").exists());
        fs::remove_dir_all(&root).ok();
    }
}
