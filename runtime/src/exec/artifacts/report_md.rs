//! `report.md`: the run for a reader, rendered from the report record.

use std::fmt::Write as _;

use super::markdown;
use super::record::{
    DeployReport, ModeledTimes, Performance, PhaseStatus, StepOrigin, StepOutcome,
};
use crate::exec::gates::gate::{format_value, GateCheck, ThresholdSource};

pub fn render(r: &DeployReport) -> String {
    let mut out = String::new();
    let name = r
        .model
        .as_ref()
        .map_or(r.model_dir.as_str(), |m| m.name.as_str());
    let _ = writeln!(out, "# Deployment report: {}\n", markdown::name(name));
    let _ = writeln!(out, "Verdict: **{}**\n", r.verdict.label());
    if let Some(seed) = r
        .model
        .as_ref()
        .and_then(|m| m.weights.strip_prefix("random"))
    {
        let _ = writeln!(
            out,
            "**Random weights**{seed}: the model directory holds a config and no checkpoint, so the weights are drawn under the seed. The gates show that the NPU path computes what this architecture computes on those weights; the generated text and the logits say nothing about a trained model.\n"
        );
    }
    let _ = writeln!(
        out,
        "Bundle {}, {}.\n",
        markdown::code_span(&r.bundle),
        sources(r)
    );
    for note in &r.bundle_notes {
        let _ = writeln!(out, "**Bundle warning:** {note}\n");
    }
    if let Some(stop) = &r.stop {
        let _ = writeln!(
            out,
            "Stopped in phase {} at gate `{}`: {} = {} (threshold {} {}). {}\n",
            stop.phase,
            stop.gate,
            stop.metric,
            format_value(stop.value),
            stop.comparison.symbol(),
            format_value(stop.threshold),
            stop.reason
        );
        if stop.tried.is_empty() {
            let _ = writeln!(out, "No lesson of the bundle matched this failure.\n");
        } else {
            let _ = writeln!(out, "Tried:\n");
            for t in &stop.tried {
                let _ = writeln!(out, "- {t}");
            }
            out.push('\n');
        }
    }
    render_warnings(&mut out, r);
    let _ = writeln!(out, "## Phases\n");
    let _ = writeln!(
        out,
        "| phase | status | gates passed | optimizations tried | wall s |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for p in &r.phases {
        let status = match p.status {
            PhaseStatus::Passed => "passed",
            PhaseStatus::Failed => "FAILED",
            PhaseStatus::NotRun => "not run",
        };
        let checks: Vec<&GateCheck> = p.gates.iter().filter(|g| !g.attempt).collect();
        let passed = checks.iter().filter(|g| g.passed).count();
        let tried = p.gates.len() - checks.len();
        let _ = writeln!(
            out,
            "| {} {} | {status} | {passed}/{} | {tried} | {:.1} |",
            p.index,
            p.title,
            checks.len(),
            p.wall_s
        );
    }
    out.push('\n');
    if let Some(choice) = &r.padding {
        render_padding(&mut out, choice);
    }
    render_texts(&mut out, r);
    if let Some(record) = &r.weight_path {
        out.push_str(&super::weight_path::render(record));
        out.push('\n');
    }
    if let Some(perf) = &r.performance {
        render_performance(&mut out, perf);
    }
    for p in r.phases.iter().filter(|p| p.status != PhaseStatus::NotRun) {
        let _ = writeln!(out, "### Phase {}: {}\n", p.index, p.title);
        for g in &p.gates {
            if let Some(tried) = g.attempt_summary() {
                let _ = writeln!(out, "- {tried} (modeled)");
                continue;
            }
            let _ = writeln!(
                out,
                "- {} `{}`: {}{}{}",
                if g.passed { "pass" } else { "FAIL" },
                g.name,
                g.summary(),
                if g.modeled { " (modeled)" } else { "" },
                derived_limit(&g.source)
            );
        }
        for a in &p.attempts {
            let from = if a.deployments.is_empty() {
                String::new()
            } else {
                format!(" (learnt on {})", a.deployments.join(", "))
            };
            let _ = writeln!(
                out,
                "- lesson {}{from} on {}: {} → {}",
                markdown::code_span(&a.lesson),
                markdown::code_span(&a.gate),
                a.fix,
                a.note
            );
        }
        for s in &p.skipped {
            let _ = writeln!(
                out,
                "- lesson {} skipped on {}: its condition {} is false on this model ({})",
                markdown::code_span(&s.lesson),
                markdown::code_span(&s.gate),
                markdown::code_span(&format!("if {}", s.condition)),
                s.values.join(", ")
            );
        }
        for n in &p.notes {
            let _ = writeln!(out, "- note: {n}");
        }
        out.push('\n');
    }
    let rederived = r.rederived_steps();
    let _ = writeln!(out, "## Bundle steps re-derived for this model\n");
    if rederived.is_empty() {
        let _ = writeln!(out, "None: every bundle step ran as recorded.\n");
    } else {
        let _ = writeln!(out, "| phase | step | outcome | why |\n|---|---|---|---|");
        for (phase, s) in rederived {
            let id = match &s.origin {
                StepOrigin::Bundle { step, .. } => step.as_str(),
                StepOrigin::Derived { .. } | StepOrigin::Remedy { .. } => "",
            };
            let (kind, why) = outcome_words(&s.outcome);
            let why = why.replace('|', "\\|");
            let id = match id {
                "" => String::new(),
                id => markdown::name(id).replace('|', "\\|"),
            };
            let _ = writeln!(out, "| {phase} | `{}` {id} | {kind} | {why} |", s.op);
        }
        out.push('\n');
    }
    out
}

/// The trajectories the bundle was built from, without repeating the bundle's
/// name when a trajectory has it.
fn sources(r: &DeployReport) -> String {
    let named = format!("{} (", r.bundle);
    let list: Vec<String> = r
        .bundle_sources
        .iter()
        .map(
            |s| match s.strip_prefix(&named).and_then(|m| m.strip_suffix(')')) {
                Some(model) => format!("recorded on {}", markdown::name(model)),
                None => format!("from trajectory {}", markdown::name(s)),
            },
        )
        .collect();
    list.join("; ")
}

/// The evaluator's warnings, each with its reason, once phase 7 has run.
fn render_warnings(out: &mut String, r: &DeployReport) {
    let Some(evaluation) = &r.evaluation else {
        return;
    };
    let _ = writeln!(out, "## Warnings\n");
    if evaluation.warnings.is_empty() {
        let _ = writeln!(out, "None.\n");
        return;
    }
    for w in &evaluation.warnings {
        let _ = writeln!(out, "- {w}");
    }
    out.push('\n');
}

/// For a limit derived from this deployment's bf16-storage floor: the floor,
/// the factor and the fixed limit it is the larger of (the derivation itself
/// is phase 3's note).
fn derived_limit(source: &ThresholdSource) -> String {
    match source {
        ThresholdSource::Measured(limit) => format!(" (limit {})", limit.formula()),
        _ => String::new(),
    }
}

/// Prompts and the text each side generated, in a table, then where the
/// final plan's free-running text first leaves the oracle's.
fn render_texts(out: &mut String, r: &DeployReport) {
    if r.texts.is_empty() {
        return;
    }
    let cell = |t: &str| t.replace('|', "\\|").replace('\n', "⏎");
    let _ = writeln!(out, "## Text\n");
    let npu = match &r.weight_path {
        Some(w) if w.buffers.iter().any(|b| b.packed.is_some()) => {
            "NPU path (final plan, free-running, 4-bit packed GEMVs)"
        }
        _ => "NPU path (final plan, free-running)",
    };
    let _ = writeln!(out, "| prompt | text | CPU oracle | {npu} |");
    let _ = writeln!(out, "|---|---|---|---|");
    for t in &r.texts {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            t.prompt,
            cell(&t.prompt_text),
            cell(&t.oracle_text),
            cell(&t.npu_text)
        );
    }
    out.push('\n');
    for t in &r.texts {
        let Some(d) = &t.first_difference else {
            continue;
        };
        let top = |c: &[crate::exec::gates::free_run::Candidate]| {
            c.iter()
                .map(|c| format!("{} `{}` {:.3}", c.token, cell(&c.text), c.logit))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "Prompt {}: the texts first differ at step {} (oracle top-1/top-2 gap {:.3}, tie margin {:.3}). CPU oracle top-5: {}. NPU top-5: {}.\n",
            t.prompt,
            d.step,
            d.oracle_gap,
            d.tie_margin,
            top(&d.oracle),
            top(&d.npu)
        );
    }
}

/// A step's outcome as the report's table words it: the verdict and why.
pub(crate) fn outcome_words(outcome: &StepOutcome) -> (&'static str, String) {
    match outcome {
        StepOutcome::AsRecorded => ("as recorded", String::new()),
        StepOutcome::Rederived { why } => ("re-derived", why.clone()),
        StepOutcome::NotApplicable { why } => ("not applicable", why.clone()),
        StepOutcome::Kept { why } => ("kept", why.clone()),
        StepOutcome::Covered { why } => ("already in effect", why.clone()),
        StepOutcome::Reverted { why } => ("reverted", why.to_string()),
        StepOutcome::Failed { why } => ("failed", why.clone()),
    }
}

/// A fraction as a percentage with two significant digits below 1 % (a kernel
/// far from its bound is not at 0 %).
fn percent(fraction: f64) -> String {
    let p = fraction * 100.0;
    if p >= 1.0 || p == 0.0 {
        format!("{p:.0}%")
    } else {
        let digits = (1 - p.log10().floor() as i32).max(0) as usize;
        format!("{p:.digits$}%")
    }
}

/// Below 1 % of its roofline bound a kernel's modeled time is launch and DMA
/// set-up overhead, and the table says so.
fn bound_words(fraction: f64, bound: &str) -> String {
    if fraction < 0.01 {
        format!("{bound}; overhead-dominated (launch and DMA set-up)")
    } else {
        bound.to_string()
    }
}

/// Kernels of the roofline table shown in the report (the JSON has them all).
const ROOFLINE_ROWS: usize = 10;

/// The modeled figures: baseline against production, decode at the published
/// figures' context, and the kernels that take the most modeled time.
fn render_performance(out: &mut String, perf: &Performance) {
    let _ = writeln!(
        out,
        "## Modeled performance\n\nFrom the XDNA 2 emulator's cost model, not measured on a device ({}).\n",
        perf.calibration
    );
    let (b, p) = (&perf.baseline, &perf.production);
    let decode = |ms: f64, tok_s: f64| format!("{ms:.1} ms/token ({tok_s:.2} tok/s)");
    let calls = |t: &ModeledTimes| {
        let (prefill, decode) = (t.calls_per_layer_prefill, t.calls_per_layer_decode);
        format!("{prefill} / {decode}")
    };
    let mut figures = vec![
        [
            format!("TTFT, prompt of {} tokens", p.seq_len),
            format!("{:.3} s", b.ttft_s),
            format!("{:.3} s", p.ttft_s),
        ],
        [
            format!("decode at context {}", p.seq_len),
            decode(b.ms_per_token, b.tok_s),
            decode(p.ms_per_token, p.tok_s),
        ],
    ];
    if let Some(c) = &perf.published_context_decode {
        figures.push([
            format!(
                "decode at context {} (where the published decode figures were measured)",
                c.context
            ),
            "-".to_string(),
            decode(c.ms_per_token, c.tok_s),
        ]);
    }
    figures.push([
        "NPU calls per layer, prefill / decode".to_string(),
        calls(b),
        calls(p),
    ]);
    let _ = writeln!(
        out,
        "| figure | baseline (phase 3) | production |\n|---|---|---|"
    );
    for [figure, baseline, production] in figures {
        let _ = writeln!(out, "| {figure} | {baseline} | {production} |");
    }
    out.push('\n');
    let mut rows: Vec<_> = perf.roofline.iter().collect();
    rows.sort_by(|x, y| y.ms.total_cmp(&x.ms));
    let _ = writeln!(
        out,
        "Roofline of the production plans, the {} kernels with the most modeled time:\n",
        ROOFLINE_ROWS.min(rows.len())
    );
    let _ = writeln!(out, "| plan | kernel x launches | modeled ms | fraction of bound | bound |\n|---|---|---|---|---|");
    for row in rows.iter().take(ROOFLINE_ROWS) {
        let _ = writeln!(
            out,
            "| {} | {} | {:.2} | {} | {} |",
            row.phase,
            row.name,
            row.ms,
            percent(row.fraction),
            bound_words(row.fraction, &row.bound)
        );
    }
    out.push('\n');
}

/// What phase 1 padded with zeros, by how much, and which kernels refused the
/// model's own sizes.
fn render_padding(out: &mut String, choice: &crate::xdna2::padding::PaddingChoice) {
    let _ = writeln!(out, "## Padding\n");
    let _ = writeln!(
        out,
        "Dimensions no legal tiling divides, padded with zeros to the nearest size every kernel on them accepts (exact: the real outputs are those of the unpadded model).\n"
    );
    let _ = writeln!(out, "| dimension | model | kernels run | padded by |");
    let _ = writeln!(out, "|---|---|---|---|");
    for (dim, p) in choice.padding.dims() {
        let by = if p.is_padded() {
            format!("+{} (+{:.1}%)", p.padded - p.real, 100.0 * p.overhead())
        } else {
            "-".to_string()
        };
        let _ = writeln!(out, "| {dim} | {} | {} | {by} |", p.real, p.padded);
    }
    out.push('\n');
    if !choice.refusals.is_empty() {
        let _ = writeln!(out, "Refused at the model's size:\n");
        for r in &choice.refusals {
            let _ = writeln!(out, "- {} {} as {}: {}", r.dim, r.size, r.role, r.detail);
        }
        out.push('\n');
    }
}
