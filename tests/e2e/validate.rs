use super::*;

#[test]
fn the_examples_validate_cleanly() {
    let cache = tempfile::tempdir().unwrap();
    let manifest = repo().join("examples/hello/workflow.json");
    let out = wfhost(
        &["validate", manifest.to_str().unwrap(), "--strict"],
        cache.path(),
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(
        text.contains("ok: workflow `hello` 1.0.0: 1 node, 4 blocks, 2 plugins"),
        "{text}"
    );
}

#[test]
fn warnings_are_printed_and_strict_makes_them_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wf.json");
    std::fs::write(
        &path,
        serde_json::json!({"id": "w", "start_node": "main", "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": {"worker": "echo", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]},
            "lost": {"worker": "echo", "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "END"}]}
        }}}})
        .to_string(),
    )
    .unwrap();
    let out = wfhost(&["validate", path.to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(
        err.contains("warning: ")
            && err.contains("/nodes/main/blocks/lost: block `main.lost` is unreachable"),
        "{err}"
    );
    assert!(
        err.contains("/nodes/main/blocks/a/transitions: no `SIGNAL:FAIL_DEFAULT` fallback"),
        "{err}"
    );
    assert!(stdout(&out).contains("2 warnings"));
    let strict = wfhost(
        &["validate", path.to_str().unwrap(), "--strict"],
        dir.path(),
    );
    assert_eq!(strict.status.code(), Some(1));
}

#[test]
fn invalid_manifests_and_plugins_fail_validation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wf.json");
    std::fs::write(&path, "{\"id\": \"w\"").unwrap();
    let out = wfhost(&["validate", path.to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("wf.json: 1:10"), "{}", stderr(&out));

    std::fs::write(dir.path().join("p.wasm"), b"\0asm\x01\0\0\0").unwrap();
    std::fs::write(
        &path,
        serde_json::json!({"id": "w", "start_node": "main", "plugins": {"p": {"path": "p.wasm"}},
            "nodes": {"main": {"entry_block": "a", "blocks": {"a": {"worker": "p"}}}}})
        .to_string(),
    )
    .unwrap();
    let out = wfhost(&["validate", path.to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("core WebAssembly module"),
        "{}",
        stderr(&out)
    );
}
