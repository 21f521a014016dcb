//! Workspace trees on disk: mounting checks, staged copies, diffs and
//! applying changes — all without ever following a symbolic link.
//!
//! Blocks can leave symlinks in the workspace (a sandboxed guest can create
//! `out/evil -> ../..`). Every function here treats a symlink as an opaque
//! entry: it is compared by its target text, copied as a link, removed as a
//! link, and never traversed.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::regular_file;
use crate::restrictions::RestrictionPlan;

/// One entry of a workspace tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink(PathBuf),
}

/// What happened to a path between two trees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Removed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Workspace-relative, `/`-separated.
    pub path: String,
    pub kind: ChangeKind,
    /// The entry's kind after the change (before it, for removals).
    pub entry: EntryKind,
}

fn entry_kind(path: &Path) -> io::Result<EntryKind> {
    let meta = fs::symlink_metadata(path)?;
    let ft = meta.file_type();
    Ok(if ft.is_symlink() {
        EntryKind::Symlink(fs::read_link(path)?)
    } else if ft.is_dir() {
        EntryKind::Dir
    } else {
        EntryKind::File
    })
}

/// List a tree, without following symlinks. `skip` prunes relative paths
/// (and everything below them).
pub fn scan(root: &Path, skip: &dyn Fn(&str) -> bool) -> io::Result<BTreeMap<String, EntryKind>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let dir = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(&rel)
        };
        for item in fs::read_dir(&dir)? {
            let item = item?;
            let name = item.file_name();
            let Some(name) = name.to_str() else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: file name is not UTF-8", item.path().display()),
                ));
            };
            let child = if rel.is_empty() {
                name.to_string()
            } else {
                format!("{rel}/{name}")
            };
            // FIFOs, sockets and devices are not workspace content: reading
            // one could stall the host forever.
            if skip(&child) || item.file_type().is_ok_and(|t| regular_file::is_special(&t)) {
                continue;
            }
            let kind = entry_kind(&item.path())?;
            if kind == EntryKind::Dir {
                stack.push(child.clone());
            }
            out.insert(child, kind);
        }
    }
    Ok(out)
}

/// Copy a tree; symlinks are recreated as links, never followed.
pub fn copy_tree(src: &Path, dst: &Path, skip: &dyn Fn(&str) -> bool) -> io::Result<()> {
    fs::create_dir_all(dst)?;
    for (rel, kind) in scan(src, skip)? {
        copy_entry(&src.join(&rel), &dst.join(&rel), &kind)?;
    }
    Ok(())
}

fn copy_entry(from: &Path, to: &Path, kind: &EntryKind) -> io::Result<()> {
    match kind {
        EntryKind::Dir => fs::create_dir_all(to),
        EntryKind::File => regular_file::copy_regular(from, to),
        EntryKind::Symlink(target) => std::os::unix::fs::symlink(target, to),
    }
}

fn same_file_content(a: &Path, b: &Path) -> io::Result<bool> {
    let (ma, mb) = (fs::symlink_metadata(a)?, fs::symlink_metadata(b)?);
    if ma.len() != mb.len() {
        return Ok(false);
    }
    Ok(regular_file::read_all(a)? == regular_file::read_all(b)?)
}

/// Changes that turn the tree at `before` into the tree at `after`.
/// `skip_before` hides paths of `before` that the comparison must not see
/// (for example directories mounted directly rather than staged).
pub fn diff(
    before: &Path,
    after: &Path,
    skip_before: &dyn Fn(&str) -> bool,
) -> io::Result<Vec<Change>> {
    let old = scan(before, skip_before)?;
    let new = scan(after, &|_| false)?;
    let mut changes = Vec::new();
    for (path, kind) in &new {
        match old.get(path) {
            None => changes.push(Change {
                path: path.clone(),
                kind: ChangeKind::Added,
                entry: kind.clone(),
            }),
            Some(old_kind) => {
                let modified = match (old_kind, kind) {
                    (EntryKind::File, EntryKind::File) => {
                        !same_file_content(&before.join(path), &after.join(path))?
                    }
                    (a, b) => a != b,
                };
                if modified {
                    changes.push(Change {
                        path: path.clone(),
                        kind: ChangeKind::Modified,
                        entry: kind.clone(),
                    });
                }
            }
        }
    }
    for (path, kind) in &old {
        if !new.contains_key(path) {
            changes.push(Change {
                path: path.clone(),
                kind: ChangeKind::Removed,
                entry: kind.clone(),
            });
        }
    }
    Ok(changes)
}

/// Changes a plan does not permit. A new or removed directory is judged by
/// what it contains; an empty one by its own path.
pub fn violations<'a>(changes: &'a [Change], plan: &RestrictionPlan) -> Vec<&'a Change> {
    changes
        .iter()
        .filter(|c| !plan.permits(&c.path))
        .filter(|c| {
            c.entry != EntryKind::Dir
                || !changes.iter().any(|other| {
                    other.path.len() > c.path.len()
                        && crate::restrictions::is_under(&other.path, &c.path)
                        && other.entry != EntryKind::Dir
                })
        })
        .collect()
}

/// Make `to` look like `from` for `changes` (found by [`diff`]), all or
/// nothing: see [`Apply`]. Symbolic links that would lead out of `to` are
/// refused.
pub fn apply(changes: &[Change], from: &Path, to: &Path) -> io::Result<()> {
    let mut tx = Apply::default();
    tx.stage(changes, from, to, "")?;
    tx.commit()
}

/// An all-or-nothing application of changes to one or more directories.
///
/// [`Apply::stage`] checks every new symbolic link, moves removed entries
/// aside (renamed, not deleted), creates new directories, and copies every
/// new file beside its target under a temporary name (this is where a full
/// disk shows). [`Apply::commit`] moves each replaced entry aside, renames
/// the staged copies into place, and only when all of that worked deletes
/// what was moved aside. Any error — or dropping an
/// `Apply` that was not committed — undoes everything it did, leaving the
/// directories as they were.
#[derive(Default)]
pub struct Apply {
    /// Staged copies and the targets they replace, in order.
    staged: Vec<Staged>,
    /// What was done, to undo it.
    undo: Vec<Undo>,
    done: bool,
}

struct Staged {
    temp: PathBuf,
    target: PathBuf,
}

enum Undo {
    /// A directory this transaction created.
    Created(PathBuf),
    /// An entry moved aside: `(aside, original)`.
    MovedAside(PathBuf, PathBuf),
    /// A staged copy renamed onto its target.
    Placed(PathBuf),
}

fn sibling(target: &Path, tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = format!(".wfhost-{tag}-{}-{n}", std::process::id());
    target.parent().unwrap_or(Path::new(".")).join(name)
}

impl Apply {
    /// Stage `changes` (paths relative to `from` and `to`); `at` is where
    /// `to` lies in the workspace (for the symlink check), `""` for the
    /// workspace itself. Removed and replaced entries are moved aside (put
    /// back by a rollback); new files are copied beside their targets.
    pub fn stage(
        &mut self,
        changes: &[Change],
        from: &Path,
        to: &Path,
        at: &str,
    ) -> io::Result<()> {
        for c in changes {
            if let EntryKind::Symlink(target) = &c.entry
                && c.kind != ChangeKind::Removed
            {
                check_link(&join_rel(at, &c.path), target)?;
            }
        }
        let mut removals: Vec<&Change> = changes
            .iter()
            .filter(|c| c.kind == ChangeKind::Removed)
            .collect();
        removals.sort_by(|a, b| b.path.cmp(&a.path));
        for c in removals {
            self.move_aside(&to.join(&c.path))?;
        }
        let mut upserts: Vec<&Change> = changes
            .iter()
            .filter(|c| c.kind != ChangeKind::Removed)
            .collect();
        upserts.sort_by(|a, b| a.path.cmp(&b.path));
        for c in upserts {
            if let Some(parent) = Path::new(&c.path).parent()
                && !parent.as_os_str().is_empty()
            {
                self.make_dirs(to, parent.to_str().unwrap_or_default())?;
            }
            let target = to.join(&c.path);
            if c.entry == EntryKind::Dir {
                self.make_dirs(to, &c.path)?;
                continue;
            }
            let temp = sibling(&target, "apply");
            copy_entry(&from.join(&c.path), &temp, &c.entry).inspect_err(|_| {
                let _ = fs::remove_file(&temp);
            })?;
            self.staged.push(Staged { temp, target });
        }
        Ok(())
    }

    /// Make `rel` under `root` a real directory, component by component:
    /// a file in the way (being replaced by a directory) is moved aside, a
    /// symlink is refused; what is created is remembered.
    fn make_dirs(&mut self, root: &Path, rel: &str) -> io::Result<()> {
        let mut prefix = String::new();
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            let path = root.join(&prefix);
            match entry_kind(&path) {
                Ok(EntryKind::Dir) => continue,
                Ok(EntryKind::File) => self.move_aside(&path)?,
                Ok(EntryKind::Symlink(_)) | Err(_) => {}
            }
            let existed = fs::symlink_metadata(&path).is_ok();
            ensure_real_dir(root, &prefix, true)?;
            if !existed {
                self.undo.push(Undo::Created(path));
            }
        }
        Ok(())
    }

    /// Put everything in place; on any error, undo it all.
    pub fn commit(mut self) -> io::Result<()> {
        match self.put_in_place() {
            Ok(()) => {
                self.done = true;
                self.discard_aside();
                Ok(())
            }
            Err(e) => Err(e), // dropped: rolled back
        }
    }

    fn put_in_place(&mut self) -> io::Result<()> {
        for staged in std::mem::take(&mut self.staged) {
            self.move_aside(&staged.target)?;
            fs::rename(&staged.temp, &staged.target).inspect_err(|_| {
                let _ = fs::remove_file(&staged.temp);
            })?;
            self.undo.push(Undo::Placed(staged.target));
        }
        Ok(())
    }

    /// Move `path` (if it exists) out of the way under a temporary name.
    fn move_aside(&mut self, path: &Path) -> io::Result<()> {
        match fs::symlink_metadata(path) {
            Ok(_) => {
                let aside = sibling(path, "undo");
                fs::rename(path, &aside)?;
                self.undo.push(Undo::MovedAside(aside, path.to_path_buf()));
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn discard_aside(&mut self) {
        for step in std::mem::take(&mut self.undo) {
            if let Undo::MovedAside(aside, _) = step {
                let _ = remove_any(&aside);
            }
        }
    }

    fn rollback(&mut self) {
        for staged in std::mem::take(&mut self.staged) {
            let _ = fs::remove_file(&staged.temp);
        }
        for step in std::mem::take(&mut self.undo).into_iter().rev() {
            let _ = match step {
                Undo::Placed(target) => remove_any(&target),
                Undo::MovedAside(aside, original) => fs::rename(&aside, &original),
                Undo::Created(dir) => fs::remove_dir(&dir),
            };
        }
    }
}

impl Drop for Apply {
    fn drop(&mut self) {
        if !self.done {
            self.rollback();
        }
    }
}

fn remove_any(path: &Path) -> io::Result<()> {
    match entry_kind(path)? {
        EntryKind::Dir => fs::remove_dir_all(path),
        _ => fs::remove_file(path),
    }
}

fn join_rel(at: &str, path: &str) -> String {
    if at.is_empty() {
        path.to_string()
    } else {
        format!("{at}/{path}")
    }
}

/// Refuse a symbolic link at `link` (workspace-relative) whose target is
/// absolute or climbs out of the workspace: a later host process (an exec
/// command, an agent) would follow it out.
pub fn check_link(link: &str, target: &Path) -> io::Result<()> {
    let outside = || {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "the symbolic link `{link}` -> `{}` leads outside the workspace; links a block creates must stay inside it",
                target.display()
            ),
        )
    };
    if target.is_absolute() {
        return Err(outside());
    }
    let mut depth = link
        .split('/')
        .filter(|p| !p.is_empty())
        .count()
        .saturating_sub(1) as i64;
    for part in target.components() {
        match part {
            std::path::Component::ParentDir => depth -= 1,
            std::path::Component::Normal(_) => depth += 1,
            std::path::Component::CurDir => {}
            _ => return Err(outside()),
        }
        if depth < 0 {
            return Err(outside());
        }
    }
    Ok(())
}

/// Undo, in `live`, the changes (found by [`diff`] from `snapshot` to
/// `live`) that `plan` does not permit, restoring what `snapshot` holds:
/// additions are removed, modifications and removals are copied back. A
/// changed directory is undone too unless a permitted change lies below
/// it. This is how a non-sandboxed executor's changes outside a block's
/// restrictions are rolled back. Returns the paths undone.
pub fn revert(
    changes: &[Change],
    plan: &RestrictionPlan,
    snapshot: &Path,
    live: &Path,
) -> io::Result<Vec<String>> {
    let undo: Vec<&Change> = changes
        .iter()
        .filter(|c| !plan.permits(&c.path))
        .filter(|c| {
            c.entry != EntryKind::Dir
                || !changes.iter().any(|other| {
                    other.path.len() > c.path.len()
                        && crate::restrictions::is_under(&other.path, &c.path)
                        && plan.permits(&other.path)
                })
        })
        .collect();
    let mut inverse = Vec::with_capacity(undo.len());
    for c in &undo {
        inverse.push(match c.kind {
            ChangeKind::Added => Change {
                kind: ChangeKind::Removed,
                ..(*c).clone()
            },
            // A removal records the entry it removed.
            ChangeKind::Removed => Change {
                kind: ChangeKind::Added,
                ..(*c).clone()
            },
            // A modification records the entry after it; restore the one
            // before.
            ChangeKind::Modified => Change {
                path: c.path.clone(),
                kind: ChangeKind::Modified,
                entry: entry_kind(&snapshot.join(&c.path))?,
            },
        });
    }
    apply(&inverse, snapshot, live)?;
    Ok(undo.into_iter().map(|c| c.path.clone()).collect())
}

/// Make sure `root/rel` is a real directory reached without passing through
/// a symlink, creating missing components when `create` is set. Returns the
/// full path. This is what makes it safe to hand the directory to a sandbox:
/// a symlink planted in the workspace can never redirect a mount outside.
pub fn ensure_real_dir(root: &Path, rel: &str, create: bool) -> io::Result<PathBuf> {
    let mut path = root.to_path_buf();
    for part in rel.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if part == ".." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{rel}` leaves the workspace"),
            ));
        }
        path.push(part);
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{} is a symbolic link; refusing to use it as a directory",
                        path.display()
                    ),
                ));
            }
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} is not a directory", path.display()),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => fs::create_dir(&path)?,
            Err(e) => return Err(e),
        }
    }
    Ok(path)
}

/// [`ensure_real_dir`] for a directory the host keeps in the workspace
/// (`.output`, `.agents-work`): also writes a `.gitignore` of `*` in it
/// when there is none, so a repository never picks the host's files up.
pub fn ensure_host_dir(root: &Path, rel: &str) -> io::Result<PathBuf> {
    let dir = ensure_real_dir(root, rel, true)?;
    let ignore = dir.join(".gitignore");
    if fs::symlink_metadata(&ignore).is_err() {
        // create_new never follows or replaces whatever is there.
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&ignore)
        {
            Ok(mut f) => {
                use std::io::Write;
                f.write_all(b"# Written by wfhost: the host's files, not the project's.\n*\n")?;
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(dir)
}

/// What [`Snapshot`] remembers of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Meta {
    kind: EntryKind,
    len: u64,
    /// Permission bits (a `chmod` is a change).
    mode: u32,
    mtime_ns: i128,
    /// The inode change time: a process cannot set it back, so a rewrite
    /// that restores size and modification time still shows.
    ctime_ns: i128,
}

fn meta_of(path: &Path) -> io::Result<Meta> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(path)?;
    let kind = if m.file_type().is_symlink() {
        EntryKind::Symlink(fs::read_link(path)?)
    } else if m.is_dir() {
        EntryKind::Dir
    } else {
        EntryKind::File
    };
    Ok(Meta {
        kind,
        len: m.len(),
        mode: m.mode() & 0o7777,
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
    })
}

/// A workspace as it was before a non-sandboxed block ran: every entry's
/// kind, size, permissions, modification and change times, plus copies of the entries a rollback may have to restore.
/// Cheap for large trees: only the files the block may not touch are
/// copied, and only when the block has restrictions.
#[derive(Debug)]
pub struct Snapshot {
    root: PathBuf,
    skip: fn(&str) -> bool,
    entries: BTreeMap<String, Meta>,
    store: PathBuf,
    copied: std::collections::BTreeSet<String>,
}

impl Snapshot {
    /// Record the tree under `root` (`skip` prunes paths, e.g. `.git`),
    /// copying into `store` — a fresh directory outside the workspace —
    /// every file and symlink for which `keep_copy` holds.
    pub fn take(
        root: &Path,
        skip: fn(&str) -> bool,
        keep_copy: &dyn Fn(&str) -> bool,
        store: &Path,
    ) -> io::Result<Snapshot> {
        fs::create_dir_all(store)?;
        let mut entries = BTreeMap::new();
        let mut copied = std::collections::BTreeSet::new();
        for (rel, _) in scan(root, &skip)? {
            let meta = meta_of(&root.join(&rel))?;
            if meta.kind != EntryKind::Dir && keep_copy(&rel) {
                let to = store.join(&rel);
                if let Some(parent) = to.parent() {
                    fs::create_dir_all(parent)?;
                }
                copy_entry(&root.join(&rel), &to, &meta.kind)?;
                copied.insert(rel.clone());
            }
            entries.insert(rel, meta);
        }
        Ok(Snapshot {
            root: root.to_path_buf(),
            skip,
            entries,
            store: store.to_path_buf(),
            copied,
        })
    }

    /// Where the copies are: the `snapshot` argument of [`revert`].
    pub fn store(&self) -> &Path {
        &self.store
    }

    /// The changes from the snapshot to the tree as it is now. A file whose
    /// size or permissions changed is modified; one whose modification or
    /// change time moved is modified unless a copy shows its content is the
    /// same (a touch is not a change).
    pub fn changes(&self) -> io::Result<Vec<Change>> {
        let now = scan(&self.root, &self.skip)?;
        let mut changes = Vec::new();
        for (rel, before) in &self.entries {
            if !now.contains_key(rel) {
                changes.push(Change {
                    path: rel.clone(),
                    kind: ChangeKind::Removed,
                    entry: before.kind.clone(),
                });
            }
        }
        for rel in now.keys() {
            let after = match meta_of(&self.root.join(rel)) {
                Ok(m) => m,
                // Gone between the scan and now: seen as not there.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let Some(before) = self.entries.get(rel) else {
                changes.push(Change {
                    path: rel.clone(),
                    kind: ChangeKind::Added,
                    entry: after.kind,
                });
                continue;
            };
            let changed = match (&before.kind, &after.kind) {
                (EntryKind::Dir, EntryKind::Dir) => false,
                (EntryKind::File, EntryKind::File) => {
                    if before.len != after.len || before.mode != after.mode {
                        true
                    } else if before.mtime_ns == after.mtime_ns && before.ctime_ns == after.ctime_ns
                    {
                        false
                    } else if self.copied.contains(rel) {
                        !same_file_content(&self.store.join(rel), &self.root.join(rel))?
                    } else {
                        true
                    }
                }
                (a, b) => a != b,
            };
            if changed {
                changes.push(Change {
                    path: rel.clone(),
                    kind: ChangeKind::Modified,
                    entry: after.kind,
                });
            }
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn revert_keeps_a_new_directory_that_holds_permitted_files() {
        let root = tmp();
        let (live, snap) = (root.join("live"), root.join("snap"));
        fs::create_dir_all(&live).unwrap();
        copy_tree(&live, &snap, &|_| false).unwrap();
        fs::create_dir_all(live.join("a")).unwrap();
        fs::write(live.join("a/ok"), "ok").unwrap();
        fs::write(live.join("a/bad"), "bad").unwrap();
        let plan = RestrictionPlan::new(Some(&["a/ok".to_string()])).unwrap();
        let changes = diff(&snap, &live, &|_| false).unwrap();
        assert_eq!(
            revert(&changes, &plan, &snap, &live).unwrap(),
            ["a/bad".to_string()]
        );
        assert!(live.join("a/ok").is_file());
        assert!(!live.join("a/bad").exists());
    }

    #[test]
    fn revert_undoes_only_the_changes_outside_the_restrictions() {
        let root = tmp();
        let (live, snap) = (root.join("live"), root.join("snap"));
        fs::create_dir_all(live.join("src")).unwrap();
        fs::create_dir_all(live.join("docs/old")).unwrap();
        fs::write(live.join("src/lib.rs"), "v1").unwrap();
        fs::write(live.join("README.md"), "readme").unwrap();
        fs::write(live.join("docs/old/a.md"), "a").unwrap();
        fs::write(live.join("turns-into-dir"), "file").unwrap();
        copy_tree(&live, &snap, &|_| false).unwrap();

        // A local agent allowed to touch src/** does more than that.
        fs::write(live.join("src/lib.rs"), "v2").unwrap();
        fs::write(live.join("src/new.rs"), "new").unwrap();
        fs::write(live.join("README.md"), "defaced").unwrap();
        fs::write(live.join("stray.txt"), "stray").unwrap();
        fs::remove_dir_all(live.join("docs/old")).unwrap();
        fs::remove_file(live.join("turns-into-dir")).unwrap();
        fs::create_dir_all(live.join("turns-into-dir/x")).unwrap();
        fs::write(live.join("turns-into-dir/x/f"), "f").unwrap();
        symlink("/etc", live.join("escape")).unwrap();

        let plan = RestrictionPlan::new(Some(&["src/**".to_string()])).unwrap();
        let changes = diff(&snap, &live, &|_| false).unwrap();
        let undone = revert(&changes, &plan, &snap, &live).unwrap();
        assert!(undone.contains(&"README.md".to_string()), "{undone:?}");
        assert!(!undone.iter().any(|p| p.starts_with("src/")), "{undone:?}");

        assert_eq!(fs::read_to_string(live.join("src/lib.rs")).unwrap(), "v2");
        assert_eq!(fs::read_to_string(live.join("src/new.rs")).unwrap(), "new");
        assert_eq!(
            fs::read_to_string(live.join("README.md")).unwrap(),
            "readme"
        );
        assert_eq!(fs::read_to_string(live.join("docs/old/a.md")).unwrap(), "a");
        assert_eq!(
            fs::read_to_string(live.join("turns-into-dir")).unwrap(),
            "file"
        );
        assert!(!live.join("stray.txt").exists());
        assert!(fs::symlink_metadata(live.join("escape")).is_err());
        // Nothing outside the restrictions differs any more.
        let left = diff(&snap, &live, &|_| false).unwrap();
        assert!(violations(&left, &plan).is_empty(), "{left:?}");
        assert_eq!(left.len(), 2, "the permitted changes stay: {left:?}");
    }

    fn tmp() -> PathBuf {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "wfhost-core-ws-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn diff_and_apply_round_trip_without_following_links() {
        let root = tmp();
        let (a, b, outside) = (root.join("a"), root.join("b"), root.join("outside"));
        fs::create_dir_all(a.join("docs")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("secret"), "s").unwrap();
        fs::write(a.join("docs/keep.md"), "1").unwrap();
        fs::write(a.join("docs/change.md"), "1").unwrap();
        fs::write(a.join("gone.txt"), "x").unwrap();
        copy_tree(&a, &b, &|_| false).unwrap();
        fs::write(b.join("docs/change.md"), "2").unwrap();
        fs::write(b.join("docs/new.md"), "3").unwrap();
        fs::remove_file(b.join("gone.txt")).unwrap();
        symlink("../../outside", b.join("docs/evil")).unwrap();

        let changes = diff(&a, &b, &|_| false).unwrap();
        let summary: Vec<_> = changes
            .iter()
            .map(|c| (c.path.as_str(), c.kind.clone()))
            .collect();
        assert_eq!(
            summary,
            [
                ("docs/change.md", ChangeKind::Modified),
                ("docs/evil", ChangeKind::Added),
                ("docs/new.md", ChangeKind::Added),
                ("gone.txt", ChangeKind::Removed),
            ]
        );
        // A link that leads out of the tree is refused, and nothing of the
        // change set is applied.
        let err = apply(&changes, &b, &a).unwrap_err();
        assert!(err.to_string().contains("leads outside"), "{err}");
        assert_eq!(fs::read_to_string(a.join("docs/change.md")).unwrap(), "1");
        assert!(a.join("gone.txt").exists());
        assert!(!a.join("docs/new.md").exists());
        assert!(fs::symlink_metadata(a.join("docs/evil")).is_err());
        // A link inside is carried as a link, and scanning never enters it.
        fs::remove_file(b.join("docs/evil")).unwrap();
        symlink("../gone.txt", b.join("docs/evil")).unwrap();
        let changes = diff(&a, &b, &|_| false).unwrap();
        apply(&changes, &b, &a).unwrap();
        assert_eq!(fs::read_to_string(a.join("docs/change.md")).unwrap(), "2");
        assert!(!a.join("gone.txt").exists());
        assert!(
            fs::symlink_metadata(a.join("docs/evil"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        let leftovers: Vec<_> = fs::read_dir(a.join("docs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".wfhost-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        let tree = scan(&a, &|_| false).unwrap();
        assert!(!tree.keys().any(|k| k.contains("secret")));
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn links_are_checked_lexically_against_the_workspace() {
        for (link, target) in [
            ("a", "b"),
            ("d/a", "../b"),
            ("d/e/a", "../../c/x"),
            ("a", "./b"),
        ] {
            assert!(
                check_link(link, Path::new(target)).is_ok(),
                "{link} -> {target}"
            );
        }
        for (link, target) in [
            ("a", "../b"),
            ("d/a", "../../b"),
            ("a", "/etc/passwd"),
            ("d/a", "x/../../../y"),
        ] {
            assert!(
                check_link(link, Path::new(target)).is_err(),
                "{link} -> {target}"
            );
        }
    }

    #[test]
    fn ensure_real_dir_refuses_symlinked_components() {
        let root = tmp();
        let outside = tmp();
        symlink(&outside, root.join("src")).unwrap();
        let err = ensure_real_dir(&root, "src/workers", true).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert!(!outside.join("workers").exists());
        let made = ensure_real_dir(&root, "a/b", true).unwrap();
        assert!(made.is_dir());
        assert!(ensure_real_dir(&root, "../x", true).is_err());
    }

    #[test]
    fn violations_judge_directories_by_content() {
        let plan = RestrictionPlan::new(Some(&["**/*.md".to_string()])).unwrap();
        let changes = vec![
            Change {
                path: "d".into(),
                kind: ChangeKind::Added,
                entry: EntryKind::Dir,
            },
            Change {
                path: "d/x.md".into(),
                kind: ChangeKind::Added,
                entry: EntryKind::File,
            },
            Change {
                path: "e".into(),
                kind: ChangeKind::Added,
                entry: EntryKind::Dir,
            },
            Change {
                path: "f.rs".into(),
                kind: ChangeKind::Added,
                entry: EntryKind::File,
            },
        ];
        let bad: Vec<_> = violations(&changes, &plan)
            .iter()
            .map(|c| c.path.clone())
            .collect();
        assert_eq!(bad, ["e", "f.rs"]);
    }
}
