//! The README's commands and flags, run. Every command of the README's code
//! blocks runs here unless it needs a full-size model or is the test command
//! itself (each skip says why), and every flag a user sees in `--help` is run
//! by one cheap invocation on the example trajectory or a tiny fixture, or is
//! listed with the reason it is not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::CommandFactory;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("readme-commands")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

/// Runs skillc with `args` (`{S}` is the scratch folder) and returns its exit code.
fn run(args: &[&str], scratch: &Path) -> i32 {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("{S}", &scratch.display().to_string()))
        .collect();
    let output = Command::new(env!("CARGO_BIN_EXE_skillc"))
        .args(&args)
        .current_dir(repo())
        .output()
        .expect("skillc runs");
    let code = output.status.code().expect("an exit code");
    if code != 0 {
        eprintln!(
            "skillc {}: exit {code}\n{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    code
}

/// The words of a command line: blanks split, double quotes group.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// The commands of the README's code blocks, `&&` chains split.
fn readme_commands() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let mut inside = false;
    let mut out = Vec::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            inside = !inside;
            continue;
        }
        if inside && line.starts_with("cargo ") {
            out.extend(line.split(" && ").map(words));
        }
    }
    out
}

#[test]
fn the_readme_commands_run() {
    let scratch = scratch("readme");
    let commands = readme_commands();
    assert!(commands.len() >= 5, "{commands:?}");
    let mut ran = 0;
    for command in &commands {
        let line = command.join(" ");
        if command[1] != "run" {
            // cargo fmt, clippy and test: the test command, which runs this test.
            eprintln!("skipped `{line}`: the test command itself");
            continue;
        }
        let at = command
            .iter()
            .position(|w| w == "--")
            .expect("cargo run -- …");
        let mut args: Vec<String> = command[at + 1..].to_vec();
        if args.iter().any(|a| a.starts_with("../shared/models/")) {
            eprintln!(
                "skipped `{line}`: a full-size model (minutes; the main job is \
                 tests/deploy_real_model.rs, ignored: cargo test --release --test integration \
                 deploy_real_model:: -- --ignored)"
            );
            continue;
        }
        // Written into the scratch folder, never over the committed bundle.
        match args.iter().position(|a| a == "--out") {
            Some(i) => args[i + 1] = "{S}/readme-out".into(),
            None => args.extend(["--out".into(), "{S}/readme-out".into()]),
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(run(&args, &scratch), 0, "`{line}`");
        ran += 1;
    }
    assert!(ran >= 1, "no README command ran");
}

/// One cheap invocation per command, each with the exit code it must end with.
const INVOCATIONS: &[(&[&str], i32)] = &[
    (&["check", "grammar/example", "--json", "--threads", "1"], 0),
    (
        &["graph", "grammar/example", "--json", "-o", "{S}/graph.json"],
        0,
    ),
    (
        &[
            "import",
            "tests/data/import/records",
            "--out",
            "{S}/imported/demo",
            "--cite-as",
            "demo=tests/data/import/records",
            "--model",
            "demo",
            "--baseline",
            "bf16",
            "--date",
            "2026-01-01",
            "--force",
            "--json",
        ],
        0,
    ),
    (
        &[
            "build",
            "grammar/example",
            "--out",
            "{S}/bundle",
            "--name",
            "ex",
            "--force",
            "--json",
        ],
        0,
    ),
    (
        &[
            "build",
            "grammar/example",
            "--out",
            "{S}/bundle",
            "--name",
            "ex",
            "--check",
        ],
        0,
    ),
    (&["diff", "{S}/bundle", "{S}/bundle", "--full", "--json"], 0),
    (
        &[
            "replay",
            "tests/replay/agree",
            "--model",
            "../shared/fixtures/llama32-tiny",
            "--functional",
            "none",
            "--seed",
            "1",
            "--problems-only",
            "--quiet",
            "--json",
        ],
        0,
    ),
    (
        &[
            "deploy",
            "generated-skills/llama1b",
            "--model",
            "../shared/fixtures/llama32-tiny",
            "--out",
            "{S}/deploy",
            "--seed",
            "0",
            "--prompt-ids",
            "1,2,3",
            "--weights",
            "bf16",
            "--stop-after",
            "1",
            "--fixtures",
            "../shared/fixtures",
            "--force",
            "--quiet",
            "--json",
        ],
        3,
    ),
    (
        &[
            "deploy",
            "generated-skills/llama1b",
            "--model",
            "../shared/fixtures/llama32-tiny",
            "--out",
            "{S}/planted",
            "--registry",
            "{S}/deploy/kernel-registry.json",
            "--plant",
            "l1-overflow",
            "--stop-after",
            "1",
            "--allow-modified",
            "--quiet",
        ],
        1,
    ),
    (
        &[
            "reference",
            "--model",
            "../shared/fixtures/llama32-tiny",
            "--config",
            "../shared/fixtures/llama32-tiny/config.transformers5.json",
            "--prompt-ids",
            "1,2,3",
            "--max-new-tokens",
            "2",
            "--ignore-eos",
            "--tolerance",
            "1e-4",
            "--top-k",
            "3",
            "--json",
        ],
        0,
    ),
    (
        &[
            "reference",
            "--model",
            "../shared/fixtures/llama32-tiny",
            "--prompt-ids",
            "1,2,3",
            "--bf16-storage-table",
            "--residual-at",
            "0,0,0",
        ],
        0,
    ),
    (
        &[
            "reference",
            "--model",
            "tests/data/deploy/padded-heads",
            "--prompt-ids",
            "1,2",
            "--seed",
            "0",
            "--max-new-tokens",
            "2",
        ],
        0,
    ),
    (&["calibrate", "--json"], 0),
    (
        &[
            "bench",
            "deploy",
            "--four-bit",
            "--plot",
            "target/tmp/readme-commands/four-bit.svg",
            "--json",
        ],
        0,
    ),
    (
        &[
            "bench",
            "lodo",
            "trajectories/llama1b",
            "trajectories/qwen3-0.6b",
            "--json",
        ],
        0,
    ),
    (
        &[
            "bench", "parse", "--sizes", "200", "--files", "2", "--runs", "1", "--seed", "1",
            "--json",
        ],
        0,
    ),
    (
        &[
            "bench",
            "build",
            "grammar/example",
            "--sizes",
            "200",
            "--files",
            "2",
            "--failing",
            "20",
            "--seed",
            "1",
            "--runs",
            "1",
            "--json",
        ],
        0,
    ),
    (
        &[
            "bench",
            "oracle",
            "--config",
            "../shared/fixtures/llama32-tiny",
            "--seed",
            "0",
            "--decode-tokens",
            "2",
            "--prefill-tokens",
            "4",
            "--stream-mib",
            "1",
            "--json",
        ],
        0,
    ),
    (
        &[
            "bench",
            "oracle",
            "--model",
            "../shared/fixtures/llama32-tiny",
            "--decode-tokens",
            "2",
            "--prefill-tokens",
            "4",
            "--stream-mib",
            "1",
        ],
        0,
    ),
    (
        &[
            "bench",
            "emulator",
            "--config",
            "../shared/fixtures/llama32-tiny",
            "--seed",
            "0",
            "--steps",
            "1",
            "--json",
        ],
        0,
    ),
];

/// Flags no cheap invocation runs, and why; each is run elsewhere or costs minutes.
const NOT_RUN: &[(&str, &str)] = &[
    (
        "deploy --seeded-weights",
        "applies to a config-only full-size model only (a deploy of minutes); run by hand for issue 30",
    ),
    (
        "deploy --prompt",
        "needs a tokenizer; no tiny fixture ships one (tests/deploy_real_model.rs, ignored)",
    ),
    (
        "deploy --chat",
        "needs a chat template; the main job (tests/deploy_real_model.rs, ignored)",
    ),
    (
        "reference --prompt",
        "needs a tokenizer (cli_reference::chat_with_the_real_gguf_model)",
    ),
    (
        "reference --chat",
        "needs a chat template (cli_reference::chat_with_the_real_gguf_model)",
    ),
    (
        "calibrate --fit",
        "rewrites the committed fit (tests/cli_calibrate.rs)",
    ),
    (
        "calibrate --data",
        "the committed calibration is the default (tests/cli_calibrate.rs)",
    ),
    (
        "calibrate --models",
        "reads the nine configs, the default (tests/cli_calibrate.rs)",
    ),
    (
        "calibrate --model",
        "the default model's plans (tests/cli_calibrate.rs)",
    ),
    (
        "calibrate --trace",
        "a full-size model's modeled timeline (tests/cli_calibrate.rs)",
    ),
    (
        "calibrate --roofline",
        "a full-size model's roofline (tests/cli_calibrate.rs)",
    ),
    (
        "bench deploy",
        "the nine full-size models: about an hour (tests/bench_deploy.rs on fixtures)",
    ),
    (
        "bench faults",
        "the fault matrix: hours on the nine (tests/bench_deploy.rs on fixtures)",
    ),
    ("bench plans", "every plan of the nine configs: minutes"),
    ("bench contention", "the main job four times: minutes"),
];

#[test]
fn every_flag_runs_or_says_why_not() {
    let scratch = scratch("flags");
    let mut ran: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (args, expected) in INVOCATIONS {
        assert_eq!(run(args, &scratch), *expected, "skillc {}", args.join(" "));
        let name = if args[0] == "bench" {
            format!("bench {}", args[1])
        } else {
            args[0].to_string()
        };
        let flags = ran.entry(name).or_default();
        flags.extend(
            args.iter()
                .filter(|a| a.starts_with('-'))
                .map(|a| a.to_string()),
        );
    }
    let not_run: BTreeMap<&str, &str> = NOT_RUN.iter().copied().collect();
    let mut missing = Vec::new();
    fn walk(prefix: &str, cmd: &clap::Command, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands() {
            if sub.is_hide_set() || sub.get_name() == "help" {
                continue;
            }
            let name = format!("{prefix}{}", sub.get_name());
            if sub.has_subcommands() {
                walk(&format!("{name} "), sub, out);
            } else {
                out.push((name, sub.clone()));
            }
        }
    }
    let mut commands = Vec::new();
    walk("", &skillc::cli::Cli::command(), &mut commands);
    for (name, cmd) in commands {
        if not_run.contains_key(name.as_str()) {
            continue;
        }
        let flags = ran.get(&name).cloned().unwrap_or_default();
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            let (Some(long), short) = (arg.get_long(), arg.get_short()) else {
                continue;
            };
            if long == "help" || long == "threads" {
                continue;
            }
            let spelled = |f: &String| {
                *f == format!("--{long}") || short.is_some_and(|s| *f == format!("-{s}"))
            };
            if !flags.iter().any(spelled)
                && !not_run.contains_key(format!("{name} --{long}").as_str())
            {
                missing.push(format!("{name} --{long}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "flags neither run nor listed with a reason: {missing:?}"
    );
}
