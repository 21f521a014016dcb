//! The workflows a server offers: the manifests in its workflow
//! directories (`DIR/*.json` and `DIR/*/workflow.json`), read afresh on
//! each call so that edits show up, with the pinned hash of each.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use wfhost_core::formats;
use wfhost_core::manifest::pinning::PinnedDefinition;
use wfhost_core::manifest::{self, LoadedWorkflow};

use crate::error::ToolError;
use crate::reply::{Problem, WorkflowSummary};

/// The file of a workflow directory that tags its workflows (WorkRail's
/// `spec/workflow-tags.json` format: `{"version": 1, "tags": [{"id",
/// "displayName", "when", "examples"}], "workflows": {"<id>": {"tags":
/// [...], "hidden"?: bool}}}`).
pub const TAGS_FILE: &str = "workflow-tags.json";

/// A loaded workflow with its pin.
#[derive(Debug, Clone)]
pub struct Entry {
    pub loaded: LoadedWorkflow,
    pub pin: PinnedDefinition,
}

impl Entry {
    pub fn summary(&self) -> WorkflowSummary {
        let wf = &self.loaded.workflow;
        let blocks = wf.nodes.values().flat_map(|n| n.blocks.values());
        WorkflowSummary {
            workflow_id: wf.id.clone(),
            description: wf.description.clone(),
            file: self.loaded.file.display().to_string(),
            workflow_hash: self.pin.hash.clone(),
            blocks: blocks.clone().count(),
            external_blocks: blocks
                .filter(|b| b.worker == manifest::EXTERNAL_WORKER)
                .count(),
            tags: Vec::new(),
        }
    }
}

/// A manifest file's modification time and length, and its pinned hash
/// then (None when it did not load).
type Stamped = (SystemTime, u64, Option<String>);

/// The workflow directories and what was read from them.
pub struct Catalog {
    dirs: Vec<PathBuf>,
    builtins: Vec<&'static str>,
    /// File → (modified, length, pinned hash), so that a change warning
    /// does not re-read unchanged files.
    hashes: Mutex<BTreeMap<PathBuf, Stamped>>,
}

impl Catalog {
    pub fn new(dirs: Vec<PathBuf>, builtins: Vec<&'static str>) -> Catalog {
        Catalog {
            dirs,
            builtins,
            hashes: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    pub fn builtins(&self) -> &[&'static str] {
        &self.builtins
    }

    /// Every workflow, by id (the first file wins a duplicate id; the
    /// others are problems), and the files that are not workflows.
    pub fn scan(&self) -> (Vec<Entry>, Vec<Problem>) {
        let mut entries: Vec<Entry> = Vec::new();
        let mut problems = Vec::new();
        for file in self.files(&mut problems) {
            match formats::load(&file, &self.builtins) {
                Ok(loaded) => {
                    if let Some(first) = entries
                        .iter()
                        .find(|e| e.loaded.workflow.id == loaded.workflow.id)
                    {
                        problems.push(Problem {
                            file: file.display().to_string(),
                            message: format!(
                                "workflow id `{}` is also that of {}, which is used",
                                loaded.workflow.id,
                                first.loaded.file.display()
                            ),
                        });
                        continue;
                    }
                    let pin = PinnedDefinition::of(&loaded);
                    entries.push(Entry { loaded, pin });
                }
                Err(errors) => problems.push(Problem {
                    file: file.display().to_string(),
                    message: errors.to_string(),
                }),
            }
        }
        entries.sort_by(|a, b| a.loaded.workflow.id.cmp(&b.loaded.workflow.id));
        (entries, problems)
    }

    /// The workflow `id`.
    pub fn find(&self, id: &str) -> Result<Entry, ToolError> {
        let (entries, _) = self.scan();
        let known: Vec<String> = entries
            .iter()
            .map(|e| e.loaded.workflow.id.clone())
            .collect();
        entries
            .into_iter()
            .find(|e| e.loaded.workflow.id == id)
            .ok_or_else(|| {
                ToolError::new(
                    "WORKFLOW_NOT_FOUND",
                    format!(
                        "no workflow `{id}` in {}; known: {}",
                        self.describe_dirs(),
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                )
                .with_details(serde_json::json!({ "known": known }))
            })
    }

    fn describe_dirs(&self) -> String {
        if self.dirs.is_empty() {
            return "no workflow directory (start with --workflows DIR)".into();
        }
        self.dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn files(&self, problems: &mut Vec<Problem>) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for dir in &self.dirs {
            let read = match std::fs::read_dir(dir) {
                Ok(read) => read,
                Err(e) => {
                    problems.push(Problem {
                        file: dir.display().to_string(),
                        message: format!("cannot read the workflow directory: {e}"),
                    });
                    continue;
                }
            };
            let mut here: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
            here.sort();
            for path in here {
                if path.is_dir() {
                    let inner = path.join("workflow.json");
                    if inner.is_file() {
                        files.push(inner);
                    }
                } else if path.extension().is_some_and(|x| x == "json")
                    && path.file_name().is_none_or(|n| n != TAGS_FILE)
                {
                    files.push(path);
                }
            }
        }
        files
    }

    /// The tags file of the first workflow directory that has one, as
    /// JSON (None without one, or when it is not a JSON object of at most
    /// 1 MiB).
    pub fn tags(&self) -> Option<serde_json::Value> {
        self.dirs.iter().find_map(|dir| {
            let file = dir.join(TAGS_FILE);
            let meta = std::fs::metadata(&file).ok()?;
            if meta.len() > wfhost_core::limits::MAX_TEXT_BYTES as u64 {
                return None;
            }
            let bytes = std::fs::read(&file).ok()?;
            wfhost_core::limits::json(&bytes).ok()?;
            serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .filter(serde_json::Value::is_object)
        })
    }

    /// The pinned hash the manifest at `file` has now (None if it cannot be
    /// read or no longer checks).
    pub fn hash_now(&self, file: &Path) -> Option<String> {
        let meta = std::fs::metadata(file).ok()?;
        let stamp = (meta.modified().ok()?, meta.len());
        let mut hashes = self.hashes.lock().expect("not poisoned");
        if let Some((modified, len, hash)) = hashes.get(file)
            && (*modified, *len) == stamp
        {
            return hash.clone();
        }
        let hash = formats::load(file, &self.builtins)
            .ok()
            .map(|loaded| PinnedDefinition::of(&loaded).hash);
        hashes.insert(file.to_path_buf(), (stamp.0, stamp.1, hash.clone()));
        hash
    }
}
