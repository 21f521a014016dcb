//! Parallel blocks through the binary: lanes in real git worktrees and in
//! plain copies, every merge strategy, conflicts, the fan-in gate, and
//! cleanup.

use super::*;

fn git(dir: &Path, args: &[&str]) {
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
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
}

/// A workspace with `src/shared.txt`, as a git repository with a commit
/// (and an uncommitted change) or as a plain directory.
fn workspace(as_git: bool) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("src")).unwrap();
    std::fs::write(ws.path().join("src/shared.txt"), "base\n").unwrap();
    std::fs::write(ws.path().join("README"), "readme\n").unwrap();
    if as_git {
        git(ws.path(), &["init", "-q"]);
        git(ws.path(), &["add", "-A"]);
        git(ws.path(), &["commit", "-q", "-m", "base"]);
        // Uncommitted work is part of what lanes start from.
        std::fs::write(ws.path().join("README"), "readme, edited\n").unwrap();
    }
    ws
}

/// Two echo lanes; `shared` makes both write `src/shared.txt`.
fn manifest(dir: &Path, strategy: &str, shared: bool) -> PathBuf {
    let (a, b) = if shared {
        ("src/shared.txt", "src/shared.txt")
    } else {
        ("src/api.txt", "src/ui.txt")
    };
    let wf = serde_json::json!({
        "id": "lanes",
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "implement", "blocks": {
            "implement": {
                "worker": "echo",
                "parallel": {"merge_strategy": strategy, "lanes": {
                    "api": {"config": {"message": "api lane", "write": {"path": a, "content": "from api\n"}}},
                    "ui": {"config": {"message": "ui lane", "write": {"path": b, "content": "from ui\n"}}}
                }},
                "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                    {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:lanes failed"}
                ]
            }
        }}}
    });
    let path = dir.join(format!("{strategy}-{shared}.json"));
    std::fs::write(&path, wf.to_string()).unwrap();
    path
}

fn of_type<'a>(events: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// Whether any lane directory of `run` is left, in memory or on disk.
pub fn lanes_left(run: &str) -> bool {
    wfhost_exec::lanes::lane_roots(&wfhost_core::ids::RunId::parse(run).unwrap())
        .iter()
        .any(|root| root.exists())
}

fn read(ws: &Path, rel: &str) -> String {
    std::fs::read_to_string(ws.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn check_workspace_strategy(as_git: bool) {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace(as_git);
    // Without conflicts, both lanes' files arrive.
    let m = manifest(scratch.path(), "workspace", false);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(read(ws.path(), "src/api.txt"), "from api\n");
    assert_eq!(read(ws.path(), "src/ui.txt"), "from ui\n");
    assert_eq!(read(ws.path(), "src/shared.txt"), "base\n");
    if as_git {
        assert_eq!(read(ws.path(), "README"), "readme, edited\n");
    }
    let run = report["run_id"].as_str().unwrap().to_string();
    assert!(!lanes_left(&run));
    // The parallel block's transition belongs to its step.
    let shown = shown_with_steps(&["show", &run, "--json"], scratch.path());
    assert_eq!(shown["steps"][0]["action"], "END", "{shown}");
    let contents: Vec<&str> = report["payload"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["content"].as_str().unwrap())
        .collect();
    assert!(
        contents.contains(&"api lane") && contents.contains(&"ui lane"),
        "{contents:?}"
    );
    assert!(of_type(&run_events(scratch.path(), &run), "lane:conflict-detected").is_empty());

    // With a conflict, the first lane to finish wins and the event says so.
    let m = manifest(scratch.path(), "workspace", true);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    let run = report["run_id"].as_str().unwrap().to_string();
    let all = run_events(scratch.path(), &run);
    let conflicts = of_type(&all, "lane:conflict-detected");
    assert_eq!(conflicts.len(), 1, "{all:#?}");
    let c = conflicts[0];
    assert_eq!(c["conflictingFile"], "src/shared.txt");
    assert_eq!(c["resolution"], "first-complete-wins");
    let first = c["lanes"][0].as_str().unwrap();
    assert_eq!(c["appliedFrom"], first);
    let completed = of_type(&all, "lane_completed");
    assert_eq!(
        completed[0]["lane"], first,
        "first to finish is first listed"
    );
    assert_eq!(read(ws.path(), "src/shared.txt"), format!("from {first}\n"));
    assert!(!lanes_left(&run));
    if as_git {
        // No branch or worktree was left in the user's repository.
        let out = Command::new("git")
            .args(["-C", ws.path().to_str().unwrap(), "worktree", "list"])
            .output()
            .unwrap();
        assert_eq!(stdout(&out).lines().count(), 1, "{}", stdout(&out));
    }
}

#[test]
fn workspace_strategy_in_a_git_repository() {
    check_workspace_strategy(true);
}

#[test]
fn workspace_strategy_in_a_plain_directory() {
    check_workspace_strategy(false);
}

fn check_concatenate(as_git: bool) {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace(as_git);
    for shared in [false, true] {
        let m = manifest(scratch.path(), "concatenate", shared);
        let (code, report) = run_report(&m, ws.path(), scratch.path());
        assert_eq!(code, Some(0), "{report}");
        // Only outputs are collected; file changes are recorded as dropped.
        assert_eq!(read(ws.path(), "src/shared.txt"), "base\n");
        assert!(!ws.path().join("src/api.txt").exists());
        let run = report["run_id"].as_str().unwrap().to_string();
        let all = run_events(scratch.path(), &run);
        let fan_in = of_type(&all, "fan_in_completed");
        assert_eq!(
            fan_in[0]["discarded"].as_array().unwrap().len(),
            2,
            "{all:#?}"
        );
        assert!(of_type(&all, "lane:conflict-detected").is_empty());
    }
}

#[test]
fn concatenate_in_a_git_repository() {
    check_concatenate(true);
}

#[test]
fn concatenate_in_a_plain_directory() {
    check_concatenate(false);
}

fn check_fail_on_conflict(as_git: bool) {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace(as_git);
    // Without a conflict it just merges.
    let m = manifest(scratch.path(), "fail-on-conflict", false);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(read(ws.path(), "src/api.txt"), "from api\n");

    // A conflict pauses the run; nothing is applied until the user chooses.
    let m = manifest(scratch.path(), "fail-on-conflict", true);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(3), "{report}");
    let run = report["run_id"].as_str().unwrap().to_string();
    let gate = report["gate"]["id"].as_str().unwrap().to_string();
    assert!(
        report["gate"]["prompt"]
            .as_str()
            .unwrap()
            .contains("src/shared.txt"),
        "{report}"
    );
    assert_eq!(read(ws.path(), "src/shared.txt"), "base\n");
    assert!(lanes_left(&run), "the lanes wait with their work");

    // Answers that do not choose a lane are refused, and change nothing.
    for bad in ["approved", "use-lane:nobody", "use-lane:README=api"] {
        let out = wfhost(&["gate", &run, &gate, bad], scratch.path());
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stdout(&out));
        assert!(!stderr(&out).is_empty());
    }
    let out = wfhost(
        &["gate", &run, &gate, "use-lane:ui", "--json"],
        scratch.path(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(read(ws.path(), "src/shared.txt"), "from ui\n");
    let all = run_events(scratch.path(), &run);
    let resolved: Vec<_> = of_type(&all, "lane:conflict-detected")
        .into_iter()
        .filter(|c| c["appliedFrom"] == "ui")
        .collect();
    assert_eq!(resolved.len(), 1, "{all:#?}");
    assert_eq!(resolved[0]["resolution"], "user-resolved");
    assert!(!lanes_left(&run));
}

#[test]
fn fail_on_conflict_in_a_git_repository() {
    check_fail_on_conflict(true);
}

#[test]
fn fail_on_conflict_in_a_plain_directory() {
    check_fail_on_conflict(false);
}

#[test]
fn gc_removes_lane_workspaces_nobody_will_come_back_to() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace(false);
    let m = manifest(scratch.path(), "workspace", false);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0));
    let run = report["run_id"].as_str().unwrap().to_string();
    // What a host that died during fan-in would have left behind.
    // Lanes of small workspaces are made in memory, the others on disk:
    // one leftover in each place.
    let roots = wfhost_exec::lanes::lane_bases();
    let root = &roots.last().unwrap().path;
    let leftover = roots[0].path.join(&run).join("step-0-api");
    std::fs::create_dir_all(&leftover).unwrap();
    std::fs::write(leftover.join("f"), "x").unwrap();
    if roots.len() > 1 {
        let on_disk = root.join(&run).join("step-1-api");
        std::fs::create_dir_all(&on_disk).unwrap();
    }
    // Another store's lanes are not this gc's business.
    let foreign = root.join("run-20260101-000000-foreign").join("step-0-a");
    std::fs::create_dir_all(&foreign).unwrap();
    let out = wfhost(&["gc", "--json"], scratch.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let removed = if roots.len() > 1 {
        serde_json::json!([format!("{run}/step-0-api"), format!("{run}/step-1-api")])
    } else {
        serde_json::json!([format!("{run}/step-0-api")])
    };
    assert_eq!(report["lane_workspaces_removed"], removed, "{report}");
    assert!(!lanes_left(&run));
    assert!(foreign.exists());
    std::fs::remove_dir_all(foreign.parent().unwrap()).unwrap();
}
