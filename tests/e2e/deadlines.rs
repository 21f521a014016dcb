//! Nothing makes wfhost wait past a deadline: a guest blocked in a host
//! call fails at its block's timeout, and a FIFO or device given as the
//! manifest, a plugin or a schema is refused at once (exit 2).

use std::process::Stdio;
use std::time::{Duration, Instant};

use super::*;

/// Run `wfhost ARGS`, killing it (and failing the test) after `limit`.
fn wfhost_within(args: &[&str], scratch: &Path, limit: Duration) -> (Output, Duration) {
    let start = Instant::now();
    let mut child = command(scratch)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "wfhost {args:?} still running after {limit:?}: {}{}",
                stdout(&out),
                stderr(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().unwrap(), start.elapsed())
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn write_json(path: &Path, value: serde_json::Value) -> PathBuf {
    std::fs::write(path, value.to_string()).unwrap();
    path.to_path_buf()
}

#[test]
fn a_guest_sleeping_past_its_timeout_fails_within_a_second_of_it() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    let manifest = write_json(
        &scratch.path().join("wf.json"),
        serde_json::json!({
            "id": "slow", "start_node": "main",
            "nodes": {"main": {"entry_block": "think", "blocks": {"think": {
                "worker": "scripted", "timeout": "2s",
                "config": {"responses": ["late"], "delay_ms": 30000},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
            }}}}
        }),
    );
    let args = [
        "run",
        manifest.to_str().unwrap(),
        "-w",
        ws.to_str().unwrap(),
        "--json",
    ];
    let (out, _) = wfhost_within(&args, scratch.path(), Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["reason"].to_string().contains("timed out after 2s"),
        "{report}"
    );
    let took = report["blocks"]["main.think"]["duration_ms"]
        .as_f64()
        .unwrap();
    assert!((2000.0..3000.0).contains(&took), "the block took {took} ms");
}

/// Each of manifest, plugin and schema as a FIFO and as `/dev/zero`.
#[test]
fn a_fifo_or_a_device_as_manifest_plugin_or_schema_is_refused_at_once() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let with_plugin = serde_json::json!({
        "id": "w", "start_node": "main",
        "plugins": {"mine": {"path": "plugin.wasm"}},
        "nodes": {"main": {"entry_block": "a", "blocks": {"a": {"worker": "mine"}}}}
    });
    let with_schema = serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {"a": {
            "worker": "echo", "validation_schema": "schema.json"
        }}}}
    });
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        ("wf.json", serde_json::Value::Null, "cannot read manifest"),
        ("plugin.wasm", with_plugin, "plugin `mine`: cannot read"),
        ("schema.json", with_schema, "cannot read schema file"),
    ];
    for (name, manifest, expected) in cases {
        for special in ["fifo", "/dev/zero"] {
            let dir = tempfile::tempdir_in(s).unwrap();
            let target = dir.path().join(name);
            if special == "fifo" {
                mkfifo(&target);
            } else {
                std::os::unix::fs::symlink(special, &target).unwrap();
            }
            let file = if manifest.is_null() {
                target.clone()
            } else {
                write_json(&dir.path().join("wf.json"), manifest.clone())
            };
            for command in ["run", "validate"] {
                let mut args = vec![command, file.to_str().unwrap()];
                if command == "run" {
                    args.extend(["-w", ws.to_str().unwrap()]);
                }
                let (out, took) = wfhost_within(&args, s, Duration::from_secs(10));
                let err = stderr(&out);
                assert_eq!(out.status.code(), Some(2), "{name} as {special}: {err}");
                assert!(err.contains(expected), "{name} as {special}: {err}");
                assert!(err.contains("not a regular file"), "{err}");
                assert_eq!(err.lines().count(), 1, "{err}");
                assert!(took < Duration::from_secs(5), "{took:?}");
            }
            assert!(tree(&ws).is_empty() && !s.join("home").exists());
        }
    }
}

#[test]
fn a_fifo_in_the_workspace_stalls_neither_a_restricted_block_nor_an_agent_snapshot() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    std::fs::create_dir_all(ws.join("notes")).unwrap();
    mkfifo(&ws.join("pipe"));
    mkfifo(&ws.join("notes/pipe"));
    let agent = repo().join("examples/agents/scripted_agent.py");
    let manifest = write_json(
        &scratch.path().join("wf.json"),
        serde_json::json!({
            "id": "fifo", "start_node": "main",
            "plugins": {"agent": {"grants": ["agent"]}},
            "nodes": {"main": {"entry_block": "note", "blocks": {
                "note": {"worker": "echo", "timeout": "10s",
                         "file_restrictions": ["notes/**", "*.md"],
                         "config": {"write": {"path": "notes/a.txt", "content": "a"}},
                         "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:agent"}]},
                "agent": {"worker": "agent", "timeout": "20s",
                          "file_restrictions": ["src/**"],
                          "config": {"command": [agent.to_str().unwrap(), "--write", "src/b.rs=b"]},
                          "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}
            }}}
        }),
    );
    let args = [
        "run",
        manifest.to_str().unwrap(),
        "-w",
        ws.to_str().unwrap(),
    ];
    let (out, _) = wfhost_within(&args, scratch.path(), Duration::from_secs(60));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes/a.txt")).unwrap(),
        "a"
    );
    assert_eq!(std::fs::read_to_string(ws.join("src/b.rs")).unwrap(), "b");
}

#[test]
fn a_fifo_planted_as_an_agents_output_file_is_not_read() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    std::fs::create_dir_all(ws.join(".output")).unwrap();
    mkfifo(&ws.join(".output/block-main.agent.json"));
    let agent = repo().join("examples/agents/scripted_agent.py");
    let manifest = write_json(
        &scratch.path().join("wf.json"),
        serde_json::json!({
            "id": "fifo-output", "start_node": "main",
            "plugins": {"agent": {"grants": ["agent"]}},
            "nodes": {"main": {"entry_block": "agent", "blocks": {
                "agent": {"worker": "agent", "timeout": "20s",
                          "config": {"command": [agent.to_str().unwrap(), "--no-output"]},
                          "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}
            }}}
        }),
    );
    let args = [
        "run",
        manifest.to_str().unwrap(),
        "-w",
        ws.to_str().unwrap(),
    ];
    let (out, took) = wfhost_within(&args, scratch.path(), Duration::from_secs(60));
    // No output file to read: the block fails, at once, not at a deadline.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(took < Duration::from_secs(15), "{took:?}");
}
