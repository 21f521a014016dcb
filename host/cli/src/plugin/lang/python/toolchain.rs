//! componentize-py, pinned, in a virtual environment of its own under the
//! user's cache, installed by `plugin build` when missing.
//!
//! The install goes to a temporary directory beside the final one and is
//! renamed into place once complete (with a marker written last), so two
//! builds at once never see half an install, and a directory without the
//! marker (an install that was killed) is never trusted: it is replaced.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The componentize-py every Python plugin is built with.
pub const COMPONENTIZE_PY_VERSION: &str = "0.25.1";

/// Written last into a complete install, holding the version.
const MARKER: &str = ".wfhost-complete";

/// The one line said when Python cannot make a virtual environment.
pub const INSTALL_PYTHON: &str = "apt-get install python3 python3-venv";

/// An installed componentize-py: the virtual environment's interpreter.
pub struct Toolchain {
    pub python: PathBuf,
}

impl Toolchain {
    /// The command that runs componentize-py with `args`. The venv is run
    /// through its interpreter, not its `bin/componentize-py` script,
    /// whose first line names the temporary directory it was installed in.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.python);
        cmd.args([
            "-c",
            "import sys, componentize_py; sys.argv[0] = 'componentize-py'; componentize_py.script()",
        ]);
        cmd
    }
}

/// Where toolchains live: `$XDG_CACHE_HOME/wfhost/toolchains`, else
/// `~/.cache/wfhost/toolchains`.
pub fn toolchains_dir() -> Result<PathBuf, String> {
    let cache = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .map(|home| PathBuf::from(home).join(".cache"))
            .ok_or("neither XDG_CACHE_HOME nor HOME is set: no cache for the Python toolchain")?,
    };
    Ok(cache.join("wfhost/toolchains"))
}

/// The pinned componentize-py, installed first if missing.
pub fn ensure(note: impl Fn(&str)) -> Result<Toolchain, String> {
    let dir = toolchains_dir()?.join(format!("componentize-py-{COMPONENTIZE_PY_VERSION}"));
    if is_complete(&dir) {
        return Ok(toolchain_in(&dir));
    }
    let python = find_python3()?;
    install(&python, &dir, note)?;
    Ok(toolchain_in(&dir))
}

fn toolchain_in(dir: &Path) -> Toolchain {
    Toolchain {
        python: dir.join("bin/python3"),
    }
}

fn is_complete(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(MARKER)).is_ok_and(|v| v.trim() == COMPONENTIZE_PY_VERSION)
        && dir.join("bin/python3").exists()
}

/// `python3` on PATH, able to make a virtual environment with pip.
pub fn find_python3() -> Result<PathBuf, String> {
    let missing = || format!("python3 is not installed; install it: {INSTALL_PYTHON}");
    let path = std::env::var_os("PATH").ok_or_else(missing)?;
    let python = std::env::split_paths(&path)
        .map(|dir| dir.join("python3"))
        .find(|p| p.is_file())
        .ok_or_else(missing)?;
    let venv = Command::new(&python)
        .args(["-c", "import venv, ensurepip"])
        .output()
        .map_err(|e| {
            format!(
                "{}: cannot run it ({e}); install Python: {INSTALL_PYTHON}",
                python.display()
            )
        })?;
    if !venv.status.success() {
        return Err(format!(
            "{} has no venv module; install it: {INSTALL_PYTHON}",
            python.display()
        ));
    }
    Ok(python)
}

/// Install into a temporary directory beside `dir`, then rename it there.
fn install(python: &Path, dir: &Path, note: impl Fn(&str)) -> Result<(), String> {
    let parent = dir.parent().expect("a toolchain dir has a parent");
    std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    let staging = tempfile::Builder::new()
        .prefix(".componentize-py-installing-")
        .tempdir_in(parent)
        .map_err(|e| format!("{}: cannot install here: {e}", parent.display()))?;
    let venv = staging.path();
    let pip = venv.join("bin/pip");
    let requirement = format!("componentize-py=={COMPONENTIZE_PY_VERSION}");
    note(&format!(
        "installing componentize-py {COMPONENTIZE_PY_VERSION}: {} -m venv {} && {} install --quiet {requirement}",
        python.display(),
        venv.display(),
        pip.display()
    ));
    run(
        Command::new(python).arg("-m").arg("venv").arg(venv),
        "python3 -m venv",
    )?;
    run(
        Command::new(&pip).args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            &requirement,
        ]),
        &format!("pip install {requirement}"),
    )?;
    std::fs::write(venv.join(MARKER), COMPONENTIZE_PY_VERSION)
        .map_err(|e| format!("{}: {e}", venv.display()))?;
    place(staging, dir)
}

/// Rename the complete install `staging` to `dir`. Another build may have
/// put a complete one there first (keep it), or a killed one left an
/// incomplete one (move it aside and replace it).
fn place(staging: tempfile::TempDir, dir: &Path) -> Result<(), String> {
    for _ in 0..3 {
        if std::fs::rename(staging.path(), dir).is_ok() {
            let _ = staging.keep();
            return Ok(());
        }
        if is_complete(dir) {
            return Ok(()); // `staging` is removed when dropped.
        }
        discard(dir)?;
    }
    Err(format!(
        "{}: cannot put the componentize-py install in place",
        dir.display()
    ))
}

/// Move an untrusted install out of the way, then remove it.
fn discard(dir: &Path) -> Result<(), String> {
    let parent = dir.parent().expect("a toolchain dir has a parent");
    let aside = tempfile::Builder::new()
        .prefix(".componentize-py-stale-")
        .tempdir_in(parent)
        .map_err(|e| format!("{}: {e}", parent.display()))?;
    let target = aside.path().join("old");
    match std::fs::rename(dir, &target) {
        Ok(()) => Ok(()), // removed with `aside`
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!(
            "{}: an incomplete componentize-py install that cannot be moved away: {e}",
            dir.display()
        )),
    }
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let status = cmd
        .status()
        .map_err(|e| format!("{what}: cannot run it: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status}); see its output above"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_install(dir: &Path, marker: Option<&str>) {
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("bin/python3"), "").unwrap();
        if let Some(version) = marker {
            std::fs::write(dir.join(MARKER), version).unwrap();
        }
    }

    #[test]
    fn only_a_marked_install_of_the_pinned_version_is_trusted() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("t");
        assert!(!is_complete(&dir));
        fake_install(&dir, None);
        assert!(!is_complete(&dir), "no marker: killed mid-install");
        fake_install(&dir, Some("0.24.0"));
        assert!(!is_complete(&dir));
        fake_install(&dir, Some(COMPONENTIZE_PY_VERSION));
        assert!(is_complete(&dir));
    }

    #[test]
    fn placing_replaces_an_incomplete_install_and_keeps_a_complete_one() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("t");
        fake_install(&dir, None);
        let staged = tempfile::tempdir_in(scratch.path()).unwrap();
        fake_install(staged.path(), Some(COMPONENTIZE_PY_VERSION));
        std::fs::write(staged.path().join("mine"), "").unwrap();
        place(staged, &dir).unwrap();
        assert!(is_complete(&dir) && dir.join("mine").exists());

        let other = tempfile::tempdir_in(scratch.path()).unwrap();
        fake_install(other.path(), Some(COMPONENTIZE_PY_VERSION));
        let other_path = other.path().to_path_buf();
        place(other, &dir).unwrap();
        assert!(
            dir.join("mine").exists(),
            "the first complete install stays"
        );
        assert!(!other_path.exists(), "the loser's install is removed");
        let left: Vec<_> = std::fs::read_dir(scratch.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[test]
    fn the_cache_follows_xdg_then_home() {
        // Read, not set: the process environment is shared by tests.
        let dir = toolchains_dir().unwrap();
        assert!(dir.ends_with("wfhost/toolchains"), "{}", dir.display());
    }
}
