//! The routines a WorkRail workflow file may call, found beside it, as
//! WorkRail's bundled library lays them out: the WorkRail workflows in
//! the file's directory and its `routines/` folder, and in the parent
//! directory and its `routines/` folder (for a workflow in a subfolder
//! such as `examples/`). A routine is a workflow whose id is
//! `wr.routine-<name>` or `routine-<name>`; it registers the template
//! `wr.templates.routine.<name>`. A routine that calls a template itself
//! is not registered (no recursion), nor is a file over the text limit or
//! one that is not JSON. The folders are read once, when a `templateCall`
//! first asks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use super::expand::{Routines, routine_name};

/// The routines beside a workflow file.
pub struct Beside {
    dirs: Vec<PathBuf>,
    found: OnceLock<BTreeMap<String, Value>>,
}

/// At most this many files are looked at per folder.
const MAX_FILES: usize = 1000;
/// At most this many bytes are read from all folders together.
const MAX_TOTAL_BYTES: u64 = 32 << 20;

impl Beside {
    pub fn of(file: &Path) -> Beside {
        let mut dirs = Vec::new();
        if let Some(dir) = file.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            dirs.push(dir.to_path_buf());
            dirs.push(dir.join("routines"));
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                dirs.push(parent.to_path_buf());
                dirs.push(parent.join("routines"));
            }
        }
        Beside {
            dirs,
            found: OnceLock::new(),
        }
    }

    fn all(&self) -> &BTreeMap<String, Value> {
        self.found.get_or_init(|| {
            let mut found = BTreeMap::new();
            let mut budget = MAX_TOTAL_BYTES;
            for dir in &self.dirs {
                for (name, routine) in read_dir(dir, &mut budget) {
                    found.entry(name).or_insert(routine);
                }
            }
            found
        })
    }
}

/// The routines of one folder, by name (files in name order).
fn read_dir(dir: &Path, budget: &mut u64) -> Vec<(String, Value)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
        .take(MAX_FILES)
        .collect();
    files.sort();
    files
        .iter()
        .filter_map(|f| read_routine(f, budget))
        .collect()
}

fn read_routine(file: &Path, budget: &mut u64) -> Option<(String, Value)> {
    let meta = std::fs::metadata(file).ok()?;
    if meta.len() > crate::limits::MAX_TEXT_BYTES as u64 || meta.len() > *budget {
        return None;
    }
    *budget -= meta.len();
    let bytes = std::fs::read(file).ok()?;
    crate::limits::json(&bytes).ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    let name = routine_name(value.get("id")?.as_str()?)?.to_string();
    let steps = value.get("steps")?.as_array()?;
    if steps.iter().any(|s| s.get("templateCall").is_some()) {
        return None;
    }
    Some((name, value))
}

impl Routines for Beside {
    fn routine(&self, name: &str) -> Option<Value> {
        self.all().get(name).cloned()
    }

    fn names(&self) -> Vec<String> {
        self.all().keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routines_are_found_in_the_folder_its_routines_and_the_parents() {
        let root = tempfile::tempdir().unwrap();
        let write = |path: &str, id: &str| {
            let p = root.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let steps = serde_json::json!([{"id": "s", "title": "S", "prompt": "p"}]);
            std::fs::write(
                &p,
                serde_json::json!({"id": id, "steps": steps}).to_string(),
            )
            .unwrap();
        };
        write("routines/review.json", "wr.routine-review");
        write("plain.json", "routine-plain");
        write("examples/flow.json", "not-a-routine");
        write("examples/routines/local.json", "wr.routine-local");
        std::fs::write(root.path().join("routines/bad.json"), "{").unwrap();
        let beside = Beside::of(&root.path().join("examples/flow.json"));
        assert_eq!(beside.names(), ["local", "plain", "review"]);
        assert!(beside.routine("review").is_some());
        assert!(beside.routine("flow").is_none());
    }
}
