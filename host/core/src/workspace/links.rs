//! Which symbolic links a sandboxed block may leave in the workspace.
//!
//! A link outlives the block that made it: exec commands, agent CLIs and
//! the user's own tools later follow it with the host's full authority. So
//! every link a block creates or moves must resolve inside the workspace,
//! and must do so by its text alone, without trusting what the path
//! passes through:
//!
//! - the target is relative (an absolute target names a host path);
//! - `..` may appear only at its start (`../../docs/a.md`, never
//!   `docs/../../a.md`: the `..` after a name is taken from wherever that
//!   name leads, which may be another link);
//! - those leading `..` never climb above the workspace root from the
//!   directory the link is in.
//!
//! If every link obeys this, following any chain of them stays inside: each
//! link's leading `..` walk up real directories, and the names after them
//! lead only down, possibly through other links that obey the same rule.

use std::fmt;

/// Why a link was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkRefusal {
    Empty,
    Absolute,
    /// A `..` after a name.
    ClimbsAfterName,
    /// More leading `..` than the link's directory is deep.
    LeadsOut,
}

impl fmt::Display for LinkRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LinkRefusal::Empty => "its target is empty",
            LinkRefusal::Absolute => "its target is an absolute path",
            LinkRefusal::ClimbsAfterName => "its target has `..` after a name",
            LinkRefusal::LeadsOut => "its target climbs above the workspace",
        })
    }
}

/// How many leading `..` `target` has, or why it can never be allowed.
pub fn climb(target: &str) -> Result<usize, LinkRefusal> {
    if target.is_empty() {
        return Err(LinkRefusal::Empty);
    }
    if target.starts_with('/') {
        return Err(LinkRefusal::Absolute);
    }
    let mut up = 0;
    let mut named = false;
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." if named => return Err(LinkRefusal::ClimbsAfterName),
            ".." => up += 1,
            _ => named = true,
        }
    }
    Ok(up)
}

/// Whether a link with `target`, in a directory `depth` levels below the
/// workspace root (0 for the root itself), may exist.
pub fn check_target(depth: usize, target: &str) -> Result<(), LinkRefusal> {
    if climb(target)? > depth {
        return Err(LinkRefusal::LeadsOut);
    }
    Ok(())
}

/// [`check_target`] for a link at the workspace-relative path `link`.
pub fn check_link_at(link: &str, target: &str) -> Result<(), LinkRefusal> {
    let depth = link
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .count()
        .saturating_sub(1);
    check_target(depth, target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_that_stay_inside_are_allowed() {
        assert_eq!(check_link_at("a", "b"), Ok(()));
        assert_eq!(check_link_at("a", "./b/c"), Ok(()));
        assert_eq!(check_link_at("docs/latest", "../v2/doc.md"), Ok(()));
        assert_eq!(check_link_at("a/b/c", "../../x"), Ok(()));
        assert_eq!(check_link_at("a/b", "."), Ok(()));
        assert_eq!(check_link_at("a/b", ".."), Ok(()));
    }

    #[test]
    fn links_that_lead_out_are_refused() {
        assert_eq!(
            check_link_at("notes/cache", "../../victim"),
            Err(LinkRefusal::LeadsOut)
        );
        assert_eq!(check_link_at("up", ".."), Err(LinkRefusal::LeadsOut));
        assert_eq!(
            check_link_at("a", "/etc/passwd"),
            Err(LinkRefusal::Absolute)
        );
        assert_eq!(check_link_at("a", ""), Err(LinkRefusal::Empty));
        // Resolved lexically `a/b/../../x` stays inside, but `b` may be a
        // link to `..` itself: a `..` after a name is never trusted.
        assert_eq!(
            check_link_at("a/l", "b/../../x"),
            Err(LinkRefusal::ClimbsAfterName)
        );
        assert_eq!(
            check_link_at("a/b/l", "../c/.."),
            Err(LinkRefusal::ClimbsAfterName)
        );
    }

    #[test]
    fn the_same_target_depends_on_where_the_link_is() {
        assert_eq!(check_target(2, "../../x"), Ok(()));
        assert_eq!(check_target(1, "../../x"), Err(LinkRefusal::LeadsOut));
    }
}
