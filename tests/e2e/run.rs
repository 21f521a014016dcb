use super::*;

#[test]
fn the_hello_example_runs() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let manifest = repo().join("examples/hello/workflow.json");
    let out = run_workflow(&manifest, ws.path(), cache.path());
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.contains("[0] main.greet -> SIGNAL:SUCCESS"), "{text}");
    // The unexpected signal is routed by the SIGNAL:FAIL_DEFAULT fallback.
    assert!(
        text.contains("[2] main.check -> SIGNAL:UNEXPECTED"),
        "{text}"
    );
    assert!(text.contains("[3] main.done -> SIGNAL:SUCCESS"), "{text}");
    assert!(
        text.contains(" succeeded: 4 steps, 1 line written"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes/hello.txt")).unwrap(),
        "hello from a sandboxed worker\n"
    );
}

#[test]
fn the_second_start_uses_the_compiled_cache() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let manifest = repo().join("examples/hello/workflow.json");
    let args = [
        "run",
        manifest.to_str().unwrap(),
        "-w",
        ws.path().to_str().unwrap(),
        "--verbose",
    ];
    let first = stdout(&wfhost(&args, cache.path()));
    assert!(
        first.contains("plugin echo (worker, builtin): compiled,"),
        "{first}"
    );
    let second = stdout(&wfhost(&args, cache.path()));
    assert!(
        second.contains("plugin echo (worker, builtin): compiled cache hit"),
        "{second}"
    );
    assert!(
        second.contains("plugin actions-core (action-handler, builtin): compiled cache hit"),
        "{second}"
    );
}

pub(crate) fn write_manifest(dir: &Path, body: serde_json::Value) -> PathBuf {
    let path = dir.join("workflow.json");
    std::fs::write(&path, serde_json::to_string_pretty(&body).unwrap()).unwrap();
    path
}

#[test]
fn a_failed_run_exits_non_zero_naming_block_and_signal() {
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let manifest = write_manifest(
        dir.path(),
        serde_json::json!({
            "id": "fails", "start_node": "main",
            "nodes": {"main": {"entry_block": "a", "blocks": {
                "a": {"worker": "echo", "config": {"signal": "SIGNAL:NOPE"},
                      "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}
            }}}
        }),
    );
    let out = run_workflow(&manifest, ws.path(), dir.path());
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("`main.a` emitted `SIGNAL:NOPE`"), "{err}");
    assert!(
        stdout(&out).contains(" failed: 1 step,"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn quiet_prints_only_where_the_run_came_to_rest() {
    let manifest = repo().join("examples/hello/workflow.json");
    for flag in ["-q", "--quiet"] {
        let ws = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let args = [
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.path().to_str().unwrap(),
            flag,
        ];
        let out = wfhost(&args, cache.path());
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{flag}: {text}");
        assert!(
            lines[0].starts_with("run run-") && lines[0].contains(" succeeded: 4 steps"),
            "{flag}: {text}"
        );
    }
    // A failed run: its last line and the error, nothing else.
    let dir = tempfile::tempdir().unwrap();
    let failing = write_manifest(
        dir.path(),
        serde_json::json!({
            "id": "fails", "start_node": "main",
            "nodes": {"main": {"entry_block": "a", "blocks": {
                "a": {"worker": "echo", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "FAIL:no good"}]}
            }}}
        }),
    );
    let ws = workspace_in(dir.path());
    let out = wfhost(
        &[
            "run",
            failing.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "-q",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out).lines().count(), 1, "{}", stdout(&out));
    assert!(stderr(&out).contains("no good"), "{}", stderr(&out));
}

#[test]
fn a_failure_reason_is_printed_once_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(
        dir.path(),
        serde_json::json!({
            "id": "plan", "start_node": "main",
            "nodes": {"main": {"entry_block": "plan", "blocks": {
                "plan": {"worker": "scripted",
                         "config": {"responses": ["not a plan"], "signal": "SIGNAL:INVALID"},
                         "transitions": [{"on_signal": "SIGNAL:INVALID", "action": "FAIL:the plan is not valid"}]}
            }}}
        }),
    );
    let out = run_workflow(&manifest, &workspace_in(dir.path()), dir.path());
    assert_eq!(out.status.code(), Some(1));
    let both = format!("{}{}", stdout(&out), stderr(&out));
    assert!(both.contains("FAIL:the plan is not valid"), "{both}");
    for line in both.lines() {
        assert!(
            line.matches("the plan is not valid").count() <= 1,
            "repeated: {line}"
        );
    }
    let run = stdout(&out).split_whitespace().nth(1).unwrap().to_string();
    for listing in [["events", &run], ["show", &run]] {
        let out = wfhost(&listing, dir.path());
        assert!(
            stdout(&out).contains("FAIL:the plan is not valid"),
            "{}",
            stdout(&out)
        );
        for line in stdout(&out).lines() {
            assert!(
                line.matches("the plan is not valid").count() <= 1,
                "{listing:?} repeats it: {line}"
            );
        }
    }
}

#[test]
fn a_write_outside_the_restrictions_is_refused_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let manifest = write_manifest(
        dir.path(),
        serde_json::json!({
            "id": "restricted", "start_node": "main",
            "nodes": {"main": {"entry_block": "a", "blocks": {
                "a": {"worker": "echo", "config": {"write": {"path": "src/main.rs", "content": "fn main() {}"}},
                      "file_restrictions": ["docs/**"],
                      "transitions": [
                        {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                        {"on_signal": "SIGNAL:WRITE_REFUSED", "action": "FAIL:write refused"}]}
            }}}
        }),
    );
    let out = run_workflow(&manifest, ws.path(), dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("write refused"));
    assert!(!ws.path().join("src/main.rs").exists());
}

#[test]
fn a_gate_pauses_with_its_own_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(
        dir.path(),
        serde_json::json!({
            "id": "gated", "start_node": "main",
            "nodes": {"main": {"entry_block": "a", "blocks": {
                "a": {"worker": "echo", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "GATE:ship it?"}]}
            }}}
        }),
    );
    let out = run_workflow(&manifest, &workspace_in(dir.path()), dir.path());
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stdout(&out).contains("waiting at gate UD-1 after main.a: ship it?"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn json_reports_status_and_statistics_per_block() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let manifest = repo().join("examples/hello/workflow.json");
    let out = wfhost(
        &[
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.path().to_str().unwrap(),
            "--json",
        ],
        cache.path(),
    );
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is only JSON");
    assert_eq!(report["status"], "succeeded");
    assert_eq!(report["workflow"], "hello");
    assert_eq!(report["steps"], 4);
    assert_eq!(report["statistics"]["lines_written"], 1);
    assert_eq!(report["blocks"]["main.write_note"]["attempts"], 1);
    assert_eq!(report["blocks"]["main.write_note"]["lines_written"], 1);
    assert!(
        report["blocks"]["main.greet"]["duration_ms"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[test]
fn a_third_party_action_handler_serves_its_own_verb() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(
        dir.path(),
        serde_json::json!({
            "id": "escalation", "start_node": "main",
            "plugins": {"escalate": {"path": wfhost_guest_artifacts::EXAMPLE_ESCALATE_ACTIONS_PATH}},
            "action_handlers": {"ESCALATE": "escalate"},
            "nodes": {"main": {"entry_block": "a", "blocks": {
                "a": {"worker": "echo", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:b"}]},
                "b": {"worker": "echo", "config": {"signal": "SIGNAL:UNSURE"},
                      "transitions": [{"on_signal": "SIGNAL:UNSURE", "action": "ESCALATE:the tests are flaky"}]}
            }}}
        }),
    );
    let out = run_workflow(&manifest, &workspace_in(dir.path()), dir.path());
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(3), "{text}{}", stderr(&out));
    assert!(
        text.contains("escalated by main.b on SIGNAL:UNSURE: the tests are flaky"),
        "{text}"
    );
    // The core verbs still went to actions-core.
    assert!(text.contains("JUMP:b: jump to main.b"), "{text}");
}

#[test]
fn a_block_over_its_write_limits_fails_and_applies_nothing() {
    for (limits, ops, expected) in [
        (
            serde_json::json!({"max_written_files": 2}),
            serde_json::json!([
                {"op": "write", "path": "out/a", "content": "1"},
                {"op": "write", "path": "out/b", "content": "2"},
                {"op": "write", "path": "out/c", "content": "3"}
            ]),
            "files, over its limit of 2 (`limits.max_written_files`)",
        ),
        (
            serde_json::json!({"max_written_bytes": 1000}),
            serde_json::json!([{"op": "write", "path": "out/big", "content": "x".repeat(1001)}]),
            "bytes, over its limit of 1000 (`limits.max_written_bytes`)",
        ),
    ] {
        let scratch = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(
            scratch.path().join("probe.wasm"),
            wfhost_guest_artifacts::TEST_PROBE,
        )
        .unwrap();
        let manifest = write_manifest(
            scratch.path(),
            serde_json::json!({
                "id": "quota", "start_node": "main",
                "plugins": {"probe": {"path": "probe.wasm"}},
                "nodes": {"main": {"entry_block": "a", "blocks": {"a": {
                    "worker": "probe",
                    "file_restrictions": ["out/**"],
                    "limits": limits,
                    "config": {"ops": ops},
                    "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "END"}]
                }}}}
            }),
        );
        let (code, report) = run_report(&manifest, ws.path(), scratch.path());
        assert_eq!(code, Some(0), "{report}");
        let error = report["payload"][0]["content"].as_str().unwrap_or_default();
        // The count is the staged check's (3 files, 1001 bytes), or — on a
        // loaded machine, when the guest outlives the first live look —
        // the live watch's, which also counts what the host wrote under
        // `.output/` meanwhile: over the limit either way.
        assert!(
            error.contains("the block wrote ") && error.contains(expected),
            "{report}"
        );
        assert!(!ws.path().join("out").join("a").exists() && !ws.path().join("out/big").exists());
    }
}

/// A guest filling the disk is stopped while it writes, not after: into
/// the workspace directly (no restrictions), into `.output/` (a read-only
/// block) and into a staged copy (`out/**`), by bytes and by files.
#[test]
fn a_guest_filling_the_disk_is_stopped_while_it_writes() {
    let fill = |path: &str| serde_json::json!([{"op": "fill", "path": path, "chunk_bytes": 65536, "chunks": 1_000_000}]);
    for (restrictions, limits, ops, expected) in [
        (
            serde_json::Value::Null,
            serde_json::json!({"max_written_bytes": 4_000_000}),
            fill("big.bin"),
            "over its limit of 4000000 (`limits.max_written_bytes`)",
        ),
        (
            serde_json::json!([]),
            serde_json::json!({"max_written_bytes": 4_000_000}),
            fill(".output/big.bin"),
            "over its limit of 4000000 (`limits.max_written_bytes`)",
        ),
        (
            serde_json::json!(["out/**"]),
            serde_json::json!({"max_written_bytes": 4_000_000}),
            fill("out/big.bin"),
            "over its limit of 4000000 (`limits.max_written_bytes`)",
        ),
        (
            serde_json::Value::Null,
            serde_json::json!({"max_written_files": 500}),
            serde_json::json!([{"op": "many_files", "prefix": "f-", "count": 1_000_000}]),
            "over its limit of 500 (`limits.max_written_files`)",
        ),
    ] {
        let scratch = tempfile::tempdir().unwrap();
        let ws = scratch.path().join("ws");
        std::fs::create_dir_all(ws.join("out")).unwrap();
        let mut block = serde_json::json!({
            "worker": "probe",
            "timeout": "60s",
            "limits": limits,
            "config": {"ops": ops},
            "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "END"}]
        });
        if !restrictions.is_null() {
            block["file_restrictions"] = restrictions.clone();
        }
        let manifest = write_manifest(
            scratch.path(),
            serde_json::json!({
                "id": "fill", "start_node": "main",
                "plugins": {"probe": {"path": wfhost_guest_artifacts::TEST_PROBE_PATH}},
                "nodes": {"main": {"entry_block": "a", "blocks": {"a": block}}}
            }),
        );
        let started = std::time::Instant::now();
        let (code, report) = run_report(&manifest, &ws, scratch.path());
        let took = started.elapsed();
        assert_eq!(code, Some(0), "{restrictions}: {report}");
        let error = report["payload"][0]["content"].as_str().unwrap_or_default();
        assert!(
            error.contains("was stopped") && error.contains(expected),
            "{restrictions}: {report}"
        );
        // Stopped within a look or two, far from the 64 GB it would write.
        assert!(
            took < std::time::Duration::from_secs(20),
            "{restrictions}: {took:?}"
        );
        let written: u64 = walk_sizes(&ws);
        assert!(
            written < 400_000_000,
            "{restrictions}: {written} bytes stayed"
        );
    }
}

fn walk_sizes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                walk_sizes(&e.path())
            } else {
                meta.len()
            }
        })
        .sum()
}
