//! The command line as a whole: one JSON spelling (`--json`) on every command,
//! every flag in `--help` and in the README, and distinct exit codes for a
//! refused input (2), a failed gate (1) and a run stopped by request (3).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clap::CommandFactory;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn skillc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skillc"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("the skillc binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Every command a user runs, as its words (`["bench", "faults"]`) and its
/// clap definition; hidden commands (phase 7's evaluator) and `help` left out.
fn user_commands() -> Vec<(Vec<String>, clap::Command)> {
    fn walk(path: &[String], cmd: &clap::Command, out: &mut Vec<(Vec<String>, clap::Command)>) {
        for sub in cmd.get_subcommands() {
            if sub.is_hide_set() || sub.get_name() == "help" {
                continue;
            }
            let mut words = path.to_vec();
            words.push(sub.get_name().to_string());
            if sub.has_subcommands() {
                walk(&words, sub, out);
            } else {
                out.push((words, sub.clone()));
            }
        }
    }
    let mut out = Vec::new();
    walk(&[], &skillc::cli::Cli::command(), &mut out);
    out
}

/// The long flags a user sees (hidden aliases and `--help` left out).
fn visible_flags(cmd: &clap::Command) -> Vec<String> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long())
        .filter(|long| *long != "help")
        .map(|long| format!("--{long}"))
        .collect()
}

#[test]
fn every_command_takes_json_and_its_help_shows_every_flag_and_the_exit_codes() {
    let commands = user_commands();
    assert!(commands.len() >= 17, "{} commands", commands.len());
    for (words, cmd) in &commands {
        let flags = visible_flags(cmd);
        assert!(flags.iter().any(|f| f == "--json"), "{words:?}: no --json");
        let mut args: Vec<&str> = words.iter().map(String::as_str).collect();
        args.push("--help");
        let help = skillc(&args);
        assert_eq!(help.status.code(), Some(0), "{words:?}");
        let text = stdout(&help);
        for flag in &flags {
            assert!(
                text.contains(flag.as_str()),
                "{words:?} --help lacks {flag}"
            );
        }
        assert!(
            text.contains("Exit codes: 0 success; 1 failed"),
            "{words:?}"
        );
    }
    let deploy = stdout(&skillc(&["deploy", "--help"]));
    assert!(deploy.contains("--plant <FAULT>"), "{deploy}");
}

#[test]
fn bench_help_lists_every_bench() {
    let help = stdout(&skillc(&["bench", "--help"]));
    let benches: Vec<String> = user_commands()
        .into_iter()
        .filter(|(words, _)| words[0] == "bench")
        .map(|(words, _)| words[1].clone())
        .collect();
    assert!(benches.len() >= 8, "{benches:?}");
    for bench in &benches {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(bench.as_str())),
            "bench --help lacks {bench}:\n{help}"
        );
    }
}

/// The README's command table and bench paragraph name every command and every
/// flag a user sees: the guide cannot fall behind the binary.
/// `--model` of the benches over the nine names one of them; any other name is
/// refused (exit 2) before anything runs, never run silently as no model.
#[test]
fn a_bench_refuses_a_model_that_is_not_one_of_the_nine() {
    for bench in ["faults", "deploy"] {
        let run = skillc(&["bench", bench, "--model", "smollm2-135m-instruct-q4_1"]);
        assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
        assert!(
            stderr(&run).contains("is not one of the nine models"),
            "{}",
            stderr(&run)
        );
    }
}

#[test]
fn the_readme_names_every_command_and_flag() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    for (words, cmd) in user_commands() {
        let named = match words.as_slice() {
            [bench, name] if bench == "bench" => readme.contains(&format!("`{name}` (")),
            _ => readme.contains(&format!("skillc {}", words.join(" "))),
        };
        assert!(
            named,
            "README.md does not name `skillc {}`",
            words.join(" ")
        );
        for flag in visible_flags(&cmd) {
            assert!(
                readme.contains(&flag),
                "README.md does not name {flag} of `skillc {}`",
                words.join(" ")
            );
        }
    }
}

#[test]
fn json_and_the_older_format_json_print_the_same() {
    for (new, old) in [
        (
            vec!["check", "--json", "grammar/example"],
            vec!["check", "--format", "json", "grammar/example"],
        ),
        (
            vec!["graph", "--json", "grammar/example"],
            vec!["graph", "--format", "json", "grammar/example"],
        ),
    ] {
        let (a, b) = (skillc(&new), skillc(&old));
        assert_eq!(a.status.code(), Some(0), "{new:?}: {}", stderr(&a));
        assert_eq!(stdout(&a), stdout(&b), "{new:?}");
        let value: serde_json::Value = serde_json::from_str(&stdout(&a)).expect("JSON");
        assert!(value.is_object() || value.is_array(), "{new:?}");
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli-surface")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

fn deploy(model: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "deploy".to_string(),
        "generated-skills/llama1b".into(),
        "--model".into(),
        model.display().to_string(),
        "--out".into(),
        out.display().to_string(),
        "--quiet".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    skillc(&args)
}

#[test]
fn deploy_exits_2_refused_1_failed_3_stopped() {
    let tiny = repo().join("../shared/fixtures/llama32-tiny");
    let out = scratch("deploy");

    let refused = deploy(
        &repo().join("tests/data/deploy/out-of-scope/moe"),
        &out.join("moe"),
        &[],
    );
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(stdout(&refused).contains("REFUSED"));

    let stopped = deploy(&tiny, &out.join("stopped"), &["--stop-after", "0"]);
    assert_eq!(stopped.status.code(), Some(3), "{}", stderr(&stopped));
    assert!(
        stdout(&stopped).contains("stop-after"),
        "{}",
        stdout(&stopped)
    );

    // A gate that fails before the requested stop is a failure, not a stop.
    let failed = deploy(
        &tiny,
        &out.join("failed"),
        &["--plant", "l1-overflow", "--stop-after", "1"],
    );
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));

    let bundle = out.join("bundle");
    let copied = skillc(&[
        "build",
        "trajectories/llama1b",
        "--out",
        &bundle.display().to_string(),
    ]);
    assert_eq!(copied.status.code(), Some(0), "{}", stderr(&copied));
    let skill = bundle.join("deploy-new-llm/SKILL.md");
    let text = std::fs::read_to_string(&skill).expect("SKILL.md");
    std::fs::write(&skill, text + "\nA hand edit.\n").expect("edited");
    let modified = skillc(&[
        "deploy",
        &bundle.display().to_string(),
        "--model",
        &tiny.display().to_string(),
        "--out",
        &out.join("modified").display().to_string(),
    ]);
    assert_eq!(modified.status.code(), Some(2), "{}", stderr(&modified));
}
