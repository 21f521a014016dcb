//! Rolling back the changes a host process made outside its restrictions.

use std::io;
use std::path::Path;

use super::diff::not_permitted;
use super::handles;
use super::{Change, ChangeKind, EntryKind, apply};
use crate::workspace::restrictions::RestrictionPlan;

/// Undo, in `live`, the changes (found by [`diff`](super::diff) from
/// `snapshot` to `live`) that `plan` does not permit, restoring what
/// `snapshot` holds: additions are removed, modifications and removals are
/// copied back. A changed directory is undone too unless a permitted change
/// lies below it. This is how a non-sandboxed executor's changes outside a
/// block's restrictions are rolled back. Returns the paths undone.
pub fn revert(
    changes: &[Change],
    plan: &RestrictionPlan,
    snapshot: &Path,
    live: &Path,
) -> io::Result<Vec<String>> {
    let undo = not_permitted(changes, plan, |other| plan.permits(&other.path));
    // A snapshot that copied nothing has no directory yet.
    std::fs::create_dir_all(snapshot)?;
    let snapshot_root = handles::open_root(snapshot)?;
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
                entry: before(&snapshot_root, &c.path)?,
            },
        });
    }
    apply(&inverse, snapshot, live)?;
    Ok(undo.into_iter().map(|c| c.path.clone()).collect())
}

fn before(snapshot: &cap_std::fs::Dir, rel: &str) -> io::Result<EntryKind> {
    let (parent, name) = handles::split(rel);
    handles::entry_kind(&handles::open_dir(snapshot, parent)?, name)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("`{rel}` in the snapshot is not a file, link or directory"),
        )
    })
}
