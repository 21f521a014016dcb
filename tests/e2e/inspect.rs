use super::*;

#[test]
fn inspect_renders_the_graph_in_each_format() {
    let cache = tempfile::tempdir().unwrap();
    let manifest = repo().join("examples/hello/workflow.json");
    let m = manifest.to_str().unwrap();
    let text = stdout(&wfhost(&["inspect", m], cache.path()));
    assert!(text.contains("block write_note [echo]"), "{text}");
    let mermaid = stdout(&wfhost(
        &["inspect", m, "--format", "mermaid"],
        cache.path(),
    ));
    assert!(
        mermaid.contains("main__greet -->|\"SIGNAL:SUCCESS\"| main__write_note"),
        "{mermaid}"
    );
    let dot = stdout(&wfhost(&["inspect", m, "-f", "dot"], cache.path()));
    assert!(dot.starts_with("digraph \"hello\""), "{dot}");
}

#[test]
fn inspect_lists_the_inputs_of_a_workflow() {
    let cache = tempfile::tempdir().unwrap();
    let manifest = repo().join("examples/inputs/workflow.json");
    let out = wfhost(&["inspect", manifest.to_str().unwrap()], cache.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for line in [
        "inputs:\n",
        "  project (string, required): The project released.\n",
        "  version (string, required): The version released, MAJOR.MINOR.PATCH.\n",
        "  audience (string, default \"users\", one of \"users\", \"developers\")\n",
        "  highlights (array of string, default [])\n",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
    // A workflow without inputs has no such section.
    let hello = repo().join("examples/hello/workflow.json");
    let text = stdout(&wfhost(&["inspect", hello.to_str().unwrap()], cache.path()));
    assert!(!text.contains("inputs"), "{text}");
}

#[test]
fn list_finds_workflows_and_reports_broken_ones() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
    std::fs::create_dir_all(dir.path().join("target")).unwrap();
    std::fs::copy(
        repo().join("examples/hello/workflow.json"),
        dir.path().join("a/b/hello.json"),
    )
    .unwrap();
    std::fs::copy(
        repo().join("examples/hello/workflow.json"),
        dir.path().join("target/skip.json"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("package.json"),
        "{\"name\": \"not a workflow\"}",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("broken.json"),
        "{\"start_node\": \"x\", \"nodes\": 3}",
    )
    .unwrap();
    let out = wfhost(&["list", dir.path().to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.contains("hello  1.0.0  ") && text.contains("a/b/hello.json"),
        "{text}"
    );
    assert!(
        text.contains("(invalid)") && text.contains("broken.json"),
        "{text}"
    );
    assert!(
        !text.contains("skip.json") && !text.contains("package.json"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_slice(
        &wfhost(
            &["list", dir.path().to_str().unwrap(), "--json"],
            dir.path(),
        )
        .stdout,
    )
    .unwrap();
    // The object GET /v1/workflows answers: paths relative to the root.
    let listed = json["workflows"].as_array().unwrap();
    assert_eq!(listed.len(), 2, "{json:#}");
    assert_eq!(
        json["root"].as_str().unwrap(),
        dir.path().canonicalize().unwrap().to_str().unwrap()
    );
    assert!(
        listed
            .iter()
            .any(|w| w["path"] == "a/b/hello.json" && w["id"] == "hello")
    );
    assert!(
        listed
            .iter()
            .any(|w| w["path"] == "broken.json" && w["error"].is_string())
    );
    assert_eq!(json["truncated"], false);
}
