//! The committed calibration cannot drift: fitted.json was fitted on exactly
//! the committed data set (hash), its per-point errors are what the cost
//! model computes now from its parameters, those parameters are a local
//! optimum of the fit objective, the plan files are what the builder
//! produces, and the published targets hold (fitted median ≤ 15 %, worst
//! ≤ 35 %, held-out median ≤ 20 %, ablation ratios within ±25 %).

use std::collections::BTreeSet;

use skillc_runtime::xdna2::builder::plan_for;
use skillc_runtime::xdna2::calibration::{
    data_dir, default_models_dir, load_model, ratio_checks, stale_plan_files, PointSet, Prepared,
    REFERENCE_MODEL,
};
use skillc_runtime::xdna2::cost::Params;
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::fit::FittedFile;
use skillc_runtime::xdna2::plan::{Phase, PlanOptions};

fn prepared() -> (Prepared, Device) {
    let device = Device::npu2();
    let prepared =
        Prepared::load(&device, &data_dir(), &default_models_dir()).expect("data set loads");
    (prepared, device)
}

#[test]
fn committed_fit_matches_the_data_set_and_the_model() {
    let (prepared, device) = prepared();
    let file = FittedFile::committed();
    assert_eq!(
        file.dataset_sha256, prepared.dataset_sha256,
        "run `skillc calibrate --fit`"
    );
    let report = prepared.report(&device, &file.params().expect("params"));
    assert_eq!(report.results.len(), file.errors.len());
    for result in &report.results {
        let stored = file.errors[&result.id];
        assert!(
            (stored - result.error).abs() < 1e-9,
            "{}: stored {stored}, now {}",
            result.id,
            result.error
        );
    }
    for (now, stored) in [(&report.fit, &file.fit), (&report.held_out, &file.held_out)] {
        assert_eq!(
            (now.points, &now.worst_id),
            (stored.points, &stored.worst_id)
        );
        assert!(
            (now.median_error - stored.median_error).abs() < 1e-9,
            "{now:?} vs {stored:?}"
        );
        assert!(
            (now.worst_error - stored.worst_error).abs() < 1e-9,
            "{now:?} vs {stored:?}"
        );
    }
}

#[test]
fn committed_parameters_are_a_local_optimum() {
    let (prepared, device) = prepared();
    let params = FittedFile::committed().params().expect("params");
    let objective = |p: &Params| -> f64 {
        prepared
            .evaluate(&device, p)
            .iter()
            .zip(&prepared.points)
            .filter(|(_, p)| p.point.set == PointSet::Fit)
            .map(|(m, p)| (m / p.measured_s).ln().powi(2))
            .sum()
    };
    let best = objective(&params);
    let values = params.values();
    for (i, spec) in Params::SPECS.iter().enumerate() {
        for factor in [0.99, 1.01] {
            let mut moved = values.clone();
            moved[i] = (moved[i] * factor).clamp(spec.lower, spec.upper);
            let value = objective(&Params::from_values(&moved));
            assert!(
                value >= best - 1e-6,
                "{} x{factor} improves the fit: {value} < {best}",
                spec.name
            );
        }
    }
}

#[test]
fn targets_hold() {
    let file = FittedFile::committed();
    assert!(file.fit.points >= 12);
    assert!(file.fit.median_error <= 0.15, "{:?}", file.fit);
    assert!(file.fit.worst_error <= 0.35, "{:?}", file.fit);
    assert_eq!(file.held_out.points, 16);
    assert!(file.held_out.median_error <= 0.20, "{:?}", file.held_out);
    assert!(file
        .note()
        .starts_with("modeled; cost model calibration: median"));
}

#[test]
fn ablation_ratios_reproduce_the_published_speedups() {
    let device = Device::npu2();
    let params = FittedFile::committed().params().expect("params");
    let checks = ratio_checks(&data_dir(), &device, &params).expect("plans load");
    for check in checks.iter().filter(|c| c.name.starts_with("ablation")) {
        assert!(
            check.error().abs() <= 0.25,
            "{}: modeled {} vs {}",
            check.name,
            check.modeled,
            check.published
        );
    }
}

#[test]
fn plan_files_are_what_the_builder_produces() {
    let device = Device::npu2();
    let (prepared, _) = prepared();
    let arch = load_model(&default_models_dir(), REFERENCE_MODEL).expect("config");
    let stale = stale_plan_files(&prepared.data, &data_dir(), &arch, &device).expect("builds");
    assert!(
        stale.is_empty(),
        "stale plan files {stale:?}: run `skillc calibrate --fit`"
    );
}

#[test]
fn points_are_sourced_and_unique() {
    let (prepared, _) = prepared();
    let mut ids = BTreeSet::new();
    for p in &prepared.points {
        assert!(ids.insert(p.point.id.clone()), "duplicate {}", p.point.id);
        assert!(p.point.source.starts_with("mlir-air:"), "{}", p.point.id);
        assert!(p.point.section.starts_with('§'), "{}", p.point.id);
        assert!(["M", "D"].contains(&p.point.tag.as_str()), "{}", p.point.id);
        assert!(
            p.measured_s > 0.0 && p.measured_s.is_finite(),
            "{}",
            p.point.id
        );
    }
}

/// The nine models under the reference plan structure: every plan places, no
/// GEMM corrupts silently, and the decode call structure is the published
/// one (calibration §6: 2 calls/layer where the cascade fits, else 5).
#[test]
fn nine_models_place_with_the_published_decode_structure() {
    let device = Device::npu2();
    let published = [
        ("llama-3.2-1b", 2),
        ("llama-3.2-3b", 5),
        ("smollm2-1.7b", 2),
        ("qwen2.5-0.5b", 5),
        ("qwen2.5-1.5b", 5),
        ("qwen2.5-3b", 5),
        ("qwen3-0.6b", 2),
        ("qwen3-1.7b", 2),
        ("qwen3-4b", 5),
    ];
    for (model, decode_calls) in published {
        let arch = load_model(&default_models_dir(), model).expect("config");
        for (phase, seq) in [(Phase::Prefill, 2048), (Phase::Decode, 128)] {
            let plan = plan_for(model, &arch, &device, phase, seq, &PlanOptions::reference())
                .expect("plan");
            if let Err(v) = plan.check(&device) {
                panic!(
                    "{model} {phase:?}: {}",
                    v.iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                );
            }
            assert!(
                plan.silent_corruptions().is_empty(),
                "{model}: {:?}",
                plan.silent_corruptions()
            );
            let expected = if phase == Phase::Decode {
                decode_calls
            } else {
                3
            };
            assert_eq!(plan.calls_per_layer(), expected, "{model} {phase:?}");
        }
    }
}
