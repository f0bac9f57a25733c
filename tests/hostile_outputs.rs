//! Issue 27, the items about what skillc writes and what it trusts: outputs that
//! are inputs (items 2 and 3), bundle text in report.md (5), edited bundles (6),
//! the kernel registry (10) and echoed input (14). One test per item, named
//! after it; `hostile.rs` checks that every item and every row of issue 15
//! keeps its test.

use crate::hostile_support::*;

use std::path::Path;

/// Item 2: `graph DIR -o DIR/00-cpu-reference.traj` overwrote its own input
/// with DOT and exited 0. Now an output that is, or lies inside, the
/// trajectory directory is refused and the input stays as it was.
#[test]
fn item02_graph_never_writes_over_its_input() {
    let root = scratch("item02");
    let dir = copy_dir(&repo("tests/data/valid/minimal"), &root.join("traj"));
    let before = contents(&dir);
    for output in ["traj/trajectory.traj", "traj/graph.dot", "traj"] {
        let refused = skillc_in(&root, &["graph", "traj", "-o", output]);
        assert_refused(
            &refused,
            2,
            &["refusing to write", "the trajectory directory `traj`"],
        );
    }
    assert_eq!(contents(&dir), before, "the trajectory is untouched");
    let written = skillc_in(&root, &["graph", "traj", "-o", "graph.dot"]);
    assert_eq!(written.status.code(), Some(0), "{}", stderr(&written));
    assert!(std::fs::read_to_string(root.join("graph.dot"))
        .expect("graph.dot")
        .starts_with("digraph"));
}

/// Item 3: `--force` deleted inputs: `build --out` at the trajectory folder or
/// its parent, `deploy --out` at the model or the bundle folder. Now an output
/// that is, contains or lies inside an input is refused, `--force` or not.
#[test]
fn item03_force_never_deletes_an_input() {
    let root = scratch("item03");
    let trajectory = copy_dir(&repo("tests/data/valid/minimal"), &root.join("work/traj"));
    let bundle = bundle_copy(&root);
    let model = failing_model(&root);
    let before = contents(&root);
    let shown = |p: &Path| p.to_string_lossy().into_owned();
    for out in [
        trajectory.clone(),
        root.join("work"),
        trajectory.join("out"),
    ] {
        let refused = skillc_in(
            &root,
            &[
                "build",
                &shown(&trajectory),
                "--out",
                &shown(&out),
                "--force",
            ],
        );
        assert_refused(&refused, 2, &["refusing to write", "trajectory directory"]);
    }
    for (out, role) in [
        (model.clone(), "the model"),
        (bundle.clone(), "the skill bundle"),
        (root.clone(), "the skill bundle"),
        (model.join("run"), "the model"),
    ] {
        let refused = deploy_in(&root, &bundle, &model, &out, &["--force"]);
        assert_refused(&refused, 2, &["refusing to write", role]);
    }
    assert_eq!(contents(&root), before, "every input is as it was");
}

/// Items 2 and 3 for the other writers: `import` never drafts into or over a
/// record it reads, and the evaluator never writes its files into the model it
/// audits; both refuse through the one overlap rule every command uses.
#[test]
fn import_and_evaluate_never_write_into_an_input() {
    let root = scratch("overlap-writers");
    let records = root.join("records");
    std::fs::create_dir_all(&records).expect("records dir");
    std::fs::write(records.join("README.md"), "# Notes\n\n- a finding\n").expect("record");
    let model = failing_model(&root);
    let before = contents(&root);
    for out in ["records", "records/draft", "."] {
        let refused = skillc_in(&root, &["import", "records", "--out", out, "--force"]);
        assert_refused(&refused, 2, &["refusing to write", "the record `records`"]);
    }
    let shown = model.to_string_lossy().into_owned();
    for out in [shown.clone(), format!("{shown}/run")] {
        let refused = skillc_in(&root, &["evaluate", &out, "--model", &shown]);
        assert_refused(&refused, 2, &["refusing to write", "the model directory"]);
    }
    assert_eq!(contents(&root), before, "every input is as it was");
}

/// Item 5: report.md copied the bundle's trajectory name raw: an unclosed fence
/// swallowed the rest of the report, raw HTML and headings appeared. Now the
/// name is one code span on one line.
#[test]
fn item05_report_md_shows_bundle_names_literally() {
    let root = scratch("item05");
    let bundle = root.join("bundle");
    let built = skillc_in(
        &root,
        &[
            "build",
            &repo("tests/data/hardening/hostile-name").to_string_lossy(),
            "--out",
            &bundle.to_string_lossy(),
        ],
    );
    assert_eq!(built.status.code(), Some(0), "{}", stderr(&built));
    let out = root.join("out");
    let deployed = deploy_in(&root, &bundle, &failing_model(&root), &out, &[]);
    assert_eq!(deployed.status.code(), Some(1), "{}", stderr(&deployed));
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        !report.lines().any(|l| l.trim_start().starts_with("```")),
        "a fence line in:\n{report}"
    );
    let line = report
        .lines()
        .find(|l| l.contains("<b>bold</b>"))
        .expect("the name is shown");
    assert!(
        line.contains("````evil⏎```⏎<b>bold</b> _x_ (Qwen/Qwen3-0.6B)````"),
        "not one code span: {line}"
    );
}

/// bundle.json of `bundle`, edited by `edit`, written back pretty.
fn edit_bundle(bundle: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = bundle.join("bundle.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    edit(&mut json);
    std::fs::write(&path, serde_json::to_string_pretty(&json).expect("json")).expect("write");
}

/// The first exit gate on `cosine` (phase 2's block gate).
fn cosine_gate(json: &mut serde_json::Value) -> &mut serde_json::Value {
    json["phases"]
        .as_array_mut()
        .expect("phases")
        .iter_mut()
        .flat_map(|p| p["exit_gates"].as_array_mut().expect("gates").iter_mut())
        .find(|g| g["metric"] == "cosine")
        .expect("a cosine gate")
}

/// Item 6: an edited bundle.json deployed: a phase-2 cosine threshold of
/// −1e308 passed a 0.806 block; duplicate keys and dangling lesson ids were
/// accepted. Now bundle.json carries its own digest: an edit is refused
/// unless `--allow-modified` (and the report says so first), a re-indented
/// file still matches, and a duplicate key, a dangling lesson id or a
/// threshold no metric can take are refused even with the flag.
#[test]
fn item06_an_edited_bundle_json_is_caught() {
    let root = scratch("item06");
    let model = failing_model(&root);
    let fresh = |name: &str| copy_dir(&repo("generated-skills/llama1b"), &root.join(name));
    let run =
        |bundle: &Path, extra: &[&str]| deploy_in(&root, bundle, &model, &root.join("out"), extra);

    let reindented = fresh("reindented");
    let path = reindented.join("bundle.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    std::fs::write(&path, serde_json::to_string(&json).expect("json")).expect("compact");
    assert_eq!(
        run(&reindented, &[]).status.code(),
        Some(1),
        "only layout changed"
    );

    let retitled = fresh("retitled");
    edit_bundle(&retitled, |json| json["phases"][3]["title"] = "mine".into());
    assert_refused(
        &run(&retitled, &[]),
        2,
        &[
            "bundle.json changed since skillc built it",
            "--allow-modified",
        ],
    );
    assert_eq!(run(&retitled, &["--allow-modified"]).status.code(), Some(1));
    let report = std::fs::read_to_string(root.join("out/report.md")).expect("report.md");
    let head: Vec<&str> = report.lines().take(8).collect();
    assert!(
        head.iter().any(|l| l.contains("**Bundle warning:** run with --allow-modified: bundle.json changed since skillc built it")),
        "{head:#?}"
    );

    let threshold = fresh("threshold");
    edit_bundle(&threshold, |json| {
        cosine_gate(json)["threshold"] = (-1e308).into()
    });
    for extra in [&[][..], &["--allow-modified"][..]] {
        let refused = run(&threshold, extra);
        assert_ne!(refused.status.code(), Some(0));
        if !extra.is_empty() {
            assert_refused(
                &refused,
                2,
                &["`cosine` threshold -1e308 is outside what the metric can be (-1 to 1)"],
            );
        }
    }

    let dangling = fresh("dangling");
    edit_bundle(&dangling, |json| {
        json["phases"][1]["lessons"]
            .as_array_mut()
            .expect("lessons")
            .push("no-such-lesson".into())
    });
    assert_refused(
        &run(&dangling, &["--allow-modified"]),
        2,
        &["phase 1 `lessons` names lesson `no-such-lesson`, which the bundle does not hold"],
    );

    let duplicate = fresh("duplicate");
    let path = duplicate.join("bundle.json");
    let text = std::fs::read_to_string(&path).expect("read");
    std::fs::write(&path, text.replacen('{', "{\n  \"name\": \"first\",", 1)).expect("write");
    assert_refused(
        &run(&duplicate, &["--allow-modified"]),
        2,
        &["bundle.json:", "key `name` appears twice in the top level"],
    );
    assert!(!root.join("out").join("plan.json").exists());
}

/// Item 10: `--registry` was read as it came: a FIFO hung the run, /dev/zero
/// was read to 4.2 GB, a registry of another device was accepted. Now each is
/// refused by name before any phase runs.
#[cfg(unix)]
#[test]
fn item10_the_registry_is_read_defensively() {
    let root = scratch("item10");
    let bundle = repo("generated-skills/llama1b");
    let model = failing_model(&root);
    let fifo = root.join("registry.fifo");
    mkfifo(&fifo);
    let other = root.join("npu1.json");
    std::fs::write(
        &other,
        r#"{"schema_version": "skillc.kernel-registry/1", "device": "npu1", "rows": []}"#,
    )
    .expect("write");
    let huge = root.join("huge.json");
    std::fs::File::create(&huge)
        .expect("create")
        .set_len(1 << 30)
        .expect("sparse");
    let cases: [(&Path, &str); 4] = [
        (&fifo, "is a FIFO (named pipe), not a regular file"),
        (
            Path::new("/dev/zero"),
            "is a character device, not a regular file",
        ),
        (&other, "recorded on device `npu1`"),
        (&huge, "is 1073741824 bytes, more than the 67108864"),
    ];
    for (registry, says) in cases {
        let refused = deploy_in(
            &root,
            &bundle,
            &model,
            &root.join("out"),
            &["--registry", &registry.to_string_lossy()],
        );
        assert_refused(&refused, 2, &[says]);
    }
}

/// Item 14: unbounded echo: `diff` printed a 100 MB name whole, and a 50 MB
/// `.traj` line came back in a diagnostic. Now both are cut, saying how much
/// was left out (10 MB here: the same path at a tenth of the test's time).
#[test]
fn item14_echoed_input_is_bounded() {
    let root = scratch("item14");
    let bundle = bundle_copy(&root);
    edit_bundle(&bundle, |json| json["name"] = "n".repeat(10 << 20).into());
    let diff = skillc_in(
        &root,
        &[
            "diff",
            &repo("generated-skills/llama1b").to_string_lossy(),
            "llama1b",
        ],
    );
    assert_eq!(diff.status.code(), Some(1), "{}", stderr(&diff));
    assert!(diff.stdout.len() < 64 << 10, "{} bytes", diff.stdout.len());
    assert!(stdout(&diff).contains("more characters)"));

    let dir = root.join("long-line");
    std::fs::create_dir_all(&dir).expect("dir");
    let line = format!("a1 action {}\n", "x".repeat(10 << 20));
    std::fs::write(
        dir.join("00.traj"),
        format!("trajectory \"t\" model \"m\" target npu2 baseline \"none\"\nsession 2026-05-01 phase 0\n{line}"),
    )
    .expect("write");
    let check = skillc_in(&root, &["check", "long-line"]);
    assert_eq!(check.status.code(), Some(1), "{}", stderr(&check));
    let shown = check.stdout.len() + check.stderr.len();
    assert!(shown < 16 << 10, "{shown} bytes");
    assert!(
        stdout(&check).contains("long-line/00.traj:3:"),
        "{}",
        stdout(&check)
    );
}
