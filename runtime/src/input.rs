//! Files and text a user hands to skillc, read defensively. Only regular files are
//! read as inputs (models, configs, references, bundles, trajectories): a FIFO
//! would block the run forever and a device would never end, so both are refused
//! before a byte is read. I/O errors read as plain sentences ("no such file or
//! directory", not "entity not found"), and text copied from an input into a
//! report is capped.

use std::borrow::Cow;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

use thiserror::Error;

/// An input file that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{path}: {problem}")]
pub struct InputError {
    pub path: String,
    pub problem: Problem,
}

/// Why, without the path (for errors that name the file themselves).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Problem {
    #[error("is {0}, not a regular file")]
    NotRegular(&'static str),
    #[error("{0}")]
    Io(String),
    #[error("not valid UTF-8 text")]
    NotUtf8,
    #[error("is {len} bytes, more than the {max} such a file may hold")]
    TooLarge { len: u64, max: u64 },
}

impl InputError {
    fn new(path: &Path, problem: Problem) -> Self {
        InputError {
            path: path.display().to_string(),
            problem,
        }
    }

    fn io(path: &Path, e: &io::Error) -> Self {
        Self::new(path, Problem::Io(describe(e)))
    }
}

/// An I/O error as a sentence fragment without the OS's error number.
pub fn describe(e: &io::Error) -> String {
    let plain = match e.kind() {
        io::ErrorKind::NotFound => "no such file or directory",
        io::ErrorKind::PermissionDenied => "permission denied",
        io::ErrorKind::IsADirectory => "is a directory",
        io::ErrorKind::NotADirectory => "a part of the path is not a directory",
        io::ErrorKind::AlreadyExists => "already exists",
        io::ErrorKind::DirectoryNotEmpty => "the directory is not empty",
        io::ErrorKind::ReadOnlyFilesystem => "the file system is read-only",
        io::ErrorKind::StorageFull => "no space left on the device",
        io::ErrorKind::UnexpectedEof => "ends early (truncated)",
        _ => "",
    };
    if !plain.is_empty() {
        return plain.to_string();
    }
    let text = e.to_string();
    match text.find(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// What a file type is, for a refusal.
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Whether `path` (following symbolic links) is a regular file; `false` when it
/// cannot be examined.
pub fn is_regular_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// Opens `path` for reading when it is a regular file. The open itself cannot
/// block: on Unix it is non-blocking (a FIFO without a writer would otherwise
/// wait forever), and the type is checked on the opened file, so a path swapped
/// between the check and the open is still refused.
pub fn open_regular(path: &Path) -> Result<File, InputError> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| InputError::io(path, &e))?;
    let metadata = file.metadata().map_err(|e| InputError::io(path, &e))?;
    if !metadata.is_file() {
        return Err(InputError::new(
            path,
            Problem::NotRegular(kind_of(metadata.file_type())),
        ));
    }
    Ok(file)
}

/// The bytes of a regular file.
pub fn read(path: &Path) -> Result<Vec<u8>, InputError> {
    let mut file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| InputError::io(path, &e))?;
    Ok(bytes)
}

/// The bytes of a regular file of at most `max` bytes: a larger one is
/// refused by its size before it is read (a file that grows while it is read
/// stops at `max + 1` bytes and is refused too).
pub fn read_at_most(path: &Path, max: u64) -> Result<Vec<u8>, InputError> {
    let file = open_regular(path)?;
    let too_large = |len: u64| InputError::new(path, Problem::TooLarge { len, max });
    let len = file.metadata().map_err(|e| InputError::io(path, &e))?.len();
    if len > max {
        return Err(too_large(len));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| InputError::io(path, &e))?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// The text of a regular UTF-8 file of at most `max` bytes.
pub fn read_to_string_at_most(path: &Path, max: u64) -> Result<String, InputError> {
    String::from_utf8(read_at_most(path, max)?).map_err(|_| InputError::new(path, Problem::NotUtf8))
}

/// The text of a regular UTF-8 file.
pub fn read_to_string(path: &Path) -> Result<String, InputError> {
    String::from_utf8(read(path)?).map_err(|_| InputError::new(path, Problem::NotUtf8))
}

/// `text` cut to at most `max_chars` characters, saying how much was left out.
pub fn capped(text: &str, max_chars: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max_chars) {
        None => Cow::Borrowed(text),
        Some((cut, _)) => {
            let left = text[cut..].chars().count();
            Cow::Owned(format!("{}… ({left} more characters)", &text[..cut]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_sentences() {
        let e = io::Error::from(io::ErrorKind::NotFound);
        assert_eq!(e.to_string(), "entity not found");
        assert_eq!(describe(&e), "no such file or directory");
        let e = io::Error::from_raw_os_error(5);
        assert!(!describe(&e).contains("os error"), "{}", describe(&e));
    }

    #[test]
    fn long_text_is_capped_with_a_count() {
        assert_eq!(capped("short", 10), "short");
        assert_eq!(capped("abcdefghij", 4), "abcd… (6 more characters)");
        assert_eq!(capped("ééé", 1), "é… (2 more characters)");
    }

    #[test]
    fn a_directory_is_not_read_as_a_file() {
        let err = read(Path::new(env!("CARGO_MANIFEST_DIR"))).expect_err("a directory");
        assert_eq!(err.problem, Problem::NotRegular("a directory"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_device_is_refused() {
        let err = read(Path::new("/dev/zero")).expect_err("a device");
        assert!(err.to_string().contains("a character device"), "{err}");
    }
}
