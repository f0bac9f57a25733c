//! `skillc build` end to end in memory: the example trajectory's whole bundle and
//! every case of tests/data/build as snapshots, determinism, minimal diffs, merging.

use crate::build_support;

use std::collections::BTreeSet;
use std::fs;

use build_support::{build, copy_dir, repo, scratch, subdirs};
use skillc::emit::Rendered;

/// One snapshot per generated file, so a change shows up as a diff of that file.
#[test]
fn example_bundle_matches_its_snapshots() {
    let (built, diagnostics) = build(&[repo("grammar/example")], None);
    assert_eq!(diagnostics, "");
    for (path, content) in &built.rendered.files {
        insta::assert_snapshot!(format!("example__{}", path.replace('/', "__")), content);
    }
    let names: Vec<&String> = built.rendered.files.keys().collect();
    insta::assert_debug_snapshot!("example__file_list", names);
}

/// tests/data/build/<case>/ holds one or more trajectory directories, built together;
/// the snapshot is every generated file plus the diagnostics.
#[test]
fn build_cases_match_their_snapshots() {
    for case in subdirs(&repo("tests/data/build")) {
        let name = case
            .file_name()
            .expect("case name")
            .to_string_lossy()
            .to_string();
        let (built, diagnostics) = build(&subdirs(&case), None);
        insta::assert_snapshot!(
            format!("case__{name}"),
            whole_bundle(&built.rendered, &diagnostics)
        );
    }
}

fn whole_bundle(rendered: &Rendered, diagnostics: &str) -> String {
    let mut out = format!("==> diagnostics <==\n{diagnostics}\n");
    for (path, content) in &rendered.files {
        out.push_str(&format!("==> {path} <==\n{content}\n"));
    }
    out
}

/// The fused-decode trajectory builds clean beside llama1b (the bundle a 4-bit
/// deploy is run with): no diagnostic, its two skills written, and phase 5 lists
/// the single-dispatch fused decode as a step guarded by the spatial-split lesson.
#[test]
fn fused_decode_builds_clean_with_llama1b() {
    let dirs = [
        repo("trajectories/llama1b"),
        repo("trajectories/fused-decode"),
    ];
    let (built, diagnostics) = build(&dirs, None);
    assert_eq!(diagnostics, "");
    let files = &built.rendered.files;
    assert!(files.contains_key("opt-fused-decode/SKILL.md"));
    assert!(files.contains_key("debug-fused-decode-hang/SKILL.md"));
    let phase5 = &files["phase-5-decode-optimization/SKILL.md"];
    assert!(phase5.contains("`fused-decode`: one NPU dispatch per token"));
    assert!(phase5.contains("guarded by `fd.lesson.spatial`"));
}

#[test]
fn two_builds_are_byte_identical() {
    let dirs = [repo("grammar/example")];
    assert_eq!(build(&dirs, None).0.rendered, build(&dirs, None).0.rendered);
}

#[test]
fn argument_order_does_not_change_a_merged_bundle() {
    let [alpha, beta] = [
        repo("tests/data/build/merge/alpha"),
        repo("tests/data/build/merge/beta"),
    ];
    let forward = build(&[alpha.clone(), beta.clone()], None);
    let backward = build(&[beta, alpha], None);
    assert_eq!(forward.0.rendered, backward.0.rendered);
    assert_eq!(forward.1, backward.1);
}

/// Appending one lesson to a declared skill changes that skill's directory (its page
/// and the provenance of what it cites), the SKILL.md of the phase that lists it, the
/// entry skill's count of placed lessons and bundle.json, nothing else.
#[test]
fn adding_a_lesson_changes_only_the_files_it_belongs_to() {
    let root = scratch("one-lesson");
    let before_dir = root.join("before/example");
    let after_dir = root.join("after/example");
    copy_dir(&repo("grammar/example"), &before_dir);
    copy_dir(&repo("grammar/example"), &after_dir);
    let kernels = after_dir.join("01-kernels.traj");
    let mut text = fs::read_to_string(&kernels).expect("read");
    text.push_str(
        "\nl99 lesson \"A herd wider than the N tiles leaves columns idle\"\n    \
         symptom validate-kernel fails with mismatches > 0\n    \
         cause herd_n > N / tile_n\n    \
         fix select-tiling herd=[8, 1]\n    \
         when kernel=gemm\n    \
         evidence o13\n    \
         in debug-gemm-corruption\n",
    );
    fs::write(&kernels, text).expect("write");

    let before = build(&[before_dir], None).0.rendered;
    let after = build(&[after_dir], None).0.rendered;
    let changed: BTreeSet<&str> = after
        .files
        .iter()
        .filter(|(path, content)| before.files.get(*path) != Some(content))
        .map(|(path, _)| path.as_str())
        .chain(
            before
                .files
                .keys()
                .filter(|path| !after.files.contains_key(*path))
                .map(String::as_str),
        )
        .collect();
    let expected = BTreeSet::from([
        "bundle.json",
        "debug-gemm-corruption/SKILL.md",
        "debug-gemm-corruption/references/provenance.md",
        "debug-gemm-corruption/references/remedies.md",
        "deploy-new-llm/SKILL.md",
        "phase-1-kernel-validation/SKILL.md",
    ]);
    assert_eq!(changed, expected);
    fs::remove_dir_all(&root).ok();
}

/// A long trajectory keeps every SKILL.md under 200 lines by moving long
/// sections to `references/`; the worked example lists every recorded step.
#[test]
fn long_sections_move_to_references() {
    let root = scratch("long");
    let dir = root.join("long");
    fs::create_dir_all(&dir).expect("dir");
    let mut text = String::from(
        "trajectory \"long\" model \"m\" target npu2 baseline \"none\"\n\
         session 2026-05-01T09:00 phase 1 \"Many kernels\"\n",
    );
    for i in 0..400 {
        text.push_str(&format!(
            "a{i} action register-kernel kernel=gemm shape=[{},64,64]\n",
            64 + i
        ));
    }
    for i in 0..150 {
        text.push_str(&format!(
            "t{i} action select-tiling kernel=gemm shape=[{},64,64]\no{i} observe mismatches = 1 == 0 -> fail\n",
            64 + i
        ));
    }
    fs::write(dir.join("00.traj"), text).expect("write");
    let (built, _) = build(&[dir], None);
    let phase = &built.rendered.files["phase-1-kernel-validation/SKILL.md"];
    assert!(
        phase.contains("is in [references/dead-ends.md](references/dead-ends.md)"),
        "{phase}"
    );
    let dead_ends = &built.rendered.files["phase-1-kernel-validation/references/dead-ends.md"];
    assert!(dead_ends.contains("`select-tiling kernel=gemm shape=[213,64,64]`"));
    let example = &built.rendered.files["phase-1-kernel-validation/references/worked-example.md"];
    assert!(example.contains("400. `register-kernel kernel=gemm shape=[463,64,64]`"));
    for (path, content) in &built.rendered.files {
        if path.ends_with("SKILL.md") {
            let lines = content.lines().count();
            assert!(lines < 200, "{path}: {lines} lines");
        }
    }
    fs::remove_dir_all(&root).ok();
}
