//! Run inputs through the binary: `--input FILE` and `--set NAME=VALUE`
//! checked before anything is written, visible to workers and templates,
//! recorded in `run_started` and kept when a run is resumed or forked.

use std::process::Stdio;
use std::time::{Duration, Instant};

use super::*;

/// A workflow whose blocks show what they got: `greet` echoes a templated
/// message, `think` answers a templated response after `delay_ms`, `probe`
/// reports `ctx.inputs()` as the worker sees it.
fn manifest(dir: &Path, delay_ms: u64) -> PathBuf {
    let step = |next: &str| serde_json::json!([{"on_signal": "SIGNAL:SUCCESS", "action": next}]);
    let wf = serde_json::json!({
        "id": "inputs-test", "start_node": "main",
        "inputs": {
            "type": "object",
            "required": ["topic"],
            "properties": {
                "topic": {"type": "string"},
                "count": {"type": "integer", "minimum": 1, "default": 2},
                "tags": {"type": "array", "items": {"type": "string"}}
            }
        },
        "plugins": {"probe": {"path": wfhost_guest_artifacts::TEST_PROBE_PATH}},
        "nodes": {"main": {"entry_block": "greet", "blocks": {
            "greet": {"worker": "echo",
                      "config": {"message": "topic={{inputs.topic}} count={{inputs.count}}"},
                      "transitions": step("JUMP:think")},
            "think": {"worker": "scripted",
                      "config": {"responses": ["thinking about {{inputs.topic}}"], "delay_ms": delay_ms},
                      "transitions": step("JUMP:probe")},
            "probe": {"worker": "probe", "config": {"ops": [{"op": "inputs"}]},
                      "transitions": step("END")}
        }}}
    });
    let path = dir.join("workflow.json");
    std::fs::write(&path, wf.to_string()).unwrap();
    path
}

/// `wfhost run MANIFEST -w DIR ARGS…` with the home in `dir`.
fn run_with(manifest: &Path, dir: &Path, args: &[&str]) -> Output {
    let ws = workspace_in(dir);
    let mut all = vec![
        "run",
        manifest.to_str().unwrap(),
        "-w",
        ws.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    wfhost(&all, dir)
}

fn payload_texts(report: &serde_json::Value) -> Vec<String> {
    report["payload"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{}:{}",
                s["type"].as_str().unwrap(),
                s["content"].as_str().unwrap()
            )
        })
        .collect()
}

const EXPECTED: [&str; 3] = [
    "ECHO:topic=rust count=2",
    "AI_RESPONSE:thinking about rust",
    r#"PROBE:ok: {"count":2,"tags":["a"],"topic":"rust"}"#,
];

#[test]
fn inputs_reach_workers_and_templates_and_are_recorded_with_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wf = manifest(d, 0);
    let file = d.join("inputs.json");
    std::fs::write(&file, r#"{"topic": "from the file", "tags": ["a"]}"#).unwrap();
    let out = run_with(
        &wf,
        d,
        &[
            "--input",
            file.to_str().unwrap(),
            "--set",
            "topic=rust",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(payload_texts(&report), EXPECTED);

    let id = report["run_id"].as_str().unwrap();
    let recorded = serde_json::json!({"count": 2, "tags": ["a"], "topic": "rust"});
    assert_eq!(run_events(d, id)[0]["inputs"], recorded);
    let show = wfhost(&["show", id, "--json"], d);
    let show: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(show["inputs"], recorded);
    let text = stdout(&wfhost(&["show", id], d));
    assert!(text.contains("  inputs      count = 2\n"), "{text}");
    assert!(text.contains("topic = \"rust\""), "{text}");

    // The input file may also come on standard input.
    let ws = workspace_in(d);
    let mut child = command(d)
        .args([
            "run",
            wf.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--input",
            "-",
            "--json",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"topic": "rust", "tags": ["a"]}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(payload_texts(&report), EXPECTED);
}

#[test]
fn bad_inputs_exit_2_naming_the_input_and_record_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let wf = manifest(dir.path(), 0);
    let not_object = dir.path().join("list.json");
    std::fs::write(&not_object, "[1]").unwrap();
    let wrong_type = dir.path().join("wrong.json");
    std::fs::write(&wrong_type, r#"{"topic": 3}"#).unwrap();
    let hello = repo().join("examples/hello/workflow.json");
    let cases: Vec<(&Path, Vec<&str>, &str)> = vec![
        (&wf, vec![], "missing required input `topic`"),
        (
            &wf,
            vec!["--set", "topic=x", "--set", "count=many"],
            "input `count`: `many` is not a valid integer",
        ),
        (
            &wf,
            vec!["--set", "topic=x", "--set", "count=0"],
            "input `count`: 0 is less than the minimum of 1",
        ),
        (
            &wf,
            vec!["--set", "topic=x", "--set", "colour=red"],
            "unknown input `colour` (declared: count, tags, topic)",
        ),
        (
            &wf,
            vec!["--input", wrong_type.to_str().unwrap()],
            "input `topic`: 3 is not of type \"string\"",
        ),
        (
            &wf,
            vec!["--input", not_object.to_str().unwrap()],
            "must hold a JSON object, not an array",
        ),
        (
            &wf,
            vec!["--input", "/nonexistent/in.json"],
            "--input /nonexistent/in.json",
        ),
        (
            &wf,
            vec!["--set", "topic"],
            "--set `topic`: expected NAME=VALUE",
        ),
        (
            &hello,
            vec!["--set", "x=1"],
            "unknown input `x`: the workflow declares no inputs",
        ),
    ];
    for (manifest, args, expected) in cases {
        let scratch = tempfile::tempdir().unwrap();
        let s = scratch.path();
        let ws = workspace_in(s);
        let mut all = vec![
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ];
        all.extend_from_slice(&args);
        let out = wfhost(&all, s);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!s.join("home").exists(), "{args:?}: no store is created");
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
}

#[test]
fn validate_checks_the_inputs_schema_and_the_placeholders() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wf = manifest(d, 0);
    let text = std::fs::read_to_string(&wf).unwrap();
    let check = |text: String| {
        std::fs::write(&wf, text).unwrap();
        wfhost(&["validate", wf.to_str().unwrap()], d)
    };
    let out = check(text.replace(r#""type":"integer""#, r#""type":"int""#));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("/inputs/properties/count/type: invalid JSON Schema"),
        "{}",
        stderr(&out)
    );
    let out = check(text.replace("thinking about {{inputs.topic}}", "{{inputs.topik}}"));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "/nodes/main/blocks/think/config/responses/0: `{{inputs.topik}}` names no input declared"
        ),
        "{}",
        stderr(&out)
    );
}

/// Wait until the run's log shows `block` started.
fn wait_for_start(dir: &Path, block: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let runs = wfhost(&["runs", "--json"], dir);
        let runs: serde_json::Value = serde_json::from_slice(&runs.stdout).unwrap_or_default();
        if let Some(id) = runs[0]["id"].as_str()
            && run_events(dir, id)
                .iter()
                .any(|e| e["type"] == "block_started" && e["block"] == block)
        {
            return id.to_string();
        }
        assert!(Instant::now() < deadline, "{block} never started");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_resumed_and_a_forked_run_keep_their_recorded_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wf = manifest(d, 1500);
    let ws = workspace_in(d);
    let mut child = command(d)
        .args(["run", wf.to_str().unwrap(), "-w", ws.to_str().unwrap()])
        .args(["--set", "topic=rust", "--set", r#"tags=["a"]"#])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let id = wait_for_start(d, "think");
    child.kill().unwrap(); // SIGKILL mid-block
    child.wait().unwrap();

    // `resume` takes no inputs: the run goes on with the recorded ones.
    let out = wfhost(&["resume", &id, "--json"], d);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(payload_texts(&report), EXPECTED);

    // A fork from the start runs every block again, with the same inputs.
    let show: serde_json::Value =
        serde_json::from_slice(&wfhost(&["show", &id, "--json"], d).stdout).unwrap();
    let start = show["start_snapshot"].as_str().unwrap().to_string();
    let out = wfhost(&["fork", &id, "--at", &start, "--json"], d);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(payload_texts(&report), EXPECTED);
}
