//! `report.md`: the run for a reader, rendered from the report record.

use std::fmt::Write as _;

use super::record::{
    DeployReport, ModeledTimes, Performance, PhaseStatus, StepOrigin, StepOutcome,
};
use crate::exec::checks::gate::format_value;

pub fn render(r: &DeployReport) -> String {
    let mut out = String::new();
    let name = r
        .model
        .as_ref()
        .map_or(r.model_dir.as_str(), |m| m.name.as_str());
    let _ = writeln!(out, "# Deployment report: {name}\n");
    let _ = writeln!(out, "Verdict: **{}**\n", r.verdict.label());
    let _ = writeln!(
        out,
        "Bundle `{}` ({}).\n",
        r.bundle,
        r.bundle_sources.join(", ")
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
            stop.comparison,
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
    let _ = writeln!(out, "## Phases\n");
    let _ = writeln!(out, "| phase | status | gates passed | wall s |");
    let _ = writeln!(out, "|---|---|---|---|");
    for p in &r.phases {
        let status = match p.status {
            PhaseStatus::Passed => "passed",
            PhaseStatus::Failed => "FAILED",
            PhaseStatus::NotRun => "not run",
        };
        let passed = p.gates.iter().filter(|g| g.passed).count();
        let _ = writeln!(
            out,
            "| {} {} | {status} | {passed}/{} | {:.1} |",
            p.index,
            p.title,
            p.gates.len(),
            p.wall_s
        );
    }
    out.push('\n');
    render_texts(&mut out, r);
    if let Some(perf) = &r.performance {
        render_performance(&mut out, perf);
    }
    for p in r.phases.iter().filter(|p| p.status != PhaseStatus::NotRun) {
        let _ = writeln!(out, "### Phase {}: {}\n", p.index, p.title);
        for g in &p.gates {
            let _ = writeln!(
                out,
                "- {} `{}`: {}{}",
                if g.passed { "pass" } else { "FAIL" },
                g.name,
                g.summary(),
                if g.modeled { " (modeled)" } else { "" }
            );
        }
        for a in &p.attempts {
            let _ = writeln!(
                out,
                "- lesson `{}` on `{}`: {} → {}",
                a.lesson, a.gate, a.fix, a.note
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
            let _ = writeln!(out, "| {phase} | `{}` {id} | {kind} | {why} |", s.op);
        }
        out.push('\n');
    }
    out
}

/// A step outcome's label and reason, for the re-derived steps table.
/// Prompts and the text each side generated, in a table.
fn render_texts(out: &mut String, r: &DeployReport) {
    if r.texts.is_empty() {
        return;
    }
    let cell = |t: &str| t.replace('|', "\\|").replace('\n', "⏎");
    let _ = writeln!(out, "## Text\n");
    let _ = writeln!(out, "| prompt | text | CPU oracle | NPU path |");
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
}

fn outcome_words(outcome: &StepOutcome) -> (&'static str, &str) {
    match outcome {
        StepOutcome::AsRecorded => ("as recorded", ""),
        StepOutcome::Rederived { why } => ("re-derived", why),
        StepOutcome::NotApplicable { why } => ("not applicable", why),
        StepOutcome::Kept { why } => ("kept", why),
        StepOutcome::Covered { why } => ("already in effect", why),
        StepOutcome::Reverted { why } => ("reverted", why),
        StepOutcome::Failed { why } => ("failed", why),
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
    let decode =
        |t: &ModeledTimes| format!("{:.1} ms/token ({:.2} tok/s)", t.ms_per_token, t.tok_s);
    let _ = writeln!(
        out,
        "| figure | baseline (phase 3) | production |\n|---|---|---|"
    );
    let _ = writeln!(
        out,
        "| TTFT, prompt of {} tokens | {:.3} s | {:.3} s |",
        p.seq_len, b.ttft_s, p.ttft_s
    );
    let _ = writeln!(
        out,
        "| decode at context {} | {} | {} |",
        p.seq_len,
        decode(b),
        decode(p)
    );
    if let Some(c) = &perf.published_context_decode {
        let _ = writeln!(
            out,
            "| decode at context {} (where the published decode figures were measured) | - | {:.1} ms/token ({:.2} tok/s) |",
            c.context, c.ms_per_token, c.tok_s
        );
    }
    let _ = writeln!(
        out,
        "| NPU calls per layer, prefill / decode | {} / {} | {} / {} |\n",
        b.calls_per_layer_prefill,
        b.calls_per_layer_decode,
        p.calls_per_layer_prefill,
        p.calls_per_layer_decode
    );
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
            "| {} | {} | {:.2} | {:.0}% | {} |",
            row.phase,
            row.name,
            row.ms,
            row.fraction * 100.0,
            row.bound
        );
    }
    out.push('\n');
}
