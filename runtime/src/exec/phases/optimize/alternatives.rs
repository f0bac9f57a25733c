//! Techniques of one phase that replace the same part of the plan, tried as
//! alternatives instead of in turn. Kept greedily, the first of two such
//! techniques that lowers the modeled time wins and the second can no longer
//! change the plan: the fused decode builds its own O+FFN whatever `cascade-ffn`
//! says, so a bundle listing the fused decode first never tried the cascade
//! against it. Which techniques exclude each other is read from the plan
//! builder, not from a list: from the plan the phase has reached, each alone
//! changes the phase's plan into a different one, and one applied after the
//! other leaves one of those two plans as it was (the builder ignores the
//! other's option, or the second overwrites the first's). Each alternative is
//! applied to the same plan and runs its own checks and numerics probe; the
//! fastest by the modeled figure is confirmed (kernel configurations, short
//! check or re-verification) and kept, the next one if it fails. Equal figures
//! go to the one listed first in the bundle, so the plan kept does not depend
//! on the order the bundle lists the alternatives in.

use std::collections::BTreeMap;

use crate::bundle::ReadStep;
use crate::exec::artifacts::record::{PhaseRecord, Reversion, StepOutcome};
use crate::exec::artifacts::report_md::outcome_words;
use crate::exec::design::{self, Design};
use crate::exec::gates::gate::format_value;
use crate::exec::phases::DeployPhase;
use crate::exec::run::Run;
use crate::exec::DeployError;
use crate::xdna2::plan::{Phase, Plan, PlanOptions};

use super::technique::{confirm, finish, fit_to_model, revert, time_technique, Timed, Timing};
use super::{value_of, State, Target};

/// The techniques among `remaining` (indices into `steps`, `remaining[0]` the
/// next to try) that exclude `remaining[0]` or one another from `base`,
/// transitively, in bundle order; `[remaining[0]]` alone when none does.
pub(super) fn group(
    run: &Run<'_>,
    t: &Target,
    base: &Design,
    steps: &[&ReadStep<'_>],
    remaining: &[usize],
) -> Vec<usize> {
    let Some(&first) = remaining.first() else {
        return Vec::new();
    };
    let builder = TargetPlan::of(run, t);
    let Some(before) = builder.plan(base) else {
        return vec![first];
    };
    // Each remaining technique alone on the base, when it changes the plan.
    let alone: BTreeMap<usize, (Design, Plan)> = remaining
        .iter()
        .filter_map(|&i| {
            let d = builder.applied(base, steps[i])?;
            let plan = builder.plan(&d).filter(|p| *p != before)?;
            Some((i, (d, plan)))
        })
        .collect();
    let mut members = vec![first];
    let mut next = 0;
    while let Some(&m) = members.get(next) {
        next += 1;
        let found: Vec<usize> = remaining
            .iter()
            .copied()
            .filter(|j| !members.contains(j))
            .filter(|&j| builder.exclusive((steps[m], alone.get(&m)), (steps[j], alone.get(&j))))
            .collect();
        members.extend(found);
    }
    members.sort_unstable();
    members
}

/// Builds the plan a phase optimizes (prefill for phase 4, decode for phase 5)
/// of a design with one more technique applied.
struct TargetPlan<'r, 'a> {
    run: &'r Run<'a>,
    phase: Phase,
}

impl<'r, 'a> TargetPlan<'r, 'a> {
    fn of(run: &'r Run<'a>, t: &Target) -> Self {
        let phase = if t.phase == DeployPhase::Prefill {
            Phase::Prefill
        } else {
            Phase::Decode
        };
        TargetPlan { run, phase }
    }

    /// The plan a phase optimizes, as a note names it.
    fn word(t: &Target) -> &'static str {
        if t.phase == DeployPhase::Prefill {
            "prefill"
        } else {
            "decode"
        }
    }

    fn applied(&self, base: &Design, read: &ReadStep<'_>) -> Option<Design> {
        let (arch, device) = (&self.run.loaded.model.arch, &self.run.device);
        let op = fit_to_model(read.op.clone(), arch, device, &mut None);
        let mut d = base.clone();
        design::apply_change(&mut d, arch, device, &op, None).ok()?;
        Some(d)
    }

    /// What the plan runs (steps, buffers, layout), without the switches it
    /// was built from: an option the builder ignores leaves it unchanged.
    fn plan(&self, d: &Design) -> Option<Plan> {
        let (arch, device) = (&self.run.loaded.model.arch, &self.run.device);
        let plan = d
            .plan(
                &self.run.loaded.name,
                arch,
                device,
                self.phase,
                design::SEQ_LEN,
            )
            .ok()?;
        Some(Plan {
            options: PlanOptions::naive(),
            ..plan
        })
    }

    /// Whether two techniques, each alone changing the plan (`alone`: the
    /// design and plan of each on the base), into different plans, replace
    /// the same part of it: whichever is applied second, the plan is one of
    /// the two single-technique plans.
    fn exclusive(
        &self,
        (a, alone_a): (&ReadStep<'_>, Option<&(Design, Plan)>),
        (b, alone_b): (&ReadStep<'_>, Option<&(Design, Plan)>),
    ) -> bool {
        let (Some((da, pa)), Some((db, pb))) = (alone_a, alone_b) else {
            return false;
        };
        if pa == pb {
            return false;
        }
        let either = |p: &Plan| p == pa || p == pb;
        let then = |d: &Design, read: &ReadStep<'_>| {
            self.applied(d, read)
                .and_then(|d| self.plan(&d))
                .is_some_and(|p| either(&p))
        };
        then(da, b) || then(db, a)
    }
}

/// Tries each of `reads` (alternatives, in bundle order) from `current`, keeps
/// the fastest that passes every gate, and returns each one's outcome in the
/// same order with the state kept, if any. A note of the phase lists them all
/// with their modeled figures.
pub(super) fn try_alternatives(
    run: &mut Run<'_>,
    rec: &mut PhaseRecord,
    t: &Target,
    reads: &[&ReadStep<'_>],
    current: &State,
) -> Result<(Vec<StepOutcome>, Option<State>), DeployError> {
    let mut outcomes = BTreeMap::new();
    let mut others = BTreeMap::new();
    let mut timed: Vec<(usize, Timed)> = Vec::new();
    for (i, read) in reads.iter().enumerate() {
        run.progress.step(&format!(
            "{} {} (alternative {} of {})",
            read.step.op,
            crate::notation::text_value(&read.step.id),
            i + 1,
            reads.len()
        ));
        match time_technique(run, rec, t, read, current)? {
            Timing::Decided { outcome, other } => {
                outcomes.insert(i, outcome);
                others.insert(i, other);
            }
            Timing::Timed(x) => {
                others.insert(i, x.other);
                timed.push((i, *x));
            }
        }
    }
    // Fastest first; at equal figures, bundle order.
    timed.sort_by(|(i, a), (j, b)| {
        value_of(t, &a.times)
            .total_cmp(&value_of(t, &b.times))
            .then(i.cmp(j))
    });
    let mut kept: Option<(usize, State)> = None;
    for (i, x) in timed {
        if let Some((k, state)) = &kept {
            let why = Reversion::OtherAlternative {
                kept: label(reads[*k]),
                figures: format!(
                    "{} vs {} {}",
                    format_value(value_of(t, &x.times)),
                    format_value(value_of(t, &state.2)),
                    t.unit()
                ),
            };
            outcomes.insert(i, revert(run, &x.action, why));
            continue;
        }
        let (outcome, next) = confirm(run, rec, t, reads[i], current, x)?;
        outcomes.insert(i, outcome);
        kept = next.map(|state| (i, state));
    }
    let listed: Vec<String> = outcomes
        .iter()
        .map(|(&i, outcome)| {
            let (verdict, why) = outcome_words(outcome);
            format!("{}: {verdict} ({why})", label(reads[i]))
        })
        .collect();
    rec.notes.push(format!(
        "alternatives (each alone changes the {} plan, and whichever is applied second leaves one of their two plans): each tried from the same plan (modeled {} {}); the fastest that passed its gates is kept, at equal figures the one listed first in the bundle: {}",
        TargetPlan::word(t),
        format_value(value_of(t, &current.2)),
        t.unit(),
        listed.join("; ")
    ));
    for (&i, outcome) in &outcomes {
        finish(run, reads[i], outcome, others.get(&i).copied().flatten());
    }
    Ok((outcomes.into_values().collect(), kept.map(|(_, s)| s)))
}

/// `op id`, as the report names a bundle step.
fn label(read: &ReadStep<'_>) -> String {
    format!("{} {}", read.step.op, read.step.id)
}
