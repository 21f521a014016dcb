//! Applying changes to a tree, all or nothing.

use std::io;
use std::path::Path;

use cap_std::fs::Dir;

use super::handles::{self, join, split};
use super::{Change, ChangeKind, EntryKind};

/// Make `to` look like `from` for `changes` (found by
/// [`diff`](super::diff)), all or nothing: see [`Apply`]. Symbolic links
/// that would lead out of `to` are refused.
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
///
/// Every path is reached from a handle of its tree's root, one directory at
/// a time, never through a symbolic link (see `handles`): a link planted in
/// the target, or a directory swapped for one while the changes are
/// applied, makes the application fail — and be undone — instead of
/// writing or deleting anywhere else.
#[derive(Default)]
pub struct Apply {
    /// The directories changes are applied to.
    targets: Vec<Dir>,
    /// Staged copies and the targets they replace, in order.
    staged: Vec<Staged>,
    /// What was done, to undo it.
    undo: Vec<Undo>,
    done: bool,
}

/// Paths are relative to `targets[tree]`.
struct Staged {
    tree: usize,
    temp: String,
    target: String,
}

enum Undo {
    /// A directory this transaction created.
    Created(usize, String),
    /// An entry moved aside: `(tree, aside, original)`, both in one
    /// directory.
    MovedAside(usize, String, String),
    /// A staged copy renamed onto its target.
    Placed(usize, String),
}

/// A name beside `rel` (in the same directory) no one else uses.
fn sibling(rel: &str, tag: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    join(
        split(rel).0,
        &format!(".wfhost-{tag}-{}-{n}", std::process::id()),
    )
}

impl Apply {
    /// Stage `changes` (paths relative to `from` and to the directory `at`
    /// of `workspace`, reached without passing a link; `""` for the
    /// workspace itself). `at` also places the changes in the workspace for
    /// the symlink check. Removed and replaced entries are moved aside (put
    /// back by a rollback); new files are copied beside their targets.
    pub fn stage(
        &mut self,
        changes: &[Change],
        from: &Path,
        workspace: &Path,
        at: &str,
    ) -> io::Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        for c in changes {
            if let EntryKind::Symlink(target) = &c.entry
                && c.kind != ChangeKind::Removed
            {
                check_link(&join(at, &c.path), target)?;
            }
        }
        let from = handles::open_root(from)?;
        let target = handles::open_dir(&handles::open_root(workspace)?, at)?;
        self.targets.push(target);
        let tree = self.targets.len() - 1;
        let mut removals: Vec<&Change> = changes
            .iter()
            .filter(|c| c.kind == ChangeKind::Removed)
            .collect();
        removals.sort_by(|a, b| b.path.cmp(&a.path));
        for c in removals {
            self.move_aside(tree, &c.path)?;
        }
        let mut upserts: Vec<&Change> = changes
            .iter()
            .filter(|c| c.kind != ChangeKind::Removed)
            .collect();
        upserts.sort_by(|a, b| a.path.cmp(&b.path));
        for c in upserts {
            if c.entry == EntryKind::Dir {
                self.make_dirs(tree, &c.path, true)?;
                continue;
            }
            self.make_dirs(tree, split(&c.path).0, false)?;
            let temp = sibling(&c.path, "apply");
            let (source, source_name) = self.parent_in(&from, &c.path)?;
            let (dir, temp_name) = self.parent(tree, &temp)?;
            handles::copy_entry(&source, source_name, &dir, temp_name, &c.entry)
                .inspect_err(|_| {
                    let _ = dir.remove_file(temp_name);
                })
                .map_err(|e| io::Error::new(e.kind(), format!("`{}`: {e}", c.path)))?;
            self.staged.push(Staged {
                tree,
                temp,
                target: c.path.clone(),
            });
        }
        Ok(())
    }

    fn parent_in<'r>(&self, root: &Dir, rel: &'r str) -> io::Result<(Dir, &'r str)> {
        let (parent, name) = split(rel);
        Ok((handles::open_dir(root, parent)?, name))
    }

    /// The parent directory of `rel` in tree `tree`, freshly reached (a
    /// directory moved aside earlier is never used by mistake).
    fn parent<'r>(&self, tree: usize, rel: &'r str) -> io::Result<(Dir, &'r str)> {
        self.parent_in(&self.targets[tree], rel)
    }

    /// Make `rel` in tree `tree` a real directory, component by component:
    /// a file in the way is moved aside; a symbolic link is refused, unless
    /// it is `rel` itself and `replace` is set (a change turned that link
    /// into a directory), when it is moved aside too. What is created is
    /// remembered.
    fn make_dirs(&mut self, tree: usize, rel: &str, replace: bool) -> io::Result<()> {
        let mut dir = self.targets[tree].try_clone()?;
        let mut prefix = String::new();
        let parts: Vec<&str> = handles::components(rel)?.collect();
        for (i, part) in parts.iter().enumerate() {
            prefix = join(&prefix, part);
            let last = i + 1 == parts.len();
            match handles::entry_kind(&dir, part) {
                Ok(Some(EntryKind::Dir)) => {}
                Ok(Some(EntryKind::Symlink(_))) if !(last && replace) => {
                    return Err(handles::link_in_the_way(&prefix));
                }
                Ok(_) => {
                    self.move_aside(tree, &prefix)?;
                    self.create_dir(tree, &dir, part, &prefix)?;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    self.create_dir(tree, &dir, part, &prefix)?;
                }
                Err(e) => return Err(e),
            }
            dir = handles::open_child(&dir, part, &prefix)?;
        }
        Ok(())
    }

    fn create_dir(&mut self, tree: usize, dir: &Dir, name: &str, rel: &str) -> io::Result<()> {
        dir.create_dir(name)
            .map_err(|e| io::Error::new(e.kind(), format!("`{rel}`: {e}")))?;
        self.undo.push(Undo::Created(tree, rel.to_string()));
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
            self.move_aside(staged.tree, &staged.target)?;
            let (dir, name) = self.parent(staged.tree, &staged.target)?;
            let temp_name = split(&staged.temp).1;
            dir.rename(temp_name, &dir, name).inspect_err(|_| {
                let _ = dir.remove_file(temp_name);
            })?;
            self.undo.push(Undo::Placed(staged.tree, staged.target));
        }
        Ok(())
    }

    /// Move `rel` (if it exists) out of the way under a temporary name in
    /// its directory.
    fn move_aside(&mut self, tree: usize, rel: &str) -> io::Result<()> {
        let (dir, name) = self.parent(tree, rel)?;
        match dir.symlink_metadata(name) {
            Ok(_) => {
                let aside = sibling(rel, "undo");
                dir.rename(name, &dir, split(&aside).1)?;
                self.undo
                    .push(Undo::MovedAside(tree, aside, rel.to_string()));
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn discard_aside(&mut self) {
        for step in std::mem::take(&mut self.undo) {
            if let Undo::MovedAside(tree, aside, _) = step
                && let Ok((dir, name)) = self.parent(tree, &aside)
            {
                let _ = handles::remove_any(&dir, name);
            }
        }
    }

    fn rollback(&mut self) {
        for staged in std::mem::take(&mut self.staged) {
            if let Ok((dir, name)) = self.parent(staged.tree, &staged.temp) {
                let _ = dir.remove_file(name);
            }
        }
        for step in std::mem::take(&mut self.undo).into_iter().rev() {
            let _ = match step {
                Undo::Placed(tree, target) => self
                    .parent(tree, &target)
                    .and_then(|(dir, name)| handles::remove_any(&dir, name)),
                Undo::MovedAside(tree, aside, original) => self
                    .parent(tree, &aside)
                    .and_then(|(dir, name)| dir.rename(name, &dir, split(&original).1)),
                Undo::Created(tree, rel) => self
                    .parent(tree, &rel)
                    .and_then(|(dir, name)| dir.remove_dir(name)),
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
