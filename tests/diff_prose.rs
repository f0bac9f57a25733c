//! `skillc diff` on edited prose: a lesson's cause and its fix in words and a
//! note, each changed by a word or two, show as the word diff of the changed
//! sentences (in the lesson and in every page that carries the text), and
//! `--full` shows the whole texts.

use crate::build_support::{copy_dir, repo, scratch};

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn skillc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skillc"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("skillc runs")
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn edited_prose_shows_as_a_word_diff_of_the_changed_sentences() {
    let root = scratch("diff-prose");
    let (old_dir, new_dir) = (root.join("old/example"), root.join("new/example"));
    copy_dir(&repo("grammar/example"), &old_dir);
    copy_dir(&repo("grammar/example"), &new_dir);
    let kernels = new_dir.join("01-kernels.traj");
    let before = fs::read_to_string(&kernels).expect("read");
    let edits = [
        (
            "the last column tile runs past N",
            "the last column tile writes past N",
        ),
        (
            "choose tile_n so that tile_n x herd_n divides N",
            "pick tile_n so that tile_n x herd_n divides N evenly",
        ),
        (
            "the last block is never written.",
            "the last block is never stored.",
        ),
    ];
    let mut after = before.clone();
    for (from, to) in edits {
        assert!(after.contains(from), "{from}");
        after = after.replace(from, to);
    }
    fs::write(&kernels, after).expect("write");
    let (old_out, new_out) = (root.join("bundles/old"), root.join("bundles/new"));
    for (dir, out) in [(&old_dir, &old_out), (&new_dir, &new_out)] {
        let run = skillc(&["build", path(dir), "--out", path(out)]);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
    }

    let words = skillc(&["diff", path(&old_out), path(&new_out)]);
    assert_eq!(words.status.code(), Some(1));
    let shown = text(&words);
    assert!(
        shown.contains("cause: ~ the last column tile [-runs-]{+writes+} past N"),
        "{shown}"
    );
    insta::assert_snapshot!("diff_prose_words", shown);

    let json = skillc(&["diff", "--json", path(&old_out), path(&new_out)]);
    let value: serde_json::Value = serde_json::from_str(&text(&json)).expect("JSON");
    assert!(value["sections"].as_array().is_some_and(|s| !s.is_empty()));

    let full = skillc(&["diff", "--full", path(&old_out), path(&new_out)]);
    assert_eq!(full.status.code(), Some(1));
    let whole = text(&full);
    assert!(whole.lines().count() > shown.lines().count(), "{whole}");
    assert!(
        whole.contains("cause: - the last column tile runs past N"),
        "{whole}"
    );
    insta::assert_snapshot!("diff_prose_full", whole);
    fs::remove_dir_all(&root).ok();
}
