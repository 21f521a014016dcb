//! A run's workspace, opened once for every surface: checked to be a
//! directory, canonicalised, refused when it holds wfhost's own state, and
//! locked while a run executes in it.
//!
//! **Guard.** Plugins and exec blocks can write to the workspace (and read
//! it). If the workspace held the wfhost home (the run store: every run's
//! manifest, events and payloads) or the compiled-plugin cache (native code
//! the host loads), a block could read other runs or plant code. So such a
//! workspace is refused before anything is written.
//!
//! **Lock.** One run per workspace: a run holds an exclusive lock on its
//! workspace directory while it executes, so two runs never write the same
//! files at once. The lock is a `flock` on the directory itself (nothing is
//! written into the workspace; the kernel releases it when the process
//! dies), and the holder's run id and pid are noted under the wfhost home
//! (`locks/workspace-<hash>.owner`, overwritten by each holder) so that a
//! refusal can name them.

use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wfhost_protocol::AppError;

use crate::plugins::RuntimeChoice;

/// A workspace that was checked: a directory, holding neither the home nor
/// the compiled-plugin cache.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// As the user named it (for messages and the run's record).
    given: PathBuf,
    /// Resolved once: every later use refers to this directory.
    canonical: PathBuf,
}

impl Workspace {
    /// Open `given` for runs against the store in `home` with the plugin
    /// cache of `runtime`.
    pub fn open(given: &Path, home: &Path, runtime: &RuntimeChoice) -> Result<Self, AppError> {
        match std::fs::metadata(given) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(AppError::bad_input(format!(
                    "workspace {} is not a directory",
                    given.display()
                ))
                .at(given.display().to_string()));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let shown = given.display().to_string();
                return Err(AppError::bad_input(format!(
                    "workspace {shown} does not exist: create it first: `mkdir -p {}`",
                    wfhost_core::text::shell_word(&shown)
                ))
                .at(shown));
            }
            Err(e) => {
                return Err(
                    AppError::bad_input(format!("workspace {}: {e}", given.display()))
                        .at(given.display().to_string()),
                );
            }
        }
        let canonical = given.canonicalize().map_err(|e| {
            AppError::bad_input(format!("workspace {}: {e}", given.display()))
                .at(given.display().to_string())
        })?;
        let workspace = Workspace {
            given: given.to_path_buf(),
            canonical,
        };
        workspace.guard(home, runtime)?;
        Ok(workspace)
    }

    /// The directory, resolved.
    pub fn path(&self) -> &Path {
        &self.canonical
    }

    /// The directory as it was named, made absolute (what a run records).
    pub fn absolute(&self) -> PathBuf {
        std::path::absolute(&self.given).unwrap_or_else(|_| self.given.clone())
    }

    /// Refuse a workspace that is, or is an ancestor of, the wfhost home
    /// (and so the run store in it) or the compiled-plugin cache in use.
    fn guard(&self, home: &Path, runtime: &RuntimeChoice) -> Result<(), AppError> {
        let mut state = vec![(
            home.to_path_buf(),
            "the wfhost home (the run store)",
            "--home or WFHOST_HOME",
        )];
        if let Some(cache) = runtime.cache_dir() {
            state.push((
                cache,
                "the compiled-plugin cache",
                "--cache-dir or WFHOST_CACHE_DIR",
            ));
        }
        for (dir, what, option) in state {
            if resolved(&dir).starts_with(&self.canonical) {
                return Err(AppError::bad_input(format!(
                    "workspace {} contains {what} {}: blocks could read or change it; use a workspace that does not contain it, or move it with {option}",
                    self.given.display(),
                    dir.display()
                ))
                .at(self.given.display().to_string()));
            }
        }
        Ok(())
    }

    /// Lock the workspace for `run_id`, or say who holds it (busy).
    /// `shared`: the user asked to share it (`--shared-workspace`): no lock.
    pub fn lock(
        &self,
        run_id: &str,
        home: &Path,
        shared: bool,
    ) -> Result<Option<WorkspaceLock>, AppError> {
        if shared {
            return Ok(None);
        }
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(&self.canonical)
            .map_err(|e| AppError::bad_input(format!("workspace {}: {e}", self.given.display())))?;
        let owner_file = owner_file(home, &self.canonical);
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let owner = std::fs::read_to_string(&owner_file)
                .ok()
                .and_then(|t| {
                    let mut parts = t.split_whitespace();
                    Some(format!("run {} (pid {})", parts.next()?, parts.next()?))
                })
                .unwrap_or_else(|| "another wfhost process".to_string());
            return Err(AppError::busy(format!(
                "workspace {} is in use by {owner}; wait for it, cancel it, or pass --shared-workspace to run in it anyway",
                self.given.display()
            ))
            .at(self.given.display().to_string()));
        }
        // The holder, for a refusal to name: rewritten only when another
        // holder wrote it last (a file written, or made and removed, per
        // hold costs more than the rest of a short hold, as an MCP advance
        // is). Read only while the lock is held, so it names the holder.
        let note = format!("{run_id} {}\n", std::process::id());
        let written = match std::fs::read(&owner_file) {
            Ok(found) if found == note.as_bytes() => Ok(()),
            _ => owner_file
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&owner_file, &note)),
        };
        drop(written);
        Ok(Some(WorkspaceLock { _dir: dir }))
    }
}

/// Held while a run executes in a workspace (the kernel lets go of it
/// when it is dropped, or when the process dies).
pub struct WorkspaceLock {
    _dir: std::fs::File,
}

fn owner_file(home: &Path, workspace: &Path) -> PathBuf {
    let key = hex::encode(Sha256::digest(workspace.as_os_str().as_encoded_bytes()));
    home.join("locks")
        .join(format!("workspace-{}.owner", &key[..32]))
}

/// `path` with symlinks resolved as far as it exists (the rest need not
/// exist yet: a home or cache is created on first use).
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wfhost_protocol::ErrorKind;

    fn choice(cache: Option<&Path>) -> RuntimeChoice {
        RuntimeChoice {
            cache_dir: cache.map(Path::to_path_buf),
            cache_disabled: cache.is_none(),
            executor: None,
        }
    }

    fn refusal(ws: &Path, home: &Path, cache: Option<&Path>) -> String {
        let e = Workspace::open(ws, home, &choice(cache)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadInput);
        e.message
    }

    #[test]
    fn a_workspace_holding_the_home_or_the_cache_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let outside = dir.path().join("home");
        assert!(Workspace::open(&ws, &outside, &choice(None)).is_ok());
        // Not yet created, below the workspace.
        assert!(refusal(&ws, &ws.join(".local/share/wfhost"), None).contains("the wfhost home"));
        assert!(refusal(&ws, &outside, Some(&ws.join("cache"))).contains("compiled-plugin cache"));
        // Equal, and reached through a symlink.
        refusal(&ws, &ws, None);
        std::os::unix::fs::symlink(&ws, dir.path().join("link")).unwrap();
        refusal(&ws, &dir.path().join("link/home"), None);
        // A workspace inside the home does not contain it.
        let inner = outside.join("ws");
        std::fs::create_dir_all(&inner).unwrap();
        assert!(Workspace::open(&inner, &outside, &choice(None)).is_ok());
        // Not a directory, or missing.
        std::fs::write(dir.path().join("file"), "").unwrap();
        assert!(refusal(&dir.path().join("file"), &outside, None).contains("not a directory"));
        refusal(&dir.path().join("missing"), &outside, None);
    }

    #[test]
    fn a_locked_workspace_names_its_holder_and_is_free_again_after() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let ws = Workspace::open(dir.path(), &home.join("x/.."), &choice(None));
        // The home under the workspace: refused; use a separate tree.
        assert!(ws.is_err());
        let ws_dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(ws_dir.path(), &home, &choice(None)).unwrap();
        let held = ws.lock("run-a", &home, false).unwrap();
        assert!(held.is_some());
        // flock locks are per open file description: a second open in this
        // process is refused too.
        let e = ws.lock("run-b", &home, false).err().unwrap();
        assert_eq!(e.kind, ErrorKind::Busy);
        assert!(e.message.contains("run run-a (pid "), "{}", e.message);
        assert!(ws.lock("run-b", &home, true).unwrap().is_none());
        drop(held);
        assert!(ws.lock("run-b", &home, false).unwrap().is_some());
    }
}
