//! Isolated workspaces for the lanes of a parallel group (seed 000): a
//! `git worktree` when the workspace is the top of a git repository with a
//! commit, else a copy of the tree.
//!
//! A lane starts as the main workspace *is*, not as its last commit: once
//! per fan-out ([`Source`]), a dirty workspace's state (uncommitted
//! changes and untracked files git does not ignore) is committed through a
//! private index, on no branch of the user's; each worktree lane checks
//! that commit out on a detached HEAD and gets a copy of `.output/`, so
//! what the lane's block changes is exactly `git diff` against it. Lanes
//! are removed as directories, then forgotten by one `git worktree prune`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use wfhost_core::ids::RunId;

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

/// A directory lanes may live in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneBase {
    pub path: PathBuf,
    /// On a tmpfs: lanes there cost memory, not disk writes.
    pub in_memory: bool,
}

/// The directories lanes may live in, outside any workspace so they never
/// show up in one: `WFHOST_LANES_DIR` alone when it is set; else a
/// directory in memory (`/dev/shm`, when it is a tmpfs) first and one in
/// `TMPDIR`. Each is this user's own (`wfhost-lanes-<uid>`, mode 0700).
/// A lane is made in the first that has room for it (see [`choose_base`])
/// and looked up in all of them, so `resume` finds it wherever it is.
pub fn lane_bases() -> Vec<LaneBase> {
    if let Some(dir) = std::env::var_os("WFHOST_LANES_DIR").filter(|d| !d.is_empty()) {
        let path = PathBuf::from(dir);
        let in_memory = is_tmpfs(&path);
        return vec![LaneBase { path, in_memory }];
    }
    // SAFETY: geteuid cannot fail.
    let name = format!("wfhost-lanes-{}", unsafe { libc::geteuid() });
    let mut bases = Vec::new();
    let shm = Path::new("/dev/shm");
    if is_tmpfs(shm) {
        bases.push(LaneBase {
            path: shm.join(&name),
            in_memory: true,
        });
    }
    let tmp = std::env::temp_dir();
    bases.push(LaneBase {
        in_memory: is_tmpfs(&tmp),
        path: tmp.join(name),
    });
    bases
}

/// The directories of `run_id`'s lanes, one per base of [`lane_bases`].
pub fn lane_roots(run_id: &RunId) -> Vec<PathBuf> {
    lane_bases()
        .into_iter()
        .map(|b| b.path.join(run_id))
        .collect()
}

/// The base that always exists: the last of [`lane_bases`].
fn last_base() -> PathBuf {
    lane_bases().pop().expect("there is always a base").path
}

/// Where `run_id`'s lanes go when there is no choice to make: the last
/// base's directory for the run.
pub fn lanes_root(run_id: &RunId) -> PathBuf {
    last_base().join(run_id)
}

pub(crate) fn is_tmpfs(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills the struct we pass for a NUL-terminated path.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type == libc::TMPFS_MAGIC
    }
}

/// Bytes free to an unprivileged writer under `dir`.
pub(crate) fn available(dir: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return 0;
    };
    // SAFETY: as in `is_tmpfs`.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return 0;
        }
        (st.f_bavail as u64).saturating_mul(st.f_frsize as u64)
    }
}

/// A lane of a workspace this big or bigger is never made in memory.
pub const MEMORY_LANE_MAX_BYTES: u64 = 64 << 20;

/// Which of `bases` a lane of a workspace of `size` bytes goes to, given
/// the room left in each: a base in memory only when the workspace is
/// under [`MEMORY_LANE_MAX_BYTES`] and the lane would take at most an
/// eighth of the room left there (so sixteen lanes of a small workspace
/// fit, and a big fan-out falls back to the disk instead of filling the
/// machine's memory); else the last base.
pub fn choose_base(bases: &[(LaneBase, u64)], size: u64) -> Option<&LaneBase> {
    choose_base_within(bases, size, MEMORY_LANE_MAX_BYTES)
}

/// [`choose_base`] with another bound than [`MEMORY_LANE_MAX_BYTES`] on
/// what goes in memory.
pub fn choose_base_within(
    bases: &[(LaneBase, u64)],
    size: u64,
    max_in_memory: u64,
) -> Option<&LaneBase> {
    let fits = |room: u64| size < max_in_memory && size.saturating_mul(8) <= room;
    bases
        .iter()
        .find(|(b, room)| b.in_memory && fits(*room))
        .or(bases.last())
        .map(|(b, _)| b)
}

/// The bytes of the files under `dir`, counting no further than `limit`.
/// Links are not followed.
pub fn tree_size(dir: &Path, limit: u64) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            }
            // Every entry takes at least a page of a tmpfs.
            total = total.saturating_add(meta.len().max(4096));
            if total >= limit {
                return total;
            }
        }
    }
    total
}

/// The directory a new lane of `main` for `run_id` goes to: in memory
/// when the workspace is small enough (see [`choose_base`]), else on disk.
/// The base is made this user's own.
pub fn root_for_new_lane(main: &Path, run_id: &RunId) -> Result<PathBuf, String> {
    let size = tree_size(main, MEMORY_LANE_MAX_BYTES);
    let bases: Vec<(LaneBase, u64)> = lane_bases()
        .into_iter()
        .map(|b| {
            let room = match (b.in_memory, b.path.parent()) {
                (true, Some(parent)) => available(parent),
                _ => 0,
            };
            (b, room)
        })
        .collect();
    let base = choose_base(&bases, size).expect("there is always a base");
    own_dir(&base.path)?;
    Ok(base.path.join(run_id))
}

/// Make `base` a directory of this user's, reached without a link, that no
/// one else can enter; refuse one someone else made or planted.
fn own_dir(base: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    match std::fs::DirBuilder::new().mode(0o700).create(base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("lanes {}: {e}", base.display())),
    }
    let meta = std::fs::symlink_metadata(base).map_err(io(&format!("lanes {}", base.display())))?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me {
        return Err(format!(
            "lanes {}: not a directory of this user's; remove it or set WFHOST_LANES_DIR",
            base.display()
        ));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o700))
            .map_err(io(&format!("lanes {}", base.display())))?;
    }
    Ok(())
}

fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    git_with(dir, None, args)
}

/// `git` in `dir`, with `index` as its index file when given.
fn git_with(dir: &Path, index: Option<&Path>, args: &[&str]) -> Result<Vec<u8>, String> {
    let mut command = Command::new("git");
    if let Some(index) = index {
        command.env("GIT_INDEX_FILE", index);
    }
    let out = command
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
        let dir = last_base();
        let file = own_dir(&dir).ok().and_then(|_| {
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

/// `dir`'s index, HEAD and HEAD's tree when `dir` is the top of a git
/// work tree whose HEAD is a commit.
fn git_top(dir: &Path) -> Option<GitTop> {
    // One git: the top, the index's path, HEAD's commit and its tree
    // (failing when there is no commit).
    let out = git(
        dir,
        &[
            "rev-parse",
            "--show-toplevel",
            "--git-path",
            "index",
            "HEAD",
            "HEAD^{tree}",
        ],
    )
    .ok()?;
    let out = String::from_utf8_lossy(&out);
    let [top, index, head, tree] = out.lines().collect::<Vec<_>>()[..] else {
        return None;
    };
    let same = matches!(
        (PathBuf::from(top).canonicalize(), dir.canonicalize()),
        (Ok(a), Ok(b)) if a == b
    );
    same.then(|| GitTop {
        index: dir.join(index),
        head: head.to_string(),
        tree: tree.to_string(),
    })
}

/// The commit of `main` as it is: HEAD when nothing differs from it, else
/// a commit of the tracked and untracked files git does not ignore (not
/// `.output/`, not `.agents-work/`), made through a private copy of the
/// user's index so that its stat cache spares rehashing unchanged files.
fn workspace_commit(main: &Path, top: &GitTop) -> Result<String, String> {
    let token = wfhost_core::random::token().map_err(|e| format!("cannot name an index: {e}"))?;
    let mut name = top.index.clone().into_os_string();
    name.push(format!(".wfhost-{token}"));
    let index = PrivateIndex(PathBuf::from(name));
    match std::fs::copy(&top.index, &index.0) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("copying the git index: {e}")),
    }
    let with_index = |args: &[&str]| git_with(main, Some(&index.0), args);
    with_index(&[
        "add",
        "-A",
        "--",
        ".",
        ":(exclude).output",
        ":(exclude).agents-work",
    ])?;
    let tree = String::from_utf8_lossy(&with_index(&["write-tree"])?)
        .trim()
        .to_string();
    if tree == top.tree {
        return Ok(top.head.clone());
    }
    let mut commit = IDENTITY.to_vec();
    commit.extend([
        "commit-tree",
        &tree,
        "-p",
        &top.head,
        "-m",
        "wfhost lane base",
    ]);
    let oid = git(main, &commit)?;
    Ok(String::from_utf8_lossy(&oid).trim().to_string())
}

/// A temporary index file, removed when dropped.
struct PrivateIndex(PathBuf);

impl Drop for PrivateIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
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

/// The result bundles of earlier blocks (`.output/exec/`,
/// `.output/agent/`): not copied into a lane, which starts with the
/// workspace's files and its blocks' outputs (`.output/block-*.json`)
/// but not with every bundle the workspace ever collected — a fan-out of
/// thousands of lanes would copy them thousands of times. A lane's own
/// bundles are brought back at fan-in.
fn earlier_bundles(rel: &str) -> bool {
    wfhost_core::workspace::bundles::BUNDLE_DIRS.contains(&rel)
}

/// The per-worktree ref of the commit a worktree lane started from.
const BASE_REF: &str = "refs/worktree/wfhost-base";

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

/// What every lane of one fan-out starts from, worked out once for all of
/// them: the canonical workspace and, when it is the top of a git
/// repository with a commit, the commit of its current state (its HEAD
/// when it is clean) that each worktree lane checks out.
#[derive(Debug, Clone)]
pub struct Source {
    main: PathBuf,
    base: Option<String>,
}

/// What `git rev-parse` says of a workspace at the top of a repository.
struct GitTop {
    index: PathBuf,
    head: String,
    tree: String,
}

impl Source {
    /// The state lanes of `main` start from. A dirty git workspace is
    /// committed (as the user's HEAD's child, on no branch, through a
    /// private index beside the user's): the user's index, HEAD and
    /// branches are untouched.
    pub fn of(main: &Path) -> Result<Source, String> {
        let main = main
            .canonicalize()
            .map_err(io(&format!("workspace {}", main.display())))?;
        let base = match git_top(&main) {
            Some(top) => Some(workspace_commit(&main, &top)?),
            None => None,
        };
        Ok(Source { main, base })
    }
}

impl Lane {
    /// Make lane `name` of the workspace `main` under `root`. A leftover of
    /// the same name (from a crash) is removed first. Lanes of one fan-out
    /// share their [`Source`]: see [`Lane::create_from`].
    pub fn create(main: &Path, root: &Path, name: &str) -> Result<Lane, String> {
        Lane::create_from(&Source::of(main)?, root, name)
    }

    /// Make lane `name` of `source` under `root`.
    pub fn create_from(source: &Source, root: &Path, name: &str) -> Result<Lane, String> {
        let main = source.main.clone();
        std::fs::create_dir_all(root).map_err(io(&format!("lanes {}", root.display())))?;
        let path = root.join(name);
        if path.exists() {
            remove_path(&main, &path);
        }
        let lane = match &source.base {
            Some(base) => {
                let lane = Lane {
                    name: name.into(),
                    path,
                    isolation: Isolation::GitWorktree,
                    main,
                };
                if let Err(e) = lane.fill_worktree(base) {
                    remove_path(&lane.main, &lane.path);
                    return Err(e);
                }
                lane
            }
            None => {
                workspace::copy_tree(&main, &path, &|rel| earlier_bundles(rel))
                    .map_err(io(&format!("copying the workspace to {}", path.display())))?;
                Lane {
                    name: name.into(),
                    path,
                    isolation: Isolation::TempCopy,
                    main,
                }
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

    fn fill_worktree(&self, base: &str) -> Result<(), String> {
        let lane = self.path.to_str().ok_or("the lane path is not UTF-8")?;
        {
            // Only the bookkeeping in `.git/worktrees/` needs turns: the
            // checkout, after it, works in the lane's own index and HEAD,
            // so lanes fill side by side.
            let _turn = RepoLock::take(&self.main);
            git(
                &self.main,
                &[
                    "worktree",
                    "add",
                    "--no-checkout",
                    "--detach",
                    "-q",
                    lane,
                    base,
                ],
            )?;
        }
        git(&self.path, &["reset", "--hard", "-q"])?;
        // What the lane's changes are measured against, whatever its block
        // commits (a ref of the lane's own, gone with the worktree).
        git(&self.path, &["update-ref", BASE_REF, base])?;
        if self.main.join(OUTPUT).is_dir() {
            workspace::copy_tree(&self.main.join(OUTPUT), &self.path.join(OUTPUT), &|rel| {
                earlier_bundles(&format!("{OUTPUT}/{rel}"))
            })
            .map_err(io("copying .output"))?;
        }
        Ok(())
    }

    /// What the lane's block changed, as changes from the main workspace
    /// (which stays as it was while lanes run) to the lane; `.output/` is
    /// not included. In a worktree, files git ignores are not seen.
    pub fn changes(&self) -> Result<Vec<Change>, String> {
        let paths: Vec<String> = match self.isolation {
            Isolation::GitWorktree => {
                git(&self.path, &["add", "-A"])?;
                let diff = |base: &str| {
                    git(
                        &self.path,
                        &[
                            "diff",
                            "--cached",
                            "--name-only",
                            "--no-renames",
                            "-z",
                            base,
                        ],
                    )
                };
                // A lane made before lanes recorded their base: its HEAD.
                let listed = diff(BASE_REF).or_else(|_| diff("HEAD"))?;
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
        remove_lanes(vec![self]);
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

/// Remove a lane directory and, for a worktree, its registration in the
/// main repository.
fn remove_path(main: &Path, path: &Path) {
    if path.exists() {
        let _ = std::fs::remove_dir_all(path);
    }
    prune(main);
}

/// Forget the worktrees of `main` whose directories are gone (ours, just
/// removed, among them).
fn prune(main: &Path) {
    let _turn = RepoLock::take(main);
    let _ = git(main, &["worktree", "prune"]);
}

/// Remove `lanes` (of one workspace or several): their directories, then
/// one `git worktree prune` per repository for all its worktree lanes.
pub fn remove_lanes(lanes: Vec<Lane>) {
    let mut repos: Vec<PathBuf> = Vec::new();
    for lane in lanes {
        if lane.path.exists() {
            let _ = std::fs::remove_dir_all(&lane.path);
        }
        if lane.isolation == Isolation::GitWorktree && !repos.contains(&lane.main) {
            repos.push(lane.main);
        }
    }
    for main in repos {
        prune(&main);
    }
}

/// Remove every lane left under `root` (a crashed fan-out) and the root.
/// Returns the lane names removed.
pub fn remove_all(main: &Path, root: &Path) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in dir.filter_map(Result::ok) {
        let _ = match e.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(e.path()),
            _ => std::fs::remove_file(e.path()),
        };
        removed.push(e.file_name().to_string_lossy().into_owned());
    }
    prune(main);
    let _ = std::fs::remove_dir(root);
    removed.sort();
    removed
}

#[cfg(test)]
mod base_tests {
    use super::*;

    fn base(path: &str, in_memory: bool) -> LaneBase {
        LaneBase {
            path: PathBuf::from(path),
            in_memory,
        }
    }

    #[test]
    fn small_workspaces_get_lanes_in_memory_and_big_ones_on_disk() {
        let bases = [(base("/m", true), 1 << 30), (base("/d", false), 0)];
        let pick = |size| choose_base(&bases, size).unwrap().path.clone();
        assert_eq!(pick(200 * 4096), PathBuf::from("/m"));
        assert_eq!(pick(MEMORY_LANE_MAX_BYTES), PathBuf::from("/d"));
        // A memory nearly full takes no lane that would use an eighth of it.
        let full = [(base("/m", true), 8 << 20), (base("/d", false), 0)];
        assert_eq!(
            choose_base(&full, 1 << 20).unwrap().path,
            PathBuf::from("/m")
        );
        assert_eq!(
            choose_base(&full, (1 << 20) + 1).unwrap().path,
            PathBuf::from("/d")
        );
        // One base (WFHOST_LANES_DIR): always that one.
        let only = [(base("/x", false), 0)];
        assert_eq!(choose_base(&only, 1).unwrap().path, PathBuf::from("/x"));
    }

    #[test]
    fn the_size_counts_every_entry_and_stops_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/big"), vec![0u8; 10_000]).unwrap();
        std::fs::write(dir.path().join("small"), "x").unwrap();
        std::os::unix::fs::symlink("/usr", dir.path().join("link")).unwrap();
        // sub (a page), big, small (a page), the link (a page): nothing
        // behind the link.
        assert_eq!(tree_size(dir.path(), u64::MAX), 4096 + 10_000 + 4096 + 4096);
        assert!(tree_size(dir.path(), 5000) < 20_000);
    }

    #[test]
    fn a_lane_base_planted_as_a_link_or_open_to_others_is_not_used_as_is() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let planted = dir.path().join("wfhost-lanes-planted");
        std::os::unix::fs::symlink(&elsewhere, &planted).unwrap();
        let err = own_dir(&planted).unwrap_err();
        assert!(err.contains("not a directory of this user's"), "{err}");
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        own_dir(&open).unwrap();
        let mode = std::fs::metadata(&open).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
