//! `skillc bench deploy` on a small seeded model: the fixture llama32-tiny's config,
//! deployed under the name of a model with a published plan structure
//! (llama-3.2-1b). The bench builds that structure for the deployed config; a tiny
//! config does not keep the published call counts, so no ratio is printed, and
//! the row says why. The ratio and its verdict rule are tested in
//! `skillc_runtime::xdna2::anchor` (the anchor of each of the nine models is the
//! plan its held-out points are predicted with); the nine-model run is a
//! benchmark (README), not a test. `bench faults` gets one test here, of its
//! unplanted-only mode on the fixtures (seconds).

use crate::deploy_support;

use deploy_support::{fixture, repo, scratch, skillc};

#[test]
fn bench_deploy_says_why_a_model_has_no_ratio_against_its_published_plan() {
    let models = scratch("bench-models");
    let model = models.join("llama-3.2-1b");
    std::fs::create_dir_all(&model).expect("model folder");
    std::fs::copy(
        fixture("llama32-tiny").join("config.json"),
        model.join("config.json"),
    )
    .expect("config copies");
    let out = scratch("bench-out");
    let output = skillc()
        .current_dir(repo("."))
        .args(["bench", "deploy", "--json", "--model", "llama-3.2-1b"])
        .arg("--models")
        .arg(&models)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("skillc runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    let row = &doc["rows"][0];
    assert_eq!(row["verdict"], "PASS", "{row}");
    // The published structure is the real model's: its call counts do not
    // survive tiny dimensions, and the bench says so instead of a ratio.
    let error = row["plan_vs_published_plan"]["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{row}"));
    assert!(
        error.contains("the published structure runs 2 calls per layer"),
        "{error}"
    );
    assert!(
        stderr.contains("| not timed: llama-3.2-1b Decode"),
        "{stderr}"
    );
    assert!(
        stderr.contains("A plan win is claimed only above 1 + band"),
        "{stderr}"
    );
}

/// `bench faults --no-faults --first-seed`: only the unplanted half, from the
/// seed given, so more seeds can be added to an earlier run without repeating it.
#[test]
fn bench_faults_adds_unplanted_seeds_without_planted_runs() {
    let out = scratch("bench-faults-out");
    let output = skillc()
        .current_dir(repo("."))
        .args(["bench", "faults", "--json", "--no-models", "--no-faults"])
        .args(["--seeds", "1", "--first-seed", "2"])
        .arg("--fixtures")
        .arg(fixture("llama32-tiny").parent().expect("fixtures folder"))
        .arg("--out")
        .arg(&out)
        .output()
        .expect("skillc runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(doc["rows"].as_array().map(Vec::len), Some(0), "{doc}");
    assert!(doc.get("caught").is_none(), "{doc}");
    assert_eq!(doc["false_alarms"], 0, "{stderr}");
    assert!(stderr.contains("Unplanted runs, seed 2:"), "{stderr}");
    assert!(!stderr.contains("| fault"), "{stderr}");
    // Each run's folder is named by its seed: seed 2, and no other.
    let runs: Vec<String> = std::fs::read_dir(out.join("llama32-tiny"))
        .expect("runs of the fixture")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    assert_eq!(runs, vec!["unplanted-2".to_string()]);
}

/// `--seeds 0` runs no unplanted deploy, so the bench must not report a count of
/// false alarms it never measured.
#[test]
fn bench_faults_without_unplanted_seeds_claims_no_false_alarm_count() {
    let out = scratch("bench-faults-no-seeds");
    let output = skillc()
        .current_dir(repo("."))
        .args(["bench", "faults", "--json", "--no-models", "--seeds", "0"])
        .args(["--fault", "param-eps", "--fixtures"])
        .arg(fixture("llama32-tiny").parent().expect("fixtures folder"))
        .arg("--out")
        .arg(&out)
        .output()
        .expect("skillc runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert!(doc.get("false_alarms").is_none(), "{doc}");
    assert!(stderr.contains("No unplanted runs"), "{stderr}");
    assert!(!stderr.contains("0 false alarms"), "{stderr}");
}
