//! The kernel check replay uses for `validate-kernel`: the runtime's kernel harness
//! ([`skillc_runtime::xdna2::harness`], the one deploy's phase 1 runs) at the
//! recorded shape, on seeded weights, at the recorded tolerance. An LM-head launch
//! stands for the whole head, so every partition runs and the worst one is the
//! result.

use skillc_runtime::model::arch::Architecture;
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::harness::{DrawnWeights, Harness, HarnessError, RunOutcome, Scale};
use skillc_runtime::xdna2::numerics::{Deviation, Tolerance};
use skillc_runtime::xdna2::plan::Launch;

use super::measure;

/// What one validation run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelCheck {
    pub comparison: Deviation,
    /// Cosine similarity of the output with the reference.
    pub cosine: f64,
}

/// Why a recorded validation did not run.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Harness(#[from] HarnessError),
    #[error("the hardware would refuse it: {0}")]
    Refused(String),
    /// The configuration breaks the device's constraints.
    #[error(transparent)]
    Constraints(#[from] super::Refusal),
}

/// Runs `launch` (every partition of an LM head) on seeded inputs and compares
/// it with the f32 reference.
pub fn validate(
    launch: &Launch,
    arch: &Architecture,
    device: &Device,
    tolerance: Tolerance,
    seed: u64,
) -> Result<KernelCheck, CheckError> {
    let weights = DrawnWeights { seed };
    let harness = Harness {
        device,
        arch,
        weights: &weights,
        rope_table: None,
        seed,
    };
    let mut worst: Option<KernelCheck> = None;
    for part in partitions(launch) {
        let run = harness.check(&part, tolerance, Scale::Production)?;
        let check = match run.outcome {
            RunOutcome::Compared { comparison, cosine } => KernelCheck { comparison, cosine },
            RunOutcome::Refused(v) => return Err(CheckError::Refused(measure::join(&v))),
        };
        if worst.is_none_or(|w| check.comparison.mismatches > w.comparison.mismatches) {
            worst = Some(check);
        }
    }
    worst.ok_or_else(|| CheckError::Refused("an LM head of no partitions".into()))
}

/// The launches that make up `launch`: each partition of an LM head, else itself.
fn partitions(launch: &Launch) -> Vec<Launch> {
    match launch {
        Launch::LmHeadGemv { spec, .. } => (0..spec.parts.max(1))
            .map(|p| {
                let mut one = launch.clone();
                if let Launch::LmHeadGemv { part, .. } = &mut one {
                    *part = p;
                }
                one
            })
            .collect(),
        other => vec![other.clone()],
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use skillc_runtime::model::config::load_config;

    use super::*;
    use crate::replay::kernel::{self, Context, KernelChoiceError};
    use crate::replay::params::{param_lists, Params};

    fn arch() -> Architecture {
        let config = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/fixtures/llama32-tiny/config.json"
        );
        load_config(Path::new(config)).expect("fixture config")
    }

    fn check(action: &str, arch: &Architecture) -> Result<KernelCheck, CheckError> {
        let device = Device::npu2();
        let lists = param_lists(action);
        let p = Params(&lists[0]);
        let ctx = Context {
            arch,
            device: &device,
            lm_head_parts: 2,
        };
        let launch = kernel::launch(p, ctx).expect("a kernel choice");
        let tolerance = skillc_runtime::xdna2::harness::tolerance_of(&launch);
        validate(&launch, arch, &device, tolerance, 7)
    }

    #[test]
    fn every_kernel_passes_its_registry_tolerance_at_a_small_shape() {
        let arch = arch();
        for action in [
            "a action select-tiling kernel=gemm shape=[256,128,128]",
            "a action select-tiling kernel=gemv shape=[512,256] herd=[8,1] tile=[8]",
            "a action select-tiling kernel=lm_head_gemv shape=[512,128]",
            "a action select-tiling kernel=rmsnorm shape=[64,128] herd=[8,1]",
            "a action select-tiling kernel=rope shape=[256,32] herd=[8,1]",
            "a action select-tiling kernel=silu_mul shape=[65536] herd=[8,1] tile=[4096]",
            "a action select-tiling kernel=eltwise_add shape=[65536] herd=[8,1]",
            "a action select-tiling kernel=flash_attention shape=[256,256,32] layout=seq-first",
            "a action select-tiling kernel=flash_attention shape=[256,256,32] layout=head-first",
        ] {
            let run = check(action, &arch).expect(action);
            assert_eq!(
                run.comparison.mismatches, 0,
                "{action}: {:?}",
                run.comparison
            );
            assert!(run.cosine > 0.999, "{action}: cosine {}", run.cosine);
        }
    }

    #[test]
    fn an_unwritten_column_block_is_caught() {
        // N = 384 in blocks of tile_n 64 x herd_n 4 = 256: the last 128 columns
        // are never written.
        let run = check(
            "a action select-tiling kernel=gemm shape=[256,128,384] tile=[32,128,32,64]",
            &arch(),
        )
        .expect("runs");
        assert!(
            run.comparison.mismatches > 256 * 100,
            "{:?}",
            run.comparison
        );
    }

    #[test]
    fn a_refused_configuration_is_reported_as_refused() {
        let refused = check(
            "a action select-tiling kernel=eltwise_add shape=[65536] herd=[8,1] tile=[8192]",
            &arch(),
        );
        assert!(
            matches!(refused, Err(CheckError::Refused(_))),
            "{refused:?}"
        );
    }

    #[test]
    fn shapes_of_the_wrong_rank_are_reported() {
        let arch = arch();
        let device = Device::npu2();
        let lists = param_lists("a action select-tiling kernel=gemm shape=[256,128]");
        let ctx = Context {
            arch: &arch,
            device: &device,
            lm_head_parts: 1,
        };
        let err = kernel::launch(Params(&lists[0]), ctx).expect_err("rank 2");
        assert_eq!(
            err,
            KernelChoiceError::Shape {
                kernel: "gemm",
                expected: 3,
                got: vec![256, 128]
            }
        );
    }
}
