//! Earlier sessions' folders are read-only to agents (seed 001: agents may
//! read previous sessions, never modify them). The host's change detection
//! leaves `.agents-work/` to the session files, so the folders of other
//! sessions are remembered before an agent runs and compared after: any
//! change is undone and reported.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use wfhost_core::workspace;

/// The most of earlier sessions remembered (their files are small text).
const MAX_BYTES: u64 = 64 << 20;
const MAX_FILES: usize = 10_000;

/// The files of every session folder but the current one.
pub struct PastSessions {
    workspace: PathBuf,
    files: BTreeMap<String, Vec<u8>>,
}

impl PastSessions {
    /// Remember the other session folders of `workspace` (`current` is the
    /// run's own, workspace-relative). `None` when there are none, or too
    /// many bytes to keep (then nothing is guarded, as before).
    pub fn remember(workspace: &Path, current: &str) -> Option<PastSessions> {
        let files = read_all(workspace, current)?;
        Some(PastSessions {
            workspace: workspace.to_path_buf(),
            files,
        })
    }

    /// What an agent changed in earlier sessions, undone; `None` when
    /// nothing changed.
    pub fn restore(self, current: &str) -> Option<String> {
        let now = read_all(&self.workspace, current).unwrap_or_default();
        let mut touched = Vec::new();
        let mut failures = Vec::new();
        for (rel, bytes) in &self.files {
            if now.get(rel) != Some(bytes) {
                touched.push(rel.clone());
                if let Err(e) = workspace::write_file(&self.workspace, rel, bytes, true) {
                    failures.push(format!("{rel}: {e}"));
                }
            }
        }
        for rel in now.keys().filter(|rel| !self.files.contains_key(*rel)) {
            touched.push(rel.clone());
            if let Err(e) = workspace::remove_file(&self.workspace, rel) {
                failures.push(format!("{rel}: {e}"));
            }
        }
        if touched.is_empty() {
            return None;
        }
        let mut message = format!(
            "earlier sessions are read-only; changed there: {} (undone)",
            touched.join(", ")
        );
        if !failures.is_empty() {
            message.push_str(&format!("; could not undo: {}", failures.join("; ")));
        }
        Some(message)
    }
}

/// Every regular file under `.agents-work/` outside `current`, by
/// workspace-relative path; links are not followed (nor kept).
fn read_all(workspace: &Path, current: &str) -> Option<BTreeMap<String, Vec<u8>>> {
    let root = ".agents-work";
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    let mut stack = vec![root.to_string()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(workspace.join(&dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let rel = format!("{dir}/{name}");
            if rel == current {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(rel);
            } else if kind.is_file() && dir != root {
                let bytes = workspace::read_file(workspace, &rel, MAX_BYTES).ok()?;
                total += bytes.len() as u64;
                if total > MAX_BYTES || files.len() >= MAX_FILES {
                    return None;
                }
                files.insert(rel, bytes);
            }
        }
    }
    Some(files)
}
