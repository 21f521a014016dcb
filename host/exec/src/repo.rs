//! `meta/repo.txt`: a best-effort snapshot of the working directory's
//! version control state, jj preferred, else git.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

async fn output(program: &str, args: &[&str], dir: &Path) -> Option<String> {
    let child = tokio::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(5), child)
        .await
        .ok()?
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn inside(dir: &Path, marker: &str) -> bool {
    dir.ancestors().any(|d| d.join(marker).exists())
}

/// The snapshot text; never fails.
pub(crate) async fn snapshot(dir: &Path) -> String {
    if inside(dir, ".jj")
        && let Some(log) = output("jj", &["log", "-r", "@", "--no-graph"], dir).await
    {
        let status = output("jj", &["status"], dir).await.unwrap_or_default();
        return format!("vcs: jj\n{log}\n{status}");
    }
    // One git process for the commit, the branch and the changes.
    if inside(dir, ".git")
        && let Some(status) = output(
            "git",
            &[
                "status",
                "--porcelain=v2",
                "--branch",
                "--untracked-files=no",
            ],
            dir,
        )
        .await
    {
        return git_snapshot(&status);
    }
    "vcs: none (no jj or git repository at the working directory)\n".to_string()
}

/// The snapshot of a repository from `git status --porcelain=v2 --branch`:
/// the commit, the branch, and the changes as the short format shows them
/// (`XY path`, `XY from -> to` for a rename).
fn git_snapshot(status: &str) -> String {
    let (mut commit, mut branch, mut changes) = ("", "", String::new());
    for line in status.lines() {
        if let Some(oid) = line.strip_prefix("# branch.oid ") {
            commit = oid;
        } else if let Some(head) = line.strip_prefix("# branch.head ") {
            branch = if head == "(detached)" { "HEAD" } else { head };
        } else if let Some(change) = short_change(line) {
            changes.push_str(&change);
            changes.push('\n');
        }
    }
    format!("vcs: git\ncommit: {commit}\nbranch: {branch}\nchanges:\n{changes}")
}

/// One changed-entry line of the porcelain v2 format, in the short format.
fn short_change(line: &str) -> Option<String> {
    let (kind, rest) = line.split_once(' ')?;
    // Fields before the path: ordinary 7, renamed or copied 8, unmerged 9.
    let before_path = match kind {
        "1" => 7,
        "2" => 8,
        "u" => 9,
        _ => return None,
    };
    let parts: Vec<&str> = rest.splitn(before_path + 1, ' ').collect();
    let xy = parts.first()?.replace('.', " ");
    let path = parts.get(before_path)?;
    Some(match path.split_once('\t') {
        Some((to, from)) => format!("{xy} {from} -> {to}"),
        None => format!("{xy} {path}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_v2_reads_as_the_short_format() {
        let status = "# branch.oid 0123abcd\n# branch.head main\n# branch.ab +0 -0\n\
            1 .M N... 100644 100644 100644 aaaa aaaa src/a file.rs\n\
            1 A. N... 000000 100644 100644 0000 bbbb new.rs\n\
            2 R. N... 100644 100644 100644 cccc cccc R100 to.rs\tfrom.rs\n\
            u UU N... 100644 100644 100644 100644 dddd eeee ffff both.rs\n";
        assert_eq!(
            git_snapshot(status),
            "vcs: git\ncommit: 0123abcd\nbranch: main\nchanges:\n M src/a file.rs\nA  new.rs\nR  from.rs -> to.rs\nUU both.rs\n"
        );
        let detached = git_snapshot("# branch.oid (initial)\n# branch.head (detached)\n");
        assert_eq!(
            detached,
            "vcs: git\ncommit: (initial)\nbranch: HEAD\nchanges:\n"
        );
    }

    #[tokio::test]
    async fn a_git_repository_is_described_by_one_process() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .status()
                .unwrap()
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q", "-b", "trunk"]);
        std::fs::write(dir.path().join("a.txt"), "1").unwrap();
        git(&["add", "a.txt"]);
        git(&["commit", "-q", "-m", "one"]);
        std::fs::write(dir.path().join("a.txt"), "2").unwrap();
        let text = snapshot(dir.path()).await;
        let head = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let head = String::from_utf8_lossy(&head.stdout);
        assert_eq!(
            text,
            format!(
                "vcs: git\ncommit: {}\nbranch: trunk\nchanges:\n M a.txt\n",
                head.trim()
            )
        );
    }
}
