//! The trajectory language has one printer (`skillc_runtime::notation`, laid out
//! for a whole file by `skillc::syntax::print`): print → parse → print gives the same
//! text and the same graph, on every committed trajectory, on the front end's test
//! trajectories and on what the run-trajectory writer of `skillc deploy` writes.

use skillc_runtime::phase::DeployPhase;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use skillc::diag::{Diagnostic, Severity};
use skillc::graph::{self, export};
use skillc::syntax::{self, SourceFile};
use skillc_runtime::bundle::{Bundle, Comparison, Value};
use skillc_runtime::exec::artifacts::trajectory::{ActionLinks, TrajectoryWriter};
use skillc_runtime::exec::gates::gate::{GateCheck, ThresholdSource};
use skillc_runtime::ops::{GateMetric, Metric, OpKind, RuntimeMetric};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every trajectory directory the round trip covers: the committed ones and the
/// valid inputs of the front end's and the build's tests.
fn trajectory_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for parent in ["trajectories", "tests/data/valid"] {
        dirs.extend(subdirectories(&Path::new(ROOT).join(parent)));
    }
    for case in subdirectories(&Path::new(ROOT).join("tests/data/build")) {
        dirs.extend(subdirectories(&case));
    }
    dirs
}

fn subdirectories(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

fn errors(diagnostics: &[Diagnostic]) -> Vec<String> {
    diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| format!("{d:?}"))
        .collect()
}

/// Each file of `sources` printed from its parse; the parse must be clean.
fn printed(sources: &[SourceFile]) -> Vec<SourceFile> {
    let (parsed, diagnostics) = syntax::parse_sources(sources, 0);
    let errors = errors(&diagnostics);
    assert!(errors.is_empty(), "{errors:#?}");
    parsed
        .iter()
        .zip(sources)
        .map(|(file, source)| SourceFile {
            path: source.path.clone(),
            text: syntax::print::file(file),
        })
        .collect()
}

/// The graph of a trajectory as JSON without source positions: what it means.
fn meaning(sources: &[SourceFile]) -> Json {
    let (parsed, diagnostics) = syntax::parse_sources(sources, 0);
    let (graph, more) = graph::build(parsed);
    let mut problems = errors(&diagnostics);
    problems.extend(errors(&more));
    assert!(problems.is_empty(), "{problems:#?}");
    let mut json: Json = serde_json::from_str(&export::to_json(&graph)).expect("graph JSON");
    strip_positions(&mut json);
    json
}

fn strip_positions(json: &mut Json) {
    match json {
        Json::Object(map) => {
            map.remove("at");
            map.values_mut().for_each(strip_positions);
        }
        Json::Array(items) => items.iter_mut().for_each(strip_positions),
        _ => {}
    }
}

/// Where two JSON documents first differ, as a path with both values.
fn first_difference(a: &Json, b: &Json, at: &str) -> Option<String> {
    match (a, b) {
        (Json::Object(x), Json::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(p), Some(q)) => first_difference(p, q, &format!("{at}.{k}")),
                (p, q) => Some(format!("{at}.{k}: {p:?} vs {q:?}")),
            })
        }
        (Json::Array(x), Json::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{at}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{at}: {a} vs {b}")),
    }
}

#[test]
fn every_committed_trajectory_prints_back_to_itself() {
    let dirs = trajectory_dirs();
    assert!(dirs.len() >= 10, "{dirs:?}");
    for dir in dirs {
        let sources = syntax::load_dir(&dir).expect("a trajectory directory");
        let first = printed(&sources);
        let second = printed(&first);
        for (a, b) in first.iter().zip(&second) {
            assert_eq!(a.text, b.text, "{}: print → parse → print differs", a.path);
        }
        let difference = first_difference(&meaning(&sources), &meaning(&first), "");
        assert_eq!(
            difference,
            None,
            "{}: the printed trajectory means something else",
            dir.display()
        );
    }
}

/// The header comment the writer starts a file with; comments are not in the tree.
fn without_comments(text: &str) -> String {
    text.lines()
        .skip_while(|l| l.starts_with('#') || l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A writer's text is already the printer's layout: parsing and printing it gives
/// it back unchanged.
fn assert_prints_back(text: &str) {
    let written = without_comments(text);
    let sources = [SourceFile {
        path: "run.traj".into(),
        text: written.clone(),
    }];
    let again = printed(&sources);
    assert_eq!(again[0].text, written);
}

fn llama1b() -> Bundle {
    let path = Path::new(ROOT).join("generated-skills/llama1b/bundle.json");
    let text = std::fs::read_to_string(&path).expect("the committed bundle");
    serde_json::from_str(&text).expect("bundle.json parses")
}

fn gate(metric: GateMetric, value: f64, threshold: f64, modeled: bool) -> GateCheck {
    let conditions = [
        ("kernel".to_string(), Value::Text("gemm".into())),
        ("shape".to_string(), Value::IntList(vec![2048, 896, 896])),
        ("tol".to_string(), Value::Float(1.6e-2)),
        (
            "label with spaces".to_string(),
            Value::Text("two words".into()),
        ),
    ]
    .into_iter()
    .collect();
    let mut g = GateCheck::named(format!("{metric} gate"), OpKind::ValidateKernel)
        .measures(metric, value)
        .when(conditions)
        .against(Comparison::Ge, threshold, ThresholdSource::rule("a rule"));
    g.modeled = modeled;
    g
}

/// Every kind of entry the writer writes, with awkward text and numbers, and every
/// lesson of the committed bundle restated as a run would restate it.
#[test]
fn what_the_run_trajectory_writer_writes_prints_back_to_itself() {
    let bundle = llama1b();
    let mut w = TrajectoryWriter::new(
        "run \"quoted\"\twith a tab",
        "Qwen2.5-0.5B",
        "a\\b\nnew line",
        "pass",
    );
    w.session(
        "2026-12-01T15:40Z",
        DeployPhase::Kernels,
        "kernels: \"all\" of them",
    );
    let params = [
        ("kernel".to_string(), Value::Text("gemm".into())),
        ("tile".to_string(), Value::IntList(vec![64, 256, 32, 32])),
        ("shape".to_string(), Value::IntList(vec![2048, 896, 896])),
        ("precision".to_string(), Value::Text("pass".into())),
    ]
    .into_iter()
    .collect();
    let a = w.action(OpKind::SelectTiling, &params, &ActionLinks::default());
    let cosine = gate(Metric::Cosine.into(), 0.999_876_543_21, 0.99, false);
    let ms = gate(Metric::KernelMs.into(), 1.234_567_89e-7, 3.0e-6, true);
    // Not a metric of the language: the writer keeps it as text.
    let unknown = gate(RuntimeMetric::Violations.into(), 1.0, 2.0, false);
    let o = w.observe(Some("a \"label\""), &[&cosine, &ms, &unknown], Some(&a));
    let fixed = w.action(
        OpKind::SelectTiling,
        &params,
        &ActionLinks {
            after: vec![&o],
            fixes: vec![&o],
            by: None,
            supersedes: vec![&a],
        },
    );
    w.verdict("in scope: decoder-only", true, Some(&fixed));
    let evidence = [o.as_str()];
    for lesson in bundle.lessons.values() {
        let skill = bundle
            .skills
            .iter()
            .find(|s| s.hypotheses.iter().any(|h| h.lesson == lesson.id));
        let id = w.lesson(lesson, skill, &evidence);
        w.note(&format!("applied {}", lesson.id), &[&id]);
    }
    w.decision("keep the \\ tiling", &[&a]);
    assert!(bundle.lessons.len() >= 10, "{}", bundle.lessons.len());
    assert_prints_back(w.text());
}

#[test]
fn a_changed_layout_is_caught() {
    let text = "trajectory \"t\"\n\nsession 2026-01-01 phase 0\na1 action check-scope\no2 observe measured \"ok\"  -> pass after a1\n";
    let sources = [SourceFile {
        path: "t.traj".into(),
        text: text.into(),
    }];
    let again = printed(&sources);
    assert_ne!(
        again[0].text, text,
        "two spaces before `->` come back as one"
    );
    assert_eq!(again[0].text, text.replace("  ->", " ->"));
}
