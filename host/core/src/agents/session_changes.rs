//! The files a session changed, for Reviewer dispatches: the universal
//! input's `session_changed_files`, folded from what the host detected
//! after each agent ran (not from what agents claim).
//!
//! Each agent run's changes are merged into the session's list so that it
//! says how each path differs from the session's start: a file added and
//! then modified is `added`; added then removed is gone from the list;
//! removed then created again is `modified`; a file that moved is `renamed`
//! with its `old_path` (and an added file that moved is still `added`).

use std::collections::BTreeMap;

use crate::agents::agent_protocol::{ChangeType, ChangedFile};

/// The file the host keeps the list in, in the session folder.
pub const FILE_NAME: &str = "session-changes.json";

/// What one agent run changed (detected by the host).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunChanges {
    pub modified: Vec<String>,
    pub created: Vec<String>,
    pub removed: Vec<String>,
    /// `(old, new)`; both also listed in `removed` and `created`.
    pub renamed: Vec<(String, String)>,
}

/// `session` (sorted by path) after `run`.
pub fn merge(session: &[ChangedFile], run: &RunChanges) -> Vec<ChangedFile> {
    let mut by_path: BTreeMap<String, (ChangeType, Option<String>)> = session
        .iter()
        .map(|f| (f.path.clone(), (f.change_type, f.old_path.clone())))
        .collect();
    let moved_from: Vec<&String> = run.renamed.iter().map(|(old, _)| old).collect();
    let moved_to: Vec<&String> = run.renamed.iter().map(|(_, new)| new).collect();
    for (old, new) in &run.renamed {
        let entry = match by_path.remove(old) {
            Some((ChangeType::Added, _)) => (ChangeType::Added, None),
            Some((ChangeType::Renamed, Some(origin))) if origin == *new => {
                (ChangeType::Modified, None)
            }
            Some((ChangeType::Renamed, origin)) => (ChangeType::Renamed, origin),
            _ => (ChangeType::Renamed, Some(old.clone())),
        };
        by_path.insert(new.clone(), entry);
    }
    for path in run.removed.iter().filter(|p| !moved_from.contains(p)) {
        match by_path.remove(path) {
            Some((ChangeType::Added, _)) => {}
            Some((ChangeType::Renamed, Some(origin))) => {
                by_path.insert(origin, (ChangeType::Deleted, None));
            }
            _ => {
                by_path.insert(path.clone(), (ChangeType::Deleted, None));
            }
        }
    }
    for path in run.created.iter().filter(|p| !moved_to.contains(p)) {
        let entry = match by_path.get(path) {
            Some((ChangeType::Deleted, _)) => (ChangeType::Modified, None),
            _ => (ChangeType::Added, None),
        };
        by_path.insert(path.clone(), entry);
    }
    for path in &run.modified {
        by_path
            .entry(path.clone())
            .or_insert((ChangeType::Modified, None));
    }
    by_path
        .into_iter()
        .map(|(path, (change_type, old_path))| ChangedFile {
            path,
            change_type,
            old_path: old_path.filter(|_| change_type == ChangeType::Renamed),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(files: &[ChangedFile]) -> Vec<String> {
        files
            .iter()
            .map(|f| match &f.old_path {
                Some(old) => format!("{:?} {} <- {old}", f.change_type, f.path),
                None => format!("{:?} {}", f.change_type, f.path),
            })
            .collect()
    }

    fn run(
        modified: &[&str],
        created: &[&str],
        removed: &[&str],
        renamed: &[(&str, &str)],
    ) -> RunChanges {
        let v = |s: &[&str]| s.iter().map(|p| p.to_string()).collect();
        RunChanges {
            modified: v(modified),
            created: v(created),
            removed: v(removed),
            renamed: renamed
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
        }
    }

    #[test]
    fn the_list_says_how_each_path_differs_from_the_sessions_start() {
        let s = merge(
            &[],
            &run(
                &["src/app.rs"],
                &["src/new.rs", "src/b.rs"],
                &["src/old.rs", "src/a.rs"],
                &[("src/a.rs", "src/b.rs")],
            ),
        );
        assert_eq!(
            list(&s),
            [
                "Modified src/app.rs",
                "Renamed src/b.rs <- src/a.rs",
                "Added src/new.rs",
                "Deleted src/old.rs"
            ]
        );
        // Added then changed: still added. Renamed then removed: its origin
        // is deleted. Deleted then created again: modified.
        let s = merge(
            &s,
            &run(&["src/new.rs"], &["src/old.rs"], &["src/b.rs"], &[]),
        );
        assert_eq!(
            list(&s),
            [
                "Deleted src/a.rs",
                "Modified src/app.rs",
                "Added src/new.rs",
                "Modified src/old.rs"
            ]
        );
        // Added then removed: gone. An added file that moves stays added.
        let s = merge(&[], &run(&[], &["x.rs"], &[], &[]));
        assert_eq!(
            list(&merge(&s, &run(&[], &[], &["x.rs"], &[]))),
            Vec::<String>::new()
        );
        assert_eq!(
            list(&merge(
                &s,
                &run(&[], &["y.rs"], &["x.rs"], &[("x.rs", "y.rs")])
            )),
            ["Added y.rs"]
        );
        // Moved and moved back: modified at most.
        let s = merge(&[], &run(&[], &["b"], &["a"], &[("a", "b")]));
        assert_eq!(
            list(&merge(&s, &run(&[], &["a"], &["b"], &[("b", "a")]))),
            ["Modified a"]
        );
    }
}
