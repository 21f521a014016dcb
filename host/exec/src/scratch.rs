//! Scratch directories wfhost keeps in the system's temporary directory
//! while a block runs: a restricted block's staged copies
//! (`wfhost-stage-<pid>-…`) and an agent's workspace snapshot
//! (`wfhost-agent-snapshot-<pid>-…`). Each is removed when its block ends;
//! a process killed mid-block (SIGKILL, power loss) leaves its own behind,
//! and [`remove_stale`] collects those whose process is gone.

use std::path::{Path, PathBuf};

/// The name prefixes of scratch directories, each followed by `<pid>-`.
pub const PREFIXES: &[&str] = &["wfhost-stage-", "wfhost-agent-snapshot-"];

/// The prefix for a scratch directory of this process: `<kind><pid>-`.
pub fn prefix(kind: &str) -> String {
    format!("{kind}{}-", std::process::id())
}

/// The process that made scratch directory `name`, if it is one.
fn owner(name: &str) -> Option<i32> {
    let rest = PREFIXES.iter().find_map(|p| name.strip_prefix(p))?;
    rest.split('-').next()?.parse().ok()
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// Remove the scratch directories in `dir` (the system's temporary
/// directory when `None`) whose process is gone. Returns their paths.
pub fn remove_stale(dir: Option<&Path>) -> Vec<PathBuf> {
    let dir = dir.map_or_else(std::env::temp_dir, Path::to_path_buf);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner(&name) else { continue };
        // Never through a link someone planted under a scratch name.
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if alive(pid) || !is_dir {
            continue;
        }
        if std::fs::remove_dir_all(entry.path()).is_ok() {
            removed.push(entry.path());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_dead_processes_scratch_goes() {
        let tmp = tempfile::tempdir().unwrap();
        // A pid that cannot exist (over the kernel's maximum).
        let dead = tmp.path().join("wfhost-stage-2147483646-abc");
        let mine = tmp
            .path()
            .join(format!("{}x", prefix("wfhost-agent-snapshot-")));
        let other = tmp.path().join("something-else-1-2");
        for d in [&dead, &mine, &other] {
            std::fs::create_dir_all(d.join("inner")).unwrap();
        }
        let removed = remove_stale(Some(tmp.path()));
        assert_eq!(removed, std::slice::from_ref(&dead));
        assert!(!dead.exists() && mine.exists() && other.exists());
    }
}
