//! Lane workspaces against real git and real directories.

use std::path::Path;
use std::process::Command;

use wfhost_core::workspace::ChangeKind;
use wfhost_exec::lanes::{self, Isolation, Lane, Source};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn write(dir: &Path, rel: &str, content: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

/// A repo with a commit, then uncommitted work: a modified, a deleted and
/// an untracked file, an ignored file, and a previous block's output.
fn dirty_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q"]);
    write(d, "src/a.rs", "a1");
    write(d, "src/b.rs", "b1");
    write(d, "gone.txt", "x");
    write(d, ".gitignore", "target/\n");
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "init"]);
    write(d, "src/a.rs", "a2-uncommitted");
    std::fs::remove_file(d.join("gone.txt")).unwrap();
    write(d, "notes/new.md", "untracked");
    write(d, "target/big.bin", "ignored");
    write(d, ".output/block-plan.json", "{}");
    dir
}

fn paths(lane: &Lane) -> Vec<(String, ChangeKind)> {
    let mut v: Vec<_> = lane
        .changes()
        .unwrap()
        .into_iter()
        .map(|c| (c.path, c.kind))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn a_worktree_lane_starts_as_the_workspace_is_and_reports_only_its_own_changes() {
    let repo = dirty_repo();
    let status = git(repo.path(), &["status", "--porcelain", "-uall"]);
    let root = tempfile::tempdir().unwrap();
    let lane = Lane::create(repo.path(), root.path(), "dev-a").unwrap();
    assert_eq!(lane.isolation, Isolation::GitWorktree);
    // The user's index and work are as they were, and the private index
    // the lane's base was made with is gone.
    assert_eq!(
        git(repo.path(), &["status", "--porcelain", "-uall"]),
        status
    );
    let git_dir = std::fs::read_dir(repo.path().join(".git")).unwrap();
    assert!(
        git_dir
            .filter_map(Result::ok)
            .all(|e| !e.file_name().to_string_lossy().contains("wfhost")),
        "no private index is left in .git"
    );
    let l = &lane.path;
    assert_eq!(
        std::fs::read_to_string(l.join("src/a.rs")).unwrap(),
        "a2-uncommitted"
    );
    assert!(!l.join("gone.txt").exists());
    assert_eq!(
        std::fs::read_to_string(l.join("notes/new.md")).unwrap(),
        "untracked"
    );
    assert!(l.join(".output/block-plan.json").is_file());
    assert!(paths(&lane).is_empty(), "a fresh lane has changed nothing");

    write(l, "src/b.rs", "b-lane");
    write(l, "src/c.rs", "c-lane");
    std::fs::remove_file(l.join("src/a.rs")).unwrap();
    write(l, ".output/block-dev-a.json", "{}");
    assert_eq!(
        paths(&lane),
        [
            ("src/a.rs".to_string(), ChangeKind::Removed),
            ("src/b.rs".to_string(), ChangeKind::Modified),
            ("src/c.rs".to_string(), ChangeKind::Added),
        ]
    );
    assert_eq!(
        lane.block_outputs()
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["block-dev-a.json", "block-plan.json"]
    );
    // The user's repository: no new branch, its work untouched.
    assert_eq!(git(repo.path(), &["branch", "--list"]).lines().count(), 1);
    assert_eq!(
        std::fs::read_to_string(repo.path().join("src/a.rs")).unwrap(),
        "a2-uncommitted"
    );
    let path = lane.path.clone();
    lane.remove();
    assert!(!path.exists());
    assert_eq!(
        git(repo.path(), &["worktree", "list"]).lines().count(),
        1,
        "the worktree is unregistered"
    );
}

#[test]
fn a_plain_directory_gets_a_copy() {
    let ws = tempfile::tempdir().unwrap();
    write(ws.path(), "a.txt", "1");
    write(ws.path(), "dir/b.txt", "2");
    let root = tempfile::tempdir().unwrap();
    let lane = Lane::create(ws.path(), root.path(), "lane-1").unwrap();
    assert_eq!(lane.isolation, Isolation::TempCopy);
    write(&lane.path, "a.txt", "changed");
    write(&lane.path, "dir/new.txt", "n");
    write(&lane.path, ".output/block-lane-1.json", "{}");
    assert_eq!(
        paths(&lane),
        [
            ("a.txt".to_string(), ChangeKind::Modified),
            ("dir/new.txt".to_string(), ChangeKind::Added),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "1"
    );
    let path = lane.path.clone();
    lane.remove();
    assert!(!path.exists());
}

#[test]
fn leftover_lanes_of_a_crash_are_removed() {
    let repo = dirty_repo();
    let root = tempfile::tempdir().unwrap();
    let lanes_dir = root.path().join("run-1");
    let a = Lane::create(repo.path(), &lanes_dir, "a").unwrap();
    let _b = Lane::create(repo.path(), &lanes_dir, "b").unwrap();
    // Recreating a lane over a leftover of the same name works.
    drop(a);
    let a = Lane::create(repo.path(), &lanes_dir, "a").unwrap();
    assert!(a.changes().unwrap().is_empty());
    assert_eq!(git(repo.path(), &["worktree", "list"]).lines().count(), 3);
    assert_eq!(lanes::remove_all(repo.path(), &lanes_dir), ["a", "b"]);
    assert!(!lanes_dir.exists());
    assert_eq!(git(repo.path(), &["worktree", "list"]).lines().count(), 1);
}

#[test]
fn a_repo_without_commits_falls_back_to_a_copy() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    write(dir.path(), "a.txt", "1");
    let root = tempfile::tempdir().unwrap();
    let lane = Lane::create(dir.path(), root.path(), "x").unwrap();
    assert_eq!(lane.isolation, Isolation::TempCopy);
    lane.remove();
}

#[test]
fn lanes_of_one_repository_can_be_made_from_many_threads_at_once() {
    let repo = dirty_repo();
    let root = tempfile::tempdir().unwrap();
    let made: Vec<Lane> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (repo, root) = (repo.path(), root.path());
                s.spawn(move || Lane::create(repo, root, &format!("t{i}")).unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(made.iter().all(|l| l.isolation == Isolation::GitWorktree));
    std::thread::scope(|s| {
        for lane in made {
            s.spawn(move || lane.remove());
        }
    });
    assert_eq!(git(repo.path(), &["worktree", "list"]).lines().count(), 1);
}

#[test]
fn lanes_of_one_source_share_its_base_and_a_clean_workspace_is_its_head() {
    let repo = dirty_repo();
    let root = tempfile::tempdir().unwrap();
    let source = Source::of(repo.path()).unwrap();
    let a = Lane::create_from(&source, root.path(), "a").unwrap();
    let b = Lane::create_from(&source, root.path(), "b").unwrap();
    let head = |lane: &Lane| git(&lane.path, &["rev-parse", "HEAD"]);
    assert_eq!(head(&a), head(&b));
    assert_ne!(head(&a), git(repo.path(), &["rev-parse", "HEAD"]));
    for lane in [&a, &b] {
        assert_eq!(
            std::fs::read_to_string(lane.path.join("notes/new.md")).unwrap(),
            "untracked"
        );
        assert!(!lane.path.join("target/big.bin").exists(), "ignored");
        assert!(paths(lane).is_empty());
    }
    lanes::remove_lanes(vec![a, b]);
    assert_eq!(git(repo.path(), &["worktree", "list"]).lines().count(), 1);

    // Committed, the workspace is its HEAD: no commit of wfhost's.
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-q", "-m", "all"]);
    let lane = Lane::create(repo.path(), root.path(), "c").unwrap();
    assert_eq!(head(&lane), git(repo.path(), &["rev-parse", "HEAD"]));
    lane.remove();
}

#[test]
fn what_a_lanes_block_commits_is_still_its_change() {
    let repo = dirty_repo();
    let root = tempfile::tempdir().unwrap();
    let lane = Lane::create(repo.path(), root.path(), "committer").unwrap();
    write(&lane.path, "src/b.rs", "b-committed");
    write(&lane.path, "src/d.rs", "d-committed");
    git(&lane.path, &["add", "-A"]);
    git(
        &lane.path,
        &["commit", "-q", "-m", "the agent's own commit"],
    );
    write(&lane.path, "src/e.rs", "e-uncommitted");
    assert_eq!(
        paths(&lane),
        [
            ("src/b.rs".to_string(), ChangeKind::Modified),
            ("src/d.rs".to_string(), ChangeKind::Added),
            ("src/e.rs".to_string(), ChangeKind::Added),
        ]
    );
    lane.remove();
    assert_eq!(git(repo.path(), &["worktree", "list"]).lines().count(), 1);
}
