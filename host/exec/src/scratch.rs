//! Scratch directories wfhost keeps while a block runs: a restricted
//! block's staged copies (`wfhost-stage-<pid>-…`) and an agent's workspace
//! snapshot (`wfhost-agent-snapshot-<pid>-…`). Each is removed when its
//! block ends; a process killed mid-block (SIGKILL, power loss) leaves its
//! own behind, and [`remove_stale`] collects those whose process is gone.
//!
//! Small staged copies are made in memory (`/dev/shm`, when it is a tmpfs)
//! by the rule lanes follow ([`crate::lanes::choose_base`]): making and
//! removing directories on a disk costs far more than the copy itself
//! (on a disk mounted with `discard`, every removed directory is a
//! synchronous discard). `WFHOST_SCRATCH_DIR` puts them all in one
//! directory of the user's choosing.

use std::path::{Path, PathBuf};

use crate::lanes::{LaneBase, available, choose_base_within, is_tmpfs};

/// The directories scratch directories may live in: `WFHOST_SCRATCH_DIR`
/// alone when it is set; else memory (`/dev/shm`, when it is a tmpfs)
/// first, then the system's temporary directory.
pub fn bases() -> Vec<LaneBase> {
    if let Some(dir) = std::env::var_os("WFHOST_SCRATCH_DIR").filter(|d| !d.is_empty()) {
        let path = PathBuf::from(dir);
        return vec![LaneBase {
            in_memory: is_tmpfs(&path),
            path,
        }];
    }
    let mut bases = Vec::new();
    let shm = Path::new("/dev/shm");
    if is_tmpfs(shm) {
        bases.push(LaneBase {
            path: shm.to_path_buf(),
            in_memory: true,
        });
    }
    let tmp = std::env::temp_dir();
    bases.push(LaneBase {
        in_memory: is_tmpfs(&tmp),
        path: tmp,
    });
    bases
}

/// The directory a scratch directory holding about `size` bytes goes in:
/// the first of [`bases`] in memory with room for it (see
/// [`choose_base`]), else the last.
pub fn dir_for(size: u64) -> PathBuf {
    dir_within(size, crate::lanes::MEMORY_LANE_MAX_BYTES)
}

/// The same, for a directory that lives only while one block runs: in
/// memory up to `max_in_memory` bytes (and an eighth of the room there).
pub fn dir_within(size: u64, max_in_memory: u64) -> PathBuf {
    let bases: Vec<(LaneBase, u64)> = bases()
        .into_iter()
        .map(|b| {
            let room = if b.in_memory { available(&b.path) } else { 0 };
            (b, room)
        })
        .collect();
    choose_base_within(&bases, size, max_in_memory)
        .expect("there is always a base")
        .path
        .clone()
}

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

/// Remove the scratch directories in `dir` (every one of [`bases`] when
/// `None`) whose process is gone. Returns their paths.
pub fn remove_stale(dir: Option<&Path>) -> Vec<PathBuf> {
    match dir {
        Some(dir) => remove_stale_in(dir),
        None => bases()
            .iter()
            .flat_map(|b| remove_stale_in(&b.path))
            .collect(),
    }
}

fn remove_stale_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
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
