//! An exclusive lock on an output folder: an advisory lock (`flock`) on a file
//! beside it, `.<name>.skillc-lock`, which holds the owner's process id for the
//! message a second run prints while it waits.
//!
//! The lock file is removed when the lock is released, so no file is left behind.
//! That is safe because the owner unlinks the file while still holding the lock,
//! and whoever acquires a lock afterwards checks that the file it locked is still
//! the one at the path (a waiter that got the lock on an unlinked file retries).
//! A run killed with `kill -9` releases the lock with its process; the file it
//! leaves is taken over by the next run.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// A held lock; dropping it releases the lock and removes the file.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
    _file: File,
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Unlink first, unlock second (when `file` is dropped after this).
        let _ = fs::remove_file(&self.path);
    }
}

/// Takes the lock at `path`, waiting for its owner if another process holds it;
/// `waiting` is told once, with the owner's process id when it is known.
pub fn acquire(path: &Path, waiting: &mut dyn FnMut(Option<u32>)) -> io::Result<Lock> {
    let mut told = false;
    loop {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        if !flock(&file, false)? {
            if !told {
                waiting(owner(&mut file));
                told = true;
            }
            flock(&file, true)?;
        }
        if still_at(path, &file) {
            file.set_len(0)?;
            file.rewind()?;
            write!(file, "{}", std::process::id())?;
            return Ok(Lock {
                path: path.to_path_buf(),
                _file: file,
            });
        }
    }
}

/// An exclusive `flock` on `file`: waiting for it when `wait`, else `Ok(false)`
/// when another process holds it. (std's `File::lock` needs a newer Rust than the
/// workspace's minimum.)
#[cfg(unix)]
fn flock(file: &File, wait: bool) -> io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    let operation = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    loop {
        // SAFETY: a plain system call on a file descriptor `file` keeps open.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if !wait => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// Without `flock`, runs are not serialized (skillc is used on Linux).
#[cfg(not(unix))]
fn flock(_file: &File, _wait: bool) -> io::Result<bool> {
    Ok(true)
}

fn owner(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Whether `file` is still the file at `path` (not unlinked by its last owner).
#[cfg(unix)]
fn still_at(path: &Path, file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (fs::metadata(path), file.metadata()) {
        (Ok(at_path), Ok(locked)) => at_path.dev() == locked.dev() && at_path.ino() == locked.ino(),
        _ => false,
    }
}

/// Elsewhere an open file cannot be unlinked, so the file is always the one.
#[cfg(not(unix))]
fn still_at(_path: &Path, _file: &File) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    #[test]
    fn one_holder_at_a_time_and_no_file_left() {
        let dir = std::env::temp_dir().join(format!("skillc-lock-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(".out.skillc-lock");
        let inside = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (path, inside) = (path.clone(), inside.clone());
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        let lock = acquire(&path, &mut |_| {}).expect("lock");
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(lock);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert!(!path.exists(), "the lock file is removed");
        fs::remove_dir_all(&dir).ok();
    }
}
