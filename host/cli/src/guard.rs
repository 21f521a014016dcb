//! A workspace must not contain wfhost's own state.
//!
//! Plugins and exec blocks can write to the workspace (and read it). If the
//! workspace held the wfhost home (the run store: every run's manifest,
//! events and payloads) or the compiled-plugin cache (native code the host
//! loads), a block could read other runs or plant code. So `run`, `resume`,
//! `fork` and `gate` refuse such a workspace before anything is written.

use std::path::{Path, PathBuf};

use crate::execute::RuntimeChoice;
use crate::{Global, exit, report_error};

/// Refuse a workspace that is, or is an ancestor of, the wfhost home (and
/// so the run store in it) or the compiled-plugin cache in use.
pub fn check_workspace(
    workspace: &Path,
    home: &Path,
    runtime: &RuntimeChoice,
) -> Result<(), String> {
    let ws = workspace
        .canonicalize()
        .map_err(|e| format!("workspace {}: {e}", workspace.display()))?;
    let mut state = vec![(
        home.to_path_buf(),
        "the wfhost home (the run store)",
        "--home or WFHOST_HOME",
    )];
    if let Some(cache) = runtime.cache_dir() {
        state.push((
            cache,
            "the compiled-plugin cache",
            "--cache-dir or WFHOST_CACHE_DIR",
        ));
    }
    for (dir, what, option) in state {
        if resolved(&dir).starts_with(&ws) {
            return Err(format!(
                "workspace {} contains {what} {}: blocks could read or change it; use a workspace that does not contain it, or move it with {option}",
                workspace.display(),
                dir.display()
            ));
        }
    }
    Ok(())
}

/// [`check_workspace`] for `wfhost run`, with the home and cache its
/// options name; the error is reported, the exit code returned.
pub fn check_run_workspace(
    workspace: &Path,
    global: &Global,
    cache_dir: Option<&Path>,
    no_cache: bool,
) -> Result<(), u8> {
    let home = global.home()?;
    let runtime = RuntimeChoice {
        cache_dir: cache_dir.map(Path::to_path_buf),
        cache_disabled: no_cache,
        executor: None,
    };
    check_workspace(workspace, &home, &runtime).map_err(|e| {
        report_error(e);
        exit::BAD_INPUT
    })
}

/// `path` with symlinks resolved as far as it exists (the rest need not
/// exist yet: a home or cache is created on first use).
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(cache: Option<&Path>) -> RuntimeChoice {
        RuntimeChoice {
            cache_dir: cache.map(Path::to_path_buf),
            cache_disabled: cache.is_none(),
            executor: None,
        }
    }

    #[test]
    fn a_workspace_holding_the_home_or_the_cache_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let outside = dir.path().join("home");
        assert!(check_workspace(&ws, &outside, &choice(None)).is_ok());
        // Not yet created, below the workspace.
        let err = check_workspace(&ws, &ws.join(".local/share/wfhost"), &choice(None));
        assert!(err.unwrap_err().contains("the wfhost home"));
        let err = check_workspace(&ws, &outside, &choice(Some(&ws.join("cache"))));
        assert!(err.unwrap_err().contains("compiled-plugin cache"));
        // Equal, and reached through a symlink.
        assert!(check_workspace(&ws, &ws, &choice(None)).is_err());
        std::os::unix::fs::symlink(&ws, dir.path().join("link")).unwrap();
        let err = check_workspace(&ws, &dir.path().join("link/home"), &choice(None));
        assert!(err.is_err());
        // A workspace inside the home does not contain it.
        let inner = outside.join("ws");
        std::fs::create_dir_all(&inner).unwrap();
        assert!(check_workspace(&inner, &outside, &choice(None)).is_ok());
    }
}
