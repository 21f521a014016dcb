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

/// What the commands of a running execution have written so far, line by
/// line as their capture files grow (`cmd-N.stdout`, `cmd-N.stderr`): what
/// `wfhost logs --follow` shows while a block runs. Each poll reads at most
/// [`LiveTail::POLL_BYTES`] of a file, never past [`LiveTail::FILE_BYTES`]
/// in all, and cuts lines at [`LiveTail::LINE_BYTES`]; links are not
/// followed. A known agent CLI's JSON events (read whole up to
/// [`LiveTail::EVENT_BYTES`]) become its steps in words ("Write
/// docs/hello.md"), or nothing when they are its bookkeeping
/// ([`crate::agents::presets::progress`]).
#[derive(Debug, Default)]
pub struct LiveTail {
    /// Per capture file: bytes read so far and the unfinished last line.
    files: std::collections::BTreeMap<PathBuf, (u64, Vec<u8>)>,
    /// Whether a poll has returned a line yet.
    shown: bool,
}

/// One line a running command wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveLine {
    /// `stdout` or `stderr`.
    pub stream: &'static str,
    /// The command's position in its block, from 1.
    pub command: u32,
    pub text: String,
    /// `text` is an agent CLI's step in words, not a line it printed.
    pub progress: bool,
}

impl LiveTail {
    /// The most read of one file in one poll.
    pub const POLL_BYTES: u64 = 64 << 10;
    /// Longer lines are cut.
    pub const LINE_BYTES: usize = 4 << 10;
    /// A line that starts as a JSON object is read whole up to this size
    /// (an agent CLI's event), then cut like any other.
    pub const EVENT_BYTES: usize = 1 << 20;
    /// The most read of one file in all (past the executor's output cap:
    /// all of it).
    pub const FILE_BYTES: u64 = 64 << 20;

    /// Whether a poll has returned a line yet (a capture file that exists
    /// but holds no whole line does not count).
    pub fn seen(&self) -> bool {
        self.shown
    }

    /// The lines written since the last poll by the execution at `step` of
    /// `name`; with `flush`, the unfinished last lines too (the block ended).
    pub fn poll(
        &mut self,
        workspace: &Path,
        run_id: &RunId,
        step: u64,
        name: &str,
        flush: bool,
    ) -> Vec<LiveLine> {
        let mut lines = Vec::new();
        for dir in bundle_dirs(workspace, run_id, step, name) {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut files: Vec<(u32, &'static str, PathBuf)> = entries
                .flatten()
                .filter_map(|e| {
                    let file_name = e.file_name();
                    let (command, stream) = capture_file(file_name.to_str()?)?;
                    Some((command, stream, e.path()))
                })
                .collect();
            files.sort();
            for (command, stream, path) in files {
                for bytes in self.read_new(&path, flush) {
                    lines.extend(live_line(stream, command, &bytes));
                }
            }
        }
        self.shown |= !lines.is_empty();
        lines
    }

    /// The whole lines written since the last poll (and the unfinished
    /// one, when flushing or too long).
    fn read_new(&mut self, path: &Path, flush: bool) -> Vec<Vec<u8>> {
        use std::io::{Seek, SeekFrom};
        let (offset, partial) = self.files.entry(path.to_path_buf()).or_default();
        let room = Self::FILE_BYTES
            .saturating_sub(*offset)
            .min(Self::POLL_BYTES);
        let read = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .and_then(|mut file| {
                if !file.metadata()?.is_file() {
                    return Ok(Vec::new());
                }
                file.seek(SeekFrom::Start(*offset))?;
                let mut bytes = Vec::new();
                file.take(room).read_to_end(&mut bytes)?;
                Ok(bytes)
            });
        let bytes = read.unwrap_or_default();
        *offset += bytes.len() as u64;
        partial.extend_from_slice(&bytes);
        let mut out = Vec::new();
        while let Some(end) = partial.iter().position(|b| *b == b'\n') {
            let mut line: Vec<u8> = partial.drain(..=end).collect();
            line.pop();
            out.push(line);
        }
        let longest = match partial.first() {
            Some(b'{') => Self::EVENT_BYTES,
            _ => Self::LINE_BYTES,
        };
        if partial.len() > longest || (flush && !partial.is_empty()) {
            out.push(std::mem::take(partial));
        }
        out
    }
}

/// `cmd-N.stdout` → (N, "stdout").
fn capture_file(file_name: &str) -> Option<(u32, &'static str)> {
    let rest = file_name.strip_prefix("cmd-")?;
    let (n, stream) = rest.split_once('.')?;
    let stream = match stream {
        "stdout" => "stdout",
        "stderr" => "stderr",
        _ => return None,
    };
    Some((n.parse().ok()?, stream))
}

/// One line as shown: an agent CLI's step, nothing for its bookkeeping,
/// else the line (cut).
fn live_line(stream: &'static str, command: u32, bytes: &[u8]) -> Option<LiveLine> {
    use crate::agents::presets::{Progress, progress};
    let shown = match std::str::from_utf8(bytes).map(progress) {
        Ok(Progress::Show(text)) => Some((text, true)),
        Ok(Progress::Hide) => None,
        Ok(Progress::Raw) | Err(_) => Some((cut_line(bytes), false)),
    };
    let (text, progress) = shown?;
    Some(LiveLine {
        stream,
        command,
        text,
        progress,
    })
}

fn cut_line(bytes: &[u8]) -> String {
    let kept = &bytes[..bytes.len().min(LiveTail::LINE_BYTES)];
    let mut text = String::from_utf8_lossy(kept).into_owned();
    if bytes.len() > kept.len() {
        text.push_str(" …");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_tail_reads_lines_as_they_are_written_and_follows_no_link() {
        let ws = tempfile::tempdir().unwrap();
        let dir = ws
            .path()
            .join(".output/agent/run-20260101-000000-000001/step-2-main.dev");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cmd-1.stdout"), "").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("cmd-1.stderr")).unwrap();
        let mut tail = LiveTail::default();
        let text = |lines: Vec<LiveLine>| lines.into_iter().map(|l| l.text).collect::<Vec<_>>();
        // A capture file with no whole line yet is nothing seen.
        assert!(
            tail.poll(ws.path(), &run(), 2, "main.dev", false)
                .is_empty()
        );
        assert!(!tail.seen());
        std::fs::write(dir.join("cmd-1.stdout"), "one\ntw").unwrap();
        assert_eq!(
            text(tail.poll(ws.path(), &run(), 2, "main.dev", false)),
            ["one"]
        );
        assert!(tail.seen());
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("cmd-1.stdout"))
            .unwrap();
        f.write_all(b"o\nthree").unwrap();
        assert_eq!(
            text(tail.poll(ws.path(), &run(), 2, "main.dev", false)),
            ["two"]
        );
        assert_eq!(
            text(tail.poll(ws.path(), &run(), 2, "main.dev", true)),
            ["three"]
        );
        assert!(tail.poll(ws.path(), &run(), 2, "main.dev", true).is_empty());
        // A flood without newlines comes in cut lines, never all at once.
        f.write_all(&vec![b'x'; 100_000]).unwrap();
        let lines = tail.poll(ws.path(), &run(), 2, "main.dev", false);
        assert!(
            !lines.is_empty()
                && lines
                    .iter()
                    .all(|l| l.text.len() <= LiveTail::LINE_BYTES + 4)
        );
    }

    #[test]
    fn an_agent_clis_events_are_shown_as_its_steps() {
        let ws = tempfile::tempdir().unwrap();
        let dir = ws
            .path()
            .join(".output/agent/run-20260101-000000-000001/step-2-main.dev");
        std::fs::create_dir_all(&dir).unwrap();
        let big = "x".repeat(200_000);
        let stream = format!(
            concat!(
                r#"{{"type":"system","subtype":"init","session_id":"s","tools":["{}"]}}"#,
                "\n",
                r#"{{"type":"assistant","session_id":"s","message":{{"content":[{{"type":"tool_use","name":"Write","input":{{"file_path":"docs/a.md","content":"{}"}}}}]}}}}"#,
                "\n",
                "plain text\n",
                r#"{{"type":"user","session_id":"s","message":{{"content":[]}}}}"#,
                "\n"
            ),
            big, big
        );
        std::fs::write(dir.join("cmd-1.stdout"), stream).unwrap();
        let mut tail = LiveTail::default();
        let mut lines = Vec::new();
        for _ in 0..20 {
            lines.extend(tail.poll(ws.path(), &run(), 2, "main.dev", false));
        }
        let shown: Vec<(&str, bool)> = lines
            .iter()
            .map(|l| (l.text.as_str(), l.progress))
            .collect();
        assert_eq!(shown, [("Write docs/a.md", true), ("plain text", false)]);
    }

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
