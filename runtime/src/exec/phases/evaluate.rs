//! Phase 7: starts the independent evaluator as a fresh process on the written
//! artifacts and takes its exit code and report as the verdict. The evaluator
//! runs on as many threads as the deploy (`threads::ENV_VAR`), so `--threads`
//! holds for the whole run.

use std::collections::BTreeMap;
use std::process::Command;

use super::DeployPhase;
use crate::bundle::{Comparison, Value};
use crate::exec::artifacts::record::{EvaluationSummary, EvaluatorVerdict, PhaseRecord};
use crate::exec::artifacts::trajectory::ActionLinks;
use crate::exec::evaluate::Evaluation;
use crate::exec::gates::gate::{GateCheck, ThresholdSource};
use crate::exec::run::{PhaseEnd, Run, Unloaded};
use crate::exec::{files, DeployError, EvaluatorLaunch, EVALUATOR_COMMAND};
use crate::ops::{Metric, OpKind};
use crate::threads;

/// Runs on a run whose model is already released (`Unloaded`): the evaluator
/// loads its own copy.
pub(crate) fn run(
    run: &mut Run<'_, Unloaded>,
    rec: &mut PhaseRecord,
) -> Result<PhaseEnd, DeployError> {
    let params = BTreeMap::from([("fresh_process".to_string(), Value::Bool(true))]);
    let action = run
        .traj
        .action(OpKind::Evaluate, &params, &ActionLinks::default());
    run.progress.step("evaluate: fresh process");
    let EvaluatorLaunch::Process(program) = &run.options.evaluator;
    let output = Command::new(program)
        .arg(EVALUATOR_COMMAND)
        .arg(&run.options.out_dir)
        .arg("--model")
        .arg(&run.options.model_dir)
        .env(threads::ENV_VAR, threads::current().to_string())
        .output()
        .map_err(|source| DeployError::Evaluator {
            program: program.to_path_buf(),
            source,
        })?;
    let code = output.status.code().unwrap_or(-1);
    let path = run.options.out_dir.join(files::EVALUATION_JSON);
    let evaluation: Option<Evaluation> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    let (verdict, findings, warnings, wall, passed_prompts) = match &evaluation {
        Some(e) => (
            e.verdict,
            e.audit
                .iter()
                .map(|a| {
                    format!(
                        "{}: {}: {}",
                        if a.ok { "ok" } else { "FAILED" },
                        a.check,
                        a.detail
                    )
                })
                .collect(),
            e.warnings.clone(),
            e.wall_s,
            e.prompts_passed,
        ),
        None => (
            EvaluatorVerdict::Fail,
            vec![format!("no evaluation.json; evaluator stderr: {stderr}")],
            Vec::new(),
            0.0,
            0,
        ),
    };
    run.report.evaluation = Some(EvaluationSummary {
        verdict,
        exit_code: code,
        findings,
        warnings,
        wall_s: wall,
    });
    let prompts = run.report.prompts.len();
    let gates = vec![
        GateCheck::named("evaluator exit code", OpKind::Evaluate)
            .measures(Metric::ExitCode, f64::from(code))
            .when(BTreeMap::from([("verdict".to_string(), Value::Text(verdict.to_string()))]))
            .must_be_zero("a fresh process re-verifies the written artifacts; its exit code drives the verdict"),
        GateCheck::named("evaluator: fresh top-k set check", OpKind::Evaluate)
            .measures(Metric::TopKAgree, passed_prompts as f64)
            .when(BTreeMap::from([("fresh_process".to_string(), Value::Bool(true))]))
            .against(
                Comparison::Ge,
                prompts as f64,
                ThresholdSource::rule("every prompt passes the fresh verification"),
            ),
    ];
    let refs: Vec<&GateCheck> = gates.iter().collect();
    run.traj.observe(
        Some(&format!("independent evaluation: {verdict}")),
        &refs,
        Some(&action),
    );
    let failed = run.record_gates(rec, gates);
    match failed {
        None => {
            // The gates passed, so the evaluator said PASS or PASS-with-warnings.
            run.report.verdict = verdict.run_verdict();
            Ok(PhaseEnd::Passed)
        }
        Some(gate) => {
            let failure = crate::exec::gates::remedy::Failure {
                phase: DeployPhase::Evaluate,
                op: OpKind::Evaluate,
                params,
                gate,
            };
            Ok(PhaseEnd::Failed(run.stop(
                rec,
                &failure,
                "the independent evaluator did not pass the deployment",
            )))
        }
    }
}
