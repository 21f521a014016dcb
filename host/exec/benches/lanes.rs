//! Fan-out cost per lane on a workspace of 10,000 files: a git worktree
//! (with the workspace's uncommitted state replayed and committed in the
//! lane) against a plain copy, each created and then measured for the
//! lane's change detection and removal.
//!
//! `cargo bench -p wfhost-exec --bench lanes` — figures are in the README.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use wfhost_exec::lanes::{Isolation, Lane};

const FILES: usize = 10_000;
const LANES: usize = 5;

fn fill(dir: &Path) {
    for i in 0..FILES {
        let sub = dir.join(format!("src/m{:03}", i / 100));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(
            sub.join(format!("f{i}.rs")),
            format!("// file {i}\nfn f{i}() {{}}\n"),
        )
        .unwrap();
    }
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "git {args:?}");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn measure(ws: &Path, expected: Isolation) -> (Duration, Duration, Duration) {
    let root = tempfile::tempdir().unwrap();
    let (mut create, mut changes, mut remove) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..LANES {
        let t = Instant::now();
        let lane = Lane::create(ws, root.path(), &format!("lane-{n}")).unwrap();
        create.push(t.elapsed());
        assert_eq!(lane.isolation, expected);
        std::fs::write(lane.path.join("src/m000/f0.rs"), "changed").unwrap();
        let t = Instant::now();
        assert_eq!(lane.changes().unwrap().len(), 1);
        changes.push(t.elapsed());
        let t = Instant::now();
        lane.remove();
        remove.push(t.elapsed());
    }
    (median(create), median(changes), median(remove))
}

fn main() {
    let repo = tempfile::tempdir().unwrap();
    fill(repo.path());
    git(repo.path(), &["init", "-q"]);
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-q", "-m", "init"]);
    // Packed, as a repository with history is.
    git(repo.path(), &["gc", "-q"]);
    // Some uncommitted work, as a workspace mid-run has.
    std::fs::write(repo.path().join("src/m001/f100.rs"), "dirty").unwrap();
    std::fs::write(repo.path().join("NEW.md"), "untracked").unwrap();

    let plain = tempfile::tempdir().unwrap();
    fill(plain.path());

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (what, ws, isolation) in [
        ("git worktree", repo.path(), Isolation::GitWorktree),
        ("temp copy", plain.path(), Isolation::TempCopy),
    ] {
        let (create, changes, remove) = measure(ws, isolation);
        println!(
            "| lane of a {FILES}-file workspace, {what} | create {:.0} ms, detect changes {:.0} ms, remove {:.0} ms (median of {LANES}) |",
            ms(create),
            ms(changes),
            ms(remove)
        );
    }
}
