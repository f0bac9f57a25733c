//! Linear layers of the reference, `y = x · Wᵀ` with W a bf16 `[out, in]`
//! matrix and x, y in f32.
//!
//! One token (decode) is a GEMV: memory-bound, so W streams once as bf16 bits
//! widened by a shift, rows split over rayon. Several tokens (prefill) go to
//! the blocked bf16 GEMM in `gemm.rs`. `matmul_sgemm` is the alternative it was
//! measured against (`matrixmultiply`'s sgemm on f32 panels of W), kept so
//! `skillc bench oracle` can show the comparison on the machine at hand.
//!
//! A packed (GGUF) matrix is read at its exact dequantized values: the GEMV
//! reads the stored blocks (`quant::WeightFormat::dot`), so decode streams
//! the weights as stored; the GEMM dequantizes panels of rows to f32 for
//! sgemm.

use rayon::prelude::*;

use crate::bf16;
use crate::model::quant;
use crate::model::tensor::{BfTensor, PackedRows};
use crate::threads;

/// Weight rows converted to f32 per sgemm call.
const PANEL_ROWS: usize = 256;
/// Output rows per rayon task in a GEMV.
const GEMV_ROWS_PER_TASK: usize = 32;
/// Independent accumulators of the dot product: enough to hide add latency.
const LANES: usize = 32;

/// `y[t, o] = Σ_i x[t, i] · w[o, i]` for `t` rows of `x` (row-major
/// `[t, in]`); `y` is `[t, out]`. One row is a GEMV, several the blocked bf16
/// GEMM.
pub fn matmul(x: &[f32], t: usize, w: &BfTensor, y: &mut [f32]) {
    if let Some(rows) = w.packed_rows() {
        assert_eq!(
            x.len(),
            t * rows.cols(),
            "{}: input is not [t, in]",
            w.name()
        );
        assert_eq!(
            y.len(),
            t * rows.rows(),
            "{}: output is not [t, out]",
            w.name()
        );
        return if t == 1 {
            packed_gemv(rows, x, y)
        } else {
            packed_sgemm(rows, x, t, y)
        };
    }
    if t == 1 {
        gemv(w, x, y);
    } else {
        super::gemm::gemm_bf16(x, t, w, y);
    }
}

/// The same product through `matrixmultiply`'s sgemm on f32 panels of W.
pub fn matmul_sgemm(x: &[f32], t: usize, w: &BfTensor, y: &mut [f32]) {
    let (out, inner) = (w.rows(), w.cols());
    assert_eq!(x.len(), t * inner, "{}: input is not [t, in]", w.name());
    assert_eq!(y.len(), t * out, "{}: output is not [t, out]", w.name());
    let bits = w.bits();
    sgemm_panels(out, inner, x, t, y, &|first, dst| {
        bf16::slice_to_f32(&bits[first * inner..(first + 1) * inner], dst)
    });
}

/// A packed matrix through sgemm: panels of rows dequantized to f32.
fn packed_sgemm(w: &PackedRows, x: &[f32], t: usize, y: &mut [f32]) {
    sgemm_panels(w.rows(), w.cols(), x, t, y, &|row, dst| {
        w.row_values(row, dst)
    });
}

/// `y = x · Wᵀ` with W `[out, inner]` produced a row at a time by `row`
/// (row index, destination), `PANEL_ROWS` rows per sgemm call. Panels are the
/// parallel tasks: each converts its rows and multiplies them on its own.
fn sgemm_panels(
    out: usize,
    inner: usize,
    x: &[f32],
    t: usize,
    y: &mut [f32],
    row: &(dyn Fn(usize, &mut [f32]) + Sync),
) {
    assert_eq!(x.len(), t * inner, "input is not [t, in]");
    assert_eq!(y.len(), t * out, "output is not [t, out]");
    let starts: Vec<usize> = (0..out).step_by(PANEL_ROWS).collect();
    let blocks: Vec<Vec<f32>> = starts
        .par_iter()
        .with_min_len(threads::min_len(PANEL_ROWS * inner * t))
        .map(|&start| {
            let rows = PANEL_ROWS.min(out - start);
            let mut panel = vec![0.0f32; rows * inner];
            for (r, dst) in panel.chunks_exact_mut(inner).enumerate() {
                row(start + r, dst);
            }
            let mut block = vec![0.0f32; t * rows];
            // SAFETY: A is x ([t, inner], row stride inner), B is the panel
            // seen as [inner, rows] (column stride inner), C is the block
            // ([t, rows], row stride rows); every index stays inside the
            // slices, whose lengths were asserted or allocated above.
            unsafe {
                matrixmultiply::sgemm(
                    t,
                    inner,
                    rows,
                    1.0,
                    x.as_ptr(),
                    inner as isize,
                    1,
                    panel.as_ptr(),
                    1,
                    inner as isize,
                    0.0,
                    block.as_mut_ptr(),
                    rows as isize,
                    1,
                );
            }
            block
        })
        .collect();
    for (start, block) in starts.iter().zip(&blocks) {
        let rows = block.len() / t.max(1);
        for (y_row, b_row) in y.chunks_exact_mut(out).zip(block.chunks_exact(rows.max(1))) {
            y_row[*start..start + rows].copy_from_slice(b_row);
        }
    }
}

/// `y[o] = Σ_i w[o, i] · x[i]`.
pub fn gemv(w: &BfTensor, x: &[f32], y: &mut [f32]) {
    let inner = w.cols();
    assert_eq!(x.len(), inner, "{}: input length", w.name());
    assert_eq!(y.len(), w.rows(), "{}: output length", w.name());
    let bits = w.bits();
    y.par_chunks_mut(GEMV_ROWS_PER_TASK)
        .with_min_len(threads::min_len(GEMV_ROWS_PER_TASK * inner))
        .enumerate()
        .for_each(|(task, ys)| {
            let first = task * GEMV_ROWS_PER_TASK;
            let rows = &bits[first * inner..(first + ys.len()) * inner];
            dot_rows(rows, inner, x, ys);
        });
}

/// `y[o] = Σ_i w[o, i] · x[i]` over the stored blocks of a packed matrix.
pub fn packed_gemv(w: &PackedRows, x: &[f32], y: &mut [f32]) {
    let sums = quant::block_sums(x);
    y.par_chunks_mut(GEMV_ROWS_PER_TASK)
        .with_min_len(threads::min_len(GEMV_ROWS_PER_TASK * w.cols()))
        .enumerate()
        .for_each(|(task, ys)| {
            let first = task * GEMV_ROWS_PER_TASK;
            packed_rows(w, first, x, &sums, ys);
        });
}

/// Dot products of rows `first..first + ys.len()` of a packed matrix.
fn packed_rows(w: &PackedRows, first: usize, x: &[f32], sums: &[f32], ys: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present, checked just above.
            unsafe { packed_rows_avx2(w, first, x, sums, ys) };
            return;
        }
    }
    packed_rows_portable(w, first, x, sums, ys);
}

/// The same code with AVX2 enabled (wider vectors; no FMA contraction, so
/// the results equal the portable path's bit for bit).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn packed_rows_avx2(w: &PackedRows, first: usize, x: &[f32], sums: &[f32], ys: &mut [f32]) {
    packed_rows_portable(w, first, x, sums, ys);
}

#[inline(always)]
fn packed_rows_portable(w: &PackedRows, first: usize, x: &[f32], sums: &[f32], ys: &mut [f32]) {
    let format = w.format();
    for (r, out) in ys.iter_mut().enumerate() {
        *out = format.dot(w.row(first + r), x, sums);
    }
}

/// Adds a bias (its exact values) to every row of `y` (`[t, n]`).
pub fn add_bias(y: &mut [f32], bias: &BfTensor) {
    let bias = bias.values();
    for row in y.chunks_exact_mut(bias.len()) {
        for (v, b) in row.iter_mut().zip(&bias) {
            *v += b;
        }
    }
}

/// One dot product per row of `rows` (`ys.len()` rows of `inner` values).
fn dot_rows(rows: &[u16], inner: usize, x: &[f32], ys: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present, checked just above.
            unsafe { dot_rows_avx2(rows, inner, x, ys) };
            return;
        }
    }
    dot_rows_portable(rows, inner, x, ys);
}

/// The same code compiled with AVX2 enabled: wider vectors only. Rust never
/// contracts `a * b + c` into an FMA, so results equal the portable path's bit
/// for bit, on every machine.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_rows_avx2(rows: &[u16], inner: usize, x: &[f32], ys: &mut [f32]) {
    dot_rows_portable(rows, inner, x, ys);
}

#[inline(always)]
fn dot_rows_portable(rows: &[u16], inner: usize, x: &[f32], ys: &mut [f32]) {
    for (y, row) in ys.iter_mut().zip(rows.chunks_exact(inner)) {
        *y = dot(row, x);
    }
}

/// Dot product of a bf16 row with an f32 vector: `LANES` running sums, reduced
/// pairwise, then the tail. This order is the reference GEMV's numerics.
#[inline(always)]
pub fn dot(row: &[u16], x: &[f32]) -> f32 {
    let n = row.len().min(x.len());
    let body = n / LANES * LANES;
    let mut acc = [0.0f32; LANES];
    for (r, v) in row[..body]
        .chunks_exact(LANES)
        .zip(x[..body].chunks_exact(LANES))
    {
        for l in 0..LANES {
            acc[l] += bf16::to_f32(r[l]) * v[l];
        }
    }
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            acc[l] += acc[l + width];
        }
    }
    let tail: f32 = row[body..n]
        .iter()
        .zip(&x[body..n])
        .map(|(&r, &v)| bf16::to_f32(r) * v)
        .sum();
    acc[0] + tail
}

/// Dot product of two f32 vectors with eight running sums (attention scores).
#[inline]
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    const W: usize = 8;
    let n = a.len().min(b.len());
    let body = n / W * W;
    let mut acc = [0.0f32; W];
    for (p, q) in a[..body].chunks_exact(W).zip(b[..body].chunks_exact(W)) {
        for l in 0..W {
            acc[l] += p[l] * q[l];
        }
    }
    let tail: f32 = a[body..n].iter().zip(&b[body..n]).map(|(p, q)| p * q).sum();
    ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7])) + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    fn random_matrix(rows: usize, cols: usize, seed: u64) -> BfTensor {
        let mut rng = SplitMix64::new(seed);
        let bits = (0..rows * cols)
            .map(|_| bf16::from_f32(rng.next_normal()))
            .collect();
        BfTensor::owned("w", vec![rows, cols], bits)
    }

    fn naive(x: &[f32], t: usize, w: &BfTensor) -> Vec<f64> {
        let (out, inner) = (w.rows(), w.cols());
        let wf = w.to_f32_vec();
        let mut y = vec![0.0f64; t * out];
        for r in 0..t {
            for o in 0..out {
                y[r * out + o] = (0..inner)
                    .map(|i| x[r * inner + i] as f64 * wf[o * inner + i] as f64)
                    .sum();
            }
        }
        y
    }

    #[test]
    fn gemv_and_gemm_match_a_f64_product() {
        // Odd sizes exercise tails, several panels and several GEMV tasks.
        let (out, inner) = (PANEL_ROWS + 37, 75);
        let w = random_matrix(out, inner, 1);
        let mut rng = SplitMix64::new(2);
        for t in [1, 3] {
            let x: Vec<f32> = (0..t * inner).map(|_| rng.next_normal()).collect();
            let want = naive(&x, t, &w);
            for kernel in [matmul, matmul_sgemm] {
                let mut y = vec![0.0f32; t * out];
                kernel(&x, t, &w, &mut y);
                for (got, want) in y.iter().zip(&want) {
                    assert!((*got as f64 - want).abs() < 1e-4, "t={t}: {got} vs {want}");
                }
            }
        }
    }

    #[test]
    fn simd_and_portable_dot_agree_bitwise() {
        let w = random_matrix(5, 131, 3);
        let x: Vec<f32> = (0..131).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut a = vec![0.0; 5];
        let mut b = vec![0.0; 5];
        dot_rows(w.bits(), 131, &x, &mut a);
        dot_rows_portable(w.bits(), 131, &x, &mut b);
        assert_eq!(a, b);
    }
}
