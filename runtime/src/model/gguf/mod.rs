//! GGUF files (llama.cpp's model format, versions 2 and 3) as a model source:
//! the header, the metadata, the tensor index, then the architecture
//! ([`config`]) and the weights ([`weights`]) of a model.
//!
//! The file is memory-mapped and never trusted: every count, length, offset
//! and shape is checked against the bytes that are there before anything is
//! allocated for it, so a corrupt file is refused with the byte offset and the
//! numbers that are wrong, never a panic or an allocation beyond the file
//! size. Tensors must be of a format the runtime dequantizes
//! ([`WeightFormat`]); others are refused by their llama.cpp name. Written
//! here rather than taken from a crate: the format is small, and the
//! hardening (and the messages) are the point.
//!
//! Layout (little-endian): `GGUF`, u32 version, u64 tensor count, u64
//! metadata count; metadata as (string key, u32 type, value); tensor infos as
//! (string name, u32 dims, u64 × dims fastest-first, u32 ggml type, u64 offset
//! from the data section); the data section starts at the next multiple of
//! `general.alignment` (32 by default).

pub mod array;
pub mod config;
pub mod weights;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;
use thiserror::Error;

use super::quant::WeightFormat;
pub use array::{Array, Strings};

/// The file extension of GGUF files.
pub const EXTENSION: &str = "gguf";
const MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml's limit on tensor dimensions.
const MAX_DIMS: u32 = 4;
/// Arrays nested deeper than this are refused (no real file nests at all).
const MAX_NESTING: usize = 4;
/// Most metadata keys and tensors a file may declare (real ones: about 50
/// keys and a few thousand tensors).
const MAX_METADATA: u64 = 1 << 16;
const MAX_TENSORS: u64 = 1 << 16;

/// Why a GGUF file was refused. `at` is a byte offset in the file.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum GgufError {
    #[error("{file}: {message}")]
    Io { file: String, message: String },
    #[error("{file}: not a GGUF file (magic {found:?} at byte 0, expected \"GGUF\")")]
    BadMagic { file: String, found: String },
    #[error("{file}: GGUF version {found} is not supported (versions 2 and 3 are)")]
    Version { file: String, found: u32 },
    #[error("{file}: truncated: {what} at byte {at} needs {needed} bytes, the file has {len}")]
    Truncated {
        file: String,
        what: String,
        at: u64,
        needed: u64,
        len: u64,
    },
    #[error(
        "{file}: {what} count {count} at byte {at} cannot fit: each needs at least {min_each} \
         bytes and {remaining} remain"
    )]
    CountPastEnd {
        file: String,
        what: &'static str,
        count: u64,
        at: u64,
        min_each: u64,
        remaining: u64,
    },
    #[error("{file}: {what} at byte {at} is not UTF-8")]
    NotUtf8 { file: String, what: String, at: u64 },
    #[error("{file}: metadata `{key}` has unknown value type {code} (byte {at})")]
    UnknownValueType {
        file: String,
        key: String,
        code: u32,
        at: u64,
    },
    #[error("{file}: metadata `{key}` nests arrays deeper than {MAX_NESTING}")]
    Nesting { file: String, key: String },
    #[error(
        "{file}: metadata `{key}` declares {count} elements (byte {at}); arrays longer than \
         {} are refused",
        array::MAX_ARRAY_LEN
    )]
    ArrayTooLong {
        file: String,
        key: String,
        count: u64,
        at: u64,
    },
    #[error("{file}: {what} count {count} (byte {at}) is more than the {max} a model file holds")]
    TooMany {
        file: String,
        what: &'static str,
        count: u64,
        at: u64,
        max: u64,
    },
    #[error("{file}: metadata key `{key}` appears twice")]
    DuplicateKey { file: String, key: String },
    #[error("{file}: tensor `{name}` appears twice in the tensor index")]
    DuplicateTensor { file: String, name: String },
    #[error("{file}: `general.alignment` = {value}: must be a power of two")]
    Alignment { file: String, value: u64 },
    #[error("{file}: tensor `{name}` has {dims} dimensions (1 to {MAX_DIMS} allowed)")]
    Dims {
        file: String,
        name: String,
        dims: u32,
    },
    #[error("{file}: tensor `{name}` has shape {shape:?}: {problem}")]
    Shape {
        file: String,
        name: String,
        shape: Vec<u64>,
        problem: String,
    },
    #[error("{file}: tensor `{name}` has unknown ggml type {code}")]
    UnknownType {
        file: String,
        name: String,
        code: u32,
    },
    #[error(
        "{file}: tensor `{name}` is {type_name}, which skillc does not dequantize \
         (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1)"
    )]
    UnsupportedType {
        file: String,
        name: String,
        type_name: &'static str,
    },
    #[error(
        "{file}: tensor `{name}` offset {offset} is not a multiple of the alignment {alignment}"
    )]
    Misaligned {
        file: String,
        name: String,
        offset: u64,
        alignment: u64,
    },
    #[error(
        "{file}: tensor `{name}` spans bytes {start}..{end} of the data section, which holds \
         {data_len} (truncated, or a lying offset)"
    )]
    PastEnd {
        file: String,
        name: String,
        start: u64,
        end: u64,
        data_len: u64,
    },
    #[error(
        "{file}: tensors `{first}` (data bytes {first_start}..{first_end}) and `{second}` \
         (from {second_start}) overlap"
    )]
    Overlap {
        file: String,
        first: String,
        first_start: u64,
        first_end: u64,
        second: String,
        second_start: u64,
    },
    #[error("{file}: metadata `{key}` is missing{hint}")]
    MissingKey {
        file: String,
        key: String,
        hint: String,
    },
    #[error("{file}: metadata `{key}` must be {expected}, found {found}")]
    KeyType {
        file: String,
        key: String,
        expected: &'static str,
        found: String,
    },
    #[error("{file}: {message}")]
    Unsupported { file: String, message: String },
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Array),
}

impl Value {
    /// Any integer type, when non-negative.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The type's name, for messages (`array of string`, …).
    pub fn kind(&self) -> String {
        match self {
            Value::U8(_) => "u8".into(),
            Value::I8(_) => "i8".into(),
            Value::U16(_) => "u16".into(),
            Value::I16(_) => "i16".into(),
            Value::U32(_) => "u32".into(),
            Value::I32(_) => "i32".into(),
            Value::U64(_) => "u64".into(),
            Value::I64(_) => "i64".into(),
            Value::F32(_) => "f32".into(),
            Value::F64(_) => "f64".into(),
            Value::Bool(_) => "bool".into(),
            Value::String(_) => "string".into(),
            Value::Array(items) if items.is_empty() => "empty array".into(),
            Value::Array(items) => format!("array of {}", items.element_kind()),
        }
    }
}

/// One entry of the tensor index, validated against the file.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// Dimensions as GGUF lists them: fastest-varying first (`[in, out]`).
    pub dims: Vec<u64>,
    pub format: WeightFormat,
    /// Absolute byte offset of the data in the file.
    pub start: usize,
    pub bytes: usize,
}

impl TensorInfo {
    /// The shape in PyTorch order (slowest first, `[out, in]`).
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }
}

/// A parsed GGUF file with its mapped bytes.
#[derive(Debug)]
pub struct GgufFile {
    /// The file name, for messages.
    pub name: String,
    pub version: u32,
    pub metadata: BTreeMap<String, Value>,
    pub tensors: BTreeMap<String, TensorInfo>,
    map: Arc<Mmap>,
}

impl GgufFile {
    /// Maps and validates `path`.
    pub fn open(path: &Path) -> Result<Self, GgufError> {
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let io = |e: std::io::Error| GgufError::Io {
            file: name.clone(),
            message: e.to_string(),
        };
        // A FIFO or a device would block or never end: refused by its kind.
        let file = crate::input::open_regular(path).map_err(|e| GgufError::Io {
            file: name.clone(),
            message: e.problem.to_string(),
        })?;
        // SAFETY: the map is read-only; like every model loader we rely on the
        // file not being truncated or rewritten while the model is loaded.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        Self::parse(name, Arc::new(map))
    }

    fn parse(name: String, map: Arc<Mmap>) -> Result<Self, GgufError> {
        let header = Reader::new(&name, &map).header()?;
        let tensors = index(&name, &map, &header)?;
        Ok(Self {
            name,
            version: header.version,
            metadata: header.metadata,
            tensors,
            map,
        })
    }

    /// The mapped file, shared with the tensors made from it.
    pub fn map(&self) -> &Arc<Mmap> {
        &self.map
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<&str, GgufError> {
        let key = "general.architecture";
        let value = self.get(key).ok_or_else(|| GgufError::MissingKey {
            file: self.name.clone(),
            key: key.into(),
            hint: " (every GGUF model names its architecture)".into(),
        })?;
        value
            .as_str()
            .ok_or_else(|| self.key_type(key, "a string", value))
    }

    pub(crate) fn key_type(&self, key: &str, expected: &'static str, found: &Value) -> GgufError {
        GgufError::KeyType {
            file: self.name.clone(),
            key: key.into(),
            expected,
            found: found.kind(),
        }
    }

    /// Total bytes of tensor data as stored.
    pub fn tensor_bytes(&self) -> u64 {
        self.tensors.values().map(|t| t.bytes as u64).sum()
    }
}

/// A tensor info as read, before it is checked against the data section.
struct RawTensor {
    name: String,
    dims: Vec<u64>,
    code: u32,
    offset: u64,
}

/// Everything before the data section.
struct Header {
    version: u32,
    metadata: BTreeMap<String, Value>,
    tensors: Vec<RawTensor>,
    alignment: u64,
    /// Absolute offset of the data section.
    data_start: u64,
}

/// A bounds-checked cursor over the file.
struct Reader<'a> {
    file: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(file: &'a str, bytes: &'a [u8]) -> Self {
        Self { file, bytes, at: 0 }
    }

    fn remaining(&self) -> u64 {
        (self.bytes.len() - self.at) as u64
    }

    fn take(&mut self, n: u64, what: &dyn Fn() -> String) -> Result<&'a [u8], GgufError> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                file: self.file.into(),
                what: what(),
                at: self.at as u64,
                needed: n,
                len: self.bytes.len() as u64,
            });
        }
        let start = self.at;
        self.at += n as usize;
        Ok(&self.bytes[start..self.at])
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N], GgufError> {
        let bytes = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String, GgufError> {
        let len = self.u64(&|| format!("length of {}", what()))?;
        let at = self.at as u64;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| GgufError::NotUtf8 {
            file: self.file.into(),
            what: what(),
            at,
        })
    }

    /// Refuses a count whose entries could not fit in the rest of the file.
    /// Refuses a count above what any model file holds: each entry costs more
    /// memory than the bytes it is read from, so the file size alone is no bound.
    fn check_at_most(&self, what: &'static str, count: u64, max: u64) -> Result<(), GgufError> {
        if count <= max {
            return Ok(());
        }
        Err(GgufError::TooMany {
            file: self.file.into(),
            what,
            count,
            at: self.at as u64 - 8,
            max,
        })
    }

    fn check_count(&self, what: &'static str, count: u64, min_each: u64) -> Result<(), GgufError> {
        if count.saturating_mul(min_each) > self.remaining() {
            return Err(GgufError::CountPastEnd {
                file: self.file.into(),
                what,
                count,
                at: self.at as u64 - 8,
                min_each,
                remaining: self.remaining(),
            });
        }
        Ok(())
    }

    fn header(&mut self) -> Result<Header, GgufError> {
        let magic = self.array::<4>(&|| "the magic number".into())?;
        if &magic != MAGIC {
            return Err(GgufError::BadMagic {
                file: self.file.into(),
                found: String::from_utf8_lossy(&magic).into_owned(),
            });
        }
        let version = self.u32(&|| "the version".into())?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::Version {
                file: self.file.into(),
                found: version,
            });
        }
        let tensor_count = self.u64(&|| "the tensor count".into())?;
        let kv_count = self.u64(&|| "the metadata count".into())?;
        // A key/value is at least an 8-byte key length, a 4-byte type and a
        // 1-byte value; a tensor info 8 + 4 + 8 + 4 + 8 bytes.
        self.check_count("metadata", kv_count, 13)?;
        self.check_at_most("metadata", kv_count, MAX_METADATA)?;
        let mut metadata = BTreeMap::new();
        for i in 0..kv_count {
            let key = self.string(&|| format!("metadata key #{i}"))?;
            let value = self.value_of(&key, 0)?;
            if metadata.insert(key.clone(), value).is_some() {
                return Err(GgufError::DuplicateKey {
                    file: self.file.into(),
                    key,
                });
            }
        }
        self.check_count("tensor", tensor_count, 32)?;
        self.check_at_most("tensor", tensor_count, MAX_TENSORS)?;
        let mut raw = Vec::with_capacity(tensor_count as usize);
        for i in 0..tensor_count {
            raw.push(self.tensor_info(i)?);
        }
        let alignment = self.alignment(&metadata)?;
        let data_start = (self.at as u64).div_ceil(alignment) * alignment;
        Ok(Header {
            version,
            metadata,
            tensors: raw,
            alignment,
            data_start,
        })
    }

    fn alignment(&self, metadata: &BTreeMap<String, Value>) -> Result<u64, GgufError> {
        let key = "general.alignment";
        let Some(value) = metadata.get(key) else {
            return Ok(DEFAULT_ALIGNMENT);
        };
        let alignment = value.as_u64().ok_or_else(|| GgufError::KeyType {
            file: self.file.into(),
            key: key.into(),
            expected: "an unsigned integer",
            found: value.kind(),
        })?;
        if !alignment.is_power_of_two() {
            return Err(GgufError::Alignment {
                file: self.file.into(),
                value: alignment,
            });
        }
        Ok(alignment)
    }

    fn value_of(&mut self, key: &str, depth: usize) -> Result<Value, GgufError> {
        let at = self.at as u64;
        let code = self.u32(&|| format!("the type of metadata `{key}`"))?;
        self.value(key, code, at, depth)
    }

    fn value(&mut self, key: &str, code: u32, at: u64, depth: usize) -> Result<Value, GgufError> {
        let what = || format!("the value of metadata `{key}`");
        Ok(match code {
            0 => Value::U8(self.array::<1>(&what)?[0]),
            1 => Value::I8(self.array::<1>(&what)?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.array(&what)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(&what)?)),
            4 => Value::U32(u32::from_le_bytes(self.array(&what)?)),
            5 => Value::I32(i32::from_le_bytes(self.array(&what)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(&what)?)),
            7 => Value::Bool(self.array::<1>(&what)?[0] != 0),
            8 => Value::String(self.string(&what)?),
            9 => Value::Array(self.metadata_array(key, depth)?),
            10 => Value::U64(u64::from_le_bytes(self.array(&what)?)),
            11 => Value::I64(i64::from_le_bytes(self.array(&what)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(&what)?)),
            code => {
                return Err(GgufError::UnknownValueType {
                    file: self.file.into(),
                    key: key.into(),
                    code,
                    at,
                })
            }
        })
    }

    fn tensor_info(&mut self, i: u64) -> Result<RawTensor, GgufError> {
        let name = self.string(&|| format!("the name of tensor #{i}"))?;
        let dims_count = self.u32(&|| format!("the dimension count of tensor `{name}`"))?;
        if dims_count == 0 || dims_count > MAX_DIMS {
            return Err(GgufError::Dims {
                file: self.file.into(),
                name,
                dims: dims_count,
            });
        }
        let dims = (0..dims_count)
            .map(|_| self.u64(&|| format!("the dimensions of tensor `{name}`")))
            .collect::<Result<Vec<_>, _>>()?;
        let code = self.u32(&|| format!("the type of tensor `{name}`"))?;
        let offset = self.u64(&|| format!("the offset of tensor `{name}`"))?;
        Ok(RawTensor {
            name,
            dims,
            code,
            offset,
        })
    }
}

/// Checks every tensor against the data section: known format, whole blocks,
/// no overflow, aligned, inside the file, no two overlapping.
fn index(
    file: &str,
    map: &Mmap,
    header: &Header,
) -> Result<BTreeMap<String, TensorInfo>, GgufError> {
    let (data_start, alignment) = (header.data_start, header.alignment);
    let data_len = (map.len() as u64).saturating_sub(data_start);
    let mut tensors = BTreeMap::new();
    let mut spans: Vec<(u64, u64, String)> = Vec::with_capacity(header.tensors.len());
    for t in &header.tensors {
        let shape_error = |problem: String| GgufError::Shape {
            file: file.into(),
            name: t.name.clone(),
            shape: t.dims.clone(),
            problem,
        };
        let format = format_of(file, &t.name, t.code)?;
        if t.dims.contains(&0) {
            return Err(shape_error("a dimension is zero".into()));
        }
        let elements = t
            .dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .filter(|&n| n <= usize::MAX as u64)
            .ok_or_else(|| shape_error("the element count overflows".into()))?;
        let cols = t.dims[0];
        if cols % format.block_len() as u64 != 0 {
            return Err(shape_error(format!(
                "the first dimension ({cols}) is not a multiple of the {format} block size ({})",
                format.block_len()
            )));
        }
        let bytes = (elements / format.block_len() as u64)
            .checked_mul(format.block_bytes() as u64)
            .ok_or_else(|| shape_error("the byte size overflows".into()))?;
        if t.offset % alignment != 0 {
            return Err(GgufError::Misaligned {
                file: file.into(),
                name: t.name.clone(),
                offset: t.offset,
                alignment,
            });
        }
        let end = t.offset.checked_add(bytes).filter(|&e| e <= data_len);
        let Some(end) = end else {
            return Err(GgufError::PastEnd {
                file: file.into(),
                name: t.name.clone(),
                start: t.offset,
                end: t.offset.saturating_add(bytes),
                data_len,
            });
        };
        spans.push((t.offset, end, t.name.clone()));
        let info = TensorInfo {
            dims: t.dims.clone(),
            format,
            start: (data_start + t.offset) as usize,
            bytes: bytes as usize,
        };
        if tensors.insert(t.name.clone(), info).is_some() {
            return Err(GgufError::DuplicateTensor {
                file: file.into(),
                name: t.name.clone(),
            });
        }
    }
    spans.sort();
    for pair in spans.windows(2) {
        let ((a_start, a_end, a), (b_start, _, b)) = (&pair[0], &pair[1]);
        if b_start < a_end {
            return Err(GgufError::Overlap {
                file: file.into(),
                first: a.clone(),
                first_start: *a_start,
                first_end: *a_end,
                second: b.clone(),
                second_start: *b_start,
            });
        }
    }
    Ok(tensors)
}

/// The format of ggml type `code`, or why it cannot be read.
fn format_of(file: &str, name: &str, code: u32) -> Result<WeightFormat, GgufError> {
    let format = match code {
        0 => WeightFormat::F32,
        1 => WeightFormat::F16,
        2 => WeightFormat::Q4_0,
        3 => WeightFormat::Q4_1,
        8 => WeightFormat::Q8_0,
        30 => WeightFormat::Bf16,
        other => {
            return Err(match ggml_type_name(other) {
                Some(type_name) => GgufError::UnsupportedType {
                    file: file.into(),
                    name: name.into(),
                    type_name,
                },
                None => GgufError::UnknownType {
                    file: file.into(),
                    name: name.into(),
                    code: other,
                },
            })
        }
    };
    Ok(format)
}

/// llama.cpp's names of the ggml types the runtime does not read.
fn ggml_type_name(code: u32) -> Option<&'static str> {
    Some(match code {
        6 => "Q5_0",
        7 => "Q5_1",
        9 => "Q8_1",
        10 => "Q2_K",
        11 => "Q3_K",
        12 => "Q4_K",
        13 => "Q5_K",
        14 => "Q6_K",
        15 => "Q8_K",
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        20 => "IQ4_NL",
        21 => "IQ3_S",
        22 => "IQ2_S",
        23 => "IQ4_XS",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        34 => "TQ1_0",
        35 => "TQ2_0",
        39 => "MXFP4",
        _ => return None,
    })
}

/// The `*.gguf` entries of a directory (whatever their kind: a FIFO named
/// `.gguf` is refused when opened, not skipped), sorted; none for a
/// directory that cannot be read.
pub fn in_dir(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<std::path::PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == EXTENSION) && !p.is_dir())
        .collect();
    files.sort();
    files
}

/// The GGUF file a model path names: the path itself when it is a file, else
/// the one `*.gguf` in the directory. `Ok(None)` for a directory without one.
pub fn find(path: &Path) -> Result<Option<std::path::PathBuf>, GgufError> {
    if !path.is_dir() && path.exists() {
        // A file, or a FIFO or device that `open` refuses by name.
        return Ok(Some(path.to_path_buf()));
    }
    let mut files = in_dir(path);
    match files.len() {
        0 => Ok(None),
        1 => Ok(files.pop()),
        _ => Err(GgufError::Unsupported {
            file: path.display().to_string(),
            message: format!(
                "{} GGUF files ({}); name the one to use",
                files.len(),
                files
                    .iter()
                    .filter_map(|f| f.file_name())
                    .map(|n| n.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}
