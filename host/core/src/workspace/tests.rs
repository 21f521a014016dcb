//! Tests of the workspace operations.

use super::*;
use crate::workspace::restrictions::RestrictionPlan;
use std::fs;
use std::io;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

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
    assert_eq!(
        summary(&changes),
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

/// Each change's path and kind.
fn summary(changes: &[Change]) -> Vec<(&str, ChangeKind)> {
    changes
        .iter()
        .map(|c| (c.path.as_str(), c.kind.clone()))
        .collect()
}

/// Every file under `dir`, with its content.
fn contents(dir: &Path) -> Vec<(String, String)> {
    scan(dir, &|_| false)
        .unwrap()
        .into_iter()
        .filter(|(_, k)| *k == EntryKind::File)
        .map(|(rel, _)| {
            let text = fs::read_to_string(dir.join(&rel)).unwrap();
            (rel, text)
        })
        .collect()
}

/// A directory outside every tree under test, holding one file.
fn victim() -> PathBuf {
    let outside = tmp();
    fs::write(outside.join("secret"), "secret").unwrap();
    outside
}

/// Replace the directory `dir` with a link to `to` (keeping its content
/// at `dir.moved`), as a racing process would.
fn swap_for_link(dir: &Path, to: &Path) {
    fs::rename(dir, dir.with_extension("moved")).unwrap();
    symlink(to, dir).unwrap();
}

#[test]
fn apply_never_writes_through_a_directory_swapped_for_a_link() {
    let root = tmp();
    let outside = victim();
    let (live, staged) = (root.join("live"), root.join("staged"));
    fs::create_dir_all(live.join("docs")).unwrap();
    fs::write(live.join("docs/secret"), "old").unwrap();
    copy_tree(&live, &staged, &|_| false).unwrap();
    fs::write(staged.join("docs/secret"), "overwritten").unwrap();
    fs::write(staged.join("docs/new"), "new").unwrap();
    let changes = diff(&live, &staged, &|_| false).unwrap();

    // Swapped after the diff, before the changes are applied.
    swap_for_link(&live.join("docs"), &outside);
    let err = apply(&changes, &staged, &live).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(contents(&outside), [("secret".into(), "secret".into())]);

    // Swapped between staging and commit.
    fs::remove_file(live.join("docs")).unwrap();
    fs::rename(live.join("docs.moved"), live.join("docs")).unwrap();
    let mut tx = Apply::default();
    tx.stage(&changes, &staged, &live, "").unwrap();
    swap_for_link(&live.join("docs"), &outside);
    assert!(tx.commit().is_err());
    assert_eq!(contents(&outside), [("secret".into(), "secret".into())]);
    // The real directory's file was not replaced. (The copies staged in
    // it stay: the rollback does not go through the link either.)
    assert_eq!(
        fs::read_to_string(live.join("docs.moved/secret")).unwrap(),
        "old"
    );
}

#[test]
fn revert_never_deletes_or_restores_through_a_link() {
    let root = tmp();
    let outside = victim();
    let (live, snap) = (root.join("live"), root.join("snap"));
    fs::create_dir_all(live.join("docs")).unwrap();
    fs::write(live.join("docs/secret"), "mine").unwrap();
    copy_tree(&live, &snap, &|_| false).unwrap();
    fs::write(live.join("docs/secret"), "changed").unwrap();
    let plan = RestrictionPlan::new(Some(&["src/**".to_string()])).unwrap();
    let changes = diff(&snap, &live, &|_| false).unwrap();
    swap_for_link(&live.join("docs"), &outside);
    assert!(revert(&changes, &plan, &snap, &live).is_err());
    assert_eq!(contents(&outside), [("secret".into(), "secret".into())]);
}

#[test]
fn walks_refuse_a_directory_swapped_for_a_link_while_they_run() {
    let root = tmp();
    let outside = victim();
    let src = root.join("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("d/f"), "f").unwrap();
    // `skip` runs for each entry as it is listed: swap `d` right then,
    // before the walk goes into it.
    let swap = |rel: &str| {
        if rel == "d" {
            swap_for_link(&src.join("d"), &outside);
        }
        false
    };
    let err = copy_tree(&src, &root.join("copy"), &swap).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(!root.join("copy/d/secret").exists());
    assert!(fs::symlink_metadata(root.join("copy/d/secret")).is_err());

    fs::remove_file(src.join("d")).unwrap();
    fs::rename(src.join("d.moved"), src.join("d")).unwrap();
    let swap = |rel: &str| {
        if rel == "d" {
            swap_for_link(&src.join("d"), &outside);
        }
        false
    };
    assert!(scan(&src, &swap).is_err());
}

#[test]
fn a_snapshot_copies_and_compares_nothing_outside_its_tree() {
    let root = tmp();
    let outside = victim();
    let live = root.join("live");
    fs::create_dir_all(live.join("docs")).unwrap();
    fs::write(live.join("docs/a"), "a").unwrap();
    symlink(&outside, live.join("out")).unwrap();
    fn nothing(_: &str) -> bool {
        false
    }
    let snap = Snapshot::take(&live, nothing, &|_| true, &|_| root.join("store")).unwrap();
    // The link is kept as a link; nothing of the victim was copied.
    assert!(
        fs::symlink_metadata(root.join("store/out"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // A directory swapped for a link: the comparison does not go into it.
    swap_for_link(&live.join("docs"), &outside);
    let changes = snap.changes().unwrap();
    assert_eq!(
        summary(&changes),
        [
            ("docs", ChangeKind::Modified),
            ("docs.moved", ChangeKind::Added),
            ("docs.moved/a", ChangeKind::Added),
            ("docs/a", ChangeKind::Removed),
        ]
    );
}

#[test]
fn fifos_are_neither_listed_nor_copied() {
    let root = tmp();
    let src = root.join("src");
    fs::create_dir_all(&src).unwrap();
    let c = std::ffi::CString::new(src.join("pipe").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    fs::write(src.join("f"), "f").unwrap();
    copy_tree(&src, &root.join("copy"), &|_| false).unwrap();
    assert_eq!(contents(&root.join("copy")), [("f".into(), "f".into())]);
    assert!(!scan(&src, &|_| false).unwrap().contains_key("pipe"));
}
