//! What a workspace was before a host process (an agent, an exec command)
//! worked on it directly, to find and roll back what it changed.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, MetadataExt};

use super::diff::same_content;
use super::handles::{self, Parents};
use super::scan::walk;
use super::{Change, ChangeKind, EntryKind};

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
    /// The inode: a file that moved keeps it (renames are told apart
    /// from a removal and an unrelated new file).
    ino: u64,
}

fn meta_of(dir: &Dir, name: &str, kind: &EntryKind) -> io::Result<Meta> {
    let m = dir.symlink_metadata(name)?;
    Ok(Meta {
        kind: kind.clone(),
        len: m.len(),
        mode: m.mode() & 0o7777,
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
        ino: m.ino(),
    })
}

/// Copy `pending` (workspace-relative, in walk order) from `tree` into a
/// new directory `store`, made when there is something to copy.
fn copy_all(
    tree: &Dir,
    pending: &[(String, EntryKind)],
    store: &Path,
) -> io::Result<BTreeSet<String>> {
    let mut copied = BTreeSet::new();
    if pending.is_empty() {
        return Ok(copied);
    }
    std::fs::create_dir_all(store)?;
    let copies = handles::open_root(store)?;
    let mut from = Parents::new(tree);
    let mut made = BTreeSet::new();
    let mut to_dirs = Parents::new(&copies);
    for (rel, kind) in pending {
        let (parent, copy_name) = handles::split(rel);
        if !made.contains(parent) {
            copies.create_dir_all(parent)?;
            made.insert(parent.to_string());
        }
        let (source, name) = from.of(rel)?;
        let (to, _) = to_dirs.of(rel)?;
        handles::copy_entry(source, name, to, copy_name, kind)?;
        copied.insert(rel.clone());
    }
    Ok(copied)
}

/// A workspace as it was before a non-sandboxed block ran: every entry's
/// kind, size, permissions, modification and change times, plus copies of
/// the entries a rollback may have to restore. Cheap for large trees: only
/// the files the block may not touch are copied, and only when the block
/// has restrictions.
#[derive(Debug)]
pub struct Snapshot {
    root: PathBuf,
    skip: fn(&str) -> bool,
    entries: BTreeMap<String, Meta>,
    store: PathBuf,
    copied: BTreeSet<String>,
}

impl Snapshot {
    /// Record the tree under `root` (`skip` prunes paths, e.g. `.git`),
    /// copying into `store(bytes)` — a fresh directory outside the
    /// workspace, chosen for the size of what is copied — every file and
    /// symlink for which `keep_copy` holds.
    pub fn take(
        root: &Path,
        skip: fn(&str) -> bool,
        keep_copy: &dyn Fn(&str) -> bool,
        store: &dyn Fn(u64) -> PathBuf,
    ) -> io::Result<Snapshot> {
        let tree = handles::open_root(root)?;
        let mut entries = BTreeMap::new();
        // What to copy, and how much: the store is chosen for its size
        // (in memory when there is room) and made only when something is
        // copied into it.
        let mut pending: Vec<(String, EntryKind)> = Vec::new();
        let mut bytes = 0u64;
        walk(&tree, &skip, &mut |rel, dir, name, kind| {
            let meta = meta_of(dir, name, kind)?;
            if *kind != EntryKind::Dir && keep_copy(rel) {
                pending.push((rel.to_string(), kind.clone()));
                // What the copy takes: a page at least (on a tmpfs).
                bytes = bytes.saturating_add(meta.len.max(4096));
            }
            entries.insert(rel.to_string(), meta);
            Ok(())
        })?;
        let store = store(bytes);
        let copied = match copy_all(&tree, &pending, &store) {
            Ok(copied) => copied,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&store);
                return Err(e);
            }
        };
        Ok(Snapshot {
            root: root.to_path_buf(),
            skip,
            entries,
            store,
            copied,
        })
    }

    /// Where the copies are: the `snapshot` argument of
    /// [`revert`](super::revert). (Made only when something was copied.)
    pub fn store(&self) -> &Path {
        &self.store
    }

    /// Which added files of `changes` are removed ones that moved: the
    /// same inode, a regular file both times. `(old path, new path)`,
    /// sorted by the new path.
    pub fn renames(&self, changes: &[Change]) -> io::Result<Vec<(String, String)>> {
        let removed: BTreeMap<u64, &str> = changes
            .iter()
            .filter(|c| c.kind == ChangeKind::Removed && c.entry == EntryKind::File)
            .filter_map(|c| Some((self.entries.get(&c.path)?.ino, c.path.as_str())))
            .collect();
        if removed.is_empty() {
            return Ok(Vec::new());
        }
        let tree = handles::open_root(&self.root)?;
        let mut live = Parents::new(&tree);
        let mut pairs = Vec::new();
        for added in changes
            .iter()
            .filter(|c| c.kind == ChangeKind::Added && c.entry == EntryKind::File)
        {
            let (dir, name) = live.of(&added.path)?;
            let ino = match dir.symlink_metadata(name) {
                Ok(m) => m.ino(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            if let Some(old) = removed.get(&ino) {
                pairs.push((old.to_string(), added.path.clone()));
            }
        }
        Ok(pairs)
    }

    /// The changes from the snapshot to the tree as it is now. A file whose
    /// size or permissions changed is modified; one whose modification or
    /// change time moved is modified unless a copy shows its content is the
    /// same (a touch is not a change).
    pub fn changes(&self) -> io::Result<Vec<Change>> {
        let tree = handles::open_root(&self.root)?;
        let copies = match self.copied.is_empty() {
            true => None,
            false => Some(handles::open_root(&self.store)?),
        };
        let mut now = BTreeMap::new();
        walk(&tree, &self.skip, &mut |rel, dir, name, kind| {
            match meta_of(dir, name, kind) {
                Ok(meta) => {
                    now.insert(rel.to_string(), meta);
                }
                // Gone between the listing and the look: not there.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            Ok(())
        })?;
        let mut changes = Vec::new();
        for (rel, before) in &self.entries {
            if !now.contains_key(rel) {
                changes.push(Change::new(rel, ChangeKind::Removed, &before.kind));
            }
        }
        let mut live = Parents::new(&tree);
        let mut kept = copies.as_ref().map(Parents::new);
        for (rel, after) in &now {
            let Some(before) = self.entries.get(rel) else {
                changes.push(Change::new(rel, ChangeKind::Added, &after.kind));
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
                    } else if let (true, Some(kept)) = (self.copied.contains(rel), &mut kept) {
                        !same_content(kept.of(rel)?, live.of(rel)?)?
                    } else {
                        true
                    }
                }
                (a, b) => a != b,
            };
            if changed {
                changes.push(Change::new(rel, ChangeKind::Modified, &after.kind));
            }
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(changes)
    }
}
