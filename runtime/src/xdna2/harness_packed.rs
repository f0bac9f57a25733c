//! The harness's check of the packed 4-bit GEMV (`kernels::gemv_packed`): the launch
//! checked against the device at its own shape (a refusal is a result), run on
//! the stored blocks, and compared with the oracle's f32 product on the exact
//! dequantized weights (`w = d·q + m` from the same bytes, `linear::packed_gemv`),
//! so a kernel that unpacks a nibble, a scale or a minimum wrongly fails here.
//!
//! The tolerance is the registry's GEMV one with its atol widened by what the
//! kernel's documented numerics cost against that reference: it unpacks each
//! weight to bf16, a relative error of at most 2^-8 per weight, so an output
//! element is off by at most `2^-8 · Σ_j |w_ij·x_j|`; the widest row's bound is
//! the atol (the registry's rtol stays for the bf16 output).

use super::harness::{draws, Harness, HarnessError, KernelRun, RunOutcome};
use super::kernels::gemv_packed::NibbleOrder;
use super::kernels::{gemv_packed, GemvSpec, Kernel, KernelError, Precision};
use super::numerics::{self, cosine, Tolerance};
use crate::bf16;
use crate::model::oracle::linear;
use crate::model::tensor::PackedRows;

/// Relative error of rounding one dequantized weight to bf16 (8 significant bits).
const BF16_UNIT_ROUNDOFF: f64 = 1.0 / 256.0;

impl Harness<'_> {
    /// Runs the packed GEMV `spec` on `w` (`m × k` blocks) with a seeded input
    /// (and residual, when the spec fuses one) against the dequantized reference.
    pub fn check_packed_gemv(
        &self,
        spec: &GemvSpec,
        w: &PackedRows,
    ) -> Result<KernelRun, HarnessError> {
        self.check_packed_gemv_against(spec, w, w, NibbleOrder::Gguf)
    }

    /// [`Self::check_packed_gemv`] with the kernel reading the nibbles in
    /// `order` (a planted fault swaps them; the reference never does).
    pub fn check_packed_gemv_ordered(
        &self,
        spec: &GemvSpec,
        w: &PackedRows,
        order: NibbleOrder,
    ) -> Result<KernelRun, HarnessError> {
        self.check_packed_gemv_against(spec, w, w, order)
    }

    /// [`Self::check_packed_gemv`] with the kernel reading `kernel_w` in
    /// `order` and the reference `reference_w` (the same matrix unless a test
    /// plants a fault).
    pub(crate) fn check_packed_gemv_against(
        &self,
        spec: &GemvSpec,
        kernel_w: &PackedRows,
        reference_w: &PackedRows,
        order: NibbleOrder,
    ) -> Result<KernelRun, HarnessError> {
        let g = spec;
        let x = draws(self.seed, "gemv-x", g.k, 1.0);
        let x32 = bf16::to_f32_vec(&x);
        let tolerance = packed_tolerance(reference_w, &x32);
        let run = |outcome| KernelRun {
            kernel: Kernel::Gemv,
            shape: gemv_packed::label(spec),
            ran_shape: gemv_packed::label(spec),
            tolerance,
            outcome,
        };
        let violations = spec.check(self.device);
        if !violations.is_empty() {
            return Ok(run(RunOutcome::Refused(violations)));
        }
        let residual = g.residual.then(|| draws(self.seed, "gemv-r", g.m, 1.0));
        let mut reference = vec![0.0f32; g.m];
        linear::packed_gemv(reference_w, &x32, &mut reference);
        if let Some(r) = &residual {
            for (y, &b) in reference.iter_mut().zip(r) {
                *y += bf16::to_f32(b);
            }
        }
        let out = match gemv_packed::gemv_packed_ordered(
            self.device,
            spec,
            kernel_w,
            &x,
            residual.as_deref(),
            order,
        ) {
            Ok(out) => bf16::to_f32_vec(&out),
            Err(KernelError::Refused { violations, .. }) => {
                return Ok(run(RunOutcome::Refused(violations)))
            }
            Err(e) => return Err(HarnessError::Kernel(e)),
        };
        Ok(run(RunOutcome::Compared {
            comparison: numerics::compare(&out, &reference, tolerance),
            cosine: cosine(&out, &reference),
        }))
    }
}

/// The GEMV registry tolerance, atol widened to the weight-rounding bound of
/// the widest row of `w` on `x` (module documentation).
fn packed_tolerance(w: &PackedRows, x: &[f32]) -> Tolerance {
    let registry = numerics::tolerance(Kernel::Gemv, Precision::Bf16);
    let mut values = vec![0.0f32; w.cols()];
    let widest = (0..w.rows())
        .map(|r| {
            w.row_values(r, &mut values);
            values
                .iter()
                .zip(x)
                .map(|(a, b)| (a * b).abs() as f64)
                .sum::<f64>()
        })
        .fold(0.0f64, f64::max);
    Tolerance {
        rtol: registry.rtol,
        atol: registry.atol + BF16_UNIT_ROUNDOFF * widest,
        source: "ours: the registry's GEMV tolerance, atol plus the bound of unpacking every weight to bf16 (2^-8 · max_i Σ_j |w_ij·x_j|) against the exact dequantized weights",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::arch::Architecture;
    use crate::model::config::load_config;
    use crate::model::quant::WeightFormat;
    use crate::xdna2::device::Device;
    use crate::xdna2::harness::DrawnWeights;
    use crate::xdna2::kernels::{Herd, PackedFormat};

    fn smollm2() -> Architecture {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/smollm2-tiny/config.json"
        );
        load_config(std::path::Path::new(path)).expect("fixture config")
    }

    fn harness_on<'a>(device: &'a Device, arch: &'a Architecture) -> Harness<'a> {
        Harness {
            device,
            arch,
            weights: &DrawnWeights { seed: 1 },
            rope_table: None,
            seed: 3,
        }
    }

    #[test]
    fn packed_gemv_passes_against_the_dequantized_weights_and_a_dropped_minimum_fails() {
        let device = Device::npu2();
        let arch = smollm2();
        let (m, k) = (128, 576);
        let w = crate::xdna2::kernels::gemv_packed::tests::q4_1_rows(m, k, 11);
        let spec = gemv_packed::select(&device, m, k, Herd::ROW, PackedFormat::Q4_1);
        let harness = harness_on(&device, &arch);
        let run = harness.check_packed_gemv(&spec, &w).unwrap();
        assert!(run.passed(), "{run:?}");
        assert_eq!(run.shape, "128x576 q4_1");

        // One block's minimum left out by the kernel: caught.
        let mut bytes = Vec::new();
        for r in 0..m {
            bytes.extend_from_slice(w.row(r));
        }
        bytes[2] = 0;
        bytes[3] = 0;
        let planted = PackedRows::owned(WeightFormat::Q4_1, m, k, bytes);
        let run = harness
            .check_packed_gemv_against(&spec, &planted, &w, NibbleOrder::Gguf)
            .unwrap();
        let comparison = run.comparison().expect("ran");
        assert!(!run.passed());
        assert_eq!(comparison.first_mismatch, Some(0), "{comparison:?}");

        // The nibbles of every byte read in the wrong order: caught.
        let run = harness
            .check_packed_gemv_ordered(&spec, &w, NibbleOrder::Swapped)
            .unwrap();
        assert!(!run.passed(), "{run:?}");
    }

    #[test]
    fn a_packed_launch_the_device_refuses_is_a_result() {
        let device = Device::npu2();
        let arch = smollm2();
        let w = crate::xdna2::kernels::gemv_packed::tests::q4_1_rows(64, 576, 2);
        let mut spec = gemv_packed::select(&device, 64, 576, Herd::ROW, PackedFormat::Q4_1);
        spec.tile.k_split = 36;
        let run = harness_on(&device, &arch)
            .check_packed_gemv(&spec, &w)
            .unwrap();
        assert!(matches!(run.outcome, RunOutcome::Refused(_)), "{run:?}");
    }
}
