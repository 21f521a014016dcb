//! The filesystem a block's guest sees: WASI preopens cut to its file
//! restrictions, and the transaction that makes a restricted block's
//! changes all-or-nothing.
//!
//! The workspace is mounted at [`GUEST_WORKSPACE`]:
//!
//! - unrestricted: the workspace itself, writable (changes land directly);
//! - read-only (`[]`): the workspace read-only and `.output/` writable;
//! - directory prefixes (`src/workers/**`): the workspace read-only, with a
//!   staged copy of each prefix directory mounted writable on top. wasi-libc
//!   resolves a path through the longest matching preopen, so a write under
//!   a prefix lands in the copy and anything else fails in the guest;
//! - any exact pattern (`**/*.md`): the root is a staged copy too, writable.
//!
//! When the block succeeds, the staged copies are diffed with the workspace
//! and applied — for a staged root only if every change matches a pattern,
//! otherwise the block fails and nothing is applied. When the block fails,
//! the copies are discarded: the workspace stays as the last successful
//! block left it. `.output/` is always mounted directly.
//!
//! A read-only mount is never placed inside a writable one (a guest calling
//! WASI directly could write through the writable parent). Mount points and
//! staged directories are reached only through real directories: a symlink
//! planted in the workspace can never redirect a mount, and WASI itself
//! refuses `..`, absolute paths and symlinks that lead out of a preopen.

use std::path::{Path, PathBuf};

use wasmtime_wasi::{FsPerms, WasiCtxBuilder};
use wfhost_core::workspace;
use wfhost_core::workspace::restrictions::{OUTPUT_DIR, RestrictionPlan};

/// Where the workspace appears inside the guest.
pub const GUEST_WORKSPACE: &str = "/workspace";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub host: PathBuf,
    pub guest: String,
    pub writable: bool,
}

/// The mounts of one block execution, and its transaction if it has one.
pub struct Sandbox {
    mounts: Vec<Mount>,
    transaction: Option<Transaction>,
}

/// Staged copies a block writes to instead of the workspace: applied when
/// the block succeeds, discarded when it fails.
struct Transaction {
    dir: tempfile::TempDir,
    workspace: PathBuf,
    plan: RestrictionPlan,
    /// The root is a staged copy (exact patterns are in force).
    staged_root: bool,
    /// The staged copies as they were handed to the guest. Only what the
    /// guest changed relative to them is applied: the live workspace may
    /// have changed meanwhile through a host capability (an agent CLI or an
    /// exec command works on it directly), and those changes stay.
    snapshots: Vec<(Option<String>, workspace::Snapshot)>,
}

fn nothing_skipped(_: &str) -> bool {
    false
}

impl Transaction {
    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn staged_dir(&self, rel: &str) -> PathBuf {
        self.dir.path().join("dirs").join(rel)
    }

    /// What the guest changed in the staged root (`None`) or in the staged
    /// writable directory `rel`.
    fn guest_changes(&self, rel: Option<&str>) -> std::io::Result<Vec<workspace::Change>> {
        match self.snapshots.iter().find(|(r, _)| r.as_deref() == rel) {
            Some((_, snapshot)) => snapshot.changes(),
            None => Ok(Vec::new()),
        }
    }
}

impl Sandbox {
    /// Prepare the mounts for `plan` over `workspace` (an absolute path).
    pub fn prepare(workspace: &Path, plan: &RestrictionPlan) -> Result<Sandbox, String> {
        let fs_err =
            |what: &str, e: std::io::Error| format!("cannot prepare the sandbox ({what}): {e}");
        let output = output_dir(workspace).map_err(|e| fs_err("`.output`", e))?;
        let output_mount = Mount {
            host: output,
            guest: format!("{GUEST_WORKSPACE}/{OUTPUT_DIR}"),
            writable: true,
        };
        if plan.is_unrestricted() {
            return Ok(Sandbox {
                mounts: vec![Mount {
                    host: workspace.to_path_buf(),
                    guest: GUEST_WORKSPACE.into(),
                    writable: true,
                }],
                transaction: None,
            });
        }
        if plan.writable_dirs().is_empty() && !plan.needs_staging() {
            return Ok(Sandbox {
                mounts: vec![
                    Mount {
                        host: workspace.to_path_buf(),
                        guest: GUEST_WORKSPACE.into(),
                        writable: false,
                    },
                    output_mount,
                ],
                transaction: None,
            });
        }
        let mut tx = Transaction {
            snapshots: Vec::new(),
            dir: tempfile::Builder::new()
                .prefix(&wfhost_exec::scratch::prefix("wfhost-stage-"))
                .tempdir_in(wfhost_exec::scratch::dir_for(staged_size(workspace, plan)))
                .map_err(|e| fs_err("staging directory", e))?,
            workspace: workspace.to_path_buf(),
            plan: plan.clone(),
            staged_root: plan.needs_staging(),
        };
        let mut mounts = Vec::new();
        if tx.staged_root {
            let root = tx.root();
            workspace::copy_tree(workspace, &root, &|p| plan.in_writable_dir(p))
                .map_err(|e| fs_err("staging copy", e))?;
            // Empty stand-ins keep the writable directories visible in
            // listings of their parents.
            for rel in plan
                .writable_dirs()
                .iter()
                .map(String::as_str)
                .chain([OUTPUT_DIR])
            {
                workspace::ensure_real_dir(&root, rel, true)
                    .map_err(|e| fs_err("staging copy", e))?;
            }
            let snapshot = workspace::Snapshot::take(&root, nothing_skipped, &|_| false, &|_| {
                tx.dir.path().join("snapshot-root")
            })
            .map_err(|e| fs_err("staging copy", e))?;
            tx.snapshots.push((None, snapshot));
            mounts.push(Mount {
                host: root,
                guest: GUEST_WORKSPACE.into(),
                writable: true,
            });
        } else {
            mounts.push(Mount {
                host: workspace.to_path_buf(),
                guest: GUEST_WORKSPACE.into(),
                writable: false,
            });
        }
        for rel in plan.writable_dirs() {
            let staged = tx.staged_dir(rel);
            // Refuses a directory reached through a symlink; a missing one
            // starts empty and is created only if the block succeeds.
            match workspace::ensure_real_dir(workspace, rel, false) {
                Ok(real) => workspace::copy_tree(&real, &staged, &|_| false)
                    .map_err(|e| fs_err(&format!("writable directory `{rel}`"), e))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    std::fs::create_dir_all(&staged)
                        .map_err(|e| fs_err(&format!("writable directory `{rel}`"), e))?
                }
                Err(e) => return Err(fs_err(&format!("writable directory `{rel}`"), e)),
            }
            let snapshot = workspace::Snapshot::take(&staged, nothing_skipped, &|_| false, &|_| {
                tx.dir.path().join("snapshot-dirs").join(rel)
            })
            .map_err(|e| fs_err(&format!("writable directory `{rel}`"), e))?;
            tx.snapshots.push((Some(rel.clone()), snapshot));
            mounts.push(Mount {
                host: staged,
                guest: format!("{GUEST_WORKSPACE}/{rel}"),
                writable: true,
            });
        }
        mounts.push(output_mount);
        Ok(Sandbox {
            mounts,
            transaction: Some(tx),
        })
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

    /// After the block: a successful block's staged changes are applied if
    /// all are permitted (else the block fails and none is applied); a failed
    /// block's are discarded, leaving the workspace as it was. Returns the
    /// workspace-relative paths applied.
    pub fn finish(
        self,
        block_succeeded: bool,
        limits: &wfhost_core::manifest::WriteLimits,
    ) -> Result<Vec<String>, String> {
        let Some(tx) = self.transaction else {
            return Ok(Vec::new());
        };
        if !block_succeeded {
            return Ok(Vec::new());
        }
        let plan = &tx.plan;
        let mut root_changes = Vec::new();
        if tx.staged_root {
            root_changes = tx
                .guest_changes(None)
                .map_err(|e| format!("cannot compare the staged workspace: {e}"))?
                .into_iter()
                .filter(|c| !plan.in_writable_dir(&c.path))
                .collect();
            let violations = workspace::violations(&root_changes, plan);
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
        }
        let mut dir_changes = Vec::new();
        for rel in plan.writable_dirs() {
            workspace::ensure_real_dir(&tx.workspace, rel, true)
                .map_err(|e| format!("cannot apply the changes to `{rel}`: {e}"))?;
            let changes = tx
                .guest_changes(Some(rel))
                .map_err(|e| format!("cannot compare the staged `{rel}`: {e}"))?;
            dir_changes.push((rel.clone(), changes));
        }
        let (mut files, mut bytes) = written(&root_changes, &tx.root());
        for (rel, changes) in &dir_changes {
            let (f, b) = written(changes, &tx.staged_dir(rel));
            files += f;
            bytes += b;
        }
        limits
            .check(files, bytes)
            .map_err(|e| format!("{e}; none of its changes were applied"))?;
        // One transaction for the root and every writable directory: all of
        // the block's changes land, or none (a full disk, a planted link).
        let mut apply = workspace::Apply::default();
        apply
            .stage(&root_changes, &tx.root(), &tx.workspace, "")
            .map_err(|e| format!("cannot apply the staged changes (none were applied): {e}"))?;
        let mut applied: Vec<String> = root_changes.into_iter().map(|c| c.path).collect();
        for (rel, changes) in dir_changes {
            apply
                .stage(&changes, &tx.staged_dir(&rel), &tx.workspace, &rel)
                .map_err(|e| {
                    format!("cannot apply the changes to `{rel}` (none were applied): {e}")
                })?;
            applied.extend(changes.into_iter().map(|c| format!("{rel}/{}", c.path)));
        }
        apply
            .commit()
            .map_err(|e| format!("cannot apply the staged changes (none were applied): {e}"))?;
        Ok(applied)
    }
}

/// `workspace/.output`, made sure to be a real directory of the
/// workspace (see [`workspace::ensure_host_dir`]). That check opens the
/// workspace and the directory and looks for the `.gitignore`, a third of
/// a no-op block's host time; so a directory this process already checked
/// is only looked at (`lstat`) to be the same one, still a directory and
/// not a link. The guest's mount is opened by path after either check, as
/// before.
fn output_dir(workspace: &Path) -> std::io::Result<PathBuf> {
    use std::collections::HashMap;
    use std::os::unix::fs::MetadataExt;
    use std::sync::{Mutex, OnceLock};
    static CHECKED: OnceLock<Mutex<HashMap<PathBuf, (u64, u64)>>> = OnceLock::new();
    let checked = CHECKED.get_or_init(Default::default);
    let path = workspace.join(OUTPUT_DIR);
    let identity = |m: &std::fs::Metadata| (m.dev(), m.ino());
    if let Ok(meta) = std::fs::symlink_metadata(&path)
        && meta.file_type().is_dir()
        && checked.lock().unwrap().get(workspace) == Some(&identity(&meta))
    {
        return Ok(path);
    }
    let path = workspace::ensure_host_dir(workspace, OUTPUT_DIR)?;
    let meta = std::fs::symlink_metadata(&path)?;
    let mut checked = checked.lock().unwrap();
    // Lanes are workspaces too: a long-lived process forgets old ones.
    if checked.len() >= 1024 {
        checked.clear();
    }
    checked.insert(workspace.to_path_buf(), identity(&meta));
    Ok(path)
}

/// About how many bytes the staged copies of `plan` take (counting no
/// further than what keeps them out of memory): the workspace when the
/// root is staged, else the writable directories.
fn staged_size(workspace: &Path, plan: &RestrictionPlan) -> u64 {
    use wfhost_exec::lanes::{MEMORY_LANE_MAX_BYTES, tree_size};
    if plan.needs_staging() {
        return tree_size(workspace, MEMORY_LANE_MAX_BYTES);
    }
    plan.writable_dirs().iter().fold(0, |total: u64, rel| {
        total.saturating_add(tree_size(&workspace.join(rel), MEMORY_LANE_MAX_BYTES))
    })
}

/// Files created or modified by `changes` (taken from `from`) and their
/// bytes.
fn written(changes: &[workspace::Change], from: &Path) -> (u64, u64) {
    changes
        .iter()
        .filter(|c| c.kind != workspace::ChangeKind::Removed)
        .filter(|c| c.entry != workspace::EntryKind::Dir)
        .fold((0, 0), |(files, bytes), c| {
            let len = std::fs::symlink_metadata(from.join(&c.path)).map_or(0, |m| m.len());
            (files + 1, bytes + len)
        })
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
        // The writable directory is a staged copy until the block succeeds.
        assert!(!ws.path().join("src/workers").exists());
        assert!(sb.mounts()[1].host.ends_with("dirs/src/workers"));
        sb.finish(true, &Default::default()).unwrap();
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
