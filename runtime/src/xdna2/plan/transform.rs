//! What a weight buffer's setup transforms do to a checkpoint tensor: zero
//! padding by nested levels and GQA-aware head padding, on bf16 bits.

/// A transform that does not fit the tensor it is applied to (a plan built for
/// another model, or a hand-edited `plan.json`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransformError {
    #[error("cannot pad a {rows}x{cols} tensor as rows {row_levels:?}, columns {col_levels:?}")]
    ZeroPad {
        rows: usize,
        cols: usize,
        row_levels: Vec<[usize; 2]>,
        col_levels: Vec<[usize; 2]>,
    },
    #[error("cannot pad {heads} heads to {padded_heads} in {kv_heads} KV groups")]
    HeadGroups {
        heads: usize,
        padded_heads: usize,
        kv_heads: usize,
    },
    #[error("{len} {axis} are not {heads} heads of {head_dim}")]
    HeadAxis {
        len: usize,
        axis: &'static str,
        heads: usize,
        head_dim: usize,
    },
    #[error("no axis {0} to pad heads along")]
    NoAxis(usize),
    #[error("rows {start}..{end} of a {len}-row tensor padded to {padded_rows}")]
    Rows {
        start: usize,
        end: usize,
        len: usize,
        padded_rows: usize,
    },
}

/// The length of an axis padded as `levels` says (`real` picks which side).
pub fn axis_len(levels: &[[usize; 2]], real: bool) -> usize {
    levels
        .iter()
        .map(|l| if real { l[0] } else { l[1] })
        .product()
}

/// Where real index `i` of an axis lands once padded as `levels`.
pub fn padded_index(levels: &[[usize; 2]], mut i: usize) -> usize {
    let (mut out, mut stride) = (0, 1);
    for &[real, padded] in levels.iter().rev() {
        out += (i % real.max(1)) * stride;
        i /= real.max(1);
        stride *= padded;
    }
    out
}

/// [`Transform::ZeroPad`](super::Transform::ZeroPad) on a `rows × cols` tensor: returns the padded data
/// with its rows and columns.
pub fn zero_pad(
    bits: &[u16],
    (rows, cols): (usize, usize),
    row_levels: &[[usize; 2]],
    col_levels: &[[usize; 2]],
) -> Result<(Vec<u16>, usize, usize), TransformError> {
    let fits = |levels: &[[usize; 2]], n: usize| {
        levels.is_empty() || (axis_len(levels, true) == n && levels.iter().all(|l| l[1] >= l[0]))
    };
    if !fits(row_levels, rows) || !fits(col_levels, cols) || bits.len() != rows * cols {
        return Err(TransformError::ZeroPad {
            rows,
            cols,
            row_levels: row_levels.to_vec(),
            col_levels: col_levels.to_vec(),
        });
    }
    let new_rows = if row_levels.is_empty() {
        rows
    } else {
        axis_len(row_levels, false)
    };
    let new_cols = if col_levels.is_empty() {
        cols
    } else {
        axis_len(col_levels, false)
    };
    let col_map: Vec<usize> = (0..cols)
        .map(|c| {
            if col_levels.is_empty() {
                c
            } else {
                padded_index(col_levels, c)
            }
        })
        .collect();
    let mut out = vec![0u16; new_rows * new_cols];
    for r in 0..rows {
        let pr = if row_levels.is_empty() {
            r
        } else {
            padded_index(row_levels, r)
        };
        let dst = &mut out[pr * new_cols..(pr + 1) * new_cols];
        for (&v, &pc) in bits[r * cols..(r + 1) * cols].iter().zip(&col_map) {
            dst[pc] = v;
        }
    }
    Ok((out, new_rows, new_cols))
}

/// [`Transform::PadHeads`](super::Transform::PadHeads) on a `rows × cols` tensor (a vector is one column):
/// zero phantom heads after the real heads of each KV group, along rows (axis 0: a
/// projection's outputs or a bias) or columns (axis 1: o_proj's inputs). Returns
/// the padded data with its rows and columns.
#[allow(clippy::too_many_arguments)]
pub fn pad_heads(
    bits: &[u16],
    rows: usize,
    cols: usize,
    axis: usize,
    heads: usize,
    padded_heads: usize,
    kv_heads: usize,
    head_dim: usize,
) -> Result<(Vec<u16>, usize, usize), TransformError> {
    let kv = kv_heads.max(1);
    if heads % kv != 0 || padded_heads % kv != 0 || padded_heads < heads {
        return Err(TransformError::HeadGroups {
            heads,
            padded_heads,
            kv_heads,
        });
    }
    let (group, padded_group) = (heads / kv, padded_heads / kv);
    // Each real head's `block` of `src` to its place in the padded order in `dst`.
    let place_heads = |dst: &mut [u16], src: &[u16], block: usize| {
        for h in 0..heads {
            let t = (h / group) * padded_group + h % group;
            dst[t * block..(t + 1) * block].copy_from_slice(&src[h * block..(h + 1) * block]);
        }
    };
    let whole_heads = |len: usize, axis: &'static str| {
        if len == heads * head_dim {
            return Ok(());
        }
        Err(TransformError::HeadAxis {
            len,
            axis,
            heads,
            head_dim,
        })
    };
    match axis {
        0 => {
            whole_heads(rows, "rows")?;
            let block = head_dim * cols;
            let mut out = vec![0u16; padded_heads * block];
            place_heads(&mut out, bits, block);
            Ok((out, padded_heads * head_dim, cols))
        }
        1 => {
            whole_heads(cols, "columns")?;
            let new_cols = padded_heads * head_dim;
            let mut out = vec![0u16; rows * new_cols];
            for r in 0..rows {
                let dst = &mut out[r * new_cols..(r + 1) * new_cols];
                place_heads(dst, &bits[r * cols..(r + 1) * cols], head_dim);
            }
            Ok((out, rows, new_cols))
        }
        other => Err(TransformError::NoAxis(other)),
    }
}
