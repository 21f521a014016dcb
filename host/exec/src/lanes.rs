//! Isolated workspaces for the lanes of a parallel group (seed 000): a
//! `git worktree` when the workspace is the top of a git repository with a
//! commit, else a copy of the tree.
//!
//! A lane starts as the main workspace *is*, not as its last commit: a
//! worktree gets the main workspace's uncommitted changes, its untracked
//! files and its `.output/` replayed, and that state is committed inside
//! the lane (on a detached HEAD, never on a branch of the user's) so that
//! what the lane's block changes is exactly `git diff` against it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use wfhost_core::workspace::{self, Change, ChangeKind, EntryKind};

/// How a lane is isolated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    GitWorktree,
    TempCopy,
}

/// One lane's workspace.
#[derive(Debug)]
pub struct Lane {
    pub name: String,
    pub path: PathBuf,
    pub isolation: Isolation,
    main: PathBuf,
}

/// Where a run's lanes live: outside the workspace, so they never show up
/// in it.
pub fn lanes_root(run_id: &str) -> PathBuf {
    std::env::temp_dir().join("wfhost-lanes").join(run_id)
}

fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        // A lane's commands must not start a repository-wide gc in the
        // user's repository on the fan-out's clock.
        .args(["-c", "gc.auto=0", "-c", "maintenance.auto=false"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// An exclusive lock on changes to `main`'s worktree bookkeeping, held
/// until dropped. Git does not protect `.git/worktrees/` against two
/// `git worktree add` at once (one can read the other's half-written
/// entry), so every wfhost thread and process making or removing lanes of
/// the same repository takes turns. The lock file is outside the
/// repository, keyed by its path.
struct RepoLock(Option<std::fs::File>);

impl RepoLock {
    fn take(main: &Path) -> RepoLock {
        use std::hash::{Hash, Hasher};
        use std::os::fd::AsRawFd;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        main.hash(&mut h);
        let dir = lanes_root("");
        let file = std::fs::create_dir_all(&dir).ok().and_then(|_| {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(format!(".lock-{:016x}", h.finish())))
                .ok()
        });
        if let Some(f) = &file {
            // SAFETY: flock on a descriptor we own; blocks until granted.
            unsafe {
                libc::flock(f.as_raw_fd(), libc::LOCK_EX);
            }
        }
        RepoLock(file)
    }
}

impl Drop for RepoLock {
    fn drop(&mut self) {
        if let Some(f) = &self.0 {
            use std::os::fd::AsRawFd;
            // SAFETY: as above.
            unsafe {
                libc::flock(f.as_raw_fd(), libc::LOCK_UN);
            }
        }
    }
}

/// Whether `dir` is the top of a git work tree whose HEAD is a commit.
fn is_git_top(dir: &Path) -> bool {
    let Ok(top) = git(dir, &["rev-parse", "--show-toplevel"]) else {
        return false;
    };
    let top = PathBuf::from(String::from_utf8_lossy(&top).trim());
    let same = match (top.canonicalize(), dir.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    same && git(dir, &["rev-parse", "--verify", "-q", "HEAD"]).is_ok()
}

fn nul_list(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

fn io(what: &str) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

const OUTPUT: &str = ".output";

/// The contract's outputs and the host's own session files
/// (`.agents-work/`, rewritten by the host at every event): never a
/// lane's change.
fn is_output(path: &str) -> bool {
    path == OUTPUT
        || path.starts_with(".output/")
        || path == ".agents-work"
        || path.starts_with(".agents-work/")
}

/// The identity git needs for the lane's base commit, whatever the user's
/// configuration says.
const IDENTITY: &[&str] = &[
    "-c",
    "user.name=wfhost",
    "-c",
    "user.email=wfhost@localhost",
    "-c",
    "commit.gpgsign=false",
];

impl Lane {
    /// Make lane `name` of the workspace `main` under `root`. A leftover of
    /// the same name (from a crash) is removed first.
    pub fn create(main: &Path, root: &Path, name: &str) -> Result<Lane, String> {
        let main = main
            .canonicalize()
            .map_err(io(&format!("workspace {}", main.display())))?;
        std::fs::create_dir_all(root).map_err(io(&format!("lanes {}", root.display())))?;
        let path = root.join(name);
        if path.exists() {
            remove_path(&main, &path);
        }
        let lane = if is_git_top(&main) {
            let _turn = RepoLock::take(&main);
            let lane = Lane {
                name: name.into(),
                path,
                isolation: Isolation::GitWorktree,
                main,
            };
            if let Err(e) = lane.fill_worktree() {
                remove_path(&lane.main, &lane.path);
                return Err(e);
            }
            lane
        } else {
            workspace::copy_tree(&main, &path, &|_| false)
                .map_err(io(&format!("copying the workspace to {}", path.display())))?;
            Lane {
                name: name.into(),
                path,
                isolation: Isolation::TempCopy,
                main,
            }
        };
        Ok(lane)
    }

    /// The existing lane `name` of `main` under `root` (after a restart).
    pub fn open(main: &Path, root: &Path, name: &str) -> Result<Lane, String> {
        let main = main
            .canonicalize()
            .map_err(io(&format!("workspace {}", main.display())))?;
        let path = root.join(name);
        let meta = std::fs::symlink_metadata(&path).map_err(io(&format!("lane {name}")))?;
        if !meta.is_dir() {
            return Err(format!(
                "lane {name}: {} is not a directory",
                path.display()
            ));
        }
        // A worktree has a `.git` file pointing into the main repository.
        let isolation = if path.join(".git").is_file() {
            Isolation::GitWorktree
        } else {
            Isolation::TempCopy
        };
        Ok(Lane {
            name: name.into(),
            path,
            isolation,
            main,
        })
    }

    /// Bring `files` into the main workspace as the lane has them: copied
    /// when present in the lane, removed from the workspace when not.
    /// Symlinks are copied as links; nothing is followed.
    pub fn merge_files(&self, files: &[String]) -> Result<(), String> {
        let mut changes = Vec::new();
        for path in files {
            if is_output(path) {
                continue;
            }
            match (entry(&self.path.join(path)), entry(&self.main.join(path))) {
                (Some(e), None) => changes.push(Change {
                    path: path.clone(),
                    kind: ChangeKind::Added,
                    entry: e,
                }),
                (Some(e), Some(_)) => changes.push(Change {
                    path: path.clone(),
                    kind: ChangeKind::Modified,
                    entry: e,
                }),
                (None, Some(e)) => changes.push(Change {
                    path: path.clone(),
                    kind: ChangeKind::Removed,
                    entry: e,
                }),
                (None, None) => {}
            }
        }
        workspace::apply(&changes, &self.path, &self.main).map_err(io(&format!(
            "merging lane {} into the workspace",
            self.name
        )))
    }

    /// Copy the lane's `.output/block-*.json` files that are new or differ
    /// from the main workspace's into its `.output/`, and everything else
    /// the lane added under `.output/` (its result bundles) that the main
    /// workspace does not have. Returns the block output files copied.
    pub fn merge_outputs(&self) -> Result<Vec<String>, String> {
        let out_dir = workspace::ensure_host_dir(&self.main, OUTPUT)
            .map_err(io("the workspace's .output"))?;
        let lane_out = self.path.join(OUTPUT);
        let mut copied = Vec::new();
        // Read and written from the workspaces' handles, never through a
        // link a lane's process planted.
        let max = crate::agent::MAX_OUTPUT_FILE_BYTES;
        for (name, _) in self.block_outputs() {
            let rel = format!("{OUTPUT}/{name}");
            let bytes = workspace::read_file(&self.path, &rel, max)
                .map_err(io(&format!("reading {name}")))?;
            if workspace::read_file(&self.main, &rel, max).ok().as_deref() == Some(&bytes[..]) {
                continue;
            }
            workspace::write_file(&self.main, &rel, &bytes, false)
                .map_err(io(&format!("writing {name}")))?;
            copied.push(name);
        }
        if lane_out.is_dir() {
            let new: Vec<Change> = workspace::scan(&lane_out, &|_| false)
                .map_err(io("listing the lane's .output"))?
                .into_iter()
                .filter(|(rel, _)| !rel.contains('/') || !out_dir.join(rel).exists())
                .filter(|(rel, _)| rel.contains('/'))
                .map(|(rel, entry)| Change {
                    path: rel,
                    kind: ChangeKind::Added,
                    entry,
                })
                .collect();
            workspace::apply(&new, &lane_out, &out_dir)
                .map_err(io("copying the lane's bundles"))?;
        }
        Ok(copied)
    }

    fn fill_worktree(&self) -> Result<(), String> {
        let lane = self.path.to_str().ok_or("the lane path is not UTF-8")?;
        git(
            &self.main,
            &["worktree", "add", "--detach", "-q", lane, "HEAD"],
        )?;
        // Uncommitted changes to tracked files (staged or not).
        let patch = git(&self.main, &["diff", "--binary", "HEAD"])?;
        if !patch.is_empty() {
            let patch_file = self.path.join(".git-wfhost-lane.patch");
            std::fs::write(&patch_file, &patch).map_err(io("writing the lane patch"))?;
            let applied = git(
                &self.path,
                &[
                    "apply",
                    "--binary",
                    "--whitespace=nowarn",
                    ".git-wfhost-lane.patch",
                ],
            );
            let _ = std::fs::remove_file(&patch_file);
            applied?;
        }
        // Untracked files that are not ignored, and the contract's outputs.
        let untracked = git(
            &self.main,
            &["ls-files", "--others", "--exclude-standard", "-z"],
        )?;
        for rel in nul_list(&untracked).into_iter().filter(|p| !is_output(p)) {
            copy_one(&self.main, &self.path, &rel)?;
        }
        if self.main.join(OUTPUT).is_dir() {
            workspace::copy_tree(&self.main.join(OUTPUT), &self.path.join(OUTPUT), &|_| false)
                .map_err(io("copying .output"))?;
        }
        let mut add = IDENTITY.to_vec();
        add.extend(["add", "-A"]);
        git(&self.path, &add)?;
        let mut commit = IDENTITY.to_vec();
        commit.extend([
            "commit",
            "-q",
            "--no-verify",
            "--allow-empty",
            "-m",
            "wfhost lane base",
        ]);
        git(&self.path, &commit)?;
        Ok(())
    }

    /// What the lane's block changed, as changes from the main workspace
    /// (which stays as it was while lanes run) to the lane; `.output/` is
    /// not included. In a worktree, files git ignores are not seen.
    pub fn changes(&self) -> Result<Vec<Change>, String> {
        let paths: Vec<String> = match self.isolation {
            Isolation::GitWorktree => {
                git(&self.path, &["add", "-A"])?;
                let listed = git(
                    &self.path,
                    &[
                        "diff",
                        "--cached",
                        "--name-only",
                        "--no-renames",
                        "-z",
                        "HEAD",
                    ],
                )?;
                nul_list(&listed)
            }
            Isolation::TempCopy => workspace::diff(&self.main, &self.path, &|_| false)
                .map_err(io("comparing the lane with the workspace"))?
                .into_iter()
                .filter(|c| c.entry != EntryKind::Dir)
                .map(|c| c.path)
                .collect(),
        };
        let mut changes = Vec::new();
        for path in paths.into_iter().filter(|p| !is_output(p)) {
            let in_lane = entry(&self.path.join(&path));
            let in_main = entry(&self.main.join(&path));
            changes.push(match (in_main, in_lane) {
                (None, Some(entry)) => Change {
                    path,
                    kind: ChangeKind::Added,
                    entry,
                },
                (Some(_), Some(entry)) => Change {
                    path,
                    kind: ChangeKind::Modified,
                    entry,
                },
                (Some(entry), None) => Change {
                    path,
                    kind: ChangeKind::Removed,
                    entry,
                },
                (None, None) => continue,
            });
        }
        Ok(changes)
    }

    /// The lane's `.output/block-*.json` files, as (file name, path).
    pub fn block_outputs(&self) -> Vec<(String, PathBuf)> {
        let Ok(dir) = std::fs::read_dir(self.path.join(OUTPUT)) else {
            return Vec::new();
        };
        let mut out: Vec<(String, PathBuf)> = dir
            .filter_map(Result::ok)
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .filter(|(name, path)| {
                name.starts_with("block-") && name.ends_with(".json") && path.is_file()
            })
            .collect();
        out.sort();
        out
    }

    /// Remove the lane's workspace (and its worktree registration).
    pub fn remove(self) {
        remove_path(&self.main, &self.path);
    }
}

fn entry(path: &Path) -> Option<EntryKind> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some(if meta.file_type().is_symlink() {
        EntryKind::Symlink(std::fs::read_link(path).ok()?)
    } else if meta.is_dir() {
        EntryKind::Dir
    } else {
        EntryKind::File
    })
}

fn copy_one(from_root: &Path, to_root: &Path, rel: &str) -> Result<(), String> {
    let (from, to) = (from_root.join(rel), to_root.join(rel));
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(io(&format!("creating {}", parent.display())))?;
    }
    match entry(&from) {
        Some(EntryKind::Symlink(target)) => std::os::unix::fs::symlink(target, &to),
        Some(EntryKind::File) => std::fs::copy(&from, &to).map(|_| ()),
        _ => Ok(()),
    }
    .map_err(io(&format!("copying {rel} into the lane")))
}

/// Remove a lane directory and, for a worktree, its registration in the
/// main repository.
fn remove_path(main: &Path, path: &Path) {
    let _turn = RepoLock::take(main);
    if let Some(p) = path.to_str() {
        let _ = git(main, &["worktree", "remove", "--force", p]);
    }
    if path.exists() {
        let _ = std::fs::remove_dir_all(path);
    }
    let _ = git(main, &["worktree", "prune"]);
}

/// Remove every lane left under `root` (a crashed fan-out) and the root.
/// Returns the lane names removed.
pub fn remove_all(main: &Path, root: &Path) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in dir.filter_map(Result::ok) {
        remove_path(main, &e.path());
        removed.push(e.file_name().to_string_lossy().into_owned());
    }
    let _ = std::fs::remove_dir(root);
    removed.sort();
    removed
}
