//! The universal input's `repo_state` (seed 001), read from the
//! repository an agent works in rather than left at its defaults:
//!
//! - `branch`: with a `.jj` directory, the jj bookmark of the working
//!   copy (when `jj` answers — see the caller's `jj` function); else git's
//!   current branch, read from `.git/HEAD` (a worktree's `.git` file
//!   followed to its `gitdir`): the branch name, `HEAD` when detached,
//!   `""` outside a repository.
//! - `ci_status` and `last_failed_step`: what a block recorded in the
//!   session's `status.json` — `last_ci_result` (`green` / `red`; anything
//!   else is `unknown`) and an agent's own `last_failed_step` field. That
//!   is how a block records a CI result: its agent writes
//!   `last_ci_result` (and, when red, `last_failed_step`) into
//!   `status.json`, which the host keeps ([`super::status_merge`]).
//!
//! Every file read here is an agent's to change: reads are bounded and
//! what does not fit is ignored.

use std::io::Read;
use std::path::Path;

use super::agent_protocol::{CiStatus, RepoState};

/// The most read of `HEAD`, a `.git` file or `status.json`.
const MAX_HEAD_BYTES: u64 = 4096;

fn read_bounded(path: &Path, max: u64) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(max).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Git's current branch of the repository at `workspace`: the name,
/// `HEAD` when detached, `None` when it is no git repository.
pub fn git_branch(workspace: &Path) -> Option<String> {
    let dot_git = workspace.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        // A worktree (or submodule): `gitdir: <path>`.
        let text = read_bounded(&dot_git, MAX_HEAD_BYTES)?;
        let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        workspace.join(target)
    };
    let head = read_bounded(&git_dir.join("HEAD"), MAX_HEAD_BYTES)?;
    let head = head.lines().next()?.trim();
    match head.strip_prefix("ref:") {
        Some(reference) => {
            let reference = reference.trim();
            Some(
                reference
                    .strip_prefix("refs/heads/")
                    .unwrap_or(reference)
                    .to_string(),
            )
        }
        None if !head.is_empty() && head.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Some("HEAD".into())
        }
        None => None,
    }
}

/// The CI result and failed step a block recorded in the session's
/// `status.json` (`session_dir`, workspace-relative).
pub fn recorded_ci(workspace: &Path, session_dir: &str) -> (CiStatus, Option<String>) {
    let rel = format!("{session_dir}/status.json");
    let max = super::artifact_content::MAX_ARTIFACT_BYTES as u64;
    let status = crate::workspace::read_file(workspace, &rel, max)
        .ok()
        .filter(|bytes| crate::limits::json(bytes).is_ok())
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok());
    let Some(status) = status else {
        return (CiStatus::Unknown, None);
    };
    let ci = match status.get("last_ci_result").and_then(|v| v.as_str()) {
        Some("green") => CiStatus::Green,
        Some("red") => CiStatus::Red,
        _ => CiStatus::Unknown,
    };
    let step = status
        .get("last_failed_step")
        .and_then(|v| v.as_str())
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.chars().take(500).collect());
    (ci, step)
}

/// `repo_state` of the repository at `workspace`, with the CI result
/// recorded in session folder `session_dir` (when the run keeps one).
/// `jj` names the jj bookmark of the working copy, or `None` (jj not
/// installed, no bookmark): it is asked only when a `.jj` directory
/// exists, and git answers otherwise.
pub fn read(
    workspace: &Path,
    session_dir: Option<&str>,
    jj: impl FnOnce(&Path) -> Option<String>,
) -> RepoState {
    let from_jj = if workspace.join(".jj").is_dir() {
        jj(workspace).filter(|b| !b.trim().is_empty())
    } else {
        None
    };
    let branch = from_jj
        .or_else(|| git_branch(workspace))
        .unwrap_or_default();
    let (ci_status, last_failed_step) = match session_dir {
        Some(dir) => recorded_ci(workspace, dir),
        None => (CiStatus::Unknown, None),
    };
    RepoState {
        branch,
        ci_status,
        last_failed_step,
    }
}

/// `input` (the universal input JSON) with its `repo_state` filled from
/// `state` where it still has the defaults (`branch: ""`, `ci_status:
/// unknown`, no `last_failed_step`): a value the workflow gave is kept.
/// Text that is not a JSON object is returned as it is.
pub fn fill(input: &str, state: &RepoState) -> String {
    let Ok(serde_json::Value::Object(mut value)) = serde_json::from_str(input) else {
        return input.to_string();
    };
    let repo = value
        .entry("repo_state")
        .or_insert_with(|| serde_json::json!({}));
    let Some(repo) = repo.as_object_mut() else {
        return input.to_string();
    };
    let empty = |v: Option<&serde_json::Value>| {
        v.is_none_or(|v| v.is_null() || v.as_str().is_some_and(|s| s.is_empty()))
    };
    if empty(repo.get("branch")) {
        repo.insert("branch".into(), state.branch.clone().into());
    }
    if repo
        .get("ci_status")
        .is_none_or(|v| v.is_null() || v == "unknown")
    {
        repo.insert(
            "ci_status".into(),
            serde_json::to_value(state.ci_status).expect("an enum serializes"),
        );
    }
    if empty(repo.get("last_failed_step"))
        && let Some(step) = &state.last_failed_step
    {
        repo.insert("last_failed_step".into(), step.clone().into());
    }
    serde_json::Value::Object(value).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(head: &str) -> tempfile::TempDir {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join(".git")).unwrap();
        std::fs::write(ws.path().join(".git/HEAD"), head).unwrap();
        ws
    }

    #[test]
    fn the_branch_comes_from_git_or_jj() {
        let ws = repo("ref: refs/heads/feature/login\n");
        let no_jj = |_: &Path| -> Option<String> { panic!("no .jj: jj is not asked") };
        assert_eq!(read(ws.path(), None, no_jj).branch, "feature/login");
        let detached = repo("3c1f0a9d2b7e4f60a1b2c3d4e5f60718293a4b5c\n");
        assert_eq!(git_branch(detached.path()).as_deref(), Some("HEAD"));
        let none = tempfile::tempdir().unwrap();
        assert_eq!(read(none.path(), None, |_| None).branch, "");
        // A worktree: `.git` names its git directory.
        let main = repo("ref: refs/heads/main\n");
        let wt_git = main.path().join(".git/worktrees/p6");
        std::fs::create_dir_all(&wt_git).unwrap();
        std::fs::write(wt_git.join("HEAD"), "ref: refs/heads/issue39-part6\n").unwrap();
        let wt = tempfile::tempdir().unwrap();
        std::fs::write(
            wt.path().join(".git"),
            format!("gitdir: {}\n", wt_git.display()),
        )
        .unwrap();
        assert_eq!(git_branch(wt.path()).as_deref(), Some("issue39-part6"));
        // jj, when there is a `.jj` and it answers; git otherwise.
        std::fs::create_dir(ws.path().join(".jj")).unwrap();
        assert_eq!(
            read(ws.path(), None, |_| Some("trunk".into())).branch,
            "trunk"
        );
        assert_eq!(read(ws.path(), None, |_| None).branch, "feature/login");
    }

    #[test]
    fn the_ci_result_is_what_a_block_recorded_in_status_json() {
        let ws = repo("ref: refs/heads/main\n");
        let session = ".agents-work/2026-11-26_s";
        std::fs::create_dir_all(ws.path().join(session)).unwrap();
        let state = read(ws.path(), Some(session), |_| None);
        assert_eq!(state.ci_status, CiStatus::Unknown, "no status.json yet");
        std::fs::write(
            ws.path().join(session).join("status.json"),
            r#"{"last_ci_result": "red", "last_failed_step": "cargo test"}"#,
        )
        .unwrap();
        let state = read(ws.path(), Some(session), |_| None);
        assert_eq!(state.ci_status, CiStatus::Red);
        assert_eq!(state.last_failed_step.as_deref(), Some("cargo test"));
        // Hostile: nested too deep, or not an object.
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        std::fs::write(ws.path().join(session).join("status.json"), deep).unwrap();
        assert_eq!(
            read(ws.path(), Some(session), |_| None).ci_status,
            CiStatus::Unknown
        );
    }

    #[test]
    fn fill_keeps_what_the_workflow_gave() {
        let state = RepoState {
            branch: "main".into(),
            ci_status: CiStatus::Green,
            last_failed_step: None,
        };
        let defaults =
            r#"{"task": {"id": "T-1"}, "repo_state": {"branch": "", "ci_status": "unknown"}}"#;
        let filled: serde_json::Value = serde_json::from_str(&fill(defaults, &state)).unwrap();
        assert_eq!(
            filled["repo_state"],
            serde_json::json!({"branch": "main", "ci_status": "green"})
        );
        let given = r#"{"repo_state": {"branch": "release", "ci_status": "red", "last_failed_step": "lint"}}"#;
        let kept: serde_json::Value = serde_json::from_str(&fill(given, &state)).unwrap();
        assert_eq!(
            kept["repo_state"],
            serde_json::json!({"branch": "release", "ci_status": "red", "last_failed_step": "lint"})
        );
        assert_eq!(fill("not json", &state), "not json");
    }
}
