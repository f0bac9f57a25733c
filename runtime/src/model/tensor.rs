//! A named weight tensor seen as bf16, held as raw `u16` bits either straight
//! from a memory-mapped safetensors file (no copy) or in an owned buffer
//! (random weights, converted f16/f32 checkpoints, misaligned data), or as the
//! rows of a GGUF file in their stored format ([`PackedRows`]: F32/F16/BF16 or
//! Q8_0/Q4_0/Q4_1 blocks, mapped). A packed tensor is dequantized to bf16 only
//! when a consumer asks for [`BfTensor::bits`] (once, then kept); the oracle
//! reads its exact values ([`BfTensor::values`], [`BfTensor::packed`]) instead.

use std::sync::{Arc, OnceLock};

use memmap2::{Mmap, MmapMut};

use super::quant::WeightFormat;

/// Tensors at least this large (bytes) are generated in huge-page memory.
const HUGE_PAGE_THRESHOLD: usize = 1 << 20;

/// Zeroed anonymous memory of `bytes`, with transparent huge pages requested
/// where the OS supports the advice (Linux; elsewhere it is plain memory).
fn anonymous_buffer(bytes: usize) -> std::io::Result<MmapMut> {
    let map = MmapMut::map_anon(bytes.max(1))?;
    #[cfg(target_os = "linux")]
    {
        // Advice only: without THP the memory works the same, just slower.
        let _ = map.advise(memmap2::Advice::HugePage);
    }
    Ok(map)
}

/// Where a tensor's bits live.
#[derive(Debug, Clone)]
enum Storage {
    /// `len` bf16 values at byte `start` of a mapped file; `start` is even, so
    /// the slice is aligned for `u16` (maps are page-aligned).
    Mapped {
        map: Arc<Mmap>,
        start: usize,
        len: usize,
    },
    Owned(Arc<Vec<u16>>),
    Packed {
        rows: PackedRows,
        /// The bf16 rounding of the exact values, made on first use.
        bf16: Arc<OnceLock<Vec<u16>>>,
    },
}

/// The bytes a packed tensor's rows live in.
#[derive(Debug, Clone)]
enum Bytes {
    Mapped {
        map: Arc<Mmap>,
        start: usize,
        len: usize,
    },
    Owned(Arc<Vec<u8>>),
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Mapped { map, start, len } => &map[*start..*start + *len],
            Bytes::Owned(bytes) => bytes,
        }
    }
}

/// A matrix (or vector) in a stored format: `rows` runs of `row_bytes`
/// bytes, each `cols` elements. `order` maps a logical row to its stored row,
/// which undoes a row permutation (llama.cpp's Q/K layout) without a copy.
#[derive(Debug, Clone)]
pub struct PackedRows {
    format: WeightFormat,
    rows: usize,
    cols: usize,
    bytes: Bytes,
    order: Option<Arc<[u32]>>,
}

impl PackedRows {
    /// Rows of `cols` elements of `format` at byte `start` of `map`; `order`
    /// (logical row → stored row) must be a permutation of `0..rows`. The
    /// caller has checked that the bytes lie inside the map.
    pub(crate) fn mapped(
        format: WeightFormat,
        rows: usize,
        cols: usize,
        map: Arc<Mmap>,
        start: usize,
        order: Option<Arc<[u32]>>,
    ) -> Self {
        let len = rows * format.row_bytes(cols).unwrap_or(0);
        debug_assert!(start + len <= map.len());
        Self {
            format,
            rows,
            cols,
            bytes: Bytes::Mapped { map, start, len },
            order,
        }
    }

    /// Rows held in memory of our own (tests, synthesized models).
    pub fn owned(format: WeightFormat, rows: usize, cols: usize, bytes: Vec<u8>) -> Self {
        debug_assert_eq!(format.row_bytes(cols).map(|r| r * rows), Some(bytes.len()));
        Self {
            format,
            rows,
            cols,
            bytes: Bytes::Owned(Arc::new(bytes)),
            order: None,
        }
    }

    pub fn format(&self) -> WeightFormat {
        self.format
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Stored bytes of the whole tensor.
    pub fn stored_bytes(&self) -> usize {
        self.bytes.as_slice().len()
    }

    /// The stored bytes of logical row `i`.
    #[inline(always)]
    pub fn row(&self, i: usize) -> &[u8] {
        let stored = self.order.as_ref().map_or(i, |o| o[i] as usize);
        let n = self.stored_bytes() / self.rows.max(1);
        &self.bytes.as_slice()[stored * n..(stored + 1) * n]
    }

    /// Exact values of row `i` into `out` (`cols` long).
    pub fn row_values(&self, i: usize, out: &mut [f32]) {
        self.format.dequantize(self.row(i), out);
    }
}

/// A bf16 tensor: row-major, `shape` as in the checkpoint (`[out, in]` for a
/// projection). Cloning shares the bits.
#[derive(Debug, Clone)]
pub struct BfTensor {
    name: String,
    shape: Vec<usize>,
    storage: Storage,
}

impl BfTensor {
    pub fn owned(name: impl Into<String>, shape: Vec<usize>, bits: Vec<u16>) -> Self {
        debug_assert_eq!(shape.iter().product::<usize>(), bits.len());
        Self {
            name: name.into(),
            shape,
            storage: Storage::Owned(Arc::new(bits)),
        }
    }

    /// A tensor of `shape` whose bits `fill` writes, one `chunk`-element slice
    /// at a time (in parallel; `fill` gets the chunk index). Large tensors live
    /// in anonymous memory with transparent huge pages requested: fewer page
    /// faults while generating, fewer TLB misses while streaming.
    pub fn generate(
        name: impl Into<String>,
        shape: Vec<usize>,
        chunk: usize,
        fill: impl Fn(usize, &mut [u16]) + Sync,
    ) -> Self {
        use rayon::prelude::*;
        let len: usize = shape.iter().product();
        if 2 * len >= HUGE_PAGE_THRESHOLD && cfg!(target_endian = "little") {
            if let Ok(mut map) = anonymous_buffer(2 * len) {
                let ptr = map.as_mut_ptr();
                // SAFETY: the map is page-aligned, 2·len bytes long, zeroed
                // (a valid u16 pattern) and exclusively borrowed here.
                let bits = unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u16>(), len) };
                bits.par_chunks_mut(chunk)
                    .with_min_len(crate::threads::min_len(chunk))
                    .enumerate()
                    .for_each(|(i, c)| fill(i, c));
                if let Ok(map) = map.make_read_only() {
                    return Self::mapped(name, shape, Arc::new(map), 0);
                }
            }
        }
        let mut bits = vec![0u16; len];
        bits.par_chunks_mut(chunk)
            .with_min_len(crate::threads::min_len(chunk))
            .enumerate()
            .for_each(|(i, c)| fill(i, c));
        Self::owned(name, shape, bits)
    }

    /// A view of `len` little-endian bf16 values at byte `start` of `map`;
    /// copies when the bytes are not aligned for `u16` or the host is big-endian.
    pub(crate) fn mapped(
        name: impl Into<String>,
        shape: Vec<usize>,
        map: Arc<Mmap>,
        start: usize,
    ) -> Self {
        let len = shape.iter().product::<usize>();
        let aligned = (map.as_ptr() as usize + start) % std::mem::align_of::<u16>() == 0;
        if aligned && cfg!(target_endian = "little") {
            return Self {
                name: name.into(),
                shape,
                storage: Storage::Mapped { map, start, len },
            };
        }
        let bits = map[start..start + 2 * len]
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        Self::owned(name, shape, bits)
    }

    /// A tensor of `shape` whose values are `rows` in a stored format
    /// (`rows.rows()` × `rows.cols()` elements).
    pub fn packed(name: impl Into<String>, shape: Vec<usize>, rows: PackedRows) -> Self {
        debug_assert_eq!(shape.iter().product::<usize>(), rows.rows * rows.cols);
        Self {
            name: name.into(),
            shape,
            storage: Storage::Packed {
                rows,
                bf16: Arc::new(OnceLock::new()),
            },
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows of a matrix (the first dimension); 1 for a vector.
    pub fn rows(&self) -> usize {
        if self.shape.len() < 2 {
            1
        } else {
            self.shape[0]
        }
    }

    /// Columns of a matrix (the product of the other dimensions).
    pub fn cols(&self) -> usize {
        match self.rows() {
            0 => 0,
            rows => self.len() / rows,
        }
    }

    /// The bf16 bits, row-major. A packed tensor is rounded to bf16 on the
    /// first call (a copy, kept for the tensor's lifetime).
    pub fn bits(&self) -> &[u16] {
        match &self.storage {
            Storage::Owned(bits) => bits,
            Storage::Packed { rows, bf16 } => bf16.get_or_init(|| packed_to_bf16(rows)),
            Storage::Mapped { map, start, len } => {
                let bytes = &map[*start..*start + 2 * len];
                // SAFETY: `mapped` checked that the bytes are aligned for u16
                // and the host is little-endian; the length is exact and the
                // map lives as long as `self` (held by the Arc).
                unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<u16>(), *len) }
            }
        }
    }

    /// Row `i` of a matrix.
    pub fn row(&self, i: usize) -> &[u16] {
        let cols = self.cols();
        &self.bits()[i * cols..(i + 1) * cols]
    }

    /// The bf16 values widened to f32 (exact widening of [`BfTensor::bits`]).
    pub fn to_f32_vec(&self) -> Vec<f32> {
        crate::bf16::to_f32_vec(self.bits())
    }

    /// The tensor's own values in f32: the bf16 bits widened, or a packed
    /// tensor dequantized exactly (no bf16 rounding).
    pub fn values(&self) -> Vec<f32> {
        match &self.storage {
            Storage::Packed { rows, .. } => {
                let mut out = vec![0.0f32; self.len()];
                for (i, row) in out.chunks_exact_mut(rows.cols.max(1)).enumerate() {
                    rows.row_values(i, row);
                }
                out
            }
            _ => self.to_f32_vec(),
        }
    }

    /// Exact values of row `i` into `out` (see [`BfTensor::values`]).
    pub fn row_values(&self, i: usize, out: &mut [f32]) {
        match &self.storage {
            Storage::Packed { rows, .. } => rows.row_values(i, out),
            _ => crate::bf16::slice_to_f32(self.row(i), out),
        }
    }

    /// This tensor in bf16 storage: a packed tensor's values rounded once
    /// (a copy), any other tensor shared.
    pub fn to_bf16(&self) -> BfTensor {
        match &self.storage {
            Storage::Packed { .. } => {
                Self::owned(self.name.clone(), self.shape.clone(), self.bits().to_vec())
            }
            _ => self.clone(),
        }
    }

    /// The stored rows when the tensor is packed (a GGUF tensor), else `None`.
    pub fn packed_rows(&self) -> Option<&PackedRows> {
        match &self.storage {
            Storage::Packed { rows, .. } => Some(rows),
            _ => None,
        }
    }

    /// The format the values are stored in.
    pub fn format(&self) -> WeightFormat {
        self.packed_rows()
            .map_or(WeightFormat::Bf16, PackedRows::format)
    }

    /// Bytes the tensor occupies as stored (bf16: two per element).
    pub fn stored_bytes(&self) -> u64 {
        self.packed_rows()
            .map_or(2 * self.len() as u64, |p| p.stored_bytes() as u64)
    }

    /// True when the bits come from a mapped file rather than memory of our own.
    pub fn is_mapped(&self) -> bool {
        match &self.storage {
            Storage::Mapped { .. } => true,
            Storage::Packed { rows, .. } => matches!(rows.bytes, Bytes::Mapped { .. }),
            Storage::Owned(_) => false,
        }
    }

    /// First non-finite value (NaN or ±inf), as (flat index, value). A packed
    /// tensor is checked on its exact values, row by row, without a copy.
    pub fn first_non_finite(&self) -> Option<(usize, f32)> {
        use rayon::prelude::*;
        const CHUNK: usize = 1 << 16;
        if let Some(rows) = self.packed_rows() {
            let rows_per_task = crate::threads::min_len(rows.cols);
            return (0..rows.rows)
                .into_par_iter()
                .with_min_len(rows_per_task)
                .find_map_first(|i| {
                    let mut row = vec![0.0f32; rows.cols];
                    rows.row_values(i, &mut row);
                    row.iter()
                        .position(|v| !v.is_finite())
                        .map(|j| (i * rows.cols + j, row[j]))
                });
        }
        self.bits()
            .par_chunks(CHUNK)
            .with_min_len(crate::threads::min_len(CHUNK))
            .enumerate()
            .find_map_first(|(c, chunk)| {
                chunk
                    .iter()
                    .position(|&b| b & 0x7f80 == 0x7f80)
                    .map(|i| (c * CHUNK + i, crate::bf16::to_f32(chunk[i])))
            })
    }
}

/// Rounds a packed tensor's exact values to bf16, row by row in parallel.
fn packed_to_bf16(rows: &PackedRows) -> Vec<u16> {
    use rayon::prelude::*;
    let mut bits = vec![0u16; rows.rows * rows.cols];
    bits.par_chunks_mut(rows.cols.max(1))
        .with_min_len(crate::threads::min_len(rows.cols))
        .enumerate()
        .for_each(|(i, out)| {
            let mut row = vec![0.0f32; rows.cols];
            rows.row_values(i, &mut row);
            crate::bf16::slice_from_f32(&row, out);
        });
    bits
}
