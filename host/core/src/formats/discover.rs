//! The workflow files under a directory, as `wfhost list` and the
//! server's `GET /v1/workflows` show them: found without following
//! symlinks, to a bounded depth and number of files, each read with the
//! manifest size limit; a file that looks like a workflow but does not
//! load is listed with its error.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::formats::{parse_any, workrail};

/// How deep directories are searched.
pub const MAX_DEPTH: usize = 8;
/// How many `.json` files are looked at, at most.
pub const MAX_FILES: usize = 2000;
/// The largest inputs schema listed (as JSON); a larger one is an error.
pub const MAX_INPUTS_BYTES: usize = 64 << 10;
/// The longest description line listed (in characters); longer ones are cut.
pub const MAX_DESCRIPTION_CHARS: usize = 300;

/// A workflow file found under the root.
#[derive(Debug, Clone, Serialize)]
pub struct Found {
    /// Relative to the root searched.
    pub path: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The first line of the description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its inputs (the manifest's `inputs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inputs: Option<serde_json::Value>,
    /// Why it cannot be loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a search found, and whether it stopped at [`MAX_FILES`].
#[derive(Debug, Default)]
pub struct Discovery {
    pub workflows: Vec<Found>,
    pub truncated: bool,
}

fn skipped_dir(name: &str) -> bool {
    name.starts_with('.') || name == "target" || name == "node_modules"
}

/// The `.json` files under `dir` (sorted, symlinks never followed).
fn candidates(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut entries: Vec<_> = entries.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() && depth < MAX_DEPTH && !skipped_dir(&name) {
            if candidates(&entry.path(), depth + 1, out) {
                return true;
            }
        } else if ft.is_file() && name.ends_with(".json") {
            if out.len() == MAX_FILES {
                return true;
            }
            out.push(entry.path());
        }
    }
    false
}

/// One file: None when it is not a workflow at all.
fn examine(root: &Path, file: &Path) -> Option<Found> {
    let mut found = Found {
        path: file.strip_prefix(root).unwrap_or(file).to_path_buf(),
        id: None,
        version: None,
        description: None,
        inputs: None,
        error: None,
    };
    let text = match crate::manifest::read(file) {
        Ok(text) => text,
        Err(e) => {
            found.error = Some(e.to_string());
            return Some(found);
        }
    };
    let value = serde_json::from_str::<serde_json::Value>(&text).ok()?;
    let manifest = value.get("nodes").is_some() && value.get("start_node").is_some();
    // A WorkRail workflow's `steps` is a list: other JSON with a `steps`
    // (a run's report, a package's) is not a workflow gone wrong.
    let workrail = workrail::is_workrail(&value) && value["steps"].is_array();
    if !manifest && !workrail {
        return None;
    }
    match parse_any(file, &text) {
        Ok(wf) => {
            found.description = wf
                .description
                .as_deref()
                .and_then(|d| d.lines().next())
                .map(|line| line.chars().take(MAX_DESCRIPTION_CHARS).collect());
            found.id = Some(wf.id);
            found.version = wf.version;
            found.inputs = bounded_inputs(wf.inputs, &mut found.error);
        }
        Err(e) => found.error = Some(e.to_string()),
    }
    Some(found)
}

/// The inputs schema, unless it is larger than [`MAX_INPUTS_BYTES`] (then
/// `error` says so).
fn bounded_inputs(
    inputs: Option<serde_json::Value>,
    error: &mut Option<String>,
) -> Option<serde_json::Value> {
    let size = inputs.as_ref().map_or(0, |v| v.to_string().len());
    if size > MAX_INPUTS_BYTES {
        *error = Some(format!(
            "its inputs schema is {size} bytes, more than the {MAX_INPUTS_BYTES} listed"
        ));
        return None;
    }
    inputs
}

/// The workflows under `root`, paths relative to it.
pub fn discover(root: &Path) -> Discovery {
    let mut files = Vec::new();
    let truncated = candidates(root, 0, &mut files);
    let workflows = files.iter().filter_map(|f| examine(root, f)).collect();
    Discovery {
        workflows,
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOW: &str = r#"{"id":"hello","description":"Say hello\nmore","start_node":"m",
      "inputs":{"type":"object","properties":{"name":{"type":"string"}}},
      "nodes":{"m":{"entry_block":"a","blocks":{"a":{"worker":"echo","transitions":[{"on_signal":"SIGNAL:SUCCESS","action":"END"}]}}}}}"#;

    #[test]
    fn finds_workflows_with_their_inputs_and_lists_broken_ones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub/.hidden")).unwrap();
        std::fs::write(dir.path().join("sub/hello.json"), FLOW).unwrap();
        std::fs::write(dir.path().join("sub/.hidden/x.json"), FLOW).unwrap();
        std::fs::write(dir.path().join("package.json"), "{\"name\":1}").unwrap();
        std::fs::write(
            dir.path().join("bad.json"),
            "{\"start_node\":1,\"nodes\":2}",
        )
        .unwrap();
        std::fs::write(dir.path().join("junk.json"), "not json").unwrap();
        std::fs::write(
            dir.path().join("report.json"),
            "{\"run_id\":\"r\",\"steps\":4,\"status\":\"succeeded\"}",
        )
        .unwrap();
        let found = discover(dir.path());
        assert!(!found.truncated);
        let paths: Vec<_> = found
            .workflows
            .iter()
            .map(|f| f.path.display().to_string())
            .collect();
        assert_eq!(paths, ["bad.json", "sub/hello.json"]);
        assert!(found.workflows[0].error.is_some());
        let hello = &found.workflows[1];
        assert_eq!(hello.id.as_deref(), Some("hello"));
        assert_eq!(hello.description.as_deref(), Some("Say hello"));
        assert_eq!(
            hello.inputs.as_ref().unwrap()["properties"]["name"]["type"],
            "string"
        );
    }

    #[test]
    fn the_search_stops_at_its_file_cap_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..=MAX_FILES {
            std::fs::write(dir.path().join(format!("f{i:05}.json")), "{}").unwrap();
        }
        std::fs::write(dir.path().join("z.json"), FLOW).unwrap();
        let found = discover(dir.path());
        assert!(found.truncated);
        assert!(found.workflows.is_empty());
    }

    #[test]
    fn a_huge_inputs_schema_is_an_error_not_a_listing() {
        let dir = tempfile::tempdir().unwrap();
        let big = "x".repeat(MAX_INPUTS_BYTES);
        let flow = FLOW.replace(
            r#""type":"string""#,
            &format!(r#""type":"string","description":"{big}""#),
        );
        std::fs::write(dir.path().join("big.json"), flow).unwrap();
        let found = discover(dir.path());
        assert!(found.workflows[0].inputs.is_none());
        assert!(
            found.workflows[0]
                .error
                .as_deref()
                .unwrap()
                .contains("inputs schema")
        );
    }

    #[test]
    fn a_huge_file_is_listed_with_an_error_and_symlinks_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("hello.json"), FLOW).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("hello.json"), dir.path().join("l.json"))
            .unwrap();
        let huge = "x".repeat(crate::workspace::regular_file::MAX_MANIFEST_BYTES as usize + 1);
        std::fs::write(dir.path().join("huge.json"), huge).unwrap();
        let found = discover(dir.path());
        assert_eq!(found.workflows.len(), 1);
        assert_eq!(found.workflows[0].path, Path::new("huge.json"));
        assert!(found.workflows[0].error.is_some());
    }
}
