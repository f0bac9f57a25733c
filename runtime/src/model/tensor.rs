//! A named bf16 weight tensor, held as raw `u16` bits either straight from a
//! memory-mapped safetensors file (no copy) or in an owned buffer (random
//! weights, converted f16/f32 checkpoints, misaligned data).

use std::sync::Arc;

use memmap2::{Mmap, MmapMut};

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
                    .enumerate()
                    .for_each(|(i, c)| fill(i, c));
                if let Ok(map) = map.make_read_only() {
                    return Self::mapped(name, shape, Arc::new(map), 0);
                }
            }
        }
        let mut bits = vec![0u16; len];
        bits.par_chunks_mut(chunk)
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

    /// The bf16 bits, row-major.
    pub fn bits(&self) -> &[u16] {
        match &self.storage {
            Storage::Owned(bits) => bits,
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

    /// The values widened to f32 (exact).
    pub fn to_f32_vec(&self) -> Vec<f32> {
        crate::bf16::to_f32_vec(self.bits())
    }

    /// True when the bits come from a mapped file rather than memory of our own.
    pub fn is_mapped(&self) -> bool {
        matches!(self.storage, Storage::Mapped { .. })
    }

    /// First non-finite value (NaN or ±inf), as (flat index, value).
    pub fn first_non_finite(&self) -> Option<(usize, f32)> {
        use rayon::prelude::*;
        const CHUNK: usize = 1 << 16;
        self.bits()
            .par_chunks(CHUNK)
            .enumerate()
            .find_map_first(|(c, chunk)| {
                chunk
                    .iter()
                    .position(|&b| b & 0x7f80 == 0x7f80)
                    .map(|i| (c * CHUNK + i, crate::bf16::to_f32(chunk[i])))
            })
    }
}
