//! A blocked GEMM that reads bf16 weights directly: `y = x · Wᵀ` for several
//! rows of x (prefill). Each register tile holds `ROWS` weight rows against
//! `TOKENS` rows of x, widening bf16 to f32 in registers, so weights are never
//! converted or packed in memory (an sgemm needs both: two extra passes over
//! every weight, which cost more than the arithmetic at prefill sizes; `skillc
//! bench oracle` times the two side by side).
//!
//! Numerics: per output, eight running sums over k (one per vector lane),
//! reduced pairwise, then the scalar tail. The AVX2 path fuses each multiply-add
//! (FMA); the portable path rounds the product first. The two differ in the
//! last bits, well inside every tolerance the oracle is used with.

use rayon::prelude::*;

use crate::bf16;
use crate::model::tensor::BfTensor;
use crate::threads;

/// Weight rows per register tile.
const ROWS: usize = 3;
/// Rows of x per register tile.
const TOKENS: usize = 4;
/// Weight rows per rayon task. Within a task each token tile (4 rows of x) is
/// held in L1 while the task's weights (24 rows, in L2) pass by it.
const ROWS_PER_TASK: usize = 24;
const LANES: usize = 8;

/// `y[t, o] = Σ_i x[t, i] · w[o, i]`; `x` is `[t, in]`, `y` is `[t, out]`.
pub fn gemm_bf16(x: &[f32], t: usize, w: &BfTensor, y: &mut [f32]) {
    let (out, inner) = (w.rows(), w.cols());
    assert_eq!(x.len(), t * inner, "{}: input is not [t, in]", w.name());
    assert_eq!(y.len(), t * out, "{}: output is not [t, out]", w.name());
    let bits = w.bits();
    // Computed transposed ([out, t]) so each task owns a contiguous slice.
    let mut transposed = vec![0.0f32; out * t];
    transposed
        .par_chunks_mut(ROWS_PER_TASK * t)
        .with_min_len(threads::min_len(ROWS_PER_TASK * t * inner))
        .enumerate()
        .for_each(|(task, yt)| {
            let first = task * ROWS_PER_TASK;
            let rows = yt.len() / t;
            let w_block = &bits[first * inner..(first + rows) * inner];
            block(w_block, inner, x, t, yt);
        });
    for (o, column) in transposed.chunks_exact(t).enumerate() {
        for (r, &v) in column.iter().enumerate() {
            y[r * out + o] = v;
        }
    }
}

/// All tiles of one block of weight rows against every row of x.
fn block(w: &[u16], inner: usize, x: &[f32], t: usize, yt: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: AVX2 and FMA are present, checked just above.
            unsafe { block_avx2(w, inner, x, t, yt) };
            return;
        }
    }
    block_with(w, inner, x, t, yt, portable::tile);
}

type TileFn = fn(&[&[u16]], &[&[f32]], &mut [[f32; TOKENS]; ROWS]);

/// Walks the block in ROWS × TOKENS tiles (smaller at the edges), token tiles
/// outermost.
#[inline(always)]
fn block_with(w: &[u16], inner: usize, x: &[f32], t: usize, yt: &mut [f32], tile: TileFn) {
    let rows = w.len() / inner;
    let mut sums = [[0.0f32; TOKENS]; ROWS];
    for c0 in (0..t).step_by(TOKENS) {
        let nc = TOKENS.min(t - c0);
        let x_rows: Vec<&[f32]> = (c0..c0 + nc).map(|c| &x[c * inner..][..inner]).collect();
        for r0 in (0..rows).step_by(ROWS) {
            let nr = ROWS.min(rows - r0);
            let w_rows: Vec<&[u16]> = (r0..r0 + nr).map(|r| &w[r * inner..][..inner]).collect();
            tile(&w_rows, &x_rows, &mut sums);
            for (r, row_sums) in sums.iter().enumerate().take(nr) {
                yt[(r0 + r) * t + c0..][..nc].copy_from_slice(&row_sums[..nc]);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn block_avx2(w: &[u16], inner: usize, x: &[f32], t: usize, yt: &mut [f32]) {
    block_with(w, inner, x, t, yt, |w, x, sums| {
        // SAFETY: only reached from `block_avx2`, i.e. with AVX2 and FMA present.
        unsafe { avx2::tile(w, x, sums) }
    });
}

/// Scalar tail of a dot product (the last `inner % LANES` values).
#[inline(always)]
fn tail(w: &[u16], x: &[f32], from: usize) -> f32 {
    w[from..]
        .iter()
        .zip(&x[from..])
        .map(|(&a, &b)| bf16::to_f32(a) * b)
        .sum()
}

/// Pairwise sum of the eight lanes.
#[inline(always)]
fn reduce(l: [f32; LANES]) -> f32 {
    ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}

mod portable {
    use super::*;

    /// One tile with arrays of lanes; the compiler vectorises the lane loops.
    pub(super) fn tile(w: &[&[u16]], x: &[&[f32]], sums: &mut [[f32; TOKENS]; ROWS]) {
        let inner = w[0].len();
        let body = inner / LANES * LANES;
        let mut acc = [[[0.0f32; LANES]; TOKENS]; ROWS];
        for k in (0..body).step_by(LANES) {
            for (r, wr) in w.iter().enumerate() {
                let mut wv = [0.0f32; LANES];
                for l in 0..LANES {
                    wv[l] = bf16::to_f32(wr[k + l]);
                }
                for (c, xc) in x.iter().enumerate() {
                    for l in 0..LANES {
                        acc[r][c][l] += wv[l] * xc[k + l];
                    }
                }
            }
        }
        for (r, wr) in w.iter().enumerate() {
            for (c, xc) in x.iter().enumerate() {
                sums[r][c] = reduce(acc[r][c]) + tail(wr, xc, body);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::*;

    /// Widens 8 bf16 values at `p` to f32.
    #[inline(always)]
    unsafe fn load_bf16(p: *const u16) -> __m256 {
        let bits = _mm_loadu_si128(p.cast());
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16))
    }

    /// One tile: up to ROWS × TOKENS accumulators of 8 lanes.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile(w: &[&[u16]], x: &[&[f32]], sums: &mut [[f32; TOKENS]; ROWS]) {
        let inner = w[0].len();
        let body = inner / LANES * LANES;
        if w.len() == ROWS && x.len() == TOKENS {
            full_tile(w, x, body, sums);
        } else {
            edge_tile(w, x, body, sums);
        }
        for (r, wr) in w.iter().enumerate() {
            for (c, xc) in x.iter().enumerate() {
                sums[r][c] += tail(wr, xc, body);
            }
        }
    }

    /// The full tile with every accumulator in a register (12 + 3 + 1 of 16).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn full_tile(w: &[&[u16]], x: &[&[f32]], body: usize, sums: &mut [[f32; TOKENS]; ROWS]) {
        let mut acc = [[_mm256_setzero_ps(); TOKENS]; ROWS];
        let wp: [*const u16; ROWS] = [w[0].as_ptr(), w[1].as_ptr(), w[2].as_ptr()];
        let xp: [*const f32; TOKENS] = [x[0].as_ptr(), x[1].as_ptr(), x[2].as_ptr(), x[3].as_ptr()];
        let mut k = 0;
        while k < body {
            let wv = [
                load_bf16(wp[0].add(k)),
                load_bf16(wp[1].add(k)),
                load_bf16(wp[2].add(k)),
            ];
            for c in 0..TOKENS {
                let xv = _mm256_loadu_ps(xp[c].add(k));
                for r in 0..ROWS {
                    acc[r][c] = _mm256_fmadd_ps(wv[r], xv, acc[r][c]);
                }
            }
            k += LANES;
        }
        store(&acc, ROWS, TOKENS, sums);
    }

    /// A partial tile at the block's edges.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn edge_tile(w: &[&[u16]], x: &[&[f32]], body: usize, sums: &mut [[f32; TOKENS]; ROWS]) {
        let mut acc = [[_mm256_setzero_ps(); TOKENS]; ROWS];
        let mut k = 0;
        while k < body {
            for (r, wr) in w.iter().enumerate() {
                let wv = load_bf16(wr.as_ptr().add(k));
                for (c, xc) in x.iter().enumerate() {
                    let xv = _mm256_loadu_ps(xc.as_ptr().add(k));
                    acc[r][c] = _mm256_fmadd_ps(wv, xv, acc[r][c]);
                }
            }
            k += LANES;
        }
        store(&acc, w.len(), x.len(), sums);
    }

    #[inline(always)]
    unsafe fn store(
        acc: &[[__m256; TOKENS]; ROWS],
        rows: usize,
        tokens: usize,
        sums: &mut [[f32; TOKENS]; ROWS],
    ) {
        for r in 0..rows {
            for c in 0..tokens {
                let mut lanes = [0.0f32; LANES];
                _mm256_storeu_ps(lanes.as_mut_ptr(), acc[r][c]);
                sums[r][c] = reduce(lanes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn matches_an_f64_product_on_ragged_sizes() {
        // Rows and tokens not multiples of the tile, inner not of the lanes,
        // several tasks.
        let (out, inner) = (ROWS_PER_TASK * 2 + 5, 43);
        let mut rng = SplitMix64::new(5);
        let bits = (0..out * inner)
            .map(|_| bf16::from_f32(rng.next_normal()))
            .collect();
        let w = BfTensor::owned("w", vec![out, inner], bits);
        let wf = w.to_f32_vec();
        for t in [2, 7] {
            let x: Vec<f32> = (0..t * inner).map(|_| rng.next_normal()).collect();
            let mut y = vec![0.0f32; t * out];
            gemm_bf16(&x, t, &w, &mut y);
            let mut portable = vec![0.0f32; t * out];
            let mut yt = vec![0.0f32; out * t];
            block_with(w.bits(), inner, &x, t, &mut yt, portable::tile);
            for o in 0..out {
                for r in 0..t {
                    portable[r * out + o] = yt[o * t + r];
                }
            }
            for r in 0..t {
                for o in 0..out {
                    let want: f64 = (0..inner)
                        .map(|i| x[r * inner + i] as f64 * wf[o * inner + i] as f64)
                        .sum();
                    let got = y[r * out + o] as f64;
                    assert!(
                        (got - want).abs() < 1e-4,
                        "t={t} [{r},{o}]: {got} vs {want}"
                    );
                    let alt = portable[r * out + o] as f64;
                    assert!(
                        (alt - want).abs() < 1e-4,
                        "portable [{r},{o}]: {alt} vs {want}"
                    );
                }
            }
        }
    }
}
