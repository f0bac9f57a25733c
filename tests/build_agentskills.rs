//! The public Agent Skills validator (`pip install skills-ref`, command `agentskills
//! validate DIR`) accepts every skill directory skillc generates: the example
//! trajectory, every build case (hostile text included) and a long trajectory whose
//! sections move to `references/`. Skipped, with a notice, only when neither the
//! `agentskills` command nor Python with `skills_ref` is installed, and never when
//! `CI` is set: then a missing validator fails the test (`.ci/run` installs it).

use crate::build_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use build_support::{build, repo, scratch, subdirs};
use skillc::emit::write::write_bundle;

/// The validator as a command prefix, if one is installed.
fn validator() -> Option<Vec<String>> {
    let works = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if works("agentskills", &["--help"]) {
        return Some(vec!["agentskills".into()]);
    }
    if works("python3", &["-m", "skills_ref.cli", "--help"]) {
        return Some(vec!["python3".into(), "-m".into(), "skills_ref.cli".into()]);
    }
    None
}

/// Whether the `CI` variable says this is a CI run (`.ci/run` sets it).
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

fn long_trajectory(root: &Path) -> PathBuf {
    let dir = root.join("long");
    fs::create_dir_all(&dir).expect("dir");
    let mut text = String::from(
        "trajectory \"long\" model \"m\" target npu2 baseline \"none\"\n\
         session 2026-05-01T09:00 phase 1 \"Many kernels\"\n",
    );
    for i in 0..300 {
        text.push_str(&format!(
            "a{i} action select-tiling kernel=gemm shape=[{},64,64] tile=[64,64,64,{}]\n\
             o{i} observe mismatches = {} == 0 -> fail\n\
             l{i} lesson \"tile {i} <overflows>\" symptom validate-kernel fails with mismatches > {i}\n  \
             fix select-tiling tile_n={} when kernel=gemm evidence o{i}\n",
            64 + i,
            i + 1,
            i + 1,
            i + 2
        ));
    }
    fs::write(dir.join("00.traj"), text).expect("write");
    dir
}

#[test]
fn agentskills_validate_accepts_every_generated_skill() {
    let Some(validator) = validator() else {
        let missing = "neither `agentskills` nor `python3 -m skills_ref.cli` is available \
                       (pip install -r .ci/requirements.txt)";
        // In CI a missing validator is a broken setup, not a reason to pass.
        assert!(!in_ci(), "CI is set but {missing}");
        eprintln!("NOTICE: skipping the Agent Skills validation: {missing}");
        return;
    };
    let root = scratch("agentskills");
    let mut builds: Vec<Vec<PathBuf>> = vec![vec![repo("grammar/example")]];
    builds.extend(
        subdirs(&repo("tests/data/build"))
            .iter()
            .map(|case| subdirs(case)),
    );
    builds.push(vec![long_trajectory(&root)]);
    let mut checked = 0;
    for (i, dirs) in builds.iter().enumerate() {
        let (built, _) = build(dirs, None);
        let out = root.join(format!("bundle-{i}"));
        write_bundle(&out, &built.rendered, false, &mut |_| {}).expect("write bundle");
        for skill in built.rendered.skill_dirs() {
            let dir = out.join(skill);
            let run = Command::new(&validator[0])
                .args(&validator[1..])
                .arg("validate")
                .arg(&dir)
                .output()
                .expect("validator runs");
            assert!(
                run.status.success(),
                "{}: {}{}",
                dir.display(),
                String::from_utf8_lossy(&run.stdout),
                String::from_utf8_lossy(&run.stderr)
            );
            checked += 1;
        }
    }
    assert!(checked >= 40, "only {checked} skill directories validated");
    fs::remove_dir_all(&root).ok();
}
