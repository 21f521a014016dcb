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
    if inside(dir, ".git")
        && let Some(head) = output("git", &["rev-parse", "HEAD"], dir).await
    {
        let branch = output("git", &["rev-parse", "--abbrev-ref", "HEAD"], dir)
            .await
            .unwrap_or_default();
        let status = output(
            "git",
            &["status", "--porcelain=v1", "--untracked-files=no"],
            dir,
        )
        .await
        .unwrap_or_default();
        return format!(
            "vcs: git\ncommit: {}\nbranch: {}\nchanges:\n{status}",
            head.trim(),
            branch.trim()
        );
    }
    "vcs: none (no jj or git repository at the working directory)\n".to_string()
}
