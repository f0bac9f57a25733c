//! GGUF metadata arrays, held at the width the file stores them: a vocabulary
//! of 150k tokens is one string buffer and one offset per token, a `token_type`
//! list one `i32` per token. An array of tagged values would cost 32 bytes per
//! element whatever its type (a 398 MB file of `u8` arrays asked for 9.6 GB),
//! so arrays never take more memory than the bytes they were read from, and an
//! array longer than [`MAX_ARRAY_LEN`] is refused before anything is allocated.

use super::{GgufError, Reader, MAX_NESTING};

/// Longest array read (16.7M elements). The largest real vocabularies hold
/// about 260k tokens and 500k merges.
pub const MAX_ARRAY_LEN: u64 = 1 << 24;

/// A metadata array by element type.
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    String(Strings),
    Array(Vec<Array>),
}

/// Strings in one buffer: string `i` is `text[ends[i - 1]..ends[i]]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Strings {
    text: String,
    ends: Vec<usize>,
}

impl Strings {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.text.get(start..end)
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len());
    }
}

impl Array {
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::F64(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The strings, when this is an array of strings.
    pub fn strings(&self) -> Option<&Strings> {
        match self {
            Array::String(s) => Some(s),
            _ => None,
        }
    }

    /// Element `i` as an unsigned integer, when it is a non-negative integer.
    pub fn u64_at(&self, i: usize) -> Option<u64> {
        match self {
            Array::U8(v) => v.get(i).map(|&x| x.into()),
            Array::U16(v) => v.get(i).map(|&x| x.into()),
            Array::U32(v) => v.get(i).map(|&x| x.into()),
            Array::U64(v) => v.get(i).copied(),
            Array::I8(v) => v.get(i).and_then(|&x| u64::try_from(x).ok()),
            Array::I16(v) => v.get(i).and_then(|&x| u64::try_from(x).ok()),
            Array::I32(v) => v.get(i).and_then(|&x| u64::try_from(x).ok()),
            Array::I64(v) => v.get(i).and_then(|&x| u64::try_from(x).ok()),
            _ => None,
        }
    }

    /// The element type's name, for messages.
    pub fn element_kind(&self) -> &'static str {
        match self {
            Array::U8(_) => "u8",
            Array::I8(_) => "i8",
            Array::U16(_) => "u16",
            Array::I16(_) => "i16",
            Array::U32(_) => "u32",
            Array::I32(_) => "i32",
            Array::U64(_) => "u64",
            Array::I64(_) => "i64",
            Array::F32(_) => "f32",
            Array::F64(_) => "f64",
            Array::Bool(_) => "bool",
            Array::String(_) => "string",
            Array::Array(_) => "array",
        }
    }
}

/// Reads `count` fixed-width elements with `read`, after the count was checked.
fn fixed<T>(
    count: usize,
    mut read: impl FnMut() -> Result<T, GgufError>,
) -> Result<Vec<T>, GgufError> {
    let mut items = Vec::with_capacity(count);
    for _ in 0..count {
        items.push(read()?);
    }
    Ok(items)
}

impl Reader<'_> {
    /// An array value: element type, length (checked against the cap and the
    /// bytes left), then the elements.
    pub(super) fn metadata_array(&mut self, key: &str, depth: usize) -> Result<Array, GgufError> {
        if depth >= MAX_NESTING {
            return Err(GgufError::Nesting {
                file: self.file.into(),
                key: key.into(),
            });
        }
        let at = self.at as u64;
        let code = self.u32(&|| format!("the element type of metadata `{key}`"))?;
        let count = self.u64(&|| format!("the length of metadata `{key}`"))?;
        let min_each = match code {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            8 | 10..=12 => 8,
            9 => 12,
            _ => 1,
        };
        self.check_count("array element", count, min_each)?;
        if count > MAX_ARRAY_LEN {
            return Err(GgufError::ArrayTooLong {
                file: self.file.into(),
                key: key.into(),
                count,
                at,
            });
        }
        self.elements(key, code, count as usize, at, depth)
    }

    fn elements(
        &mut self,
        key: &str,
        code: u32,
        n: usize,
        at: u64,
        depth: usize,
    ) -> Result<Array, GgufError> {
        let what = || format!("the value of metadata `{key}`");
        Ok(match code {
            0 => Array::U8(fixed(n, || Ok(self.array::<1>(&what)?[0]))?),
            1 => Array::I8(fixed(n, || Ok(self.array::<1>(&what)?[0] as i8))?),
            2 => Array::U16(fixed(n, || Ok(u16::from_le_bytes(self.array(&what)?)))?),
            3 => Array::I16(fixed(n, || Ok(i16::from_le_bytes(self.array(&what)?)))?),
            4 => Array::U32(fixed(n, || Ok(u32::from_le_bytes(self.array(&what)?)))?),
            5 => Array::I32(fixed(n, || Ok(i32::from_le_bytes(self.array(&what)?)))?),
            6 => Array::F32(fixed(n, || Ok(f32::from_le_bytes(self.array(&what)?)))?),
            7 => Array::Bool(fixed(n, || Ok(self.array::<1>(&what)?[0] != 0))?),
            8 => {
                let mut strings = Strings::default();
                for _ in 0..n {
                    strings.push(&self.string(&what)?);
                }
                Array::String(strings)
            }
            9 => Array::Array(fixed(n, || self.metadata_array(key, depth + 1))?),
            10 => Array::U64(fixed(n, || Ok(u64::from_le_bytes(self.array(&what)?)))?),
            11 => Array::I64(fixed(n, || Ok(i64::from_le_bytes(self.array(&what)?)))?),
            12 => Array::F64(fixed(n, || Ok(f64::from_le_bytes(self.array(&what)?)))?),
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
}
