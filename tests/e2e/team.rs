//! `examples/agent-team`: seed 001's team as a workflow, walked through the
//! real binary — its two mandatory gates answered by separate `wfhost gate`
//! processes, a changes-requested round, an invalid answer, the implement
//! loop's fix round, the lean mode, and a run killed mid-block and resumed.

use std::process::Stdio;
use std::time::{Duration, Instant};

use super::*;

fn manifest(name: &str) -> PathBuf {
    repo().join("examples/agent-team").join(name)
}

fn json_of(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", stdout(o), stderr(o)))
}

/// The run's session folder (the only one in `ws`).
fn session(ws: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(ws.join(".agents-work"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.into_iter().next().unwrap()
}

fn status(ws: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(session(ws).join("status.json")).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The `user_decisions` record `id` of status.json.
fn decision(status: &serde_json::Value, id: &str) -> serde_json::Value {
    let all = status["user_decisions"].as_array().unwrap();
    let found: Vec<_> = all.iter().filter(|d| d["decision_id"] == id).collect();
    assert_eq!(found.len(), 1, "{id} once per session: {status}");
    found[0].clone()
}

/// `wfhost run MANIFEST -w WS --json`: the exit code and the run id.
fn start(manifest: &Path, ws: &Path, scratch: &Path) -> (Output, String) {
    let out = wfhost(
        &[
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--json",
        ],
        scratch,
    );
    let id = json_of(&out)["run_id"].as_str().unwrap().to_string();
    (out, id)
}

fn gate(run: &str, gate: &str, answer: &str, scratch: &Path) -> Output {
    wfhost(&["gate", run, gate, answer], scratch)
}

#[test]
fn both_manifests_validate_strictly() {
    let scratch = tempfile::tempdir().unwrap();
    for name in ["workflow.json", "lean.json"] {
        let out = wfhost(
            &["validate", manifest(name).to_str().unwrap(), "--strict"],
            scratch.path(),
        );
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
    }
}

/// Full mode, as the example's README walks it: design, a changes-requested
/// round, an invalid answer, approval, a review strategy given as a
/// synonym, then the implement loop with one fix round, integration, docs
/// and the report.
#[test]
fn the_full_team_runs_through_both_gates_and_a_fix_round() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);

    let (out, run) = start(&manifest("workflow.json"), &ws, s);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(json_of(&out)["gate"]["id"], "UD-APPROVE-DESIGN");
    let dir = session(&ws);
    for artifact in ["spec.md", "acceptance.json", "architecture.md"] {
        assert!(dir.join(artifact).is_file(), "{artifact}");
    }
    let waiting = status(&ws);
    assert_eq!(waiting["current_state"], "APPROVE_DESIGN", "{waiting}");
    assert_eq!(decision(&waiting, "UD-APPROVE-DESIGN")["status"], "pending");
    assert!(!dir.join("approve-design-history.jsonl").exists());

    // Changes requested: SpecAgent and the Architect run again, and the
    // gate asks again.
    let out = gate(
        &run,
        "UD-APPROVE-DESIGN",
        "changes-requested:call it hello",
        s,
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("design.spec -> SIGNAL:SUCCESS")
            && text.contains("design.architect -> SIGNAL:SUCCESS"),
        "{text}"
    );
    let history = std::fs::read_to_string(dir.join("approve-design-history.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = history
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{history}");
    assert_eq!(lines[0]["decision_id"], "UD-APPROVE-DESIGN");
    assert_eq!(lines[0]["answer"], "changes-requested:call it hello");
    let again = status(&ws);
    assert_eq!(again["current_state"], "APPROVE_DESIGN", "{again}");
    let tracking = &again["gate_tracking"]["APPROVE_DESIGN"];
    assert_eq!(tracking["correction_status"], "completed", "{again}");
    assert_eq!(
        tracking["last_correction_dispatch"]["agent"], "SpecAgent",
        "{again}"
    );
    assert_eq!(
        tracking["last_correction_dispatch"]["task_id"], "design.spec",
        "{again}"
    );
    assert_eq!(
        decision(&again, "UD-APPROVE-DESIGN")["status"],
        "pending",
        "asked again, same record"
    );

    // An invalid answer is refused and asked again; the gate stays open.
    let out = gate(&run, "UD-APPROVE-DESIGN", "looks fine", s);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("asked again (1 of 3)"),
        "{}",
        stderr(&out)
    );
    let still = status(&ws);
    assert_eq!(still["current_state"], "APPROVE_DESIGN", "{still}");
    assert_eq!(decision(&still, "UD-APPROVE-DESIGN")["status"], "pending");

    let out = gate(&run, "UD-APPROVE-DESIGN", "approved", s);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("UD-REVIEW-STRATEGY per-batch   (or single-final)"),
        "{}",
        stdout(&out)
    );
    let planned = status(&ws);
    assert_eq!(planned["current_state"], "REVIEW_STRATEGY", "{planned}");
    assert_eq!(
        decision(&planned, "UD-APPROVE-DESIGN")["answer"],
        "approved"
    );

    // A synonym; only the canonical value is kept.
    let out = gate(&run, "UD-REVIEW-STRATEGY", "per batch", s);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    assert!(
        text.contains("implement.review -> SIGNAL:FAIL")
            && text.contains("implement.code: 2 runs")
            && text.contains("implement.qa -> SIGNAL:SUCCESS")
            && text.contains("release.report -> SIGNAL:SUCCESS"),
        "{text}"
    );
    let done = status(&ws);
    assert_eq!(done["current_state"], "DONE", "{done}");
    let strategy = decision(&done, "UD-REVIEW-STRATEGY");
    assert_eq!(strategy["answer"], "per-batch", "{done}");
    assert_eq!(strategy["status"], "answered");
    // Fix loops only: the design redone on request, the code on the
    // Reviewer's FAIL — not the blocks the work flowed back to.
    assert_eq!(
        done["retry_counts"],
        serde_json::json!({
            "design.spec": {"SIGNAL:GATE_CHANGES_REQUESTED": 1},
            "implement.code": {"SIGNAL:FAIL": 1}
        }),
        "{done}"
    );
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("## Outcome"), "{report}");
    // The Planner's tasks: the Coder set T-001 implemented, the host
    // completed it once every gate passed.
    let tasks = std::fs::read_to_string(dir.join("tasks.yaml")).unwrap();
    assert!(
        tasks.contains("T-001") && tasks.contains("status: completed") && !tasks.contains("wfhost"),
        "{tasks}"
    );
    for file in ["src/greet.py", "src/test_greet.py", "docs/greet.md"] {
        assert!(ws.join(file).is_file(), "{file}");
    }
    // The history is not written again by the later steps.
    assert_eq!(
        std::fs::read_to_string(dir.join("approve-design-history.jsonl")).unwrap(),
        history
    );
}

/// Lean mode: no Architect, no design gate, no architecture.md (the
/// Planner's architecture gate is skipped).
#[test]
fn the_lean_team_skips_the_architect_and_the_design_gate() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let (out, run) = start(&manifest("lean.json"), &ws, s);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(json_of(&out)["gate"]["id"], "UD-REVIEW-STRATEGY");
    let out = gate(&run, "UD-REVIEW-STRATEGY", "Single Final", s);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let dir = session(&ws);
    assert!(!dir.join("architecture.md").exists());
    assert!(dir.join("report.md").is_file());
    let done = status(&ws);
    assert_eq!(done["current_state"], "DONE", "{done}");
    assert_eq!(
        decision(&done, "UD-REVIEW-STRATEGY")["answer"],
        "single-final"
    );
    assert!(
        done["user_decisions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["decision_id"] != "UD-APPROVE-DESIGN"),
        "{done}"
    );
    assert!(!stdout(&out).contains("design.architect"));
}

/// The run waits at a gate; a later process answers it and is killed while
/// the Coder works; `wfhost resume` runs the Coder again and finishes.
#[test]
fn a_run_answered_by_another_process_and_killed_mid_block_resumes() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let pause = s.join("pause");
    // The example, with the Coder pausing while `pause` exists.
    let mut wf: serde_json::Value =
        serde_json::from_slice(&std::fs::read(manifest("workflow.json")).unwrap()).unwrap();
    wf.as_object_mut().unwrap().remove("$schema");
    let agent = repo().join("examples/agents/json_agent.py");
    for node in wf["nodes"].as_object_mut().unwrap().values_mut() {
        for (id, block) in node["blocks"].as_object_mut().unwrap() {
            let command = block["config"]["command"].as_array_mut().unwrap();
            command[0] = agent.to_str().unwrap().into();
            if id == "code" {
                command.push("--pause-while".into());
                command.push(pause.to_str().unwrap().into());
            }
        }
    }
    let copy = s.join("team.json");
    std::fs::write(&copy, wf.to_string()).unwrap();

    let (out, run) = start(&copy, &ws, s);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let out = gate(&run, "UD-APPROVE-DESIGN", "approved", s);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));

    std::fs::write(&pause, "").unwrap();
    let mut child = command(s)
        .args(["gate", &run, "UD-REVIEW-STRATEGY", "batch"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let pid = loop {
        let text = std::fs::read_to_string(&pause).unwrap();
        if !text.trim().is_empty() {
            break text.trim().to_string();
        }
        assert!(Instant::now() < deadline, "the Coder never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap(); // SIGKILL, mid-block
    child.wait().unwrap();
    // Let the orphaned agent go, and wait until it has.
    std::fs::remove_file(&pause).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new("/proc").join(&pid).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let answered = status(&ws);
    assert_eq!(
        decision(&answered, "UD-REVIEW-STRATEGY")["answer"],
        "per-batch",
        "{answered}"
    );

    let out = wfhost(&["resume", &run], s);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("implement.code -> SIGNAL:SUCCESS"),
        "{}",
        stdout(&out)
    );
    let done = status(&ws);
    assert_eq!(done["current_state"], "DONE", "{done}");
    assert!(session(&ws).join("report.md").is_file());
}
