//! One run per workspace: a run holds an exclusive lock on its workspace
//! directory while it executes, so two runs never write the same files at
//! once. The lock is a `flock` on the directory itself (nothing is written
//! into the workspace; the kernel releases it when the process dies), and
//! the owner's run id and pid are noted under the wfhost home so that a
//! refusal can name them.

use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::{exit, report_error};

/// Held while a run executes in a workspace.
pub struct WorkspaceLock {
    _dir: std::fs::File,
    owner_file: PathBuf,
}

impl Drop for WorkspaceLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.owner_file);
    }
}

fn owner_file(home: &Path, workspace: &Path) -> PathBuf {
    let key = hex::encode(Sha256::digest(workspace.as_os_str().as_encoded_bytes()));
    home.join("locks")
        .join(format!("workspace-{}.owner", &key[..32]))
}

/// Lock `workspace` for `run_id`, or explain who holds it (exit 4).
/// `shared`: the user asked to share it (`--shared-workspace`).
pub fn lock(
    workspace: &Path,
    run_id: &str,
    home: &Path,
    shared: bool,
) -> Result<Option<WorkspaceLock>, u8> {
    if shared {
        return Ok(None);
    }
    let canonical = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(&canonical)
        .map_err(|e| {
            report_error(format!("workspace {}: {e}", workspace.display()));
            exit::BAD_INPUT
        })?;
    let owner_file = owner_file(home, &canonical);
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let owner = std::fs::read_to_string(&owner_file)
            .ok()
            .and_then(|t| {
                let mut parts = t.split_whitespace();
                Some(format!("run {} (pid {})", parts.next()?, parts.next()?))
            })
            .unwrap_or_else(|| "another wfhost process".to_string());
        report_error(format!(
            "workspace {} is in use by {owner}; wait for it, cancel it, or pass --shared-workspace to run in it anyway",
            workspace.display()
        ));
        return Err(exit::BUSY);
    }
    if let Some(parent) = owner_file.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let _ = std::fs::write(&owner_file, format!("{run_id} {}\n", std::process::id()));
    Ok(Some(WorkspaceLock {
        _dir: dir,
        owner_file,
    }))
}
