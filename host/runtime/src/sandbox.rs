//! The filesystem a block's guest sees: WASI preopens cut to its file
//! restrictions.
//!
//! The workspace is mounted at [`GUEST_WORKSPACE`]:
//!
//! - unrestricted: the workspace, writable;
//! - directory prefixes only (`src/workers/**`): the workspace read-only,
//!   each prefix directory writable on top of it, and `.output/` writable.
//!   wasi-libc resolves a path through the longest matching preopen, so a
//!   write under a writable prefix lands, anything else fails in the guest;
//! - any exact pattern (`**/*.md`): the root is a staged copy, writable;
//!   prefix directories and `.output/` are mounted from the real workspace on
//!   top of it. After a successful block the copy is diffed with the
//!   workspace and its changes applied only if every one is permitted;
//!   otherwise the block fails and none of them is applied.
//!
//! A read-only mount is never placed inside a writable one (a guest calling
//! WASI directly could write through the writable parent). Mount points are
//! opened only through real directories: a symlink planted in the
//! workspace can never redirect a mount, and WASI itself refuses `..`,
//! absolute paths and symlinks that lead out of a preopen.

use std::path::{Path, PathBuf};

use wasmtime_wasi::{FsPerms, WasiCtxBuilder};
use wfhost_core::restrictions::{OUTPUT_DIR, RestrictionPlan};
use wfhost_core::workspace;

/// Where the workspace appears inside the guest.
pub const GUEST_WORKSPACE: &str = "/workspace";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub host: PathBuf,
    pub guest: String,
    pub writable: bool,
}

/// The mounts of one block execution, and its staging area if it has one.
pub struct Sandbox {
    mounts: Vec<Mount>,
    staging: Option<Staging>,
}

struct Staging {
    dir: tempfile::TempDir,
    workspace: PathBuf,
    plan: RestrictionPlan,
}

impl Sandbox {
    /// Prepare the mounts for `plan` over `workspace` (an absolute path).
    pub fn prepare(workspace: &Path, plan: &RestrictionPlan) -> Result<Sandbox, String> {
        let fs_err =
            |what: &str, e: std::io::Error| format!("cannot prepare the sandbox ({what}): {e}");
        if plan.is_unrestricted() {
            return Ok(Sandbox {
                mounts: vec![Mount {
                    host: workspace.to_path_buf(),
                    guest: GUEST_WORKSPACE.into(),
                    writable: true,
                }],
                staging: None,
            });
        }
        let mut mounts = Vec::new();
        let mut staging = None;
        if plan.needs_staging() {
            let dir = tempfile::Builder::new()
                .prefix("wfhost-stage-")
                .tempdir()
                .map_err(|e| fs_err("staging directory", e))?;
            let skip = |p: &str| plan.in_writable_dir(p);
            workspace::copy_tree(workspace, dir.path(), &skip)
                .map_err(|e| fs_err("staging copy", e))?;
            // Empty stand-ins keep the writable directories visible in
            // listings of their parents.
            for rel in plan
                .writable_dirs()
                .iter()
                .map(String::as_str)
                .chain([OUTPUT_DIR])
            {
                workspace::ensure_real_dir(dir.path(), rel, true)
                    .map_err(|e| fs_err("staging copy", e))?;
            }
            mounts.push(Mount {
                host: dir.path().to_path_buf(),
                guest: GUEST_WORKSPACE.into(),
                writable: true,
            });
            staging = Some(Staging {
                dir,
                workspace: workspace.to_path_buf(),
                plan: plan.clone(),
            });
        } else {
            mounts.push(Mount {
                host: workspace.to_path_buf(),
                guest: GUEST_WORKSPACE.into(),
                writable: false,
            });
        }
        for rel in plan
            .writable_dirs()
            .iter()
            .map(String::as_str)
            .chain([OUTPUT_DIR])
        {
            let host = workspace::ensure_real_dir(workspace, rel, true)
                .map_err(|e| fs_err(&format!("writable directory `{rel}`"), e))?;
            mounts.push(Mount {
                host,
                guest: format!("{GUEST_WORKSPACE}/{rel}"),
                writable: true,
            });
        }
        Ok(Sandbox { mounts, staging })
    }

    pub fn mounts(&self) -> &[Mount] {
        &self.mounts
    }

    /// Add the mounts to a WASI context.
    pub fn apply_to(&self, builder: &mut WasiCtxBuilder) -> Result<(), String> {
        for m in &self.mounts {
            let perms = if m.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            builder
                .preopened_dir(&m.host, &m.guest, perms)
                .map_err(|e| format!("cannot mount {} at {}: {e}", m.host.display(), m.guest))?;
        }
        Ok(())
    }

    /// After the block: apply a successful block's staged changes if all are
    /// permitted. Returns the paths applied. A failed block's staged changes
    /// are discarded.
    pub fn finish(self, block_succeeded: bool) -> Result<Vec<String>, String> {
        let Some(staging) = self.staging else {
            return Ok(Vec::new());
        };
        if !block_succeeded {
            return Ok(Vec::new());
        }
        let Staging {
            dir,
            workspace,
            plan,
        } = staging;
        let skip = |p: &str| plan.in_writable_dir(p);
        let changes = workspace::diff(&workspace, dir.path(), &skip)
            .map_err(|e| format!("cannot compare the staged workspace: {e}"))?;
        let violations = workspace::violations(&changes, &plan);
        if !violations.is_empty() {
            let mut paths: Vec<&str> = violations.iter().map(|c| c.path.as_str()).collect();
            let more = paths.len().saturating_sub(10);
            paths.truncate(10);
            return Err(format!(
                "the block changed paths outside its file restrictions ({}): {}{}; none of its staged changes were applied",
                plan.exact_patterns().join(", "),
                paths.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        workspace::apply(&changes, dir.path(), &workspace)
            .map_err(|e| format!("cannot apply the staged changes: {e}"))?;
        Ok(changes.into_iter().map(|c| c.path).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(p: &[&str]) -> RestrictionPlan {
        RestrictionPlan::new(Some(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>())).unwrap()
    }

    #[test]
    fn prefix_restrictions_mount_read_only_root_and_writable_dirs() {
        let ws = tempfile::tempdir().unwrap();
        let sb = Sandbox::prepare(ws.path(), &plan(&["src/workers/**"])).unwrap();
        let m: Vec<(&str, bool)> = sb
            .mounts()
            .iter()
            .map(|m| (m.guest.as_str(), m.writable))
            .collect();
        assert_eq!(
            m,
            [
                ("/workspace", false),
                ("/workspace/src/workers", true),
                ("/workspace/.output", true)
            ]
        );
        assert!(ws.path().join("src/workers").is_dir());
    }

    #[test]
    fn never_mounts_read_only_inside_writable() {
        let ws = tempfile::tempdir().unwrap();
        for p in [vec!["a/**", "a/b/**"], vec!["**/*.md", "docs/**"], vec![]] {
            let sb = Sandbox::prepare(ws.path(), &plan(&p)).unwrap();
            for ro in sb.mounts().iter().filter(|m| !m.writable) {
                for rw in sb.mounts().iter().filter(|m| m.writable) {
                    assert!(
                        !ro.guest.starts_with(&format!("{}/", rw.guest)),
                        "{ro:?} inside {rw:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn symlinked_writable_dir_is_refused() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("src")).unwrap();
        let err = Sandbox::prepare(ws.path(), &plan(&["src/**"]))
            .err()
            .unwrap();
        assert!(err.contains("symbolic link"), "{err}");
    }
}
