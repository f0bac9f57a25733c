//! Steps and lessons recorded on bf16 weights, deployed on the GGUF corpus's
//! Q4_1 control model (`runtime/tests/data/gguf/ok-micro.gguf`): on the packed
//! path a format-dependent technique of the committed llama1b bundle is
//! re-validated on the packed GEMVs it changes, and a bf16-recorded lesson
//! whose fix sizes a GEMV tile from 2-byte rows (tests/data/deploy/weights) has
//! its tile re-derived from the packed footprint instead of applied as
//! recorded; on the bf16 path the same bundles run as recorded and the report
//! lists nothing.

use crate::deploy_support;

use deploy_support::{built_with, deploy_weights, llama1b, repo, scratch, summary};
use skillc_runtime::bundle::Value;
use skillc_runtime::exec::artifacts::record::{DeployReport, StepOutcome, Verdict};
use skillc_runtime::exec::artifacts::weight_path::{FormatAction, OtherFormat};
use skillc_runtime::exec::Fault;
use skillc_runtime::phase::DeployPhase;
use skillc_runtime::xdna2::packing::WeightPath;

const MICRO: &str = "runtime/tests/data/gguf/ok-micro.gguf";

fn recorded_on(r: &DeployReport) -> &[OtherFormat] {
    r.weight_path
        .as_ref()
        .map_or(&[][..], |p| p.recorded_on.as_slice())
}

/// The outcome text of every bundle step a run recorded.
fn step_whys(r: &DeployReport) -> Vec<String> {
    r.phases
        .iter()
        .flat_map(|p| &p.steps)
        .map(|s| match &s.outcome {
            StepOutcome::AsRecorded => String::new(),
            StepOutcome::Rederived { why }
            | StepOutcome::NotApplicable { why }
            | StepOutcome::Kept { why }
            | StepOutcome::Covered { why }
            | StepOutcome::Failed { why } => why.clone(),
            StepOutcome::Reverted { why } => why.to_string(),
        })
        .collect()
}

#[test]
fn bf16_recorded_techniques_are_re_validated_on_packed_gemvs_and_run_as_recorded_on_bf16() {
    let out = scratch("recorded-format-packed");
    let packed = deploy_weights(llama1b(), &repo(MICRO), &out, &[], WeightPath::Auto).report;
    assert_eq!(packed.verdict, Verdict::Pass, "{}", summary(&packed));
    let items = recorded_on(&packed);
    assert!(!items.is_empty(), "{}", summary(&packed));
    for i in items {
        assert_eq!((i.recorded.as_str(), i.deployed.as_str()), ("bf16", "q4_1"));
        assert!(i.op.spec().weights.depends(), "{i:?}");
        assert!(i.item.starts_with("step p"), "{i:?}");
    }
    // A technique kept on the packed plan says its packed GEMVs were checked again.
    let kept: Vec<&OtherFormat> = items
        .iter()
        .filter(|i| i.action == FormatAction::Revalidated && i.detail.starts_with("kept"))
        .collect();
    assert!(!kept.is_empty(), "{items:?}");
    for i in &kept {
        assert!(
            i.detail
                .contains("every q4_1 GEMV of the plan re-validated by phase 1's check"),
            "{i:?}"
        );
    }
    // ... by gates of phase 4 or 5 on the packed kernels, which the bf16 run has not.
    let packed_gates = |r: &DeployReport| {
        r.gates()
            .filter(|(phase, g)| {
                matches!(phase, DeployPhase::Prefill | DeployPhase::Decode)
                    && g.name.ends_with(" q4_1")
            })
            .count()
    };
    assert!(packed_gates(&packed) > 0, "{}", summary(&packed));
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        md.contains("| item | operation | recorded on | met | done | how |"),
        "{md}"
    );

    let bf16 = deploy_weights(
        llama1b(),
        &repo(MICRO),
        &scratch("recorded-format-bf16"),
        &[],
        WeightPath::Bf16,
    )
    .report;
    assert_eq!(bf16.verdict, Verdict::Pass, "{}", summary(&bf16));
    assert!(recorded_on(&bf16).is_empty(), "{:?}", recorded_on(&bf16));
    assert_eq!(packed_gates(&bf16), 0, "{}", summary(&bf16));
    assert!(
        step_whys(&bf16)
            .iter()
            .all(|w| !w.contains("recorded on bf16")),
        "{:?}",
        step_whys(&bf16)
    );
}

#[test]
fn a_bf16_sized_gemv_tile_fix_is_re_derived_for_packed_blocks_not_applied_as_recorded() {
    let bundle = built_with("bundle-llama1b-test-weights", "tests/data/deploy/weights");
    let lesson = bundle
        .lessons
        .get("w.l3")
        .unwrap_or_else(|| panic!("the test lesson: {:?}", bundle.lessons.keys()));
    assert_eq!(
        lesson.weights,
        Some(skillc_runtime::ops::WeightFormat::Bf16)
    );
    // The packed kernel's planted fault makes its phase-1 validation fail, so the
    // debugging lessons are tried on the packed GEMV.
    let out = scratch("recorded-format-lesson");
    let r = deploy_weights(
        &bundle,
        &repo(MICRO),
        &out,
        &[Fault::PackedNibbleOrder],
        WeightPath::Auto,
    )
    .report;
    assert_eq!(r.verdict, Verdict::Fail, "{}", summary(&r));
    let attempt = r
        .phases
        .iter()
        .flat_map(|p| &p.attempts)
        .find(|a| a.lesson == "w.l3")
        .unwrap_or_else(|| panic!("w.l3 tried: {}", summary(&r)));
    // As recorded the fix gives 256 / (2 * 64) = 2 rows; the packed rows are
    // 40 bytes, not 128, and the tile is re-derived from them.
    let tile = attempt.params.as_ref().and_then(|p| p.get("tile")).cloned();
    assert!(
        matches!(&tile, Some(Value::IntList(t)) if t.len() == 1 && t[0] > 2),
        "{tile:?}: {}",
        attempt.note
    );
    assert!(
        attempt
            .note
            .starts_with("recorded on bf16 weights, the kernel reads")
            && attempt.note.contains("its fix as recorded gives tile=[2]")
            && attempt.note.contains("re-derived from the q4_1 footprint"),
        "{}",
        attempt.note
    );
    let entry = recorded_on(&r)
        .iter()
        .find(|i| i.item == "lesson w.l3")
        .unwrap_or_else(|| panic!("{:?}", recorded_on(&r)));
    assert_eq!(entry.action, FormatAction::Rederived);

    // On the bf16 path no GEMV reads packed weights: the fault does not apply,
    // nothing fails and nothing recorded on bf16 meets other weights.
    let bf16 = deploy_weights(
        &bundle,
        &repo(MICRO),
        &scratch("recorded-format-lesson-bf16"),
        &[Fault::PackedNibbleOrder],
        WeightPath::Bf16,
    )
    .report;
    assert_eq!(bf16.verdict, Verdict::Pass, "{}", summary(&bf16));
    assert!(recorded_on(&bf16).is_empty(), "{:?}", recorded_on(&bf16));
}
