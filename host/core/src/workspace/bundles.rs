//! The result bundles of a run's blocks in its workspace: the exec and
//! agent bundles under `.output/exec/RUN/` and `.output/agent/RUN/`, named
//! `step-STEP-NODE.BLOCK` (`-2`, `-3`, … for executions run again), each a
//! `manifest.json` listing its commands and the files holding their
//! stdout and stderr.
//!
//! The workspace is written by workers: bundles are read as untrusted.
//! Symbolic links are never followed, only names found in the directory
//! are opened (a caller's text is compared, never joined into a path), and
//! each file is read up to [`FILE_CAP`].

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::ids::RunId;

/// The most of one captured file read.
pub const FILE_CAP: u64 = 1 << 20;

/// Where the bundles of a run's blocks are, under the workspace.
pub const BUNDLE_DIRS: [&str; 2] = [".output/exec", ".output/agent"];

/// The bundle directories of the execution at `step` of `name` (`node.block`):
/// `step-STEP-NAME`, then `step-STEP-NAME-2`, … for executions run again.
pub fn bundle_dirs(workspace: &Path, run_id: &RunId, step: u64, name: &str) -> Vec<PathBuf> {
    let base = format!("step-{step}-{name}");
    let mut found = Vec::new();
    for kind in BUNDLE_DIRS {
        let rel = format!("{kind}/{run_id}");
        let Ok(parent) = super::ensure_real_dir(workspace, &rel, false) else {
            continue;
        };
        let Ok(entries) = std::fs::read_dir(&parent) else {
            continue;
        };
        let mut dirs: Vec<(u64, PathBuf)> = entries
            .flatten()
            // `DirEntry::file_type` does not follow symbolic links.
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| {
                let file_name = e.file_name();
                let n = repeat_of(file_name.to_str()?, &base)?;
                Some((n, e.path()))
            })
            .collect();
        dirs.sort();
        found.extend(dirs.into_iter().map(|(_, p)| p));
    }
    found
}

/// 1 for `base`, n for `base-n`, else none.
fn repeat_of(file_name: &str, base: &str) -> Option<u64> {
    let rest = file_name.strip_prefix(base)?;
    if rest.is_empty() {
        return Some(1);
    }
    rest.strip_prefix('-')?.parse().ok().filter(|n| *n >= 2)
}

/// A regular file in `dir`, read without following a symbolic link, up
/// to [`FILE_CAP`]; `true` when there was more.
pub fn read_file(dir: &Path, name: &str) -> Result<(String, bool), String> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(format!("`{name}` is not a file name in the bundle"));
    }
    let path = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| format!("{name}: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("{name}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{name} is not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(FILE_CAP)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{name}: {e}"))?;
    Ok((
        String::from_utf8_lossy(&bytes).into_owned(),
        meta.len() > FILE_CAP,
    ))
}

/// One captured stream of a command.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Captured {
    pub text: String,
    /// More than [`FILE_CAP`] was written; the rest is not read.
    pub truncated: bool,
}

/// A bundle as read: its directory (relative to the workspace), what its
/// manifest says of each command, and each command's stdout and stderr.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BundleView {
    pub dir: String,
    pub commands: Vec<CommandView>,
}

/// A stream's file, read or not.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Stream {
    Read(Captured),
    Unreadable { error: String },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandView {
    /// The command as its manifest records it (argv, cwd, exit code, …).
    pub command: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<Stream>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<Stream>,
}

/// The bundles of the execution at `step` of `name` (`node.block`) of run
/// `run_id` in `workspace`, each read as far as it can be.
pub fn read_bundles(
    workspace: &Path,
    run_id: &RunId,
    step: u64,
    name: &str,
) -> Vec<Result<BundleView, String>> {
    bundle_dirs(workspace, run_id, step, name)
        .into_iter()
        .map(|dir| {
            let shown = dir
                .strip_prefix(workspace)
                .unwrap_or(&dir)
                .display()
                .to_string();
            read_bundle(&dir)
                .map(|commands| BundleView {
                    dir: shown.clone(),
                    commands,
                })
                .map_err(|e| format!("{shown}: {e}"))
        })
        .collect()
}

fn read_bundle(dir: &Path) -> Result<Vec<CommandView>, String> {
    let (text, _) = read_file(dir, "manifest.json")?;
    let manifest: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("manifest.json: {e}"))?;
    let commands = manifest["commands"].as_array().cloned().unwrap_or_default();
    Ok(commands
        .into_iter()
        .map(|command| {
            let stream = |key: &str| {
                command[key]
                    .as_str()
                    .map(|name| match read_file(dir, name) {
                        Ok((text, truncated)) => Stream::Read(Captured { text, truncated }),
                        Err(error) => Stream::Unreadable { error },
                    })
            };
            CommandView {
                stdout: stream("stdout"),
                stderr: stream("stderr"),
                command,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_executions_get_numbered_bundles() {
        assert_eq!(repeat_of("step-1-main.b", "step-1-main.b"), Some(1));
        assert_eq!(repeat_of("step-1-main.b-3", "step-1-main.b"), Some(3));
        assert_eq!(repeat_of("step-1-main.bc", "step-1-main.b"), None);
        assert_eq!(repeat_of("step-1-main.b-1", "step-1-main.b"), None);
        assert_eq!(repeat_of("step-1-main.b-x", "step-1-main.b"), None);
    }

    #[test]
    fn bundle_files_are_never_read_through_links() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret"), "s").unwrap();
        std::fs::write(dir.path().join("cmd-1.stdout"), "out").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), dir.path().join("link")).unwrap();
        assert_eq!(
            read_file(dir.path(), "cmd-1.stdout").unwrap(),
            ("out".to_string(), false)
        );
        assert!(read_file(dir.path(), "link").is_err());
        assert!(read_file(dir.path(), "../secret").is_err());
    }

    fn run() -> RunId {
        RunId::parse("run-20260101-000000-000001").unwrap()
    }

    #[test]
    fn a_bundle_reads_with_its_commands_output() {
        let ws = tempfile::tempdir().unwrap();
        let dir = ws
            .path()
            .join(".output/exec/run-20260101-000000-000001/step-3-main.build");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("manifest.json"),
            r#"{"commands": [{"argv": ["make"], "exit_code": 0, "stdout": "cmd-1.stdout", "stderr": "cmd-1.stderr"}]}"#,
        )
        .unwrap();
        std::fs::write(dir.join("cmd-1.stdout"), "built\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("cmd-1.stderr")).unwrap();
        let found = read_bundles(ws.path(), &run(), 3, "main.build");
        assert_eq!(found.len(), 1);
        let bundle = found[0].as_ref().unwrap();
        assert_eq!(
            bundle.dir,
            ".output/exec/run-20260101-000000-000001/step-3-main.build"
        );
        let c = &bundle.commands[0];
        assert_eq!(
            c.stdout,
            Some(Stream::Read(Captured {
                text: "built\n".into(),
                truncated: false
            }))
        );
        assert!(
            matches!(c.stderr, Some(Stream::Unreadable { .. })),
            "a link is not followed"
        );
        assert!(read_bundles(ws.path(), &run(), 3, "main.b").is_empty());
        assert!(read_bundles(ws.path(), &run(), 3, "../../x").is_empty());
    }
}
