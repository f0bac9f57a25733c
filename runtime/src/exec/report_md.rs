//! `report.md`: the run for a reader, rendered from the report record.

use std::fmt::Write as _;

use super::gate::format_value;
use super::record::{DeployReport, PhaseStatus, StepOutcome};

pub fn render(r: &DeployReport) -> String {
    let mut out = String::new();
    let name = r.model.as_ref().map_or("model", |m| m.name.as_str());
    let _ = writeln!(out, "# Deployment report: {name}\n");
    let _ = writeln!(out, "Verdict: **{}**\n", r.verdict.label());
    let _ = writeln!(
        out,
        "Bundle `{}` ({}).\n",
        r.bundle,
        r.bundle_sources.join(", ")
    );
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
        for (phase, s) in rederived {
            let why = match &s.outcome {
                StepOutcome::Rederived { why }
                | StepOutcome::NotApplicable { why }
                | StepOutcome::Reverted { why }
                | StepOutcome::Failed { why } => why.as_str(),
                StepOutcome::AsRecorded
                | StepOutcome::Kept { .. }
                | StepOutcome::Covered { .. } => "",
            };
            let _ = writeln!(out, "- phase {phase} `{}`: {why}", s.op);
        }
        out.push('\n');
    }
    out
}
