//! The 4-bit part of `skillc bench deploy` (alone with `--four-bit`, in about a
//! minute): for each published 4-bit deployment of the calibration data set,
//! skillc's decode plan against the published one, both timed by the cost model
//! with the same parameters in the same run, and decode speed against context
//! (1k to 128k) beside the published nightly sweep, as a table and an SVG plot.
//!
//! skillc's plan is what phases 4 and 5 keep under the cost model: from phase 3's
//! baseline design, every technique step of the bundle's phases 4 and 5 in bundle
//! order, each kept when the plans still place and the phase's modeled figure
//! strictly drops (TTFT for phase 4, decode at 2048 for phase 5), every decode
//! projection reading its weights packed in the deployment's format, as the
//! packing decision does for a model that stores them so. Numerics are not run
//! here (a deploy gates them; `skillc deploy … --seeded-weights q4_1` runs the
//! same selection with its gates); phase 1's per-site tilings are the builder's.
//! The published plan is the builder's fused decode laid out as published
//! (`calibration::fused_plan`). A ratio is a plan win only beyond its band: the
//! larger of the 4-bit held-out median error and the model's own error at that
//! context.

use std::collections::BTreeMap;
use std::path::Path;

use skillc_runtime::bundle::Bundle;
use skillc_runtime::exec::design::{self, modeled, Design};
use skillc_runtime::model::arch::Architecture;
use skillc_runtime::model::config::load_config;
use skillc_runtime::ops::Op;
use skillc_runtime::xdna2::anchor::{Figure, Versus};
use skillc_runtime::xdna2::calibration::{
    fused_plan, FittedFourBit, FourBitData, FourBitSet, CALIBRATION_Q4_JSON,
};
use skillc_runtime::xdna2::cost::{time_plan, Params};
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::fit::committed_params;
use skillc_runtime::xdna2::kernels::PackedFormat;
use skillc_runtime::xdna2::plan::{Launch, Phase, Plan, Step};

use super::{BenchError, Output};

/// Decode contexts of the sweep table and plot.
pub const CONTEXTS: [usize; 8] = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072];

/// The decode GEMV weight buffers the builder names.
const PROJECTIONS: [&str; 7] = ["wq", "wk", "wv", "wo", "wg", "wu", "wd"];

/// One published 4-bit deployment: its model, format and measured points.
struct Deployment {
    model: String,
    format: PackedFormat,
    /// Measured seconds per token by context, with the point's id.
    measured: BTreeMap<usize, (f64, String)>,
}

/// One model's comparison.
pub struct Comparison {
    pub model: String,
    pub format: PackedFormat,
    /// The techniques skillc's plan kept, in order.
    pub kept: Vec<String>,
    /// By context: skillc's and the published plan's modeled seconds per token.
    pub curve: Vec<(usize, f64, f64)>,
    /// skillc against published at 2048, with its band.
    pub at_2048: Versus,
    /// skillc against the published plan with its LM head in bf16 at 2048:
    /// the plans' structures compared on the same head.
    pub same_head_2048: Versus,
    pub measured: BTreeMap<usize, f64>,
}

fn deployments() -> Vec<Deployment> {
    let data: FourBitData =
        serde_json::from_str(CALIBRATION_Q4_JSON).expect("committed calibration_q4.json parses");
    let mut out: Vec<Deployment> = Vec::new();
    for p in data
        .points
        .iter()
        .filter(|p| p.set != FourBitSet::OtherPart)
    {
        let seconds = p
            .seconds_per_token()
            .expect("committed 4-bit points are decode times or rates");
        let entry = match out.iter_mut().position(|d| d.model == p.model) {
            Some(i) => &mut out[i],
            None => {
                out.push(Deployment {
                    model: p.model.clone(),
                    format: p.format,
                    measured: BTreeMap::new(),
                });
                out.last_mut().expect("just pushed")
            }
        };
        entry.measured.insert(p.context, (seconds, p.id.clone()));
    }
    out
}

/// The design phases 4 and 5 keep under the cost model (see the module doc).
fn skillc_design(
    bundle: &Bundle,
    (name, arch): (&str, &Architecture),
    device: &Device,
    params: &Params,
    format: PackedFormat,
) -> (Design, Vec<String>) {
    let mut current = Design::baseline();
    current.packed = PROJECTIONS
        .iter()
        .map(|b| (b.to_string(), format))
        .collect();
    let mut kept = Vec::new();
    for phase in [4u8, 5] {
        let figure = |d: &Design| {
            let plans = d.plans(name, arch, device).ok()?;
            if plans.prefill.check(device).is_err() || plans.decode.check(device).is_err() {
                return None;
            }
            let times = modeled(&plans, device, params);
            Some(match phase {
                4 => times.ttft_s,
                _ => times.ms_per_token,
            })
        };
        let steps = bundle
            .phases
            .iter()
            .filter(|p| p.index == phase)
            .flat_map(|p| &p.steps)
            .filter(|s| s.op.is_technique());
        for step in steps {
            let Ok(op) = Op::read(step.op, &step.params) else {
                continue;
            };
            let mut next = current.clone();
            if design::apply_change(&mut next, arch, device, &op, None).is_err() || next == current
            {
                continue;
            }
            if let (Some(before), Some(after)) = (figure(&current), figure(&next)) {
                if after < before {
                    kept.push(format!("{} {}", step.op, step.id));
                    current = next;
                }
            }
        }
    }
    (current, kept)
}

/// skillc's plan against the published one for every published 4-bit model.
/// The 4-bit deployments whose model `wanted` accepts, compared.
pub fn compare(
    bundle: &Bundle,
    models: &Path,
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<Comparison>, BenchError> {
    let device = Device::npu2();
    let params = committed_params();
    let fitted = FittedFourBit::committed();
    let mut out = Vec::new();
    for d in deployments().into_iter().filter(|d| wanted(&d.model)) {
        let config = models.join(&d.model).join("config.json");
        let arch = load_config(&config).map_err(|e| BenchError::config(&config, e))?;
        let (design, kept) = skillc_design(bundle, (&d.model, &arch), &device, &params, d.format);
        let mut curve = Vec::new();
        for context in CONTEXTS {
            let ours = design
                .plan(&d.model, &arch, &device, Phase::Decode, context)
                .map_err(|e| BenchError::Fused(e.to_string()))?;
            let published = fused_plan(&d.model, &arch, &device, d.format, context)
                .map_err(|e| BenchError::Fused(e.to_string()))?;
            curve.push((
                context,
                time_plan(&ours, &device, &params).total_s,
                time_plan(&published, &device, &params).total_s,
            ));
        }
        let own = d
            .measured
            .get(&2048)
            .and_then(|(_, id)| fitted.errors.get(id))
            .map_or(0.0, |e| e.abs());
        let band = own.max(fitted.held_out.median_error);
        let (_, ours, published) = curve[1];
        let mut bf16_head = fused_plan(&d.model, &arch, &device, d.format, 2048)
            .map_err(|e| BenchError::Fused(e.to_string()))?;
        unpack_lm_head(&mut bf16_head);
        let bf16_head = time_plan(&bf16_head, &device, &params).total_s;
        out.push(Comparison {
            same_head_2048: Versus::new(Figure::Decode, ours, bf16_head, band),
            model: d.model.clone(),
            format: d.format,
            kept,
            at_2048: Versus::new(Figure::Decode, ours, published, band),
            curve,
            measured: d.measured.iter().map(|(c, (s, _))| (*c, *s)).collect(),
        });
    }
    Ok(out)
}

/// The LM head of `plan` reading bf16 weights.
fn unpack_lm_head(plan: &mut Plan) {
    for step in plan.epilogue.iter_mut() {
        if let Step::Call(call) = step {
            for launch in &mut call.launches {
                if let Launch::LmHeadGemv { spec, .. } = launch {
                    spec.part.packed = None;
                }
            }
        }
    }
}

/// Prints the comparison and the sweep table; writes the plot to `svg`.
pub fn print(out: &mut Output, comparisons: &[Comparison], svg: &Path) -> Result<(), BenchError> {
    let fitted = FittedFourBit::committed();
    out.line("");
    out.line(&format!(
        "4-bit deployments: skillc's decode plan against the published one, both modeled by one cost model (modeled, not measured; {})",
        fitted.fused_note()
    ));
    out.line("");
    out.line("| model | format | skillc plan: techniques kept | skillc ms/token @2048 | published plan ms/token @2048 | published / skillc | band | verdict | published plan, bf16 LM head | its ratio | verdict | measured ms/token @2048 (sweep) |");
    out.line("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for c in comparisons {
        let (v, h) = (&c.at_2048, &c.same_head_2048);
        out.line(&format!(
            "| {} | {} | {} | {:.2} | {:.2} | {:.2}x | ±{:.1} % | {} | {:.2} | {:.2}x | {} | {} |",
            c.model,
            c.format,
            c.kept.join(", "),
            v.skillc_s * 1e3,
            v.published_s * 1e3,
            v.speedup,
            100.0 * v.band,
            v.verdict.label(),
            h.published_s * 1e3,
            h.speedup,
            h.verdict.label(),
            c.measured
                .get(&2048)
                .map_or("-".to_string(), |s| format!("{:.1}", s * 1e3))
        ));
        out.row(serde_json::json!({
            "model": c.model,
            "format": c.format.to_string(),
            "kept": c.kept,
            "versus_2048": v,
            "versus_bf16_head_2048": h,
            "curve": c.curve.iter().map(|(ctx, ours, published)| serde_json::json!({
                "context": ctx, "skillc_s": ours, "published_s": published,
                "measured_s": c.measured.get(ctx),
            })).collect::<Vec<_>>(),
        }));
    }
    out.line("");
    out.line("skillc's plans read their LM head in bf16 (no packed LM-head kernel, see the README's 4-bit weight path); the published weight buffers hold the head in 4-bit blocks.");
    out.line("");
    out.line("Decode tok/s against context: skillc's plan (modeled) / the published plan (modeled) / the published nightly sweep (measured, where swept)");
    out.line("");
    let mut head = "| model |".to_string();
    for c in CONTEXTS {
        head.push_str(&format!(" {}k |", c / 1024));
    }
    out.line(&head);
    out.line(&format!("|---|{}", "---|".repeat(CONTEXTS.len())));
    for c in comparisons {
        let mut row = format!("| {} |", c.model);
        for (ctx, ours, published) in &c.curve {
            let measured = c
                .measured
                .get(ctx)
                .map_or("-".to_string(), |s| format!("{:.1}", 1.0 / s));
            row.push_str(&format!(
                " {:.1} / {:.1} / {measured} |",
                1.0 / ours,
                1.0 / published
            ));
        }
        out.line(&row);
    }
    std::fs::create_dir_all(svg.parent().unwrap_or(Path::new(".")))
        .and_then(|()| std::fs::write(svg, super::packed_svg::plot(comparisons)))
        .map_err(|e| BenchError::Fused(format!("{}: {e}", svg.display())))?;
    out.line("");
    out.line(&format!("plot: {}", svg.display()));
    out.set("plot", svg.display().to_string());
    Ok(())
}
