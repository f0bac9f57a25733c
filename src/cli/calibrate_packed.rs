//! The 4-bit part of `skillc calibrate`: the published 4-bit deployments'
//! decode figures against the fused-decode model, with the fit and held-out
//! summaries (signed bias beside each), the points measured on another part
//! shown unscored, the fitted 4-bit parameters against their ranges, and
//! leave-one-family-out (each family predicted by a fit on the others' scored
//! points, a cross-validation never committed). Printed after the bf16
//! report, which it does not change; `--fit` refits the 4-bit parameters on
//! the freshly fitted bf16 ones and rewrites `runtime/data/xdna2/fitted_q4.json`.

use std::path::Path;

use skillc_runtime::xdna2::calibration::{
    fit_four_bit, FittedFourBit, FourBitFamilyOut, FourBitReport, FourBitSet, PreparedFourBit,
    Summary,
};
use skillc_runtime::xdna2::cost::Params;
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::fit::Side;

/// The 4-bit fit to report: refitted and written with `refit`, else read
/// from `data` and refused (`Err` with the message) when its hash is stale.
pub fn fitted(
    prepared: &PreparedFourBit,
    device: &Device,
    bf16: &Params,
    data: &Path,
    refit: bool,
) -> Result<Result<FittedFourBit, String>, std::io::Error> {
    let path = data.join("fitted_q4.json");
    if refit {
        let file = fit_four_bit(prepared, device, bf16);
        std::fs::write(&path, file.to_json())?;
        return Ok(Ok(file));
    }
    let text = std::fs::read_to_string(&path)?;
    let file = match FittedFourBit::parse(&text) {
        Ok(file) => file,
        Err(e) => return Ok(Err(format!("fitted_q4.json: {e}"))),
    };
    if file.dataset_sha256 != prepared.dataset_sha256 {
        return Ok(Err(format!(
            "fitted_q4.json was fitted on another data set or bf16 fit (sha256 {} vs {}); run `skillc calibrate --fit`",
            file.dataset_sha256, prepared.dataset_sha256
        )));
    }
    Ok(Ok(file))
}

/// The 4-bit section of the report.
pub fn print(
    prepared: &PreparedFourBit,
    report: &FourBitReport,
    file: &FittedFourBit,
    (families, lofo): &(Vec<FourBitFamilyOut>, Summary),
) {
    println!();
    println!("4-bit deployments (decode per token of the published structure: one fused dispatch of every layer and the LM head, projections and LM head packed, attention on the NPU; 4-bit parameters fitted with every bf16 parameter fixed):");
    println!("  fit on: {}", prepared.data.fit_choice);
    for (set, title) in [
        (FourBitSet::Fit, "fitted"),
        (FourBitSet::HeldOut, "held out"),
        (
            FourBitSet::OtherPart,
            "another part or other conditions (shown, not scored)",
        ),
    ] {
        println!("  {title}:");
        for (result, point) in report.results.iter().zip(&prepared.data.points) {
            if result.set != set {
                continue;
            }
            println!(
                "    {:<38} {:>4} {:>5} {:>9} {:>9} {:>+7.1}%",
                result.id,
                point.section.trim_start_matches('§'),
                point.format.to_string(),
                format!("{:.2} ms", result.measured_s * 1e3),
                format!("{:.2} ms", result.modeled_s * 1e3),
                100.0 * result.error
            );
        }
    }
    println!(
        "{}",
        super::calibrate::summary_line("4-bit calibration", &report.fit)
    );
    println!(
        "{}",
        super::calibrate::summary_line("4-bit held-out", &report.held_out)
    );
    println!("4-bit parameters (the ranges their measurements allow):");
    for p in &file.params {
        let at = match p.at_bound {
            Some(Side::Lower) => " AT ITS LOWER BOUND",
            Some(Side::Upper) => " AT ITS UPPER BOUND",
            None => "",
        };
        println!(
            "  {} = {:.4e} in [{:.4e}, {:.4e}]{at} ({})",
            p.param, p.value, p.lower, p.upper, p.range
        );
    }
    println!("4-bit leave-one-family-out (each family's scored points predicted by the 4-bit parameters fitted on every other family's scored points; a cross-validation, not the committed fit):");
    for f in families {
        let params: Vec<String> = f
            .params
            .iter()
            .map(|(name, value)| format!("{name} {value:.3e}"))
            .collect();
        println!(
            "  {} (fitted on {} points: {}):",
            f.family,
            f.fitted_on.len(),
            params.join(", ")
        );
        for (id, error) in &f.errors {
            println!("    {id:<38} {:>+7.1}%", 100.0 * error);
        }
    }
    println!(
        "{}",
        super::calibrate::summary_line("4-bit leave-one-family-out", lofo)
    );
}
