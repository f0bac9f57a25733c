//! Tile search over the device constraints: every tiling of a GEMM shape the
//! device accepts on the launch's herd (MMA alignment, tiles dividing M, K and
//! N, L1 and L2 capacity with double buffering, the DMA stride limit, DMA
//! channels), found by enumerating the divisors of the shape rather than a
//! fixed menu, so a shape nobody recorded still gets a legal tiling when one
//! exists. Phase 1 picks the fastest modeled one; padding asks whether any
//! exists at a size (`padding.rs`).

use super::device::Device;
use super::kernels::{GemmSpec, GemmTile};

/// The matrix unit's MMA is 8×8×8: every tile edge is a multiple of it.
const MMA: usize = 8;
/// Largest tile edges worth trying: beyond them L1 (64 KiB) cannot hold the
/// double-buffered A and B tiles and the f32 C tile anyway.
const MAX_TILE_M: usize = 128;
const MAX_TILE_N: usize = 256;
const MAX_TILE_K_L1: usize = 64;
const MAX_TILE_K_L2: usize = 512;

/// Multiples of the MMA that divide `n`, up to `max`, largest first.
fn mma_divisors(n: usize, max: usize) -> Vec<usize> {
    (1..=max / MMA)
        .rev()
        .map(|i| i * MMA)
        .filter(|d| n % d == 0)
        .collect()
}

/// Every legal tiling of `spec`'s shape on its herd, keeping its precision,
/// output dtype and epilogue. Empty when no tiling divides the shape: then the
/// shape must change (padding) or the herd must.
pub fn gemm_tilings(device: &Device, spec: &GemmSpec) -> Vec<GemmSpec> {
    let (cols, rows) = (spec.herd.cols().max(1), spec.herd.rows().max(1));
    if spec.m % cols != 0 || spec.n % rows != 0 {
        return Vec::new();
    }
    let tile_ms = mma_divisors(spec.m / cols, MAX_TILE_M);
    let tile_ns = mma_divisors(spec.n / rows, MAX_TILE_N);
    let tile_k_l2s = mma_divisors(spec.k, MAX_TILE_K_L2);
    let mut legal = Vec::new();
    for &tile_m in &tile_ms {
        for &tile_n in &tile_ns {
            for &tile_k_l2 in &tile_k_l2s {
                for tile_k_l1 in mma_divisors(tile_k_l2, MAX_TILE_K_L1) {
                    let s = GemmSpec {
                        tile: GemmTile {
                            tile_m,
                            tile_k_l2,
                            tile_k_l1,
                            tile_n,
                            ..spec.tile
                        },
                        ..*spec
                    };
                    if s.unwritten_columns() == 0 && s.check(device).is_empty() {
                        legal.push(s);
                    }
                }
            }
        }
    }
    legal
}

/// Whether any tiling of `spec`'s shape places on its herd.
pub fn gemm_places(device: &Device, spec: &GemmSpec) -> bool {
    !gemm_tilings(device, spec).is_empty()
}

/// The legal tiling with the lowest `cost` (ties: the first enumerated, i.e.
/// the largest tiles), with how many legal tilings there were.
pub fn cheapest_gemm(
    device: &Device,
    spec: &GemmSpec,
    cost: impl Fn(&GemmSpec) -> f64,
) -> Option<(GemmSpec, usize)> {
    let legal = gemm_tilings(device, spec);
    let count = legal.len();
    legal
        .into_iter()
        .map(|s| (cost(&s), s))
        .reduce(|best, next| if next.0 < best.0 { next } else { best })
        .map(|(_, s)| (s, count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdna2::kernels::{Dtype, Precision};

    fn spec(m: usize, k: usize, n: usize) -> GemmSpec {
        GemmSpec::select(&Device::npu2(), m, k, n, Precision::Bf16, Dtype::Bf16)
    }

    #[test]
    fn every_found_tiling_is_legal_and_covers_n() {
        let device = Device::npu2();
        let found = gemm_tilings(&device, &spec(2048, 144, 2048));
        assert!(!found.is_empty(), "K 144 has tile_k_l2 48 or 144");
        for s in &found {
            assert!(s.check(&device).is_empty(), "{:?}", s.tile);
            assert_eq!(s.unwritten_columns(), 0);
            assert_eq!(s.k % s.tile.tile_k_l2, 0);
        }
    }

    /// N = 144 on four herd rows leaves 36 columns per row, which no multiple
    /// of the 8-wide MMA divides: no tiling exists, whatever the menu.
    #[test]
    fn a_width_no_tile_divides_has_no_tiling() {
        let device = Device::npu2();
        assert!(!gemm_places(&device, &spec(2048, 2048, 144)));
        assert!(gemm_places(&device, &spec(2048, 2048, 160)));
    }
}
