//! Launches on the real rows only. Plans are built at a production row count
//! (2048 in deploy); a prompt fills its first rows and the rest is padding that no
//! real row can see (every kernel is row-independent or causal). These functions
//! run a production launch on a spec trimmed to the real rows with the numerics of
//! the production spec, bit for bit on the real rows: the same GEMM tile_n, herd
//! rows, K tiling and precision; the same flash-attention cascade stage boundaries.

use std::borrow::Cow;

use super::ExecError;
use crate::xdna2::device::Device;
use crate::xdna2::kernels::{
    self, BOperand, FlashAttentionSpec, GemmSpec, GemmTile, Herd, KernelError, QkvLayout,
};

/// Columns per GEMM call when the interpreter splits N (a whole number of the
/// herd's column blocks), to keep the emulator's f32 copy of B small.
const N_CHUNK: usize = 1024;

/// A GEMM on the real rows: row chunks of at most the production tile_m, each a
/// launch on one herd column with the production tile_n, herd rows, K tiling and
/// precision. N is split too, into whole blocks of `tile_n · herd_rows` columns;
/// the columns the production tiling leaves unwritten (N not a multiple of the
/// block) stay unwritten, as on the device. `w` is the `[N, K]` weight; rows past
/// its end are the zero padding of a partition.
pub fn gemm_rows(
    d: &Device,
    spec: &GemmSpec,
    a: &[u16],
    rows: usize,
    w: &[u16],
) -> Result<Vec<u16>, KernelError> {
    let (k, n) = (spec.k, spec.n);
    let block = (spec.tile.tile_n * spec.herd.rows()).max(1);
    let written = spec.written_columns();
    let cols = (N_CHUNK / block).max(1) * block;
    let chunk = spec.tile.tile_m.max(8);
    let mut out = vec![0u16; rows * n];
    let mut start = 0;
    while start < rows {
        let real = chunk.min(rows - start);
        let padded = real.div_ceil(8) * 8;
        let mut a_chunk = vec![0u16; padded * k];
        a_chunk[..real * k].copy_from_slice(&a[start * k..(start + real) * k]);
        let mut n0 = 0;
        while n0 < written {
            let nc = cols.min(written - n0);
            let real_rows = (w.len() / k.max(1)).saturating_sub(n0).min(nc);
            let b: Cow<'_, [u16]> = if real_rows == nc {
                Cow::Borrowed(&w[n0 * k..(n0 + nc) * k])
            } else {
                let mut padded_b = vec![0u16; nc * k];
                if real_rows > 0 {
                    padded_b[..real_rows * k].copy_from_slice(&w[n0 * k..(n0 + real_rows) * k]);
                }
                Cow::Owned(padded_b)
            };
            let small = GemmSpec {
                m: padded,
                n: nc,
                herd: Herd([1, spec.herd.rows()]),
                tile: GemmTile {
                    tile_m: padded,
                    ..spec.tile
                },
                ..*spec
            };
            let y = kernels::gemm(d, &small, &a_chunk, BOperand::NxK(&b))?;
            for r in 0..real {
                out[(start + r) * n + n0..][..nc].copy_from_slice(&y[r * nc..(r + 1) * nc]);
            }
            n0 += nc;
        }
        start += real;
    }
    Ok(out)
}

/// Prefill flash attention over the first `rows` positions. The keys are padded
/// to whole cascade stages of the production launch (`lk / cascade` keys each),
/// so every real query row meets the same stages, key blocks and merge order as
/// in the production launch; the padding lies past every real row's causal limit.
pub fn attention_rows(
    d: &Device,
    spec: &FlashAttentionSpec,
    rows: usize,
    (q, k, v): (&[u16], &[u16], &[u16]),
) -> Result<Vec<u16>, ExecError> {
    if !spec.causal && rows < spec.lq {
        return Err(ExecError::NonCausalPadding { rows, lq: spec.lq });
    }
    let key = d.limits.fa_key_block.max(1);
    let per_stage = (spec.lk / spec.tile.cascade.max(1)).max(key);
    let (len, cascade) = if rows <= per_stage {
        (rows.div_ceil(key) * key, 1)
    } else {
        let stages = rows.div_ceil(per_stage);
        (stages * per_stage, stages)
    };
    let mut small = FlashAttentionSpec::select(
        len,
        len,
        spec.heads,
        spec.kv_heads,
        spec.head_dim,
        spec.causal,
    );
    small.layout = spec.layout;
    small.tile.heads_per_unroll = spec.tile.heads_per_unroll;
    small.scale_dim = spec.scale_dim;
    small.window = spec.window;
    small.tile.cascade = cascade;
    let hd = spec.head_dim;
    let positions = Positions {
        rows,
        len,
        hd,
        layout: spec.layout,
    };
    let (qp, kp, vp) = (
        positions.pad(q, spec.heads),
        positions.pad(k, spec.kv_heads),
        positions.pad(v, spec.kv_heads),
    );
    let out = kernels::flash_attention(d, &small, &qp, &kp, &vp).map_err(ExecError::kernel)?;
    Ok(positions.unpad(&out, spec.heads))
}

/// Where the `rows` real positions of a Q, K, V or output tensor sit among the
/// kernel's `len` positions, in either layout.
struct Positions {
    rows: usize,
    len: usize,
    hd: usize,
    layout: QkvLayout,
}

impl Positions {
    /// `x` (real rows) zero-padded to `len` positions.
    fn pad(&self, x: &[u16], heads: usize) -> Vec<u16> {
        let (rows, len, hd) = (self.rows, self.len, self.hd);
        let mut out = vec![0u16; len * heads * hd];
        match self.layout {
            QkvLayout::SeqFirst => {
                out[..rows * heads * hd].copy_from_slice(&x[..rows * heads * hd])
            }
            QkvLayout::HeadFirst => {
                for h in 0..heads {
                    out[h * len * hd..][..rows * hd]
                        .copy_from_slice(&x[h * rows * hd..][..rows * hd]);
                }
            }
        }
        out
    }

    /// The real rows of a padded `x`.
    fn unpad(&self, x: &[u16], heads: usize) -> Vec<u16> {
        let (rows, len, hd) = (self.rows, self.len, self.hd);
        match self.layout {
            QkvLayout::SeqFirst => x[..rows * heads * hd].to_vec(),
            QkvLayout::HeadFirst => {
                let mut out = Vec::with_capacity(rows * heads * hd);
                for h in 0..heads {
                    out.extend_from_slice(&x[h * len * hd..][..rows * hd]);
                }
                out
            }
        }
    }
}
