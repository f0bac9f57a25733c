//! The 4-bit calibration cannot drift and cannot move a bf16 figure:
//! fitted_q4.json was fitted on exactly the committed 4-bit data set and bf16
//! fit (hash), a refit reproduces it, its per-point errors are what the model
//! computes now, the fit points are Llama-3.2-1B's alone, every bf16
//! point is modeled the same whatever the 4-bit parameters are, and the packed
//! GEMV's time follows its own parameter (Q4_0 at 140/121 of Q4_1 per weight).

use skillc_runtime::xdna2::calibration::{
    data_dir, default_models_dir, fit_four_bit, FittedFourBit, FourBitSet, Prepared,
    PreparedFourBit,
};
use skillc_runtime::xdna2::cost::{time_launch, Params};
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::fit::{committed_params, FittedFile};
use skillc_runtime::xdna2::kernels::{gemv_packed, Herd, PackedFormat};
use skillc_runtime::xdna2::packed_cost::{PackedParams, Q4_0_BODY_RATIO};
use skillc_runtime::xdna2::plan::Launch;

fn prepared() -> (Prepared, PreparedFourBit, Device) {
    let device = Device::npu2();
    let bf16 = Prepared::load(&device, &data_dir(), &default_models_dir()).expect("bf16 data");
    let fitted = std::fs::read_to_string(data_dir().join("fitted.json")).expect("fitted.json");
    let q4 = PreparedFourBit::load(&device, &data_dir(), &default_models_dir(), &fitted)
        .expect("4-bit data set loads");
    (bf16, q4, device)
}

#[test]
fn committed_four_bit_fit_matches_its_data_set_and_a_refit() {
    let (_, q4, device) = prepared();
    let file = FittedFourBit::committed();
    assert_eq!(
        file.dataset_sha256, q4.dataset_sha256,
        "run `skillc calibrate --fit`"
    );
    let params = committed_params();
    let report = q4.report(&device, &params);
    for r in &report.results {
        let committed = file.errors[&r.id];
        assert!(
            (committed - r.error).abs() < 1e-9,
            "{}: {committed} vs {}",
            r.id,
            r.error
        );
    }
    assert_eq!(report.fit, file.fit);
    assert_eq!(report.held_out, file.held_out);
    let refit = fit_four_bit(
        &q4,
        &device,
        &FittedFile::committed().params().expect("params"),
    );
    assert_eq!(refit.params, file.params, "the fit is deterministic");
    // The fit points are Llama-3.2-1B's sweep and nothing else; the rest
    // held out or shown unscored.
    let fit: Vec<&str> = q4
        .data
        .points
        .iter()
        .filter(|p| p.set == FourBitSet::Fit)
        .map(|p| p.id.as_str())
        .collect();
    assert_eq!(
        fit,
        [
            "llama32_1b_q4nx-decode-1k",
            "llama32_1b_q4nx-decode-2k",
            "llama32_1b_q4nx-decode-128k"
        ]
    );
    for p in q4
        .data
        .points
        .iter()
        .filter(|p| p.set == FourBitSet::HeldOut)
    {
        assert_ne!(p.model, "llama-3.2-1b", "{}: a 1B point held out", p.id);
    }
    assert!(
        file.params.iter().all(|p| p.at_bound.is_none()),
        "{:?}",
        file.params
    );
}

#[test]
fn no_bf16_figure_depends_on_the_four_bit_parameters() {
    let (bf16, _, device) = prepared();
    let params = committed_params();
    let moved = Params {
        packed: PackedParams::from_values(
            &params
                .packed
                .values()
                .iter()
                .map(|v| v * 3.0)
                .collect::<Vec<_>>(),
        ),
        ..params.clone()
    };
    assert_eq!(
        bf16.evaluate(&device, &params),
        bf16.evaluate(&device, &moved)
    );
}

#[test]
fn a_packed_gemv_is_timed_by_its_unpacking_rate_and_format() {
    let device = Device::npu2();
    let params = committed_params();
    let time = |format: PackedFormat, p: &Params| {
        let spec = gemv_packed::select(&device, 2048, 2048, Herd::ROW, format);
        let launch = Launch::Gemv {
            w: "w".into(),
            x: "x".into(),
            out: "y".into(),
            residual: None,
            spec,
        };
        time_launch(&launch, &device, p, false).body_s
    };
    let q4_1 = time(PackedFormat::Q4_1, &params);
    let q4_0 = time(PackedFormat::Q4_0, &params);
    assert!(
        (q4_0 / q4_1 - Q4_0_BODY_RATIO).abs() < 1e-9,
        "{q4_0} / {q4_1}"
    );
    let slower = Params {
        packed: PackedParams {
            q4_tile_weights_per_s: params.packed.q4_tile_weights_per_s / 2.0,
            ..params.packed.clone()
        },
        ..params.clone()
    };
    assert!((time(PackedFormat::Q4_1, &slower) / q4_1 - 2.0).abs() < 1e-9);
}
