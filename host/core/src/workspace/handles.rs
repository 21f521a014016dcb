//! Directory handles: how every host-side workspace operation reaches a
//! path.
//!
//! A tree is opened once by its path (the workspace, a staged copy: paths
//! the host chose) and everything below it is reached from that handle, one
//! component at a time, refusing any component that is a symbolic link
//! (`cap-fs-ext`'s `open_dir_nofollow`). The final component is then acted
//! on through its parent's handle by name — `lstat`, `readlink`, `unlinkat`,
//! `renameat`, `openat` with `O_NOFOLLOW` — so neither a link a block left
//! nor one swapped in between a check and a use can lead an operation out
//! of the tree.

use std::collections::HashMap;
use std::io;
use std::path::Path;

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

use super::EntryKind;

/// Open the root of a tree by its host path.
pub(super) fn open_root(path: &Path) -> io::Result<Dir> {
    Dir::open_ambient_dir(path, ambient_authority())
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// The components of a tree-relative path; `..` is refused.
pub(super) fn components(rel: &str) -> io::Result<impl Iterator<Item = &str>> {
    if rel.split('/').any(|p| p == "..") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{rel}` leaves the workspace"),
        ));
    }
    Ok(rel.split('/').filter(|p| !p.is_empty() && *p != "."))
}

/// `a/b/c` → (`a/b`, `c`); `c` → (``, `c`).
pub(super) fn split(rel: &str) -> (&str, &str) {
    match rel.rfind('/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => ("", rel),
    }
}

pub(super) fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

/// Open the directory `name` in `dir`, refusing a symbolic link.
pub(super) fn open_child(dir: &Dir, name: &str, rel: &str) -> io::Result<Dir> {
    dir.open_dir_nofollow(name).map_err(|e| {
        match dir.symlink_metadata(name).map(|m| m.file_type()) {
            Ok(t) if t.is_symlink() => link_in_the_way(rel),
            Ok(t) if !t.is_dir() => io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("`{rel}` is not a directory"),
            ),
            _ => io::Error::new(e.kind(), format!("`{rel}`: {e}")),
        }
    })
}

pub(super) fn link_in_the_way(rel: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("`{rel}` is a symbolic link; refusing to go through it"),
    )
}

/// The directory `rel` under `root`, reached without passing a link.
pub(super) fn open_dir(root: &Dir, rel: &str) -> io::Result<Dir> {
    let mut dir = root.try_clone()?;
    let mut prefix = String::new();
    for part in components(rel)? {
        prefix = join(&prefix, part);
        dir = open_child(&dir, part, &prefix)?;
    }
    Ok(dir)
}

/// What `name` in `dir` is, without following it; `None` for a FIFO,
/// socket or device, which are never workspace content.
pub(super) fn entry_kind(dir: &Dir, name: &str) -> io::Result<Option<EntryKind>> {
    let ft = dir.symlink_metadata(name)?.file_type();
    kind_of(dir, name, ft)
}

pub(super) fn kind_of(
    dir: &Dir,
    name: &str,
    ft: cap_std::fs::FileType,
) -> io::Result<Option<EntryKind>> {
    Ok(if ft.is_symlink() {
        Some(EntryKind::Symlink(dir.read_link_contents(name)?))
    } else if ft.is_dir() {
        Some(EntryKind::Dir)
    } else if ft.is_file() {
        Some(EntryKind::File)
    } else {
        None
    })
}

/// Open the regular file `name` in `dir` for reading: never following a
/// link, never waiting on a FIFO, refusing anything but a regular file.
pub(super) fn open_file(dir: &Dir, name: &str) -> io::Result<std::fs::File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .follow(FollowSymlinks::No)
        .custom_flags(libc::O_NONBLOCK);
    let file = dir
        .open_with(name, &options)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => io::Error::new(
                io::ErrorKind::InvalidInput,
                "is a symbolic link, not a regular file",
            ),
            _ => e,
        })?
        .into_std();
    crate::workspace::regular_file::check_regular(file)
}

/// Copy the regular file `from_name` in `from` to `to_name` in `to`, with
/// its permissions; never writing through a link at the target.
pub(super) fn copy_file(from: &Dir, from_name: &str, to: &Dir, to_name: &str) -> io::Result<()> {
    let mut source = open_file(from, from_name)?;
    let permissions = source.metadata()?.permissions();
    use crate::workspace::regular_file::{Existing, create_in};
    let mut target = create_in(to, to_name, Existing::Truncate, 0o666)?;
    io::copy(&mut source, &mut target)?;
    target.set_permissions(permissions)
}

/// Recreate one entry: a file's content, a link as a link, a directory
/// (empty).
pub(super) fn copy_entry(
    from: &Dir,
    from_name: &str,
    to: &Dir,
    to_name: &str,
    kind: &EntryKind,
) -> io::Result<()> {
    match kind {
        EntryKind::Dir => match to.create_dir(to_name) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match entry_kind(to, to_name)? {
                Some(EntryKind::Dir) => Ok(()),
                _ => Err(e),
            },
            other => other,
        },
        EntryKind::File => copy_file(from, from_name, to, to_name),
        EntryKind::Symlink(target) => to.symlink_contents(target, to_name),
    }
}

/// Remove `name` in `dir` whatever it is; a directory with everything in
/// it, never following a link inside.
pub(super) fn remove_any(dir: &Dir, name: &str) -> io::Result<()> {
    if dir.symlink_metadata(name)?.is_dir() {
        dir.remove_dir_all(name)
    } else {
        dir.remove_file(name)
    }
}

/// Parent directories of paths in one tree, opened on demand and kept for
/// the paths that follow (sorted paths mostly share them). Only for trees
/// nothing moves directories in while it is used.
pub(super) struct Parents<'a> {
    root: &'a Dir,
    open: HashMap<String, Dir>,
}

impl<'a> Parents<'a> {
    pub(super) fn new(root: &'a Dir) -> Self {
        Parents {
            root,
            open: HashMap::new(),
        }
    }

    /// The parent directory of `rel` and `rel`'s last component.
    pub(super) fn of<'r>(&mut self, rel: &'r str) -> io::Result<(&Dir, &'r str)> {
        let (parent, name) = split(rel);
        if parent.is_empty() {
            return Ok((self.root, name));
        }
        if !self.open.contains_key(parent) {
            // Bounded: a few directories' handles at a time.
            if self.open.len() >= 64 {
                self.open.clear();
            }
            let dir = open_dir(self.root, parent)?;
            self.open.insert(parent.to_string(), dir);
        }
        Ok((&self.open[parent], name))
    }
}
