//! Workspace trees on disk: mounting checks, staged copies, diffs and
//! applying changes — all without ever following a symbolic link.
//!
//! Blocks can leave symlinks in the workspace. Every function here treats a
//! symlink as an opaque entry: it is compared by its target text, copied as
//! a link, removed as a link, and never traversed. Every host-side
//! operation reaches its paths through directory handles (`handles`): a
//! tree is opened once by its path and everything below it is reached one
//! component at a time, never through a link, so neither a link a block
//! left nor one swapped in between a check and a use can lead the host
//! out of the tree. FIFOs, sockets and devices are never opened.
//!
//! - [`scan`], [`copy_tree`]: list and copy a tree;
//! - [`diff`], [`violations`]: compare two trees, judge the changes;
//! - [`apply`], [`Apply`]: apply changes all or nothing;
//! - [`revert`]: roll back a host process's changes outside its
//!   restrictions, from a [`Snapshot`];
//! - [`ensure_real_dir`], [`ensure_host_dir`]: directories to mount or to
//!   keep the host's files in;
//! - [`read_file`], [`write_file`]: single files the host reads or writes
//!   there (block outputs, session files).

use std::path::PathBuf;

mod apply;
pub mod bundles;
mod diff;
mod dirs;
mod files;
mod handles;
pub mod links;
pub mod regular_file;
pub mod restrictions;
mod revert;
mod scan;
mod snapshot;
#[cfg(test)]
mod tests;

pub use apply::{Apply, apply, check_link};
pub use diff::{diff, violations};
pub use dirs::{ensure_host_dir, ensure_real_dir, open_real_dir};
pub use files::{read_file, remove_file, write_file};
pub use revert::revert;
pub use scan::{copy_tree, scan};
pub use snapshot::Snapshot;

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

impl Change {
    fn new(path: &str, kind: ChangeKind, entry: &EntryKind) -> Change {
        Change {
            path: path.to_string(),
            kind,
            entry: entry.clone(),
        }
    }
}
