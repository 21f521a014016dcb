//! The JavaScript toolchain: node and npm from the PATH, and jco and
//! componentize-js at pinned versions, installed once by npm into a cache
//! directory shared by every project of the user.
//!
//! The install is `npm ci` of a package.json and package-lock.json built
//! into wfhost, so every dependency is pinned, in a temporary directory
//! beside the final one, which it is renamed to once npm succeeded and the
//! installed versions are checked: concurrent builds each install and one
//! rename wins; an interrupted install leaves a temporary directory,
//! never a directory that looks installed.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned versions (the lock pins the rest).
pub const JCO_VERSION: &str = "1.35.0";
pub const COMPONENTIZE_JS_VERSION: &str = "0.23.0";

const PACKAGE_JSON: &str = include_str!("toolchain/package.json");
const PACKAGE_LOCK: &str = include_str!("toolchain/package-lock.json");

/// Written last into a complete install.
const COMPLETE: &str = ".wfhost-complete";

/// What to install when node or npm is missing.
const INSTALL_NODE: &str = "sudo apt-get install nodejs npm";

/// node and npm, found on the PATH.
pub struct Node {
    pub node: PathBuf,
    pub npm: PathBuf,
}

/// An installed toolchain.
pub struct Toolchain {
    dir: PathBuf,
}

impl Toolchain {
    /// componentize-js's command-line program (run with node).
    pub fn componentize_js(&self) -> PathBuf {
        self.dir
            .join("node_modules/@bytecodealliance/componentize-js/src/cli.js")
    }
}

/// node and npm, or the one line that says how to install them.
pub fn find_node() -> Result<Node, String> {
    match (on_path("node"), on_path("npm")) {
        (Some(node), Some(npm)) => Ok(Node { node, npm }),
        _ => Err(format!(
            "JavaScript plugins need node (20 or later) and npm, not found on PATH: install them \
             with `{INSTALL_NODE}` (or from https://nodejs.org)"
        )),
    }
}

/// The executable `name` in a directory of the PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|file| {
            file.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// `$XDG_CACHE_HOME/wfhost/toolchains`, else `~/.cache/wfhost/toolchains`.
pub fn root() -> Result<PathBuf, String> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    if let Some(cache) = absolute("XDG_CACHE_HOME") {
        return Ok(cache.join("wfhost/toolchains"));
    }
    absolute("HOME")
        .map(|home| home.join(".cache/wfhost/toolchains"))
        .ok_or_else(|| {
            "cannot tell where to install the JavaScript toolchain: set HOME or XDG_CACHE_HOME"
                .to_string()
        })
}

/// The directory of this toolchain: its versions, and a digest of the lock
/// so that a changed lock is a new directory.
pub fn dir_in(root: &Path) -> PathBuf {
    root.join(format!(
        "jco-{JCO_VERSION}-componentize-js-{COMPONENTIZE_JS_VERSION}-{:08x}",
        fnv1a(PACKAGE_LOCK.as_bytes()) as u32
    ))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The installed toolchain, installing it first if needed.
pub fn ensure(node: &Node) -> Result<Toolchain, String> {
    let root = root()?;
    let dir = dir_in(&root);
    if is_complete(&dir) {
        return Ok(Toolchain { dir });
    }
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    set_aside(&root, &dir);
    let staging = tempfile::Builder::new()
        .prefix(".installing-")
        .tempdir_in(&root)
        .map_err(|e| format!("{}: {e}", root.display()))?;
    install(node, staging.path(), &dir)?;
    match std::fs::rename(staging.path(), &dir) {
        Ok(()) => {
            // Renamed away: nothing left for the guard to remove.
            let _ = staging.keep();
        }
        // Another build installed it meanwhile; ours is removed.
        Err(_) if is_complete(&dir) => {}
        Err(e) => {
            return Err(format!(
                "{}: cannot install the toolchain here: {e}",
                dir.display()
            ));
        }
    }
    Ok(Toolchain { dir })
}

/// A complete install: the marker written after npm succeeded and the
/// versions were checked.
fn is_complete(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(COMPLETE)).is_ok_and(|m| m == marker())
}

fn marker() -> String {
    format!("jco {JCO_VERSION}\ncomponentize-js {COMPONENTIZE_JS_VERSION}\n")
}

/// A directory in the way that is not a complete install (made by hand,
/// or by something else): moved aside and removed, never trusted.
fn set_aside(root: &Path, dir: &Path) {
    if !dir.exists() || is_complete(dir) {
        return;
    }
    if let Ok(aside) = tempfile::Builder::new().prefix(".stale-").tempdir_in(root) {
        let target = aside.path().join("toolchain");
        if std::fs::rename(dir, &target).is_ok() {
            eprintln!(
                "note: {} is an incomplete install; reinstalling",
                dir.display()
            );
        }
        // `aside` and what was moved into it are removed when dropped.
    }
}

/// `npm ci` into `staging`, then check what it installed and mark it.
fn install(node: &Node, staging: &Path, dir: &Path) -> Result<(), String> {
    write(&staging.join("package.json"), PACKAGE_JSON)?;
    write(&staging.join("package-lock.json"), PACKAGE_LOCK)?;
    let mut cmd = Command::new(&node.npm);
    cmd.arg("ci")
        .arg("--prefix")
        .arg(staging)
        .args(["--ignore-scripts", "--no-audit", "--no-fund"])
        // npm's output is for the user; stdout is the component's path.
        .stdout(std::io::stderr());
    eprintln!(
        "note: installing jco {JCO_VERSION} and componentize-js {COMPONENTIZE_JS_VERSION} into {} \
         (once): {}",
        dir.display(),
        shown(&cmd)
    );
    let status = cmd
        .status()
        .map_err(|e| format!("{}: {e}", node.npm.display()))?;
    if !status.success() {
        return Err(format!(
            "npm ci failed ({status}) installing jco {JCO_VERSION} and componentize-js \
             {COMPONENTIZE_JS_VERSION} in {}; see npm's errors above (is the registry `npm config \
             get registry` names reachable?)",
            staging.display()
        ));
    }
    check_installed(staging, "@bytecodealliance/jco", JCO_VERSION)?;
    check_installed(
        staging,
        "@bytecodealliance/componentize-js",
        COMPONENTIZE_JS_VERSION,
    )?;
    write(&staging.join(COMPLETE), &marker())
}

/// The package `name` installed in `dir` at `version`.
fn check_installed(dir: &Path, name: &str, version: &str) -> Result<(), String> {
    let file = dir.join("node_modules").join(name).join("package.json");
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    match json["version"].as_str() {
        Some(v) if v == version => Ok(()),
        other => Err(format!(
            "{}: npm installed {name} {}, not the pinned {version}",
            file.display(),
            other.unwrap_or("(no version)")
        )),
    }
}

fn write(path: &Path, content: &str) -> Result<(), String> {
    std::fs::write(path, content).map_err(|e| format!("{}: {e}", path.display()))
}

/// `cmd` as a shell line, for notes.
pub fn shown(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a directory with the right marker is an install; anything else
    /// in its place is moved away (and removed) before installing.
    #[test]
    fn a_half_installed_toolchain_is_not_trusted() {
        let root = tempfile::tempdir().unwrap();
        let dir = dir_in(root.path());
        std::fs::create_dir_all(dir.join("node_modules/@bytecodealliance/jco")).unwrap();
        assert!(!is_complete(&dir), "no marker");
        std::fs::write(dir.join(COMPLETE), "jco 0.0.1\n").unwrap();
        assert!(!is_complete(&dir), "another version's marker");
        std::fs::remove_file(dir.join(COMPLETE)).unwrap();
        set_aside(root.path(), &dir);
        assert!(!dir.exists());
        let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");

        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(COMPLETE), marker()).unwrap();
        assert!(is_complete(&dir));
        set_aside(root.path(), &dir);
        assert!(is_complete(&dir), "a complete install is left alone");
    }

    #[test]
    fn the_install_checks_the_versions_npm_installed() {
        let dir = tempfile::tempdir().unwrap();
        let package = dir.path().join("node_modules/@bytecodealliance/jco");
        std::fs::create_dir_all(&package).unwrap();
        std::fs::write(package.join("package.json"), r#"{"version": "1.34.0"}"#).unwrap();
        let err = check_installed(dir.path(), "@bytecodealliance/jco", JCO_VERSION).unwrap_err();
        assert!(
            err.contains("npm installed @bytecodealliance/jco 1.34.0, not the pinned 1.35.0"),
            "{err}"
        );
        std::fs::write(package.join("package.json"), r#"{"version": "1.35.0"}"#).unwrap();
        assert!(check_installed(dir.path(), "@bytecodealliance/jco", JCO_VERSION).is_ok());
    }
}
