//! Comparing two trees, and judging the changes against restrictions.

use std::io;
use std::path::Path;

use cap_std::fs::Dir;

use super::handles::{self, Parents};
use super::scan::scan_dir;
use super::{Change, ChangeKind, EntryKind};
use crate::workspace::restrictions::RestrictionPlan;

/// Whether the regular files `a` and `b` hold the same bytes.
pub(super) fn same_content(a: (&Dir, &str), b: (&Dir, &str)) -> io::Result<bool> {
    use std::io::Read;
    let (mut fa, mut fb) = (handles::open_file(a.0, a.1)?, handles::open_file(b.0, b.1)?);
    if fa.metadata()?.len() != fb.metadata()?.len() {
        return Ok(false);
    }
    let (mut ca, mut cb) = (Vec::new(), Vec::new());
    fa.read_to_end(&mut ca)?;
    fb.read_to_end(&mut cb)?;
    Ok(ca == cb)
}

/// Changes that turn the tree at `before` into the tree at `after`.
/// `skip_before` hides paths of `before` that the comparison must not see
/// (for example directories mounted directly rather than staged).
pub fn diff(
    before: &Path,
    after: &Path,
    skip_before: &dyn Fn(&str) -> bool,
) -> io::Result<Vec<Change>> {
    let (before, after) = (handles::open_root(before)?, handles::open_root(after)?);
    let old = scan_dir(&before, skip_before)?;
    let new = scan_dir(&after, &|_| false)?;
    let (mut old_parents, mut new_parents) = (Parents::new(&before), Parents::new(&after));
    let mut changes = Vec::new();
    for (path, kind) in &new {
        let modified = match (old.get(path), kind) {
            (None, _) => {
                changes.push(Change::new(path, ChangeKind::Added, kind));
                continue;
            }
            (Some(EntryKind::File), EntryKind::File) => {
                !same_content(old_parents.of(path)?, new_parents.of(path)?)?
            }
            (Some(old_kind), _) => old_kind != kind,
        };
        if modified {
            changes.push(Change::new(path, ChangeKind::Modified, kind));
        }
    }
    for (path, kind) in &old {
        if !new.contains_key(path) {
            changes.push(Change::new(path, ChangeKind::Removed, kind));
        }
    }
    Ok(changes)
}

/// Changes a plan does not permit. A new or removed directory is judged by
/// what it contains; an empty one by its own path.
pub fn violations<'a>(changes: &'a [Change], plan: &RestrictionPlan) -> Vec<&'a Change> {
    not_permitted(changes, plan, |other| other.entry != EntryKind::Dir)
}

/// Changes `plan` does not permit, leaving out a directory with a change
/// below it for which `keeps` holds (the directory is judged by that).
pub(super) fn not_permitted<'a>(
    changes: &'a [Change],
    plan: &RestrictionPlan,
    keeps: impl Fn(&Change) -> bool,
) -> Vec<&'a Change> {
    changes
        .iter()
        .filter(|c| !plan.permits(&c.path))
        .filter(|c| {
            c.entry != EntryKind::Dir
                || !changes.iter().any(|other| {
                    other.path.len() > c.path.len()
                        && crate::workspace::restrictions::is_under(&other.path, &c.path)
                        && keeps(other)
                })
        })
        .collect()
}
