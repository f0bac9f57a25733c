//! GEMM `C[M×N] = A[M×K] · B[K×N]` on a herd of compute tiles: bf16
//! operands (exact products, or BFP16 blocks along K), f32 accumulation,
//! a bf16 (fused cast or drain) or f32 epilogue.
//!
//! The silent-corruption case is emulated, not refused: the herd walks N in
//! blocks of `tile_n · herd_rows` and the toolchain does not assert that they
//! divide N (calibration §1, lesson 5), so columns past the last full block
//! are never written and keep whatever the output buffer held (zeros for a
//! fresh buffer). A validation gate then sees mismatches > 0, which is how the
//! reference deployment found it. `GemmSpec::unwritten_columns` names the
//! cause for a debugger.

use serde::{Deserialize, Serialize};

use super::{operand, refuse_if_any, Dtype, Herd, Kernel, KernelError, Precision};
use crate::bf16;
use crate::threads;
use crate::xdna2::constraints::{ChannelUse, Checker, Constraint, ConstraintViolation};
use crate::xdna2::device::Device;
use crate::xdna2::numerics::bfp16_rows;
use rayon::prelude::*;

/// How the f32 accumulators leave the tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Epilogue {
    /// Cast to bf16 in place inside the C tile (no extra L1).
    FusedCast,
    /// Drain through a separate bf16 output tile (extra L1).
    Drain,
    /// Write the f32 accumulators.
    F32,
}

/// Per-tile tiling of one GEMM launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GemmTile {
    pub tile_m: usize,
    pub tile_k_l2: usize,
    pub tile_k_l1: usize,
    pub tile_n: usize,
    pub epilogue: Epilogue,
}

/// One GEMM launch: shape, herd, tiling, precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GemmSpec {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub herd: Herd,
    pub tile: GemmTile,
    pub precision: Precision,
    pub out_dtype: Dtype,
}

/// The B operand's storage: `[K,N]` as the hardware reads it (pre-transposed
/// weights), or `[N,K]` as checkpoints store projections.
#[derive(Debug, Clone, Copy)]
pub enum BOperand<'a> {
    KxN(&'a [u16]),
    NxK(&'a [u16]),
}

impl BOperand<'_> {
    fn data(&self) -> &[u16] {
        match self {
            BOperand::KxN(d) | BOperand::NxK(d) => d,
        }
    }
}

const TILE_N_CHOICES: [usize; 5] = [128, 64, 32, 16, 8];
const TILE_M_CHOICES: [usize; 3] = [64, 32, 16];
const TILE_K_L2_CHOICES: [usize; 4] = [256, 128, 64, 32];
const TILE_K_L1: usize = 32;
/// The matrix unit's MMA is 8×8×8.
const MMA: usize = 8;

impl GemmSpec {
    /// The reference deployment's choice for a shape on the full array: the
    /// largest registry tile that divides the shape (tile_n shrinks and
    /// herd_n stays 4 for non-512-aligned N; tile_k_l2 shrinks for wide N to
    /// respect the DMA stride limit).
    pub fn select(
        device: &Device,
        m: usize,
        k: usize,
        n: usize,
        precision: Precision,
        out_dtype: Dtype,
    ) -> GemmSpec {
        let herd = Herd([device.columns, device.compute_rows]);
        let tile_m = TILE_M_CHOICES
            .into_iter()
            .find(|t| m % (t * herd.cols()) == 0)
            .unwrap_or(16);
        let tile_n = TILE_N_CHOICES
            .into_iter()
            .find(|t| n % (t * herd.rows()) == 0)
            .unwrap_or(MMA);
        let tile_k_l2 = TILE_K_L2_CHOICES
            .into_iter()
            .find(|t| k % t == 0 && stride_words(*t, n) <= device.limits.dma_stride_max_words)
            .unwrap_or(32);
        let epilogue = match out_dtype {
            Dtype::Bf16 => Epilogue::FusedCast,
            Dtype::F32 => Epilogue::F32,
        };
        GemmSpec {
            m,
            k,
            n,
            herd,
            tile: GemmTile {
                tile_m,
                tile_k_l2,
                tile_k_l1: TILE_K_L1,
                tile_n,
                epilogue,
            },
            precision,
            out_dtype,
        }
    }

    /// Columns the herd computes: whole blocks of `tile_n · herd_rows`.
    pub fn written_columns(&self) -> usize {
        let block = self.tile.tile_n * self.herd.rows();
        if block == 0 {
            return 0;
        }
        (self.n / block) * block
    }

    /// Columns left unwritten by the silent-corruption case (0 when N divides).
    pub fn unwritten_columns(&self) -> usize {
        self.n - self.written_columns()
    }

    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.k as f64 * self.n as f64
    }

    pub fn check(&self, device: &Device) -> Vec<ConstraintViolation> {
        let mut c = Checker::new(device, Kernel::Gemm);
        let t = self.tile;
        let (cols, rows) = (self.herd.cols(), self.herd.rows());
        c.herd_fits(cols, rows);
        let mma_ok = [t.tile_m, t.tile_n, t.tile_k_l1]
            .iter()
            .all(|v| *v > 0 && v % MMA == 0);
        c.require(mma_ok, Constraint::Alignment, || {
            format!(
                "tile_m {}, tile_k_l1 {}, tile_n {} must be multiples of the {MMA}x{MMA}x{MMA} MMA",
                t.tile_m, t.tile_k_l1, t.tile_n
            )
        });
        c.whole_row_blocks(self.m, t.tile_m, cols);
        let k_ok = t.tile_k_l1 > 0 && t.tile_k_l2 % t.tile_k_l1 == 0 && self.k % t.tile_k_l2 == 0;
        c.require(k_ok, Constraint::Alignment, || {
            format!(
                "K {} must be a multiple of tile_k_l2 {}, itself a multiple of tile_k_l1 {}",
                self.k, t.tile_k_l2, t.tile_k_l1
            )
        });
        let epilogue_ok = (t.epilogue == Epilogue::F32) == (self.out_dtype == Dtype::F32);
        c.require(epilogue_ok, Constraint::Shape, || {
            format!(
                "epilogue {:?} does not produce {:?} output",
                t.epilogue, self.out_dtype
            )
        });
        let drain = if t.epilogue == Epilogue::Drain {
            t.tile_m * t.tile_n * 2
        } else {
            0
        };
        c.l1(&[
            ("A 2x", 2 * t.tile_m * t.tile_k_l1 * 2),
            ("B 2x", 2 * t.tile_k_l1 * t.tile_n * 2),
            ("C f32", t.tile_m * t.tile_n * 4),
            ("drain bf16", drain),
        ]);
        c.l2(&[
            ("A panel 2x", 2 * t.tile_m * t.tile_k_l2 * 2),
            ("B panel 2x", 2 * t.tile_k_l2 * t.tile_n * 2),
            (
                "C staging",
                t.tile_m * t.tile_n * rows * self.out_dtype.bytes(),
            ),
        ]);
        let words = stride_words(t.tile_k_l2, self.n);
        let max = device.limits.dma_stride_max_words;
        c.require(words <= max, Constraint::DmaStride, || {
            format!(
                "B stride tile_k_l2 {} x N {} = {words} words exceeds [1, {max}]",
                t.tile_k_l2, self.n
            )
        });
        c.channels(
            cols,
            ChannelUse {
                compute_in: 2,
                compute_out: 1,
                mem_in: 2 + rows,
                mem_out: 3,
                shim_in: 2,
                shim_out: 1,
            },
        );
        c.finish()
    }
}

/// 32-bit words of the B panel's DMA stride: one tile_k_l2 slab of bf16 N.
fn stride_words(tile_k_l2: usize, n: usize) -> usize {
    tile_k_l2 * n * 2 / 4
}

/// Runs a GEMM with a bf16 epilogue into a fresh (zeroed) output.
pub fn gemm(
    device: &Device,
    spec: &GemmSpec,
    a: &[u16],
    b: BOperand<'_>,
) -> Result<Vec<u16>, KernelError> {
    let mut out = vec![0u16; spec.m * spec.n];
    gemm_into(device, spec, a, b, &mut out)?;
    Ok(out)
}

/// Runs a GEMM with a bf16 epilogue into `out`, which keeps its old contents
/// in the columns the silent-corruption case leaves unwritten.
pub fn gemm_into(
    device: &Device,
    spec: &GemmSpec,
    a: &[u16],
    b: BOperand<'_>,
    out: &mut [u16],
) -> Result<(), KernelError> {
    validate(device, spec, a, b)?;
    operand(Kernel::Gemm, "C", out, spec.m * spec.n)?;
    let acc = accumulate(spec, a, b);
    let written = spec.written_columns();
    for (row_out, row_acc) in out.chunks_mut(spec.n).zip(acc.chunks(spec.n)) {
        bf16::slice_from_f32(&row_acc[..written], &mut row_out[..written]);
    }
    Ok(())
}

/// Runs a GEMM with the f32 epilogue; unwritten columns are zero.
pub fn gemm_f32(
    device: &Device,
    spec: &GemmSpec,
    a: &[u16],
    b: BOperand<'_>,
) -> Result<Vec<f32>, KernelError> {
    validate(device, spec, a, b)?;
    Ok(accumulate(spec, a, b))
}

fn validate(
    device: &Device,
    spec: &GemmSpec,
    a: &[u16],
    b: BOperand<'_>,
) -> Result<(), KernelError> {
    refuse_if_any(Kernel::Gemm, spec.check(device))?;
    operand(Kernel::Gemm, "A", a, spec.m * spec.k)?;
    operand(Kernel::Gemm, "B", b.data(), spec.k * spec.n)
}

/// f32 accumulators `[M,N]` of the written columns (others zero).
fn accumulate(spec: &GemmSpec, a: &[u16], b: BOperand<'_>) -> Vec<f32> {
    let (m, k, n) = (spec.m, spec.k, spec.n);
    let written = spec.written_columns();
    let mut c = vec![0.0f32; m * n];
    if written == 0 || m == 0 {
        return c;
    }
    let mut a32 = bf16::to_f32_vec(a);
    // BFP16 blocks run along K, the reduction axis, for both operands.
    let (b32, rsb, csb) = match (spec.precision, b) {
        (Precision::Bf16, BOperand::KxN(d)) => (bf16::to_f32_vec(d), n as isize, 1),
        (Precision::Bf16, BOperand::NxK(d)) => (bf16::to_f32_vec(d), 1, k as isize),
        (Precision::Bfp16, _) => {
            bfp16_rows(&mut a32, k);
            let mut nk = to_nxk(b, k, n);
            bfp16_rows(&mut nk, k);
            (nk, 1, k as isize)
        }
    };
    // Blocks of rows of A and C in parallel, the same blocks whatever the
    // thread count; each C value is one sgemm's dot product over all of K, so
    // the blocking does not change it.
    c.par_chunks_mut(SGEMM_ROWS * n)
        .zip(a32.par_chunks(SGEMM_ROWS * k))
        .with_min_len(threads::min_len(SGEMM_ROWS * k * written))
        .for_each(|(c_rows, a_rows)| {
            let rows = c_rows.len() / n;
            // SAFETY: the pointers cover rows·k, k·n and rows·n f32 values laid
            // out with the given strides; only the first `written` ≤ n columns
            // of C are touched.
            unsafe {
                matrixmultiply::sgemm(
                    rows,
                    k,
                    written,
                    1.0,
                    a_rows.as_ptr(),
                    k as isize,
                    1,
                    b32.as_ptr(),
                    rsb,
                    csb,
                    0.0,
                    c_rows.as_mut_ptr(),
                    n as isize,
                    1,
                );
            }
        });
    c
}

/// Rows of A (and C) per sgemm call.
const SGEMM_ROWS: usize = 64;

/// B widened to f32 in `[N,K]` order.
fn to_nxk(b: BOperand<'_>, k: usize, n: usize) -> Vec<f32> {
    match b {
        BOperand::NxK(d) => bf16::to_f32_vec(d),
        BOperand::KxN(d) => {
            let mut t = vec![0.0f32; n * k];
            for (kk, row) in d.chunks(n).enumerate() {
                for (j, &v) in row.iter().enumerate() {
                    t[j * k + kk] = bf16::to_f32(v);
                }
            }
            t
        }
    }
}
