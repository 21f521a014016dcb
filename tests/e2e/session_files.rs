//! `.agents-work/<session>/status.json` and `tasks.yaml`: the run's
//! projections, kept current in the workspace at every transition.

use super::*;

fn review_gate() -> PathBuf {
    repo().join("examples/review-gate/workflow.json")
}

fn json_of(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", stdout(o), stderr(o)))
}

/// The session folders of `ws`, sorted by name.
fn sessions(ws: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(ws.join(".agents-work"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    dirs.sort();
    dirs
}

fn status(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("status.json")).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn tasks(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("tasks.yaml")).unwrap()
}

/// Both files, to check a folder was left alone.
fn contents(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    (
        std::fs::read(dir.join("status.json")).unwrap(),
        std::fs::read(dir.join("tasks.yaml")).unwrap(),
    )
}

/// `status: <s>` of task `id` in a tasks.yaml.
fn task_status(yaml: &str, id: &str) -> String {
    let at = yaml
        .find(&format!("- id: \"{id}\""))
        .unwrap_or_else(|| panic!("no task {id}: {yaml}"));
    let rest = &yaml[at..];
    let line = rest
        .lines()
        .find(|l| l.trim_start().starts_with("status: "))
        .unwrap();
    line.trim_start()["status: ".len()..].to_string()
}

fn start(ws: &Path, scratch: &Path) -> (Output, String) {
    let out = wfhost(
        &[
            "run",
            review_gate().to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--json",
        ],
        scratch,
    );
    let id = json_of(&out)["run_id"].as_str().unwrap().to_string();
    (out, id)
}

#[test]
fn status_and_tasks_follow_a_gated_run_in_a_folder_per_run() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (s, w) = (scratch.path(), ws.path());

    let (out, id) = start(w, s);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("warning"),
        "the files were written: {}",
        stderr(&out)
    );
    let dirs = sessions(w);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let first = dirs[0].clone();
    // `run-YYYYMMDD-HHMMSS-xxxxxx` → `YYYY-MM-DD_review-gate-HHMMSS-xxxxxx`.
    let (date, rest) = id["run-".len()..].split_at(8);
    let name = first.file_name().unwrap().to_str().unwrap();
    assert_eq!(
        name,
        format!(
            "{}-{}-{}_review-gate{rest}",
            &date[..4],
            &date[4..6],
            &date[6..]
        )
    );

    let waiting = status(&first);
    assert_eq!(waiting["current_state"], "ASK_USER", "{waiting}");
    assert_eq!(waiting["session"], name);
    assert_eq!(waiting["last_ci_result"], "unknown");
    let decisions = waiting["user_decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 1, "{waiting}");
    let ud1 = &decisions[0];
    assert_eq!(ud1["decision_id"], "UD-1");
    assert_eq!(ud1["question"], "Approve the plan?");
    assert_eq!(ud1["status"], "pending");
    assert_eq!(ud1["answer"], serde_json::Value::Null);
    assert_eq!(ud1["resolved_at"], serde_json::Value::Null);
    assert_eq!(ud1["resolution_reason"], serde_json::Value::Null);
    assert_eq!(ud1["state_context"], "IMPLEMENT_LOOP");
    let asked_at = ud1["asked_at"].as_str().unwrap();
    assert!(
        asked_at.len() == 20 && asked_at.ends_with('Z') && asked_at.as_bytes()[10] == b'T',
        "{asked_at}"
    );
    let yaml = tasks(&first);
    assert_eq!(task_status(&yaml, "main.draft"), "implemented", "{yaml}");
    assert_eq!(task_status(&yaml, "main.ship"), "not-started", "{yaml}");

    let out = wfhost(&["gate", &id, "UD-1", "approved"], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let done = status(&first);
    assert_eq!(done["current_state"], "DONE", "{done}");
    let ud1 = &done["user_decisions"][0];
    assert_eq!(ud1["status"], "answered");
    assert_eq!(ud1["answer"], "approved");
    assert_eq!(ud1["asked_at"], asked_at);
    assert!(ud1["resolved_at"].is_string(), "{done}");
    assert!(ud1["resolution_reason"].is_string(), "{done}");
    assert_eq!(done["known_issues"], serde_json::json!([]));
    let yaml = tasks(&first);
    assert_eq!(task_status(&yaml, "main.draft"), "completed", "{yaml}");
    assert_eq!(task_status(&yaml, "main.ship"), "completed", "{yaml}");
    let finished = contents(&first);

    // A second run gets its own folder; the first is not touched.
    let (out, second_id) = start(w, s);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_ne!(second_id, id);
    let dirs = sessions(w);
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    let second = dirs.into_iter().find(|d| *d != first).unwrap();
    assert_eq!(status(&second)["current_state"], "ASK_USER");
    assert_eq!(contents(&first), finished);

    // Changes requested: the draft runs again and gates again.
    let out = wfhost(
        &[
            "gate",
            &second_id,
            "UD-1",
            "changes-requested:add a load test",
        ],
        s,
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let again = status(&second);
    assert_eq!(again["current_state"], "ASK_USER", "{again}");
    assert_eq!(again["user_decisions"][0]["status"], "answered");
    assert_eq!(
        again["user_decisions"][0]["answer"],
        "changes-requested:add a load test"
    );
    assert_eq!(again["user_decisions"][1]["decision_id"], "UD-2");
    assert_eq!(again["user_decisions"][1]["status"], "pending");
    assert_eq!(
        again["retry_counts"],
        serde_json::json!({"main.draft": {"SIGNAL:GATE_CHANGES_REQUESTED": 1}})
    );
    assert_eq!(contents(&first), finished);
}

/// A run started in `w`, waiting at its gate with its decision pending:
/// its id and its session folder.
fn waiting_at_its_gate(s: &Path, w: &Path) -> (String, PathBuf) {
    let (out, id) = start(w, s);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let dir = sessions(w).remove(0);
    assert_eq!(status(&dir)["user_decisions"][0]["status"], "pending");
    (id, dir)
}

/// `wfhost cancel` at a gate: the session says the run is BLOCKED and the
/// decision cancelled; what an agent kept in status.json stays.
#[test]
fn a_run_cancelled_at_a_gate_cancels_its_decision_and_keeps_the_agents_fields() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (s, w) = (scratch.path(), ws.path());
    let (id, dir) = waiting_at_its_gate(s, w);
    let mut kept = status(&dir);
    kept["assumptions"] = serde_json::json!(["the plan fits one sprint"]);
    kept["runtime_flags"] = serde_json::json!({"copilot_instructions_exists": true});
    std::fs::write(dir.join("status.json"), kept.to_string()).unwrap();

    let out = wfhost(&["cancel", &id, "--reason", "wrong branch"], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let after = status(&dir);
    assert_eq!(after["current_state"], "BLOCKED", "{after}");
    let ud1 = &after["user_decisions"][0];
    assert_eq!(ud1["status"], "cancelled", "{after}");
    assert_eq!(ud1["answer"], serde_json::Value::Null);
    assert!(ud1["resolved_at"].is_string(), "{after}");
    // Who cancelled it (the account running `wfhost cancel`) and why.
    let reason = ud1["resolution_reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("the run was cancelled by ")
            && reason.ends_with(" with wfhost cancel: wrong branch"),
        "{after}"
    );
    assert_eq!(
        after["assumptions"],
        serde_json::json!(["the plan fits one sprint"])
    );
    assert_eq!(after["runtime_flags"]["copilot_instructions_exists"], true);
}

/// The same through the HTTP API: the server's cancel has its run process
/// bring the session files up to date.
#[test]
fn a_run_cancelled_through_the_api_cancels_its_decision() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (s, w) = (scratch.path(), ws.path());
    let (id, dir) = waiting_at_its_gate(s, w);
    let served = super::serve::serve_with(s, &["--local-agents", "0"]);
    let (code, body) = super::serve::http_post(
        &served.addr,
        &format!("/v1/runs/{id}/cancel"),
        &serde_json::json!({"reason": "wrong branch"}),
    );
    assert_eq!(code, 200, "{body}");
    let after = status(&dir);
    assert_eq!(after["current_state"], "BLOCKED", "{after}");
    assert_eq!(after["user_decisions"][0]["status"], "cancelled", "{after}");
    assert_eq!(
        after["user_decisions"][0]["resolution_reason"],
        "the run was cancelled by the HTTP API: wrong branch",
        "{after}"
    );
}

#[test]
fn a_fork_writes_its_own_folder() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (s, w) = (scratch.path(), ws.path());
    let (out, id) = start(w, s);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    // Where the run waits at its gate.
    let show = shown_with_steps(&["show", &id, "--json"], s);
    let at_gate = show["steps"][0]["snapshot"].as_str().unwrap().to_string();
    let out = wfhost(&["gate", &id, "UD-1", "approved"], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let original = sessions(w).remove(0);
    let finished = contents(&original);

    // Back to the gate, as branch 2.
    let out = wfhost(&["fork", &id, "--at", &at_gate], s);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let dirs = sessions(w);
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    let branch = dirs.into_iter().find(|d| *d != original).unwrap();
    assert_eq!(
        branch.file_name().unwrap().to_str().unwrap(),
        format!("{}-b2", original.file_name().unwrap().to_str().unwrap())
    );
    let forked = status(&branch);
    assert_eq!(forked["current_state"], "ASK_USER", "{forked}");
    assert_eq!(forked["user_decisions"][0]["status"], "pending");

    let out = wfhost(&["gate", &id, "UD-1", "changes-requested:smaller"], s);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let forked = status(&branch);
    assert_eq!(forked["user_decisions"][0]["status"], "answered");
    assert_eq!(forked["user_decisions"].as_array().unwrap().len(), 2);
    assert_eq!(
        contents(&original),
        finished,
        "branch 1's folder is left alone"
    );
}

/// A block behind artifact gates runs only once the session folder holds
/// a spec and acceptance criteria worth the name; before, it ends
/// `SIGNAL:BLOCKED` with what is wrong, its worker not run.
#[test]
fn artifact_gates_block_until_the_session_artifacts_have_content() {
    let scratch = tempfile::tempdir().unwrap();
    let wf = scratch.path().join("gated.json");
    std::fs::write(
        &wf,
        serde_json::json!({
            "id": "gated",
            "start_node": "main",
            "session_mode": "lean",
            "nodes": {"main": {"entry_block": "code", "blocks": {"code": {
                "worker": "echo",
                "config": {"message": "coding"},
                "artifact_gates": ["spec.md", "acceptance.json", "architecture.md"],
                "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                    {"on_signal": "SIGNAL:BLOCKED", "action": "FAIL:the design artifacts are not ready"}
                ]
            }}}}
        })
        .to_string(),
    )
    .unwrap();
    let ws = workspace_in(scratch.path());
    // A chosen run id names the session folder the run will use.
    let run = |id: &str| {
        command(scratch.path())
            .args([
                "run",
                wf.to_str().unwrap(),
                "-w",
                ws.to_str().unwrap(),
                "--run-id",
                id,
                "--json",
            ])
            .output()
            .unwrap()
    };
    let folder = |id: &str| {
        let name = wfhost_core::agents::session_projection::run_session_name(id, "gated", 1, "");
        ws.join(".agents-work").join(name)
    };

    let first = "run-20261123-101010-aaaaaa";
    let out = run(first);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = json_of(&out);
    let text = report.to_string();
    assert!(
        text.contains("spec.md is missing") && text.contains("acceptance.json is missing"),
        "{text}"
    );
    assert!(
        !text.contains("architecture.md"),
        "a lean session has no architecture gate: {text}"
    );
    assert!(!text.contains("coding"), "the worker ran: {text}");

    let second = "run-20261123-101011-bbbbbb";
    let dir = folder(second);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("spec.md"),
        "# Goals\nA tool.\n# Acceptance Criteria\nAC-1.\n# Definition of Done\nGreen.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("acceptance.json"),
        r#"[{"id": "AC-1", "description": "d"}]"#,
    )
    .unwrap();
    let out = run(second);
    assert_eq!(out.status.code(), Some(1));
    let text = json_of(&out).to_string();
    assert!(
        text.contains("acceptance.json: criterion 1 has no (or an empty) verify"),
        "{text}"
    );
    assert!(!text.contains("spec.md"), "{text}");

    let third = "run-20261123-101012-cccccc";
    let dir = folder(third);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("spec.md"),
        "# Goals\nA tool.\n# Acceptance Criteria\nAC-1.\n# Definition of Done\nGreen.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("acceptance.json"),
        r#"[{"id": "AC-1", "description": "d", "verify": "cmd: true"}]"#,
    )
    .unwrap();
    let out = run(third);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
}
