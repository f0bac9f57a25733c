//! `skillc calibrate` end to end: the report (every point measured vs
//! modeled, the summary lines, the speed-ups) is snapshotted; a data
//! directory whose fit is stale is refused with exit 1; a trace is written.

use std::process::Command;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/runtime/data/xdna2");

fn skillc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_skillc"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("skillc runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn report() {
    let (code, out, err) = skillc(&["calibrate", "--roofline"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("\ncalibration: 99 points, median error"),
        "{out}"
    );
    assert!(out.contains("\nheld-out: 16 points, median error"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn a_stale_fit_is_refused() {
    let dir = std::env::temp_dir().join(format!("skillc-calibrate-stale-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("plans")).expect("temp dir");
    for entry in std::fs::read_dir(format!("{DATA}/plans")).expect("plans") {
        let path = entry.expect("entry").path();
        std::fs::copy(
            &path,
            dir.join("plans").join(path.file_name().expect("name")),
        )
        .expect("copy");
    }
    for file in ["npu2.json", "fitted.json"] {
        std::fs::copy(format!("{DATA}/{file}"), dir.join(file)).expect("copy");
    }
    // One measured figure edited: the data set no longer matches the fit.
    let text = std::fs::read_to_string(format!("{DATA}/calibration.json")).expect("data");
    let edited = text.replacen("\"value\": 6215", "\"value\": 6216", 1);
    assert_ne!(text, edited);
    std::fs::write(dir.join("calibration.json"), edited).expect("write");
    let (code, out, err) = skillc(&["calibrate", "--data", dir.to_str().expect("utf-8")]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("fitted.json was fitted on another data set"),
        "{err}"
    );
    assert!(err.contains("run `skillc calibrate --fit`"), "{err}");
}

#[test]
fn trace_is_written() {
    let path = std::env::temp_dir().join(format!("skillc-trace-{}.json", std::process::id()));
    let (code, out, err) = skillc(&[
        "calibrate",
        "--model",
        "qwen3-0.6b",
        "--trace",
        path.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let text = std::fs::read_to_string(&path).expect("trace");
    std::fs::remove_file(&path).ok();
    let trace: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(trace["otherData"]["modeled"], true);
    assert!(out.contains("qwen3-0.6b: TTFT"), "{out}");
}

#[test]
fn a_stale_four_bit_fit_is_refused() {
    let dir =
        std::env::temp_dir().join(format!("skillc-calibrate-q4-stale-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("plans")).expect("temp dir");
    for entry in std::fs::read_dir(format!("{DATA}/plans")).expect("plans") {
        let path = entry.expect("entry").path();
        std::fs::copy(
            &path,
            dir.join("plans").join(path.file_name().expect("name")),
        )
        .expect("copy");
    }
    for file in [
        "npu2.json",
        "fitted.json",
        "calibration.json",
        "fitted_q4.json",
    ] {
        std::fs::copy(format!("{DATA}/{file}"), dir.join(file)).expect("copy");
    }
    // One published 4-bit figure edited: the bf16 fit still matches, the 4-bit one no longer.
    let text = std::fs::read_to_string(format!("{DATA}/calibration_q4.json")).expect("data");
    let edited = text.replacen("\"value\": 14.7", "\"value\": 14.8", 1);
    assert_ne!(text, edited);
    std::fs::write(dir.join("calibration_q4.json"), edited).expect("write");
    let (code, out, err) = skillc(&["calibrate", "--data", dir.to_str().expect("utf-8")]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("fitted_q4.json was fitted on another data set"),
        "{err}"
    );
}
