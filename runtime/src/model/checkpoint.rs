//! Safetensors checkpoints on disk: one `model.safetensors`, or shards listed by
//! `model.safetensors.index.json`. Files are memory-mapped and their headers
//! validated by the `safetensors` crate; when it refuses a file, the header is
//! re-read here to say which tensor and which numbers are wrong. Tensors come
//! out as bf16 ([`BfTensor`]): bf16 data is mapped without a copy, f16/f32 data
//! is rounded to bf16 (the reference keeps weights in bf16).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;
use safetensors::tensor::{Dtype, SafeTensorError, SafeTensors};
use serde_json::Value;
use thiserror::Error;

use super::tensor::BfTensor;

/// Why a checkpoint's weights could not be read. File names are given relative
/// to the model directory, so messages are the same on every machine.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum WeightsError {
    #[error("{file}: {message}")]
    Io { file: String, message: String },
    #[error("{file}: {problem}")]
    Header { file: String, problem: String },
    #[error("{file}: {problem}")]
    Index { file: String, problem: String },
    #[error("tensor `{name}` is missing (looked in {searched})")]
    MissingTensor { name: String, searched: String },
    #[error("tensor `{name}` has shape {found:?}, the config implies {expected:?}")]
    Shape {
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    #[error("tensor `{name}` has dtype {found}; weights must be BF16, F16 or F32")]
    DType { name: String, found: String },
    #[error("tensor `{name}` holds a non-finite value ({value}) at flat index {index}")]
    NonFinite {
        name: String,
        index: usize,
        value: f32,
    },
    #[error(
        "found {} safetensors files ({}) but no {INDEX_FILE} saying which tensor is where",
        .files.len(),
        .files.join(", ")
    )]
    Ambiguous { files: Vec<String> },
    #[error("{file}: tensor `{name}` was expected here by the index but is not in the file")]
    NotInShard { file: String, name: String },
    #[error(
        "{file}: {} tensor(s) the config does not use ({}); the file and the config \
         describe different models",
        .names.len(),
        crate::model::weights::shortlist(.names)
    )]
    Unused { file: String, names: Vec<String> },
    #[error(
        "{file}: declares {declared} decoder blocks (`{key}`) but holds tensors of {held} \
         (blk.0 to blk.{})",
        .held - 1
    )]
    Blocks {
        file: String,
        key: String,
        declared: usize,
        held: usize,
    },
}

const INDEX_FILE: &str = "model.safetensors.index.json";
const SINGLE_FILE: &str = "model.safetensors";
/// Fixture outputs live beside the weights and are never weights themselves.
const REFERENCE_FILE: &str = "reference.safetensors";

/// One mapped safetensors file with its validated header.
#[derive(Debug)]
struct ShardFile {
    name: String,
    map: Arc<Mmap>,
    tensors: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone)]
struct Entry {
    dtype: Dtype,
    shape: Vec<usize>,
    /// Absolute byte offset of the data in the file.
    start: usize,
}

/// The weights of a model directory, opened but not yet read.
#[derive(Debug)]
pub struct Checkpoint {
    shards: Vec<ShardFile>,
    /// Tensor name → index into `shards`.
    located: BTreeMap<String, usize>,
}

impl Checkpoint {
    /// The weight files of `dir`: the index's shards, else `model.safetensors`,
    /// else the only `*.safetensors` file. `Ok(None)` when there are none.
    pub fn find(dir: &Path) -> Result<Option<Vec<String>>, WeightsError> {
        // `exists`, not `is_file`: a FIFO or device under these names must be
        // refused by name when opened, not passed over.
        if dir.join(INDEX_FILE).exists() {
            return read_index(dir).map(|index| Some(index.files()));
        }
        if dir.join(SINGLE_FILE).exists() {
            return Ok(Some(vec![SINGLE_FILE.to_string()]));
        }
        let entries = std::fs::read_dir(dir).map_err(|e| io_error(".", &e))?;
        let mut files: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".safetensors") && n != REFERENCE_FILE)
            .collect();
        files.sort();
        match files.len() {
            0 => Ok(None),
            1 => Ok(Some(files)),
            _ => Err(WeightsError::Ambiguous { files }),
        }
    }

    /// Opens and validates every weight file of `dir` (see [`Checkpoint::find`]).
    /// The files' names joined, for messages.
    pub fn describe(&self) -> String {
        self.files().join(", ")
    }

    pub fn open(dir: &Path) -> Result<Option<Self>, WeightsError> {
        let Some(files) = Self::find(dir)? else {
            return Ok(None);
        };
        let index = if dir.join(INDEX_FILE).exists() {
            Some(read_index(dir)?)
        } else {
            None
        };
        let shards = files
            .iter()
            .map(|name| open_shard(dir, name))
            .collect::<Result<Vec<_>, _>>()?;
        let mut located = BTreeMap::new();
        for (i, shard) in shards.iter().enumerate() {
            for name in shard.tensors.keys() {
                located.entry(name.clone()).or_insert(i);
            }
        }
        if let Some(index) = index {
            for (tensor, file) in &index.weight_map {
                let Some(i) = shards.iter().position(|s| &s.name == file) else {
                    continue;
                };
                if !shards[i].tensors.contains_key(tensor) {
                    return Err(WeightsError::NotInShard {
                        file: file.clone(),
                        name: tensor.clone(),
                    });
                }
                located.insert(tensor.clone(), i);
            }
        }
        Ok(Some(Self { shards, located }))
    }

    /// Names of every tensor, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.located.keys().map(String::as_str)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.located.contains_key(name)
    }

    /// Files that were opened, for messages.
    pub fn files(&self) -> Vec<&str> {
        self.shards.iter().map(|s| s.name.as_str()).collect()
    }

    /// Reads tensor `name` as bf16, checking its shape against `expected`.
    pub fn tensor(&self, name: &str, expected: &[usize]) -> Result<BfTensor, WeightsError> {
        let shard = self
            .located
            .get(name)
            .map(|&i| &self.shards[i])
            .ok_or_else(|| WeightsError::MissingTensor {
                name: name.to_string(),
                searched: self.files().join(", "),
            })?;
        let entry = &shard.tensors[name];
        if entry.shape != expected {
            return Err(WeightsError::Shape {
                name: name.to_string(),
                expected: expected.to_vec(),
                found: entry.shape.clone(),
            });
        }
        let len: usize = entry.shape.iter().product();
        let bytes = &shard.map[entry.start..entry.start + len * entry.dtype.size()];
        let shape = entry.shape.clone();
        match entry.dtype {
            Dtype::BF16 => Ok(BfTensor::mapped(
                name,
                shape,
                shard.map.clone(),
                entry.start,
            )),
            Dtype::F16 => Ok(BfTensor::owned(name, shape, f16_bytes_to_bf16(bytes))),
            Dtype::F32 => Ok(BfTensor::owned(name, shape, f32_bytes_to_bf16(bytes))),
            other => Err(WeightsError::DType {
                name: name.to_string(),
                found: format!("{other:?}"),
            }),
        }
    }
}

fn io_error(file: &str, e: &std::io::Error) -> WeightsError {
    WeightsError::Io {
        file: file.to_string(),
        message: crate::input::describe(e),
    }
}

/// A refused or unreadable input file, named as the model directory shows it.
fn input_error(file: &str, e: crate::input::InputError) -> WeightsError {
    WeightsError::Io {
        file: file.to_string(),
        message: e.problem.to_string(),
    }
}

#[derive(Debug)]
struct Index {
    /// Tensor name → shard file name.
    weight_map: BTreeMap<String, String>,
}

impl Index {
    fn files(&self) -> Vec<String> {
        let mut files: Vec<String> = self.weight_map.values().cloned().collect();
        files.sort();
        files.dedup();
        files
    }
}

fn read_index(dir: &Path) -> Result<Index, WeightsError> {
    let problem = |problem: String| WeightsError::Index {
        file: INDEX_FILE.into(),
        problem,
    };
    let text = crate::input::read_to_string(&dir.join(INDEX_FILE))
        .map_err(|e| input_error(INDEX_FILE, e))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| problem(format!("not valid JSON: {e}")))?;
    let map = value
        .get("weight_map")
        .and_then(Value::as_object)
        .ok_or_else(|| problem("has no `weight_map` object".into()))?;
    let mut weight_map = BTreeMap::new();
    for (tensor, file) in map {
        let file = file
            .as_str()
            .ok_or_else(|| problem(format!("`weight_map.{tensor}` is not a file name")))?;
        if file.contains('/')
            || file.contains('\\')
            || file.starts_with('.')
            || !file.ends_with(".safetensors")
        {
            return Err(problem(format!(
                "`weight_map.{tensor}` = \"{file}\" is not a .safetensors file name inside the model directory"
            )));
        }
        weight_map.insert(tensor.clone(), file.to_string());
    }
    if weight_map.is_empty() {
        return Err(problem("`weight_map` is empty".into()));
    }
    Ok(Index { weight_map })
}

fn open_shard(dir: &Path, name: &str) -> Result<ShardFile, WeightsError> {
    let path: PathBuf = dir.join(name);
    let file = crate::input::open_regular(&path).map_err(|e| input_error(name, e))?;
    // SAFETY: the map is read-only; like every safetensors reader we rely on the
    // file not being truncated or rewritten while the model is loaded.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| io_error(name, &e))?;
    let (header_len, metadata) =
        SafeTensors::read_metadata(&map).map_err(|e| WeightsError::Header {
            file: name.to_string(),
            problem: explain_header_error(&map, &e),
        })?;
    let data_start = 8 + header_len;
    let tensors = metadata
        .tensors()
        .into_iter()
        .map(|(tensor, info)| {
            let entry = Entry {
                dtype: info.dtype,
                shape: info.shape.clone(),
                start: data_start + info.data_offsets.0,
            };
            (tensor, entry)
        })
        .collect();
    Ok(ShardFile {
        name: name.to_string(),
        map: Arc::new(map),
        tensors,
    })
}

/// A sentence for a header the `safetensors` crate refused, with the numbers
/// and the tensor to blame where the header can still be read.
fn explain_header_error(bytes: &[u8], err: &SafeTensorError) -> String {
    let file_len = bytes.len();
    let declared = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes);
    match err {
        SafeTensorError::HeaderTooSmall => format!(
            "{file_len} bytes is too short for a safetensors file (8-byte header length missing)"
        ),
        SafeTensorError::HeaderTooLarge => format!(
            "declared header length {} exceeds the 100 MB limit (corrupt or not a safetensors file)",
            declared.unwrap_or(0)
        ),
        SafeTensorError::InvalidHeaderLength => format!(
            "declared header length {} runs past the end of the {file_len}-byte file (truncated?)",
            declared.unwrap_or(0)
        ),
        SafeTensorError::InvalidHeader => "the header is not UTF-8 text".into(),
        SafeTensorError::InvalidHeaderDeserialization => explain_header_json(bytes),
        SafeTensorError::InvalidOffset(name) => format!(
            "tensor `{name}`: data_offsets do not start where the previous tensor ends \
             (the header lies about the layout)"
        ),
        SafeTensorError::TensorInvalidInfo | SafeTensorError::ValidationOverflow => {
            explain_sizes(bytes)
        }
        SafeTensorError::MetadataIncompleteBuffer => {
            let header_end = 8 + declared.unwrap_or(0) as usize;
            let described = header_entries(bytes)
                .iter()
                .map(|e| e.end)
                .max()
                .unwrap_or(0);
            let present = file_len.saturating_sub(header_end) as u64;
            if present < described {
                format!(
                    "the header describes {described} bytes of tensor data but the file holds \
                     {present} (truncated)"
                )
            } else {
                format!(
                    "the header describes {described} bytes of tensor data but the file holds \
                     {present} (trailing bytes no tensor covers)"
                )
            }
        }
        other => format!("unreadable safetensors header: {other:?}"),
    }
}

/// One header entry as written, for diagnosis only.
struct RawEntry {
    name: String,
    dtype: String,
    shape: Vec<u64>,
    begin: u64,
    end: u64,
}

/// Why a safetensors header is not JSON text.
#[derive(Debug, Error)]
enum HeaderError {
    #[error("the header is not UTF-8 text")]
    NotUtf8,
    #[error("the header is not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
}

fn header_json(bytes: &[u8]) -> Result<Value, HeaderError> {
    let n = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0) as usize;
    let text = bytes
        .get(8..8usize.saturating_add(n))
        .and_then(|b| std::str::from_utf8(b).ok())
        .ok_or(HeaderError::NotUtf8)?;
    serde_json::from_str(text).map_err(HeaderError::Json)
}

fn header_entries(bytes: &[u8]) -> Vec<RawEntry> {
    let Ok(Value::Object(map)) = header_json(bytes) else {
        return Vec::new();
    };
    map.iter()
        .filter(|(name, _)| name.as_str() != "__metadata__")
        .filter_map(|(name, v)| {
            let offsets = v.get("data_offsets")?.as_array()?;
            Some(RawEntry {
                name: name.clone(),
                dtype: v.get("dtype")?.as_str()?.to_string(),
                shape: v
                    .get("shape")?
                    .as_array()?
                    .iter()
                    .map(Value::as_u64)
                    .collect::<Option<Vec<_>>>()?,
                begin: offsets.first()?.as_u64()?,
                end: offsets.get(1)?.as_u64()?,
            })
        })
        .collect()
}

fn explain_header_json(bytes: &[u8]) -> String {
    let map = match header_json(bytes) {
        Err(problem) => return problem.to_string(),
        Ok(Value::Object(map)) => map,
        Ok(_) => return "the header is JSON but not an object of tensors".into(),
    };
    for (name, v) in &map {
        if name == "__metadata__" {
            continue;
        }
        let dtype = v.get("dtype").and_then(Value::as_str);
        if let Some(dtype) = dtype {
            if dtype_size(dtype).is_none() {
                return format!("tensor `{name}`: unknown dtype \"{dtype}\"");
            }
        }
        for key in ["dtype", "shape", "data_offsets"] {
            if v.get(key).is_none() {
                return format!("tensor `{name}`: `{key}` is missing");
            }
        }
        let offsets_ok = v
            .get("data_offsets")
            .and_then(Value::as_array)
            .is_some_and(|a| a.len() == 2 && a.iter().all(|x| x.as_u64().is_some()));
        if !offsets_ok {
            return format!("tensor `{name}`: `data_offsets` must be two non-negative integers");
        }
        let shape_ok = v
            .get("shape")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().all(|x| x.as_u64().is_some()));
        if !shape_ok {
            return format!("tensor `{name}`: `shape` must be a list of non-negative integers");
        }
    }
    "the header JSON does not follow the safetensors schema".into()
}

fn explain_sizes(bytes: &[u8]) -> String {
    for e in header_entries(bytes) {
        let Some(size) = dtype_size(&e.dtype) else {
            continue;
        };
        let elements = e.shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
        let Some(nbytes) = elements.and_then(|n| n.checked_mul(size)) else {
            return format!(
                "tensor `{}`: shape {:?} overflows (declared size beyond 2^64 bytes)",
                e.name, e.shape
            );
        };
        let span = e.end.wrapping_sub(e.begin);
        if e.end < e.begin || span != nbytes {
            return format!(
                "tensor `{}`: data_offsets [{}, {}] span {} bytes but {} × shape {:?} needs {nbytes}",
                e.name,
                e.begin,
                e.end,
                e.end as i128 - e.begin as i128,
                e.dtype,
                e.shape
            );
        }
    }
    "a tensor's data_offsets disagree with its dtype and shape".into()
}

fn dtype_size(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" => 1,
        "I16" | "U16" | "F16" | "BF16" => 2,
        "I32" | "U32" | "F32" => 4,
        "I64" | "U64" | "F64" => 8,
        _ => return None,
    })
}

fn f16_bytes_to_bf16(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|b| {
            let value = half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
            crate::bf16::from_f32(value)
        })
        .collect()
}

fn f32_bytes_to_bf16(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(4)
        .map(|b| crate::bf16::from_f32(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
        .collect()
}
