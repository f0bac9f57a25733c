//! `skillc calibrate [--fit]`: compares the XDNA 2 cost model with every
//! measured point of the reference system, prints modeled vs measured and the
//! error per point, the fitted and held-out summaries, and the published
//! speed-ups next to the modeled ones; beside each summary its signed bias,
//! the parameters the fit left at a bound (and the points that pull them
//! there), and the leave-one-family-out figure. `--fit` regenerates the
//! committed plan files, refits the parameters on the fit points (and once
//! per family left out) and rewrites `runtime/data/xdna2/fitted.json`.
//! `--json` prints the same report as one JSON document. `--trace FILE`
//! writes the modeled Chrome-trace timeline of one of the nine models
//! (prefill, then decode tokens) and `--roofline` prints its per-kernel
//! roofline.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use skillc_runtime::xdna2::builder::{plan_for, PlanError};
use skillc_runtime::xdna2::calibration::{
    data_dir, default_models_dir, leave_one_family_out, load_model, ratio_checks, stale_plan_files,
    write_plan_files, CalibrationError, DataSet, PointSet, Prepared, PreparedFourBit, RatioCheck,
    Report, Summary, REFERENCE_MODEL,
};
use skillc_runtime::xdna2::cost::{time_plan, Params};
use skillc_runtime::xdna2::device::{Device, DeviceError};
use skillc_runtime::xdna2::fit::{fit, fitted_file, BoundCheck, FitFileError, FittedFile, Side};
use skillc_runtime::xdna2::lofo::LeaveOneFamilyOut;
use skillc_runtime::xdna2::plan::{Phase, PlanOptions};
use skillc_runtime::xdna2::roofline::roofline;
use skillc_runtime::xdna2::trace::chrome_trace;

use super::{EXIT_FAILED, EXIT_USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Regenerate the plan files, refit the parameters and rewrite fitted.json.
    #[arg(long)]
    pub fit: bool,
    /// Directory holding calibration.json, npu2.json, fitted.json and plans/.
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Directory holding the models' config.json files (shared/models).
    #[arg(long, value_name = "DIR")]
    pub models: Option<PathBuf>,
    /// Model whose reference plans --trace and --roofline show.
    #[arg(long, value_name = "NAME", default_value = REFERENCE_MODEL)]
    pub model: String,
    /// Write the modeled Chrome-trace / Perfetto timeline (prefill at 2048, then 3 decode tokens).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Print the modeled roofline of the model's prefill and decode.
    #[arg(long)]
    pub roofline: bool,
    /// Print the report (every point, the summaries with their signed bias,
    /// the bounds, leave-one-family-out, the published ratios) as one JSON
    /// document instead of the tables.
    #[arg(long, conflicts_with_all = ["trace", "roofline"])]
    pub json: bool,
}

pub fn run(args: Args) -> ExitCode {
    let data = args.data.unwrap_or_else(data_dir);
    let models = args.models.unwrap_or_else(default_models_dir);
    let show = Show {
        model: args.model,
        trace: args.trace,
        roofline: args.roofline,
        json: args.json,
    };
    if let Some(trace) = &show.trace {
        let inputs = [
            ("calibration data folder", data.as_path()),
            ("models folder", models.as_path()),
        ];
        if let Err(error) = crate::outdir::overlap::refuse_overlap(trace, &inputs) {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    }
    match calibrate(&data, &models, args.fit, &show) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Why `calibrate` could not run (exit 2).
#[derive(Debug, thiserror::Error)]
enum CalibrateError {
    /// A file read or written, with its path.
    #[error("{}: {source}", path.display())]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Calibration(#[from] CalibrationError),
    #[error(transparent)]
    Fitted(#[from] FitFileError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl CalibrateError {
    fn file(path: &Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| CalibrateError::File {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// What to show beyond the calibration report.
struct Show {
    model: String,
    trace: Option<PathBuf>,
    roofline: bool,
    json: bool,
}

fn calibrate(
    data: &Path,
    models: &Path,
    refit: bool,
    show: &Show,
) -> Result<ExitCode, CalibrateError> {
    let device_path = data.join("npu2.json");
    let device_text =
        std::fs::read_to_string(&device_path).map_err(CalibrateError::file(&device_path))?;
    let device = Device::from_json(&device_text)?;
    let arch = load_model(models, REFERENCE_MODEL)?;
    let fitted_path = data.join("fitted.json");
    // With --json, stdout holds the document alone.
    let say = |line: String| {
        if show.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    if refit {
        let (dataset, _) = DataSet::load(data)?;
        for path in write_plan_files(&dataset, data, &arch, &device)? {
            say(format!("wrote runtime/data/xdna2/{path}"));
        }
    }
    let prepared = Prepared::load(&device, data, models)?;
    let file = if refit {
        let outcome = fit(&prepared, &device);
        let report = prepared.report(&device, &outcome.params);
        let file = fitted_file(&prepared, &device, &outcome, &report);
        std::fs::write(&fitted_path, file.to_json()).map_err(CalibrateError::file(&fitted_path))?;
        say(format!(
            "fit: {} evaluations, objective {:.4}; wrote runtime/data/xdna2/fitted.json",
            outcome.evaluations, outcome.objective
        ));
        file
    } else {
        let stale = stale_plan_files(&prepared.data, data, &arch, &device)?;
        if !stale.is_empty() {
            eprintln!(
                "error: plan files differ from the builder: {}; run `skillc calibrate --fit`",
                stale.join(", ")
            );
            return Ok(ExitCode::from(EXIT_FAILED));
        }
        let text =
            std::fs::read_to_string(&fitted_path).map_err(CalibrateError::file(&fitted_path))?;
        let file = FittedFile::parse(&text)?;
        if file.dataset_sha256 != prepared.dataset_sha256 {
            eprintln!("error: fitted.json was fitted on another data set (sha256 {} vs {}); run `skillc calibrate --fit`", file.dataset_sha256, prepared.dataset_sha256);
            return Ok(ExitCode::from(EXIT_FAILED));
        }
        file
    };
    let params = file.params()?;
    let report = prepared.report(&device, &params);
    let ratios = ratio_checks(data, &device, &params)?;
    let four_bit = PreparedFourBit::load(&device, data, models, &file.to_json())?;
    let q4_file = match super::calibrate_packed::fitted(&four_bit, &device, &params, data, refit)
        .map_err(CalibrateError::file(&data.join("fitted_q4.json")))?
    {
        Ok(file) => file,
        Err(message) => {
            eprintln!("error: {message}");
            return Ok(ExitCode::from(EXIT_FAILED));
        }
    };
    if refit {
        say("fit: 4-bit parameters; wrote runtime/data/xdna2/fitted_q4.json".to_string());
    }
    let params = Params {
        packed: q4_file.packed_params(),
        ..params
    };
    let q4_report = four_bit.report(&device, &params);
    let q4_families = leave_one_family_out(&four_bit, &device, &params);
    if show.json {
        let ratios: Vec<_> = ratios
            .iter()
            .map(|r| serde_json::json!({ "check": r, "error": r.error() }))
            .collect();
        let doc = serde_json::json!({
            "modeled": true,
            "report": report,
            "bounds": file.bounds,
            "leave_one_family_out": file.leave_one_family_out,
            "ratios": ratios,
            "four_bit": {
                "report": q4_report,
                "params": q4_file.params,
                "leave_one_family_out": { "families": q4_families.0, "summary": q4_families.1 },
            },
        });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else {
        print_report(&prepared, &report);
        print_bounds(&file.bounds);
        print_families(&file.leave_one_family_out);
        print_ratios(&ratios);
        super::calibrate_packed::print(&four_bit, &q4_report, &q4_file, &q4_families);
    }
    let note = FittedFile {
        fit: report.fit.clone(),
        held_out: report.held_out.clone(),
        ..file
    }
    .note();
    if show.trace.is_some() || show.roofline {
        show_model(models, &device, &params, &prepared, show, &note)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn show_model(
    models: &Path,
    device: &Device,
    params: &Params,
    prepared: &Prepared,
    show: &Show,
    note: &str,
) -> Result<(), CalibrateError> {
    let arch = load_model(models, &show.model)?;
    let plan = |phase, seq| {
        plan_for(
            &show.model,
            &arch,
            device,
            phase,
            seq,
            &PlanOptions::reference(),
        )
    };
    let prefill = time_plan(
        &plan(Phase::Prefill, prepared.data.prefill_seq_len)?,
        device,
        params,
    );
    let decode = time_plan(
        &plan(Phase::Decode, prepared.data.decode_context)?,
        device,
        params,
    );
    println!();
    println!(
        "{}: TTFT {:.3} s at seq {}, decode {:.1} ms/token at context {} ({note})",
        show.model,
        prefill.total_s,
        prefill.seq_len,
        decode.total_s * 1e3,
        decode.seq_len
    );
    if let Some(path) = &show.trace {
        let runs = [
            ("prefill", &prefill),
            ("decode 1", &decode),
            ("decode 2", &decode),
            ("decode 3", &decode),
        ];
        let mut text = serde_json::to_string(&chrome_trace(&runs, note))?;
        text.push('\n');
        std::fs::write(path, text).map_err(CalibrateError::file(path))?;
        println!(
            "wrote {} (modeled timeline; open in ui.perfetto.dev or chrome://tracing)",
            path.display()
        );
    }
    if show.roofline {
        println!();
        print!(
            "{}",
            roofline(&prefill, params, &format!("prefill, {note}"))
        );
        println!();
        print!("{}", roofline(&decode, params, &format!("decode, {note}")));
    }
    Ok(())
}

fn print_report(prepared: &Prepared, report: &Report) {
    println!("All times below are modeled by the XDNA 2 cost model (no device), against measured figures of the reference system.");
    for set in [PointSet::Fit, PointSet::HeldOut] {
        println!();
        println!(
            "{}",
            match set {
                PointSet::Fit => "fitted points (standalone kernels, Llama-3.2-1B calls, ablation cells, Llama-3.2-1B whole model, host attention):",
                PointSet::HeldOut => "held-out points (whole-model figures predicted from the reference plan structure, never fitted):",
            }
        );
        println!(
            "  {:<40} {:>4} {:>14} {:>14} {:>8}",
            "point", "§", "measured", "modeled", "error"
        );
        for (result, point) in report.results.iter().zip(&prepared.points) {
            if result.set != set {
                continue;
            }
            println!(
                "  {:<40} {:>4} {:>14} {:>14} {:>+7.1}%",
                result.id,
                point.point.section.trim_start_matches('§'),
                human_time(result.measured_s),
                human_time(result.modeled_s),
                100.0 * result.error
            );
        }
    }
    println!();
    println!("{}", summary_line("calibration", &report.fit));
    println!("{}", summary_line("held-out", &report.held_out));
}

/// The parameters the fit left at a bound of their measured range.
fn print_bounds(bounds: &[BoundCheck]) {
    println!();
    if bounds.is_empty() {
        println!("bounds: every parameter fitted inside the range its measurements allow");
        return;
    }
    println!("parameters at a bound of the range their measurements allow:");
    for b in bounds {
        let side = match b.side {
            Side::Lower => "lower",
            Side::Upper => "upper",
        };
        println!(
            "  {} = {:.4e} at its {side} bound [{:.4e}, {:.4e}] ({})",
            b.param, b.value, b.lower, b.upper, b.range
        );
        if !b.binds() {
            println!("    does not bind: the fit gains nothing past it");
            continue;
        }
        let pulls: Vec<String> = b
            .pulled_by
            .iter()
            .map(|p| {
                format!(
                    "{} {:+.1}% -> {:+.1}%",
                    p.id,
                    100.0 * p.error,
                    100.0 * p.past
                )
            })
            .collect();
        println!(
            "    binds: 1% past it the objective drops {:.2e}; pulled by {}",
            b.gain,
            pulls.join(", ")
        );
    }
}

/// Each family's held-out points predicted without its kernel shapes.
fn print_families(lofo: &LeaveOneFamilyOut) {
    println!();
    println!("leave one family out (refit without the kernel points only that family's published plans run):");
    for f in &lofo.families {
        let errors: Vec<String> = f
            .errors
            .iter()
            .map(|(id, e)| format!("{id} {:+.1}%", 100.0 * e))
            .collect();
        println!(
            "  {:<10} {} fit points left out; {}",
            f.family,
            f.dropped.len(),
            errors.join(", ")
        );
    }
    println!("{}", summary_line("leave-one-family-out", &lofo.summary));
}

/// One summary of errors: median, signed median (the bias), worst.
pub(super) fn summary_line(label: &str, s: &Summary) -> String {
    format!(
        "{label}: {} points, median error {:.1}%, signed median {:+.1}% ({} of {} below measured), worst {:.1}% ({})",
        s.points,
        100.0 * s.median_error,
        100.0 * s.median_signed_error,
        s.negative,
        s.points,
        100.0 * s.worst_error,
        s.worst_id
    )
}

fn print_ratios(ratios: &[RatioCheck]) {
    println!();
    for check in ratios {
        println!(
            "{}: modeled {:.2}x, published {:.2}x ({:+.1}%)",
            check.name,
            check.modeled,
            check.published,
            100.0 * check.error()
        );
    }
}

fn human_time(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "n/a".to_string();
    }
    if seconds >= 1.0 {
        format!("{seconds:.3} s")
    } else if seconds >= 1e-3 {
        format!("{:.3} ms", seconds * 1e3)
    } else {
        format!("{:.1} us", seconds * 1e6)
    }
}
