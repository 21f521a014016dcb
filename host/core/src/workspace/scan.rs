//! Walking a tree and copying it.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use cap_std::fs::Dir;

use super::EntryKind;
use super::handles::{self, Parents};

/// Visit every entry under `root`: all entries of a directory before those
/// of its subdirectories, never following a link, never visiting a FIFO,
/// socket or device. `skip` prunes relative paths (and everything below
/// them). `visit` gets the entry's relative path, its parent's handle, its
/// name and its kind.
pub(super) fn walk(
    root: &Dir,
    skip: &dyn Fn(&str) -> bool,
    visit: &mut dyn FnMut(&str, &Dir, &str, &EntryKind) -> io::Result<()>,
) -> io::Result<()> {
    walk_dir(root, "", skip, visit)
}

fn walk_dir(
    dir: &Dir,
    rel: &str,
    skip: &dyn Fn(&str) -> bool,
    visit: &mut dyn FnMut(&str, &Dir, &str, &EntryKind) -> io::Result<()>,
) -> io::Result<()> {
    let mut subdirs = Vec::new();
    for item in dir.entries()? {
        let item = item?;
        let name = item.file_name();
        let Some(name) = name.to_str() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "`{}`: file name is not UTF-8",
                    handles::join(rel, &name.to_string_lossy())
                ),
            ));
        };
        let child = handles::join(rel, name);
        if skip(&child) {
            continue;
        }
        let Some(kind) = handles::kind_of(dir, name, item.file_type()?)? else {
            continue;
        };
        visit(&child, dir, name, &kind)?;
        if kind == EntryKind::Dir {
            subdirs.push((child, name.to_string()));
        }
    }
    for (child, name) in subdirs {
        let sub = handles::open_child(dir, &name, &child)?;
        walk_dir(&sub, &child, skip, visit)?;
    }
    Ok(())
}

/// List a tree, without following symlinks. `skip` prunes relative paths
/// (and everything below them). FIFOs, sockets and devices are left out:
/// they are not workspace content, and reading one could stall the host.
pub fn scan(root: &Path, skip: &dyn Fn(&str) -> bool) -> io::Result<BTreeMap<String, EntryKind>> {
    let root = handles::open_root(root)?;
    scan_dir(&root, skip)
}

pub(super) fn scan_dir(
    root: &Dir,
    skip: &dyn Fn(&str) -> bool,
) -> io::Result<BTreeMap<String, EntryKind>> {
    let mut out = BTreeMap::new();
    walk(root, skip, &mut |rel, _, _, kind| {
        out.insert(rel.to_string(), kind.clone());
        Ok(())
    })?;
    Ok(out)
}

/// Copy a tree into `dst` (created if missing); symlinks are recreated as
/// links, never followed.
pub fn copy_tree(src: &Path, dst: &Path, skip: &dyn Fn(&str) -> bool) -> io::Result<()> {
    std::fs::create_dir_all(dst)?;
    let (src, dst) = (handles::open_root(src)?, handles::open_root(dst)?);
    let mut targets = Parents::new(&dst);
    walk(&src, skip, &mut |rel, from, name, kind| {
        let (to, to_name) = targets.of(rel)?;
        handles::copy_entry(from, name, to, to_name, kind)
            .map_err(|e| io::Error::new(e.kind(), format!("`{rel}`: {e}")))
    })
}
