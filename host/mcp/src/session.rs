//! Which session a run started over MCP belongs to: the one the client
//! names, else the git branch of the run's workspace.

use std::io::Read;
use std::path::{Path, PathBuf};

use wfhost_store::SessionTag;

/// The longest `.git` file or `HEAD` read; both are a line long.
const MAX_GIT_FILE: u64 = 4096;

/// The branch checked out in the git repository holding `dir` (its work
/// tree or a linked worktree), read from `HEAD` without running git.
/// `None` outside a repository, on a detached head, or when the files are
/// not what git writes.
pub fn git_branch(dir: &Path) -> Option<String> {
    let git_dir = find_git_dir(dir)?;
    let head = read_small(&git_dir.join("HEAD"))?;
    let branch = head.trim_end().strip_prefix("ref: refs/heads/")?;
    (!branch.is_empty() && !branch.chars().any(char::is_control)).then(|| branch.to_string())
}

fn find_git_dir(dir: &Path) -> Option<PathBuf> {
    for at in dir.ancestors() {
        let dot_git = at.join(".git");
        let Ok(meta) = std::fs::metadata(&dot_git) else {
            continue;
        };
        if meta.is_dir() {
            return Some(dot_git);
        }
        if meta.is_file() {
            // A linked worktree or submodule: `gitdir: <path>`.
            let text = read_small(&dot_git)?;
            let target = Path::new(text.trim_end().strip_prefix("gitdir: ")?);
            return Some(at.join(target));
        }
        return None;
    }
    None
}

/// A regular file's first [`MAX_GIT_FILE`] bytes as text; never opens a
/// FIFO or device a hostile workspace put there.
fn read_small(path: &Path) -> Option<String> {
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_GIT_FILE)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The session of a run starting in `workspace`: `asked` when the client
/// named one, else the workspace's git branch, else none.
pub fn session_for(asked: Option<&str>, workspace: &Path) -> Result<Option<SessionTag>, String> {
    let branch = git_branch(workspace);
    match asked {
        Some(id) => SessionTag::client(id, branch).map(Some),
        None => Ok(branch.map(|b| SessionTag::git(&b, &workspace.display().to_string()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_branch_of_a_repository_a_worktree_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/feature/x\n").unwrap();
        assert_eq!(
            git_branch(&repo.join("src/deep")).as_deref(),
            Some("feature/x")
        );

        std::fs::write(repo.join(".git/HEAD"), "3f9c2a0d\n").unwrap();
        assert_eq!(git_branch(&repo), None, "a detached head has no branch");

        let wt = root.path().join("wt");
        let wt_git = root.path().join("gitdirs/wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::create_dir_all(&wt_git).unwrap();
        std::fs::write(wt_git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(wt.join(".git"), "gitdir: ../gitdirs/wt\n").unwrap();
        assert_eq!(git_branch(&wt).as_deref(), Some("main"));

        let plain = tempfile::tempdir().unwrap();
        assert_eq!(git_branch(plain.path()), None);
    }

    #[test]
    fn a_client_session_id_wins_and_bad_ones_are_refused() {
        let plain = tempfile::tempdir().unwrap();
        let s = session_for(Some("chat-42"), plain.path()).unwrap().unwrap();
        assert_eq!(s.id, "chat-42");
        assert!(session_for(Some(""), plain.path()).is_err());
        assert!(session_for(Some("a\nb"), plain.path()).is_err());
        assert!(session_for(Some(&"x".repeat(257)), plain.path()).is_err());
        assert_eq!(session_for(None, plain.path()).unwrap(), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_for_head_is_not_opened() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(repo.path().join(".git")).unwrap();
        let head = repo.path().join(".git/HEAD");
        let status = std::process::Command::new("mkfifo")
            .arg(&head)
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(git_branch(repo.path()), None);
    }
}
