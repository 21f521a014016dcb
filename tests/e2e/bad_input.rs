//! Bad input: a clear one-line error naming the file and the place, exit
//! code 2, and nothing written to the workspace or the run store.

use super::*;

struct Case {
    ws: tempfile::TempDir,
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Self {
        Case {
            ws: tempfile::tempdir().unwrap(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn manifest(&self, text: &str) -> PathBuf {
        let path = self.dir.path().join("workflow.json");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Run, check exit code 2 and an untouched workspace, return stderr.
    fn refused(&self, manifest: &Path) -> String {
        let out = run_workflow(manifest, self.ws.path(), self.dir.path());
        let err = stderr(&out);
        assert_eq!(
            out.status.code(),
            Some(2),
            "stdout: {}\nstderr: {err}",
            stdout(&out)
        );
        assert!(
            tree(self.ws.path()).is_empty(),
            "workspace touched: {:?}",
            tree(self.ws.path())
        );
        assert!(
            !self.dir.path().join("home").exists(),
            "a run store was created for a run that never started"
        );
        assert!(
            stdout(&out).is_empty(),
            "nothing ran, nothing printed: {}",
            stdout(&out)
        );
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.starts_with("error: "), "{err}");
        err
    }
}

fn good(block_a: serde_json::Value) -> String {
    serde_json::json!({
        "id": "w", "start_node": "main",
        "plugins": {},
        "nodes": {"main": {"entry_block": "a", "blocks": {"a": block_a}}}
    })
    .to_string()
}

#[test]
fn missing_manifest() {
    let case = Case::new();
    let err = case.refused(&case.dir.path().join("nope.json"));
    assert!(
        err.contains("nope.json") && err.contains("cannot read manifest"),
        "{err}"
    );
}

#[test]
fn invalid_json_names_line_and_column() {
    let case = Case::new();
    let path = case.manifest("{\n  \"id\": \"w\",\n  \"nodes\": {,}\n}\n");
    let err = case.refused(&path);
    assert!(err.contains("workflow.json: 3:13:"), "{err}");
}

#[test]
fn unknown_worker_names_the_block() {
    let case = Case::new();
    let path = case.manifest(&good(serde_json::json!({"worker": "ghost"})));
    let err = case.refused(&path);
    assert!(
        err.contains("workflow.json: /nodes/main/blocks/a/worker: unknown worker `ghost`"),
        "{err}"
    );
}

#[test]
fn transition_to_a_missing_block_names_the_transition() {
    let case = Case::new();
    let path = case.manifest(&good(serde_json::json!({
        "worker": "echo", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:nowhere"}]
    })));
    let err = case.refused(&path);
    assert!(
        err.contains("/nodes/main/blocks/a/transitions/0/action"),
        "{err}"
    );
    assert!(err.contains("`nowhere`"), "{err}");
}

fn with_plugin(case: &Case, bytes: &[u8]) -> PathBuf {
    std::fs::write(case.dir.path().join("plugin.wasm"), bytes).unwrap();
    case.manifest(
        &serde_json::json!({
            "id": "w", "start_node": "main",
            "plugins": {"mine": {"path": "plugin.wasm"}},
            "nodes": {"main": {"entry_block": "a", "blocks": {"a": {"worker": "mine"}}}}
        })
        .to_string(),
    )
}

#[test]
fn a_file_that_is_not_a_component() {
    let case = Case::new();
    let err = case.refused(&with_plugin(&case, b"#!/bin/sh\necho hi\n"));
    assert!(
        err.contains("plugin.wasm") && err.contains("plugin `mine`"),
        "{err}"
    );
    assert!(err.contains("not a WebAssembly file"), "{err}");
    let err = case.refused(&with_plugin(&case, b"\0asm\x01\0\0\0"));
    assert!(
        err.contains("core WebAssembly module, not a component"),
        "{err}"
    );
}

#[test]
fn a_component_of_the_wrong_world() {
    let case = Case::new();
    let err = case.refused(&with_plugin(&case, wfhost_guest_artifacts::ACTIONS_CORE));
    assert!(err.contains("plugin `mine`"), "{err}");
    assert!(
        err.contains("is an action-handler component, but it is used as a worker"),
        "{err}"
    );
}

#[test]
fn an_ungranted_capability() {
    let case = Case::new();
    let err = case.refused(&with_plugin(&case, wfhost_guest_artifacts::TEST_NET_PROBE));
    assert!(
        err.contains("plugin `mine`") && err.contains("wasi:sockets/"),
        "{err}"
    );
}

#[test]
fn an_unknown_grant() {
    let case = Case::new();
    let path = case.manifest(
        &serde_json::json!({
            "id": "w", "start_node": "main",
            "plugins": {"mine": {"path": "plugin.wasm", "grants": ["teleport"]}},
            "nodes": {"main": {"entry_block": "a", "blocks": {"a": {"worker": "mine"}}}}
        })
        .to_string(),
    );
    let err = case.refused(&path);
    assert!(
        err.contains("/plugins/mine/grants/0") && err.contains("`teleport`"),
        "{err}"
    );
}

#[test]
fn a_missing_workspace() {
    let case = Case::new();
    let path = case.manifest(&good(serde_json::json!({"worker": "echo"})));
    let out = wfhost(
        &["run", path.to_str().unwrap(), "-w", "/nonexistent/ws"],
        case.dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("workspace /nonexistent/ws does not exist")
            && err.contains("`mkdir -p /nonexistent/ws`"),
        "{err}"
    );
    assert!(!case.dir.path().join("home").exists(), "nothing recorded");
    // A name a shell would split is quoted in the hint.
    let odd = case.dir.path().join("my ws's");
    let out = wfhost(
        &["run", path.to_str().unwrap(), "-w", odd.to_str().unwrap()],
        case.dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let quoted = format!(
        "`mkdir -p '{}'`",
        odd.display().to_string().replace('\'', "'\\''")
    );
    assert!(stderr(&out).contains(&quoted), "{}", stderr(&out));
}

#[test]
fn duplicate_keys_are_refused_with_line_and_column() {
    let case = Case::new();
    // Two blocks `a`: the second would silently replace the first.
    let path = case.manifest(
        "{\n  \"id\": \"w\", \"start_node\": \"main\",\n  \"nodes\": {\"main\": {\"entry_block\": \"a\", \"blocks\": {\n    \"a\": {\"worker\": \"echo\"},\n    \"a\": {\"worker\": \"scripted\"}\n  }}}\n}\n",
    );
    let err = case.refused(&path);
    assert!(err.contains("workflow.json: 5:"), "{err}");
    assert!(err.contains("duplicate key `a`"), "{err}");
}

#[test]
fn out_of_range_durations_are_refused_before_anything_runs() {
    for timeout in [
        "99999999999999999999s",
        "10000000000000000000s",
        "92233720368547758s",
        "169h",
    ] {
        let case = Case::new();
        let path = case.manifest(&good(
            serde_json::json!({"worker": "echo", "timeout": timeout}),
        ));
        let err = case.refused(&path);
        assert!(err.contains("workflow.json: 1:"), "{timeout}: {err}");
        assert!(err.contains("maximum of 7 days"), "{timeout}: {err}");
    }
}
