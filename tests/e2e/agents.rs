//! Agent blocks through the binary, with the scripted agents of
//! `examples/agents/`: the env contract and prompt as a child process sees
//! them, the JSON protocol and its gate, misbehaving agents in parallel
//! lanes, and a crashed fan-out resumed.

use std::process::Stdio;
use std::time::{Duration, Instant};

use super::*;

fn agents_dir() -> PathBuf {
    repo().join("examples/agents")
}

fn write_manifest(dir: &Path, name: &str, wf: serde_json::Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(&wf).unwrap()).unwrap();
    path
}

pub(super) fn scripted(args: &[&str]) -> serde_json::Value {
    let mut argv = vec![agents_dir().join("scripted_agent.py").display().to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    serde_json::json!(argv)
}

fn payload_text(report: &serde_json::Value) -> String {
    report["payload"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["content"].as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_real_child_sees_the_env_contract_and_the_prompt_in_seed_order() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let dump = scratch.path().join("seen.json");
    let wf = serde_json::json!({
        "id": "contract",
        "rules": "RULE: stay in the workspace.",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "first",
        "nodes": {
            "first": {"entry_block": "hello", "blocks": {"hello": {
                "worker": "echo",
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:dev.implement"}]
            }}},
            "dev": {"entry_block": "implement", "blocks": {"implement": {
                "worker": "agent",
                "file_restrictions": ["src/**"],
                "prompt": {"prefix": "PREFIX: senior dev.", "task": "TASK: add a file.", "output_checklist": ["first item", "second item"]},
                "config": {"command": scripted(&["--dump-context", dump.to_str().unwrap(), "--write", "src/a.rs=a"])},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
            }}}
        }
    });
    let m = write_manifest(scratch.path(), "wf.json", wf);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    let seen: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&dump).unwrap()).unwrap();
    let env = &seen["env"];
    let ws_real = ws.path().canonicalize().unwrap();
    assert_eq!(env["WORKFLOW_ID"], "contract");
    assert_eq!(env["EXECUTION_ID"], report["run_id"]);
    assert_eq!(env["NODE_ID"], "dev.implement");
    assert_eq!(env["STEP_INDEX"], "1");
    assert_eq!(env["FILE_RESTRICTIONS"], r#"["src/**"]"#);
    // The run serves telemetry: an address of this invocation's own.
    assert_eq!(env["TELEMETRY_ENABLED"], "1");
    let url = env["TELEMETRY_URL"].as_str().unwrap();
    // `/telemetry/<hub>/<token>`: both unguessable.
    let parts: Vec<&str> = url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split_once("/telemetry/"))
        .map(|(_, path)| path.split('/').collect())
        .unwrap_or_else(|| panic!("{url}"));
    assert_eq!(parts.len(), 2, "{url}");
    for part in parts {
        assert!(
            part.len() == 32 && part.bytes().all(|b| b.is_ascii_hexdigit()),
            "{url}"
        );
    }
    assert_eq!(
        env["OUTPUT_DIR"],
        ws_real.join(".output").display().to_string()
    );
    assert_eq!(env["PREVIOUS_BLOCK_ID"], "first.hello");
    assert_eq!(seen["cwd"], ws_real.display().to_string());
    let prompt = seen["prompt"].as_str().unwrap();
    assert!(
        prompt.starts_with(
            "RULE: stay in the workspace.\n\nPREFIX: senior dev.\n\nTASK: add a file.\n\n\
             Only modify files matching: src/**. Other files are read-only, except the .output/ directory, which is always writable.\n\n\
             You must produce the following outputs:\n1) first item\n2) second item\n\n\
             When you are done, write your result as one JSON object to the file `.output/block-dev.implement.json`"
        ),
        "{prompt}"
    );
    // The engine created .output/ and the agent's output is there, checked.
    let output: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ws.path().join(".output/block-dev.implement.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(output["status"], "completed");
    assert_eq!(output["filesCreated"], serde_json::json!(["src/a.rs"]));
}

/// An agent that knows nothing of wfhost's contract and does what its
/// prompt says — writes the example the prompt shows where the prompt says
/// — succeeds, restrictions or not, whatever its block type.
/// `FILE_RESTRICTIONS` tells a read-only block (`[]` in the manifest:
/// only `.output/` may change) from an unrestricted one (`[]` in the env,
/// as seed 000 says).
#[test]
fn file_restrictions_tell_read_only_from_unrestricted() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (ro, free) = (
        scratch.path().join("ro.json"),
        scratch.path().join("free.json"),
    );
    let wf = serde_json::json!({
        "id": "restrictions",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "main",
        "nodes": {"main": {"entry_block": "look", "blocks": {
            "look": {
                "worker": "agent",
                "file_restrictions": [],
                "config": {"command": scripted(&["--dump-context", ro.to_str().unwrap()])},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:change"}]
            },
            "change": {
                "worker": "agent",
                "config": {"command": scripted(&["--dump-context", free.to_str().unwrap()])},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
            }
        }}}
    });
    let m = write_manifest(scratch.path(), "wf.json", wf);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    let env = |file: &Path| -> serde_json::Value {
        let seen: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        seen["env"]["FILE_RESTRICTIONS"].clone()
    };
    assert_eq!(env(&ro), r#"[".output/**"]"#);
    assert_eq!(env(&free), "[]");
}

#[test]
fn an_agent_that_follows_its_prompt_writes_a_valid_output() {
    let scratch = tempfile::tempdir().unwrap();
    for (role, block_type) in [("dev", "dev"), ("plan", "plan"), ("review", "review")] {
        let ws = tempfile::tempdir().unwrap();
        let wf = serde_json::json!({
            "id": "prompted",
            "plugins": {"agent": {"grants": ["agent"]}},
            "start_node": "docs",
            "nodes": {"docs": {"entry_block": "write", "blocks": {"write": {
                "worker": "agent",
                "file_restrictions": ["docs/**"],
                "config": {
                    "command": scripted(&["--as-prompted", "--role", role]),
                    "block_type": block_type
                },
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
            }}}}
        });
        let m = write_manifest(scratch.path(), "wf.json", wf);
        let (code, report) = run_report(&m, ws.path(), scratch.path());
        assert_eq!(code, Some(0), "{block_type}: {report}");
    }
}

#[test]
fn output_defects_and_restriction_violations_are_signalled_with_reasons() {
    let scratch = tempfile::tempdir().unwrap();
    for (args, on_violation, signal, reason) in [
        (vec!["--no-output"], "rollback", "SIGNAL:FAILED", "wrote no"),
        (
            vec!["--bad-json"],
            "rollback",
            "SIGNAL:FAILED",
            "not valid block output JSON",
        ),
        (
            vec!["--wrong-block-id"],
            "rollback",
            "SIGNAL:FAILED",
            "is for block `someone-else`",
        ),
        (
            vec!["--bad-status"],
            "rollback",
            "SIGNAL:FAILED",
            "not valid block output JSON",
        ),
        (
            vec!["--status", "partial"],
            "rollback",
            "SIGNAL:PARTIAL",
            "agent dev.implement -> SIGNAL:PARTIAL",
        ),
        (
            vec!["--write-outside", "README=defaced"],
            "rollback",
            "SIGNAL:SUCCESS",
            "outside the file restrictions (rolled back): README",
        ),
        (
            vec!["--write-outside", "README=defaced"],
            "fail",
            "SIGNAL:FAILED",
            "left in place; the block fails",
        ),
    ] {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("README"), "readme\n").unwrap();
        let wf = serde_json::json!({
            "id": "defects",
            "plugins": {"agent": {"grants": ["agent"]}},
            "start_node": "dev",
            "nodes": {"dev": {"entry_block": "implement", "blocks": {"implement": {
                "worker": "agent",
                "file_restrictions": ["src/**"],
                "config": {"command": scripted(&args), "on_violation": on_violation},
                "transitions": [{"on_signal": signal, "action": "END"}]
            }}}}
        });
        let m = write_manifest(scratch.path(), "wf.json", wf);
        let (code, report) = run_report(&m, ws.path(), scratch.path());
        assert_eq!(code, Some(0), "{args:?}: {report}");
        let text = payload_text(&report);
        assert!(text.contains(reason), "{args:?}: `{reason}` not in {text}");
        let readme = std::fs::read_to_string(ws.path().join("README")).unwrap();
        assert_eq!(readme == "readme\n", on_violation == "rollback", "{args:?}");
    }
}

/// A rolled-back change outside the restrictions is never quiet: the run's
/// screen and `show` say so, though the block succeeded.
#[test]
fn a_rolled_back_violation_is_shown_on_the_screen_and_in_show() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    std::fs::write(ws.join("README"), "readme\n").unwrap();
    let wf = serde_json::json!({
        "id": "quiet",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "implement", "blocks": {"implement": {
            "worker": "agent",
            "file_restrictions": ["src/**"],
            "config": {"command": scripted(&["--write-outside", "README=defaced"])},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    });
    let m = write_manifest(scratch.path(), "wf.json", wf);
    let out = run_workflow(&m, &ws, scratch.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = "changes outside the file restrictions were rolled back: README";
    assert!(stdout(&out).contains(said), "{}", stdout(&out));
    let id = stdout(&out).split_whitespace().nth(1).unwrap().to_string();
    let show = wfhost(&["show", &id], scratch.path());
    assert!(stdout(&show).contains(said), "{}", stdout(&show));
    let json = wfhost(&["show", &id, "--json"], scratch.path());
    assert!(stdout(&json).contains("\"warnings\""), "{}", stdout(&json));
}

#[test]
fn the_json_protocol_maps_statuses_and_needs_decision_opens_a_gate() {
    let scratch = tempfile::tempdir().unwrap();
    let json_agent = agents_dir().join("json_agent.py").display().to_string();
    let wf = |args: &[&str], transitions: serde_json::Value| {
        let mut command = vec![json_agent.clone()];
        command.extend(args.iter().map(|a| a.to_string()));
        serde_json::json!({
            "id": "protocol",
            "plugins": {"agent": {"grants": ["agent"]}},
            "start_node": "dev",
            "nodes": {"dev": {"entry_block": "implement", "blocks": {"implement": {
                "worker": "agent",
                "config": {
                    "command": command,
                    "protocol": "json",
                    "prompt_delivery": "argument",
                    "input": {"task": {"id": "T-001", "title": "Add subtract", "goal": "calc.subtract works"}}
                },
                "transitions": transitions
            }}}}
        })
    };
    for (status, signal) in [
        ("OK", "SIGNAL:SUCCESS"),
        ("BLOCKED", "SIGNAL:BLOCKED"),
        ("NEEDS_INFO", "SIGNAL:NEEDS_INFO"),
        ("FAIL", "SIGNAL:FAIL"),
    ] {
        let ws = tempfile::tempdir().unwrap();
        let m = write_manifest(
            scratch.path(),
            "wf.json",
            wf(
                &["--status", status],
                serde_json::json!([{"on_signal": signal, "action": "END"}]),
            ),
        );
        let (code, report) = run_report(&m, ws.path(), scratch.path());
        assert_eq!(code, Some(0), "{status}: {report}");
    }
    // A valid OK answer from an agent that then exits non-zero is not a
    // success: the block ends with the synthetic failure that says why.
    let ws = tempfile::tempdir().unwrap();
    let m = write_manifest(
        scratch.path(),
        "wf.json",
        wf(
            &["--status", "OK", "--exit", "3"],
            serde_json::json!([{"on_signal": "SIGNAL:FAILED", "action": "END"}]),
        ),
    );
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    assert!(
        payload_text(&report).contains("exited with code 3"),
        "{report}"
    );

    // Prose around the JSON is a protocol error.
    let ws = tempfile::tempdir().unwrap();
    let m = write_manifest(
        scratch.path(),
        "wf.json",
        wf(
            &["--prose"],
            serde_json::json!([{"on_signal": "SIGNAL:PROTOCOL_ERROR", "action": "END"}]),
        ),
    );
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    assert!(payload_text(&report).contains("protocol error"), "{report}");

    // A status the contract reserves to another role is a protocol error
    // that says why: NEEDS_INFO is the Researcher's, not the Coder's.
    let ws = tempfile::tempdir().unwrap();
    let mut coder = wf(
        &["--status", "NEEDS_INFO"],
        serde_json::json!([{"on_signal": "SIGNAL:PROTOCOL_ERROR", "action": "END"}]),
    );
    let block = coder["nodes"]["dev"]["blocks"]["implement"].take();
    coder["nodes"]["dev"]["blocks"] = serde_json::json!({"coder": block});
    coder["nodes"]["dev"]["entry_block"] = "coder".into();
    let m = write_manifest(scratch.path(), "wf.json", coder);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    assert!(
        payload_text(&report).contains(
            "status `NEEDS_INFO` is used by Researcher only, and this block plays the Coder"
        ),
        "{report}"
    );

    // NEEDS_DECISION pauses at a gate whose question is the summary.
    let ws = tempfile::tempdir().unwrap();
    let m = write_manifest(
        scratch.path(),
        "wf.json",
        wf(
            &[
                "--status",
                "NEEDS_DECISION",
                "--summary",
                "Postgres or SQLite?",
            ],
            serde_json::json!([{"on_signal": "SIGNAL:GATE_APPROVED", "action": "END"}]),
        ),
    );
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(3), "{report}");
    assert_eq!(report["gate"]["prompt"], "Postgres or SQLite?");
    let run = report["run_id"].as_str().unwrap();
    let gate = report["gate"]["id"].as_str().unwrap();
    // A plain question takes the answer itself.
    let out = wfhost(&["gate", run, gate, "SQLite"], scratch.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
}

/// A security NEEDS_DECISION with findings asks each as its own decision:
/// a partial answer cancels the ordinary questions left out, asks the
/// security question again, and only an explicit deferral ends it.
#[test]
fn a_security_decision_asks_each_question_and_never_cancels_security_ones() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let json_agent = agents_dir().join("json_agent.py").display().to_string();
    let wf = serde_json::json!({
        "id": "security-decision",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "implement",
        "nodes": {"implement": {"entry_block": "security", "blocks": {"security": {
            "worker": "agent",
            "config": {
                "command": [json_agent, "--status", "NEEDS_DECISION",
                    "--summary", "Two medium findings need a decision.",
                    "--security-concern", "Log the raw session token at debug level?",
                    "--finding", "Keep the session cookie for 30 days?",
                    "--finding", "Allow password reset by e-mail only?"],
                "protocol": "json",
                "prompt_delivery": "argument",
                "input": {"task": {"id": "T-001", "title": "Security", "goal": "check T-001"}}
            },
            "transitions": [{"on_signal": "SIGNAL:GATE_APPROVED", "action": "END"}]
        }}}}
    });
    let m = write_manifest(scratch.path(), "wf.json", wf);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(3), "{report}");
    let run = report["run_id"].as_str().unwrap();
    assert_eq!(report["gate"]["id"], "UD-1");
    let prompt = report["gate"]["prompt"].as_str().unwrap();
    for line in [
        "1. UD-1 [security]: Log the raw session token at debug level?",
        "2. UD-2: Keep the session cookie for 30 days?",
        "3. UD-3: Allow password reset by e-mail only?",
    ] {
        assert!(prompt.contains(line), "{line}\n{prompt}");
    }
    let status = || -> serde_json::Value {
        let dirs: Vec<_> = std::fs::read_dir(ws.path().join(".agents-work"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        let text = std::fs::read_to_string(dirs[0].join("status.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    let decisions = |s: &serde_json::Value| -> Vec<(String, String, serde_json::Value)> {
        s["user_decisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["decision_id"].as_str().unwrap().to_string(),
                    d["status"].as_str().unwrap().to_string(),
                    d["resolution_reason"].clone(),
                )
            })
            .collect()
    };
    let pending = serde_json::Value::Null;
    assert_eq!(
        decisions(&status()),
        [
            ("UD-1".into(), "pending".into(), pending.clone()),
            ("UD-2".into(), "pending".into(), pending.clone()),
            ("UD-3".into(), "pending".into(), pending.clone()),
        ]
    );
    // A question is answered through its gate, not alone; a plain answer
    // to three questions is refused. Neither records anything.
    for (gate, answer, why) in [
        ("UD-2", "yes", "UD-2 is a question of gate UD-1"),
        ("UD-1", "yes", "asks 3 questions"),
    ] {
        let out = wfhost(&["gate", run, gate, answer], scratch.path());
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(why), "{}", stderr(&out));
    }
    // A partial answer: UD-3 answered, UD-2 cancelled for want of a
    // response, the security question asked again.
    let out = wfhost(&["gate", run, "UD-1", r#"{"3": "yes"}"#], scratch.path());
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("1. UD-1 [security]"),
        "{}",
        stderr(&out)
    );
    let s = status();
    assert_eq!(s["current_state"], "ASK_USER", "{s}");
    assert_eq!(
        decisions(&s),
        [
            ("UD-1".into(), "pending".into(), pending.clone()),
            (
                "UD-2".into(),
                "cancelled".into(),
                "no response provided".into()
            ),
            ("UD-3".into(), "answered".into(), pending.clone()),
        ]
    );
    // Still listed as open; an empty answer leaves it open too.
    let gates = wfhost(&["gates", "--json"], scratch.path());
    assert!(stdout(&gates).contains("UD-1"), "{}", stdout(&gates));
    let out = wfhost(&["gate", run, "UD-1", "{}"], scratch.path());
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    // The explicit deferral ends it; the run goes on.
    let out = wfhost(&["gate", run, "ud-1", "defer: next sprint"], scratch.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let s = status();
    assert_eq!(s["current_state"], "DONE", "{s}");
    assert_eq!(
        decisions(&s)[0],
        (
            "UD-1".into(),
            "cancelled".into(),
            "user deferred: next sprint".into()
        )
    );
    let answered = &s["user_decisions"][2];
    assert_eq!(answered["answer"], "yes", "{s}");
    assert!(answered["resolved_at"].is_string(), "{s}");
}

#[test]
fn misbehaving_lanes_fail_alone_and_the_workspace_keeps_its_files() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("src")).unwrap();
    std::fs::write(ws.path().join("README"), "readme\n").unwrap();
    std::fs::write(ws.path().join("src/main.rs"), "fn main() {}\n").unwrap();
    let lane = |args: &[&str]| serde_json::json!({"config": {"command": scripted(args)}});
    let wf = serde_json::json!({
        "id": "unruly",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "implement", "blocks": {"implement": {
            "worker": "agent",
            "timeout": "4s",
            "file_restrictions": ["src/**"],
            "config": {"command": scripted(&[]), "on_violation": "fail"},
            "parallel": {"merge_strategy": "workspace", "lanes": {
                "good": lane(&["--write", "src/good.rs=good"]),
                "flood": lane(&["--flood", "20", "--no-output"]),
                "silent": lane(&["--exit", "0", "--no-output"]),
                "hang": lane(&["--hang"]),
                "escape": lane(&["--write-outside", "README=defaced", "--write", "src/escape.rs=x"])
            }},
            "transitions": [{"on_signal": "SIGNAL:PARTIAL", "action": "END"}]
        }}}}
    });
    let m = write_manifest(scratch.path(), "wf.json", wf);
    let started = Instant::now();
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    assert!(started.elapsed() < Duration::from_secs(60));
    let run = report["run_id"].as_str().unwrap();
    let all = run_events(scratch.path(), run);
    let lanes: std::collections::BTreeMap<String, (String, String)> = all
        .iter()
        .filter(|e| e["type"] == "lane_completed")
        .map(|e| {
            (
                e["lane"].as_str().unwrap().to_string(),
                (
                    e["signal"].as_str().unwrap().to_string(),
                    e["summary"].as_str().unwrap_or_default().to_string(),
                ),
            )
        })
        .collect();
    assert_eq!(lanes["good"].0, "SIGNAL:SUCCESS", "{lanes:?}");
    for (lane, why) in [
        ("flood", "wrote no"),
        ("silent", "wrote no"),
        ("hang", "timed out"),
    ] {
        assert_eq!(lanes[lane].0, "SIGNAL:FAILED", "{lane}: {lanes:?}");
        assert!(lanes[lane].1.contains(why), "{lane}: {lanes:?}");
    }
    assert_eq!(lanes["escape"].0, "SIGNAL:FAILED", "{lanes:?}");
    // Only the good lane's work arrived; nothing was lost.
    assert_eq!(
        std::fs::read_to_string(ws.path().join("src/good.rs")).unwrap(),
        "good"
    );
    assert!(!ws.path().join("src/escape.rs").exists());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("README")).unwrap(),
        "readme\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("src/main.rs")).unwrap(),
        "fn main() {}\n"
    );
    // Every lane's output reached .output/, synthetic or not.
    for lane in ["good", "flood", "silent", "hang", "escape"] {
        assert!(
            ws.path()
                .join(format!(".output/block-dev.implement.{lane}.json"))
                .is_file(),
            "{lane}"
        );
    }
}

#[test]
fn a_crashed_fan_out_resumes_only_its_unfinished_lanes() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let log = scratch.path().join("runs.log");
    let log_arg = log.to_str().unwrap();
    let wf = serde_json::json!({
        "id": "crash",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "implement", "blocks": {"implement": {
            "worker": "agent",
            "timeout": "60s",
            "config": {"command": scripted(&[])},
            "parallel": {"lanes": {
                "fast": {"config": {"command": scripted(&["--log", log_arg, "--write", "fast.txt=f"])}},
                "slow": {"config": {"command": scripted(&["--log", log_arg, "--sleep", "4", "--write", "slow.txt=s"])}}
            }},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    });
    let m = write_manifest(scratch.path(), "wf.json", wf);
    let mut child = command(scratch.path())
        .args([
            "run",
            m.to_str().unwrap(),
            "-w",
            ws.path().to_str().unwrap(),
            "--json",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the fast lane is on record, then kill the host.
    let deadline = Instant::now() + Duration::from_secs(30);
    let run = loop {
        assert!(Instant::now() < deadline, "the fast lane never completed");
        std::thread::sleep(Duration::from_millis(100));
        let out = wfhost(&["runs", "--json"], scratch.path());
        let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let Some(run) = runs.as_array().and_then(|r| r.first()) else {
            continue;
        };
        let run = run["id"].as_str().unwrap().to_string();
        if run_events(scratch.path(), &run)
            .iter()
            .any(|e| e["type"] == "lane_completed" && e["lane"] == "fast")
        {
            break run;
        }
    };
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
    assert!(!ws.path().join("fast.txt").exists(), "nothing merged yet");

    let out = wfhost(&["resume", &run], scratch.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let runs = std::fs::read_to_string(&log).unwrap();
    let count = |id: &str| runs.lines().filter(|l| *l == id).count();
    assert_eq!(count("dev.implement.fast"), 1, "{runs}");
    assert_eq!(count("dev.implement.slow"), 2, "{runs}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("fast.txt")).unwrap(),
        "f"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("slow.txt")).unwrap(),
        "s"
    );
    assert!(!super::parallel::lanes_left(&run));
}

#[test]
fn an_agent_runs_in_a_container_of_a_local_image() {
    if !super::exec::docker_ready() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    // The image has no agent; `cp` puts a prepared output in place, which is
    // what the host must find at /workspace/.output inside the container.
    let prepared = serde_json::json!({
        "blockId": "dev.implement", "blockType": "dev", "status": "completed",
        "deliverables": {"blockType": "code", "filesChanged": [], "diffSummary": "none"},
        "summary": "copied in a container", "filesModified": [], "filesCreated": [],
        "timestamp": "2026-11-22T10:00:00Z"
    });
    std::fs::write(ws.path().join("prepared.json"), prepared.to_string()).unwrap();
    let wf = serde_json::json!({
        "id": "container-agent",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "implement", "blocks": {"implement": {
            "worker": "agent",
            "timeout": "60s",
            "config": {
                "command": ["cp", "/workspace/prepared.json", "/workspace/.output/block-dev.implement.json"],
                "prompt_delivery": "file",
                "executor": {"container": {"image": "wfhost-test/busybox:1"}}
            },
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    });
    let m = write_manifest(scratch.path(), "wf.json", wf);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    assert!(
        payload_text(&report).contains("copied in a container"),
        "{report}"
    );
    let run = report["run_id"].as_str().unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(ws.path().join(format!(
            ".output/agent/{run}/step-0-dev.implement/manifest.json"
        )))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["executor"], "container");
    // The prompt file was visible where the container looked.
    let prompt_file = ws.path().join(format!(
        ".output/agent/{run}/step-0-dev.implement.prompt.md"
    ));
    assert!(prompt_file.is_file());

    // The JSON protocol's input reaches a container command on stdin: `cat`
    // answers with it, which is not a universal output (a protocol error),
    // and the bundle shows what arrived.
    let wf = serde_json::json!({
        "id": "container-agent",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "implement", "blocks": {"implement": {
            "worker": "agent",
            "timeout": "60s",
            "config": {
                "command": ["cat"],
                "protocol": "json",
                "prompt_delivery": "file",
                "input": {"task": {"id": "T-042", "title": "Echo", "goal": "stdin arrives"}},
                "executor": {"container": {"image": "wfhost-test/busybox:1"}}
            },
            "transitions": [{"on_signal": "SIGNAL:PROTOCOL_ERROR", "action": "END"}]
        }}}}
    });
    let m = write_manifest(scratch.path(), "wf2.json", wf);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    let run = report["run_id"].as_str().unwrap();
    let echoed = std::fs::read_to_string(ws.path().join(format!(
        ".output/agent/{run}/step-0-dev.implement/cmd-1.stdout"
    )))
    .unwrap();
    let input: serde_json::Value = serde_json::from_str(&echoed).unwrap();
    assert_eq!(input["task"]["id"], "T-042", "{echoed}");
}

#[test]
fn telemetry_an_agent_sends_lands_in_the_log_attributed_to_its_block() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let statuses = scratch.path().join("statuses.txt");
    let big = format!("{{\"type\": \"big\", \"pad\": \"{}\"}}", "x".repeat(70_000));
    let wf = serde_json::json!({
        "id": "telemetry",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "first",
        "nodes": {
            "first": {"entry_block": "hello", "blocks": {"hello": {
                "worker": "echo",
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:dev.implement"}]
            }}},
            "dev": {"entry_block": "implement", "blocks": {"implement": {
                "worker": "agent",
                "config": {"command": scripted(&[
                    "--telemetry", r#"{"type": "tool_use", "tool": "edit", "node": "first"}"#,
                    "--telemetry", r#"[{"type": "a"}, {"type": "b"}]"#,
                    "--telemetry", "not json",
                    "--telemetry", "[1, 2]",
                    "--telemetry", &big,
                    "--telemetry-log", statuses.to_str().unwrap(),
                    "--write", "a.txt=a",
                ])},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
            }}}
        }
    });
    let m = write_manifest(scratch.path(), "wf.json", wf);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(
        std::fs::read_to_string(&statuses)
            .unwrap()
            .lines()
            .collect::<Vec<_>>(),
        ["202", "202", "400", "400", "413"]
    );
    let events = run_events(scratch.path(), report["run_id"].as_str().unwrap());
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .filter(|k| k.starts_with("block_") || *k == "telemetry")
        .collect();
    assert_eq!(
        kinds,
        [
            "block_started",
            "block_completed",
            "block_started",
            "telemetry",
            "telemetry",
            "telemetry",
            "block_completed"
        ]
    );
    let telemetry: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["type"] == "telemetry").collect();
    // Attributed by the address it came to, whatever the body says.
    for t in &telemetry {
        assert_eq!(
            (&t["node"], &t["block"], &t["step"]),
            (&"dev".into(), &"implement".into(), &1.into())
        );
    }
    let types: Vec<&str> = telemetry
        .iter()
        .map(|t| t["body"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["tool_use", "a", "b"]);
    assert_eq!(telemetry[0]["body"]["node"], "first");
    // And shown with the run's events.
    let text = stdout(&wfhost(
        &["events", report["run_id"].as_str().unwrap()],
        scratch.path(),
    ));
    assert!(
        text.contains("telemetry from dev.implement: tool_use"),
        "{text}"
    );
}

/// The contract's context files: each must exist before the agent runs;
/// `{session}` in the input names the run's session folder, which agents
/// also get as `SESSION_DIR`.
#[test]
fn a_missing_context_file_blocks_the_agent_before_it_runs() {
    let scratch = tempfile::tempdir().unwrap();
    let json_agent = agents_dir().join("json_agent.py").display().to_string();
    let dump = scratch.path().join("coder-context.json");
    let wf = |spec_writes: &[&str]| {
        let mut spec = vec![json_agent.clone()];
        for w in spec_writes {
            spec.extend(["--write".to_string(), w.to_string()]);
        }
        let coder = vec![
            json_agent.clone(),
            "--dump-context".into(),
            dump.display().to_string(),
        ];
        let agent = |command: Vec<String>, files: serde_json::Value, next: &str| {
            serde_json::json!({
                "worker": "agent",
                "config": {
                    "command": command,
                    "protocol": "json",
                    "prompt_delivery": "argument",
                    "input": {"task": {"id": "T-001", "title": "t", "goal": "g", "context_files": files}}
                },
                "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": next},
                    {"on_signal": "SIGNAL:BLOCKED", "action": "END"}
                ]
            })
        };
        serde_json::json!({
            "id": "context",
            "plugins": {"agent": {"grants": ["agent"]}},
            "start_node": "team",
            "nodes": {"team": {"entry_block": "spec", "blocks": {
                "spec": agent(spec, serde_json::json!([]), "JUMP:code"),
                "code": agent(coder, serde_json::json!(["{session}/spec.md", "{session}/architecture.md"]), "END")
            }}}
        })
    };
    let ws = tempfile::tempdir().unwrap();
    let m = write_manifest(
        scratch.path(),
        "wf.json",
        wf(&["{session}/spec.md=# Goals\\nx\\n"]),
    );
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    let text = payload_text(&report);
    assert!(
        text.contains("BLOCKED: context file `.agents-work/")
            && text.contains("/architecture.md` is missing"),
        "{text}"
    );
    assert!(!dump.exists(), "the agent ran without its context files");

    let ws = tempfile::tempdir().unwrap();
    let m = write_manifest(
        scratch.path(),
        "wf.json",
        wf(&[
            "{session}/spec.md=# Goals\\nx\\n",
            "{session}/architecture.md=# Overview\\ny\\n",
        ]),
    );
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    let seen: serde_json::Value = serde_json::from_slice(&std::fs::read(&dump).unwrap()).unwrap();
    let session = seen["env"]["SESSION_DIR"].as_str().unwrap();
    assert!(
        session.starts_with(".agents-work/") && ws.path().join(session).is_dir(),
        "{seen}"
    );
    assert_eq!(
        seen["input"]["task"]["context_files"][0],
        format!("{session}/spec.md"),
        "{seen}"
    );
}

/// `repo_state` is read from the repository: git's branch, and the CI
/// result an earlier block recorded in the session's status.json.
#[test]
fn repo_state_comes_from_the_repository_and_the_recorded_ci_result() {
    let scratch = tempfile::tempdir().unwrap();
    let json_agent = agents_dir().join("json_agent.py").display().to_string();
    let dump = scratch.path().join("coder-context.json");
    let agent = |command: Vec<String>, next: &str| {
        serde_json::json!({
            "worker": "agent",
            "config": {
                "command": command,
                "protocol": "json",
                "prompt_delivery": "argument",
                "input": {"task": {"id": "T-001", "title": "t", "goal": "g"}}
            },
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": next}]
        })
    };
    let ci = vec![
        json_agent.clone(),
        "--write".into(),
        r#"{session}/status.json={"last_ci_result": "red", "last_failed_step": "cargo test"}"#
            .into(),
    ];
    let coder = vec![
        json_agent.clone(),
        "--dump-context".into(),
        dump.display().to_string(),
    ];
    let wf = serde_json::json!({
        "id": "repo-state",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "team",
        "nodes": {"team": {"entry_block": "ci", "blocks": {
            "ci": agent(ci, "JUMP:code"),
            "code": agent(coder, "END")
        }}}
    });
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".git")).unwrap();
    std::fs::write(
        ws.path().join(".git/HEAD"),
        "ref: refs/heads/feature/login\n",
    )
    .unwrap();
    let m = write_manifest(scratch.path(), "wf.json", wf);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    let seen: serde_json::Value = serde_json::from_slice(&std::fs::read(&dump).unwrap()).unwrap();
    assert_eq!(
        seen["input"]["repo_state"],
        serde_json::json!({"branch": "feature/login", "ci_status": "red", "last_failed_step": "cargo test"}),
        "{seen}"
    );
}

/// A team's tasks.yaml belongs to its agents once the Planner writes it:
/// the host stops projecting it, refuses (and undoes) an edit that breaks
/// the task lifecycle, and promotes `implemented` to `completed` when the
/// run succeeds.
#[test]
fn the_task_lifecycle_is_enforced_on_the_agents_tasks_yaml() {
    let scratch = tempfile::tempdir().unwrap();
    let json_agent = agents_dir().join("json_agent.py").display().to_string();
    let task = |status: &str| {
        format!(
            "{{session}}/tasks.yaml=tasks:\\n  - id: T-001\\n    goal: add subtract\\n    status: {status}\\n    acceptance_checks: [\"cmd: make test\"]\\n"
        )
    };
    let wf = |coder_sets: &str| {
        let agent = |block_type: &str, write: String, next: &str| {
            serde_json::json!({
                "worker": "agent",
                "config": {
                    "command": [json_agent.clone(), "--write", write],
                    "protocol": "json",
                    "prompt_delivery": "argument",
                    "block_type": block_type,
                    "input": {"task": {"id": "T-001", "title": "t", "goal": "g"}}
                },
                "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": next},
                    {"on_signal": "SIGNAL:BLOCKED", "action": "FAIL:the coder broke the task lifecycle"}
                ]
            })
        };
        serde_json::json!({
            "id": "lifecycle",
            "plugins": {"agent": {"grants": ["agent"]}},
            "start_node": "team",
            "nodes": {"team": {"entry_block": "plan", "blocks": {
                "plan": agent("plan", task("not-started"), "JUMP:code"),
                "code": agent("dev", task(coder_sets), "END")
            }}}
        })
    };
    let session_tasks = |ws: &Path| {
        let sessions: Vec<PathBuf> = std::fs::read_dir(ws.join(".agents-work"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        std::fs::read_to_string(sessions[0].join("tasks.yaml")).unwrap()
    };

    // A Coder may not complete its own task: undone, and the block is BLOCKED.
    let ws = tempfile::tempdir().unwrap();
    let m = write_manifest(scratch.path(), "wf.json", wf("completed"));
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(1), "{report}");
    let text = payload_text(&report);
    assert!(
        text.contains("task `T-001`: `not-started` → `completed`") && text.contains("(undone)"),
        "{text}"
    );
    let tasks = session_tasks(ws.path());
    assert!(
        tasks.contains("status: not-started") && !tasks.contains("wfhost"),
        "{tasks}"
    );

    // `implemented` is the Coder's to set; the host completes it at the end.
    let ws = tempfile::tempdir().unwrap();
    let m = write_manifest(scratch.path(), "wf.json", wf("implemented"));
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    let tasks = session_tasks(ws.path());
    assert!(tasks.contains("status: completed"), "{tasks}");
}

/// `tasks.yaml` nested `levels` deep in block style (`- - - …`), 2 bytes a
/// level: the 2 KB file that took the host down (issue 36), as a
/// `--write` of the JSON agent.
pub(super) fn deep_tasks_write(levels: usize) -> String {
    format!(
        "{{session}}/tasks.yaml=tasks:\\n  {}x\\n",
        "- ".repeat(levels)
    )
}

/// A workflow of one JSON agent block, `team.plan` (a Planner), running
/// `json_agent.py` with `args`; SIGNAL:SUCCESS ends the run, any other
/// signal fails it.
pub(super) fn one_planner(args: &[String]) -> serde_json::Value {
    let mut command = vec![agents_dir().join("json_agent.py").display().to_string()];
    command.extend(args.iter().cloned());
    serde_json::json!({
        "id": "deep-tasks",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "team",
        "nodes": {"team": {"entry_block": "plan", "blocks": {"plan": {
            "worker": "agent",
            "config": {
                "command": command,
                "protocol": "json",
                "prompt_delivery": "argument",
                "block_type": "plan",
                "input": {"task": {"id": "T-001", "title": "t", "goal": "g"}}
            },
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    })
}

/// An agent's `tasks.yaml` nested 1,000 levels deep used to overflow the
/// stack of the fiber its check ran on (exit 134, no error line). It is
/// refused before it is parsed: undone, the block BLOCKED with the file
/// and the limit, the run failed like any other, with an error line.
#[test]
fn a_tasks_yaml_nested_a_thousand_levels_deep_blocks_the_agent_not_the_host() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    let m = write_manifest(
        scratch.path(),
        "wf.json",
        one_planner(&["--write".into(), deep_tasks_write(1_000)]),
    );
    let out = run_workflow(&m, &ws, scratch.path());
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("team.plan -> SIGNAL:BLOCKED"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).starts_with("error: block `team.plan` emitted `SIGNAL:BLOCKED`"),
        "{}",
        stderr(&out)
    );
    let run = stdout(&out).split_whitespace().nth(1).unwrap().to_string();
    let events = serde_json::Value::from(run_events(scratch.path(), &run)).to_string();
    assert!(
        events.contains("/tasks.yaml: nested more than 64 levels deep (the host's limit) (undone)"),
        "{events}"
    );
    // Undone: the Planner's file is gone (there was none before it).
    let sessions: Vec<PathBuf> = std::fs::read_dir(ws.join(".agents-work"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    let tasks = std::fs::read_to_string(sessions[0].join("tasks.yaml")).unwrap_or_default();
    assert!(!tasks.contains("- - -"), "{tasks}");
}

/// The host dies after an agent edited `tasks.yaml` and before the edit
/// was checked; the block runs again on resume (as a requeued job does
/// under `wfhost serve`) and makes the same edit. It is checked against
/// the file as it was before the first attempt, not the one the
/// unchecked attempt left: the illegal change is still refused.
#[test]
fn an_edit_left_unchecked_by_a_dead_host_is_checked_when_the_block_runs_again() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let pause = s.join("pause");
    let json_agent = agents_dir().join("json_agent.py").display().to_string();
    let task = |status: &str| {
        format!(
            "{{session}}/tasks.yaml=tasks:\\n  - id: T-001\\n    goal: add subtract\\n    status: {status}\\n    acceptance_checks: [\"cmd: make test\"]\\n"
        )
    };
    let agent = |block_type: &str, args: Vec<String>, next: &str| {
        let mut command = vec![json_agent.clone()];
        command.extend(args);
        serde_json::json!({
            "worker": "agent",
            "config": {
                "command": command,
                "protocol": "json",
                "prompt_delivery": "argument",
                "block_type": block_type,
                "input": {"task": {"id": "T-001", "title": "t", "goal": "g"}}
            },
            "transitions": [
                {"on_signal": "SIGNAL:SUCCESS", "action": next},
                {"on_signal": "SIGNAL:BLOCKED", "action": "FAIL:the coder broke the task lifecycle"}
            ]
        })
    };
    // A Coder that completes its own task (not its to set), pausing once
    // its edit is made.
    let coder = vec![
        "--write".to_string(),
        task("completed"),
        "--pause-after-writes".into(),
        pause.display().to_string(),
    ];
    let wf = serde_json::json!({
        "id": "unchecked",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "team",
        "nodes": {"team": {"entry_block": "plan", "blocks": {
            "plan": agent("plan", vec!["--write".into(), task("not-started")], "JUMP:code"),
            "code": agent("dev", coder, "END")
        }}}
    });
    let m = write_manifest(s, "wf.json", wf);
    std::fs::write(&pause, "").unwrap();
    let mut child = command(s)
        .args(["run", m.to_str().unwrap(), "-w", ws.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = loop {
        let text = std::fs::read_to_string(&pause).unwrap();
        if !text.trim().is_empty() {
            break text.trim().to_string();
        }
        assert!(Instant::now() < deadline, "the Coder never made its edit");
        std::thread::sleep(Duration::from_millis(20));
    };
    // The host dies between the Coder's edit and its check.
    child.kill().unwrap(); // SIGKILL, the process this test started
    child.wait().unwrap();
    std::fs::remove_file(&pause).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new("/proc").join(&pid).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let sessions: Vec<PathBuf> = std::fs::read_dir(ws.join(".agents-work"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    let tasks = || std::fs::read_to_string(sessions[0].join("tasks.yaml")).unwrap();
    assert!(tasks().contains("status: completed"), "{}", tasks());

    let out = wfhost(&["runs", "--json"], s);
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = runs[0]["id"].as_str().unwrap().to_string();
    let out = wfhost(&["resume", &run, "--json"], s);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = payload_text(&report);
    assert!(
        text.contains("task `T-001`: `not-started` → `completed`") && text.contains("(undone)"),
        "{text}"
    );
    assert!(tasks().contains("status: not-started"), "{}", tasks());
    assert!(
        !sessions[0].join(".tasks.yaml.before").exists(),
        "the record outlived its check"
    );
}

/// A Reviewer's input lists what the session changed, as the host
/// detected it: added, modified, deleted, and renamed with the old path.
#[test]
fn a_reviewer_gets_the_sessions_changed_files() {
    let scratch = tempfile::tempdir().unwrap();
    let json_agent = agents_dir().join("json_agent.py").display().to_string();
    let dump = scratch.path().join("reviewer.json");
    let agent = |block_type: &str, args: &[&str], next: &str| {
        let mut command = vec![json_agent.clone()];
        command.extend(args.iter().map(|a| a.to_string()));
        serde_json::json!({
            "worker": "agent",
            "config": {
                "command": command,
                "protocol": "json",
                "prompt_delivery": "argument",
                "block_type": block_type,
                "input": {"task": {"id": "T-001", "title": "t", "goal": "g"}}
            },
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": next}]
        })
    };
    let wf = serde_json::json!({
        "id": "review",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "team",
        "nodes": {"team": {"entry_block": "code", "blocks": {
            "code": agent("dev", &[
                "--write", "src/app.py=print(2)\\n",
                "--write", "src/new.py=x = 1\\n",
                "--move", "src/old.py=src/moved.py",
            ], "JUMP:clean"),
            "clean": agent("dev", &["--move", "src/gone.py=src/tmp.py", "--write", "src/tmp.py=y\\n"], "JUMP:review"),
            "review": agent("review", &["--dump-context", dump.to_str().unwrap()], "END")
        }}}
    });
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("src")).unwrap();
    for (file, text) in [
        ("app.py", "print(1)\n"),
        ("old.py", "old\n"),
        ("gone.py", "gone\n"),
    ] {
        std::fs::write(ws.path().join("src").join(file), text).unwrap();
    }
    let m = write_manifest(scratch.path(), "wf.json", wf);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    let seen: serde_json::Value = serde_json::from_slice(&std::fs::read(&dump).unwrap()).unwrap();
    assert_eq!(
        seen["input"]["task"]["session_changed_files"],
        serde_json::json!([
            {"path": "src/app.py", "change_type": "modified"},
            {"path": "src/moved.py", "change_type": "renamed", "old_path": "src/old.py"},
            {"path": "src/new.py", "change_type": "added"},
            {"path": "src/tmp.py", "change_type": "renamed", "old_path": "src/gone.py"}
        ]),
        "{seen}"
    );
}

/// Earlier sessions' folders are read-only: what an agent changes there
/// is undone and the block ends BLOCKED, naming the files.
#[test]
fn earlier_sessions_are_read_only_to_agents() {
    let scratch = tempfile::tempdir().unwrap();
    let json_agent = agents_dir().join("json_agent.py").display().to_string();
    let old = ".agents-work/2026-01-02_earlier-101010-aaaaaa";
    let wf = serde_json::json!({
        "id": "past",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "team",
        "nodes": {"team": {"entry_block": "code", "blocks": {"code": {
            "worker": "agent",
            "config": {
                "command": [
                    json_agent, "--write", format!("{old}/spec.md=# rewritten\\n"),
                    "--write", format!("{old}/new.md=planted\\n"),
                    "--write", "{session}/notes.md=mine\\n"
                ],
                "protocol": "json",
                "prompt_delivery": "argument",
                "input": {"task": {"id": "T-001", "title": "t", "goal": "g"}}
            },
            "transitions": [
                {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                {"on_signal": "SIGNAL:BLOCKED", "action": "FAIL:an earlier session was changed"}
            ]
        }}}}
    });
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(old)).unwrap();
    std::fs::write(ws.path().join(old).join("spec.md"), "# Goals\nthen\n").unwrap();
    let m = write_manifest(scratch.path(), "wf.json", wf);
    let (code, report) = run_report(&m, ws.path(), scratch.path());
    assert_eq!(code, Some(1), "{report}");
    let text = payload_text(&report);
    assert!(
        text.contains("earlier sessions are read-only")
            && text.contains(&format!("{old}/spec.md"))
            && text.contains(&format!("{old}/new.md")),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join(old).join("spec.md")).unwrap(),
        "# Goals\nthen\n"
    );
    assert!(!ws.path().join(old).join("new.md").exists());
    // The run's own session folder is the agent's to write.
    assert!(!text.contains("notes.md"), "{text}");
}

/// An agent that exits without reading the prompt wfhost writes to its
/// stdin (more than a pipe holds) fails its block; it never takes wfhost
/// down with it (a broken pipe is the agent's, not the host's).
#[test]
fn an_agent_that_never_reads_its_prompt_fails_its_block_not_the_host() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let wf = serde_json::json!({
        "id": "unread",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "implement", "blocks": {"implement": {
            "worker": "agent",
            "prompt": {"task": "x".repeat(256 << 10)},
            "config": {"command": ["true"]},
            "transitions": [{"on_signal": "SIGNAL:FAILED", "action": "END"}]
        }}}}
    });
    let m = write_manifest(scratch.path(), "wf.json", wf);
    for _ in 0..3 {
        let (code, report) = run_report(&m, ws.path(), scratch.path());
        assert_eq!(code, Some(0), "{report}");
        assert!(payload_text(&report).contains("wrote no"), "{report}");
    }
}
