//! The per-run execution lock: a `flock` on `<home>/locks/<run-id>.lock`.
//!
//! The kernel releases the lock when its holder dies, kill -9 included, so
//! a crashed run never stays "locked" and no lease expiry has to be
//! guessed; a live holder keeps every other process from executing the
//! same run at the same time.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::{RunId, StoreError};

/// Held while a process executes a run; released on drop or death.
#[derive(Debug)]
pub struct RunLock {
    // Keeping the descriptor open keeps the lock; the file itself stays
    // (another process may be opening it).
    _file: File,
}

/// Record the holder's pid in the lock file, in place: a process taking
/// the lock again (an MCP server advancing a run call after call) finds it
/// there and writes nothing, and no write truncates the file (on ext4 a
/// truncation to zero forces the file's pages to disk).
fn write_pid(file: &mut File) -> std::io::Result<()> {
    let ours = format!("{:<10}", std::process::id());
    let mut found = [0u8; 16];
    let n = file.read_at(&mut found, 0)?;
    if &found[..n] == ours.as_bytes() {
        return Ok(());
    }
    file.write_all_at(ours.as_bytes(), 0)?;
    if n > ours.len() {
        file.set_len(ours.len() as u64)?;
    }
    Ok(())
}

impl RunLock {
    fn path(home: &Path, run_id: &RunId) -> PathBuf {
        home.join("locks").join(format!("{run_id}.lock"))
    }

    /// Take the lock, or fail at once naming the holder.
    pub fn acquire(home: &Path, run_id: &RunId) -> Result<RunLock, StoreError> {
        let path = Self::path(home, run_id);
        let io = |e: std::io::Error| StoreError::Io {
            path: path.clone(),
            message: format!("cannot use the run lock: {e}"),
        };
        std::fs::create_dir_all(path.parent().expect("lock files live in a directory"))
            .map_err(io)?;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        // SAFETY: flock on a file descriptor we own.
        let try_lock = || unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        let mut rc = try_lock();
        // A probe (`is_held`) holds a shared lock for a few microseconds:
        // a real holder is still there after a short wait, a probe is not.
        for _ in 0..10 {
            if rc == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
            rc = try_lock();
        }
        if rc != 0 {
            let pid = std::fs::read_to_string(&path)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            return Err(StoreError::Busy {
                run_id: run_id.to_string(),
                pid,
            });
        }
        write_pid(&mut file).map_err(io)?;
        Ok(RunLock { _file: file })
    }

    /// Whether some process holds the lock now.
    pub fn is_held(home: &Path, run_id: &RunId) -> bool {
        let path = Self::path(home, run_id);
        let Ok(file) = File::open(&path) else {
            return false;
        };
        // SAFETY: flock on a file descriptor we own; a shared probe that is
        // released at once.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
        if rc == 0 {
            unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
            false
        } else {
            true
        }
    }

    /// The pid of the process holding the lock, if one does and has
    /// written it.
    pub fn holder(home: &Path, run_id: &RunId) -> Option<u32> {
        if !Self::is_held(home, run_id) {
            return None;
        }
        std::fs::read_to_string(Self::path(home, run_id))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }

    /// Remove the lock file of a run that is gone (gc).
    pub(crate) fn remove(home: &Path, run_id: &RunId) {
        let _ = std::fs::remove_file(Self::path(home, run_id));
    }
}
