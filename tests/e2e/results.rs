//! What a run produced, in plain sight: the end of `run`, `show`, `logs`,
//! their JSON and the API name the run's result (the last output) and the
//! files its blocks wrote.

use super::run::write_manifest;
use super::serve::{http_get, serve};
use super::{run_workflow, stderr, stdout, wfhost, workspace_in};

fn notes_then_summary(dir: &std::path::Path) -> std::path::PathBuf {
    write_manifest(
        dir,
        serde_json::json!({
            "id": "results", "start_node": "main",
            "nodes": {"main": {"entry_block": "notes", "blocks": {
                "notes": {
                    "worker": "echo",
                    "config": {"message": "notes written",
                               "write": {"path": "docs/notes.md", "content": "# Notes\n"}},
                    "file_restrictions": ["docs/**"],
                    "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:summary"}]
                },
                "summary": {
                    "worker": "echo",
                    "config": {"message": "all done\nsee docs/notes.md"},
                    "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
                }
            }}}
        }),
    )
}

#[test]
fn the_result_and_the_files_written_are_shown_by_run_show_logs_and_the_api() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let manifest = notes_then_summary(s);
    let out = run_workflow(&manifest, &ws, s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("result (ECHO):\n  all done\n  see docs/notes.md\nwrote: docs/notes.md"),
        "{text}"
    );
    let runs: serde_json::Value =
        serde_json::from_slice(&wfhost(&["runs", "--json"], s).stdout).unwrap();
    let id = runs[0]["id"].as_str().unwrap().to_string();

    let shown: serde_json::Value =
        serde_json::from_slice(&wfhost(&["show", &id, "--json"], s).stdout).unwrap();
    assert_eq!(
        shown["result"]["content"], "all done\nsee docs/notes.md",
        "{shown:#}"
    );
    assert_eq!(shown["result"]["type"], "ECHO", "{shown:#}");
    assert_eq!(
        shown["written"],
        serde_json::json!(["docs/notes.md"]),
        "{shown:#}"
    );
    let text = stdout(&wfhost(&["show", &id], s));
    assert!(text.contains("result (ECHO):\n  all done"), "{text}");
    assert!(text.contains("wrote: docs/notes.md"), "{text}");

    // Each block's own output and files in the logs.
    let logs = stdout(&wfhost(&["logs", &id], s));
    assert!(
        logs.contains("[0] main.notes -> SIGNAL:SUCCESS")
            && logs.contains("  output (ECHO): notes written\n  wrote: docs/notes.md"),
        "{logs}"
    );
    assert!(
        logs.contains("  output (ECHO): all done\n    see docs/notes.md"),
        "{logs}"
    );

    // The API's run has them too (the dashboard's result panel reads it).
    let served = serve(s);
    let (code, run) = http_get(&served.addr, &format!("/v1/runs/{id}"));
    assert_eq!(code, 200, "{run}");
    assert_eq!(run["result"], shown["result"], "{run:#}");
    assert_eq!(run["written"], shown["written"], "{run:#}");
}

#[test]
fn run_json_carries_the_result_and_quiet_leaves_it_out() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let manifest = notes_then_summary(s);
    let out = super::command(s)
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["result"]["content"], "all done\nsee docs/notes.md",
        "{report:#}"
    );
    assert_eq!(
        report["written"],
        serde_json::json!(["docs/notes.md"]),
        "{report:#}"
    );
    // `-q`: only where the run came to rest.
    let quiet = super::command(s)
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "-q",
        ])
        .output()
        .unwrap();
    assert!(!stdout(&quiet).contains("result ("), "{}", stdout(&quiet));
}
