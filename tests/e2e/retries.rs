//! Retry policies end to end: a failing exec block run again after its
//! waits under `wfhost run`, a SIGKILL during a wait and `resume` (the due
//! time kept), a served run's leased job retried once the server wakes
//! it, lanes retried under the policy, and a Slurm job retried.

use super::exec::slurm_ready;
use super::leases::Agent;
use super::serve::{await_status, http_get, http_post, serve_with};
use super::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Exits 3 while the counter file (its first argument) counts fewer runs
/// than its second argument, then 0; every run adds one.
const FLAKY: &str = "import sys\np, fails = sys.argv[1], int(sys.argv[2])\ntry:\n    n = int(open(p).read())\nexcept OSError:\n    n = 0\nopen(p, 'w').write(str(n + 1))\nsys.exit(3 if n < fails else 0)\n";

/// One exec block `build` that fails its first `fails` runs (counted in
/// `counter`), with `retry`, and `executor` when given.
fn flaky(counter: &Path, fails: u32, retry: Value, executor: Option<Value>) -> Value {
    let argv = json!([
        "python3",
        "flaky.py",
        counter.display().to_string(),
        fails.to_string()
    ]);
    let mut config = json!({"commands": [{"argv": argv}]});
    if let Some(executor) = executor {
        config["executor"] = executor;
    }
    json!({"id": "flaky", "plugins": {"exec": {"grants": ["exec"]}},
    "start_node": "main",
    "nodes": {"main": {"entry_block": "build", "blocks": {"build": {
        "worker": "exec", "timeout": "120s", "config": config, "retry": retry,
        "transitions": [
            {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
            {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:the build gave up"}]
    }}}}})
}

/// The manifest `wf` written into `scratch`, and a workspace with the
/// flaky script.
fn prepared(scratch: &Path, wf: &Value) -> (PathBuf, PathBuf) {
    let ws = workspace_in(scratch);
    std::fs::write(ws.join("flaky.py"), FLAKY).unwrap();
    let manifest = scratch.join("flaky.json");
    std::fs::write(&manifest, wf.to_string()).unwrap();
    (manifest, ws)
}

fn of_type<'e>(events: &'e [Value], kind: &str) -> Vec<&'e Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn runs_of(counter: &Path) -> u32 {
    std::fs::read_to_string(counter)
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or(0)
}

#[test]
fn wfhost_run_retries_a_failing_exec_block_after_growing_waits_and_show_lists_each_attempt() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let counter = s.join("runs");
    let retry = json!({"max_attempts": 4, "initial": "300ms", "multiplier": 2, "jitter": 0});
    let (manifest, ws) = prepared(s, &flaky(&counter, 2, retry, None));
    let started = Instant::now();
    let (code, report) = run_report(&manifest, &ws, s);
    assert_eq!(code, Some(0), "{report:#}");
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(runs_of(&counter), 3);
    let run = report["run_id"].as_str().unwrap();
    let events = run_events(s, run);
    let retries = of_type(&events, "retry_scheduled");
    let waits: Vec<(u64, u64, i64)> = retries
        .iter()
        .map(|e| {
            (
                e["retry"].as_u64().unwrap(),
                e["wait_ms"].as_u64().unwrap(),
                e["due_at_ms"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        waits.iter().map(|w| (w.0, w.1)).collect::<Vec<_>>(),
        [(1, 300), (2, 600)]
    );
    assert_eq!(retries[0]["signal"], "SIGNAL:EXEC_FAILED");
    // Each attempt started once its retry was due.
    let starts: Vec<&Value> = of_type(&events, "block_started");
    assert_eq!(
        starts
            .iter()
            .map(|e| e["attempt"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let stored = stdout(&wfhost(&["events", run, "--json"], s));
    let times: Vec<i64> = stored
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"]["type"] == "block_started")
        .map(|e| e["at"].as_i64().unwrap())
        .collect();
    assert!(
        times[1] >= waits[0].2 && times[2] >= waits[1].2,
        "{times:?} {waits:?}"
    );

    let shown = stdout(&wfhost(&["show", run], s));
    assert!(
        shown.contains("main.build #1 -> SIGNAL:EXEC_FAILED  retry 1 in 300 ms")
            && shown.contains("main.build #2 -> SIGNAL:EXEC_FAILED  retry 2 in 600 ms")
            && shown.contains("main.build #3 -> SIGNAL:SUCCESS  END"),
        "{shown}"
    );
    let rows: Value =
        serde_json::from_slice(&wfhost(&["show", run, "--json", "--steps"], s).stdout).unwrap();
    assert_eq!(rows["steps"][0]["retry"]["wait_ms"], 300, "{rows:#}");
    assert_eq!(rows["steps"][2]["retry"], Value::Null, "{rows:#}");
}

#[test]
fn a_signal_the_policy_never_retries_and_an_exhausted_policy_fail_the_run() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let counter = s.join("runs");
    let never = json!({"never": ["SIGNAL:EXEC_FAILED"], "initial": "10ms"});
    let (manifest, ws) = prepared(s, &flaky(&counter, 9, never, None));
    let (code, report) = run_report(&manifest, &ws, s);
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(runs_of(&counter), 1);
    let run = report["run_id"].as_str().unwrap();
    assert!(of_type(&run_events(s, run), "retry_scheduled").is_empty());

    std::fs::remove_file(&counter).unwrap();
    let few = json!({"max_attempts": 2, "initial": "10ms"});
    std::fs::write(&manifest, flaky(&counter, 9, few, None).to_string()).unwrap();
    let (code, report) = run_report(&manifest, &ws, s);
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["reason"], "block `main.build`: the build gave up");
    assert_eq!(runs_of(&counter), 2);

    // A config the exec worker refuses (`bad-config`) is permanent.
    let mut wrong = flaky(&counter, 0, json!({"initial": "10ms"}), None);
    wrong["nodes"]["main"]["blocks"]["build"]["config"]["comands"] = json!([]);
    std::fs::write(&manifest, wrong.to_string()).unwrap();
    let (code, report) = run_report(&manifest, &ws, s);
    assert_eq!(code, Some(1), "{report:#}");
    let run = report["run_id"].as_str().unwrap();
    let events = run_events(s, run);
    assert!(of_type(&events, "retry_scheduled").is_empty());
    let completed = of_type(&events, "block_completed");
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["permanent"], true, "{:#}", completed[0]);
}

#[test]
fn a_run_killed_during_its_retry_wait_keeps_the_due_time_and_resume_retries_once() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let counter = s.join("runs");
    let retry = json!({"initial": "3s", "jitter": 0});
    let (manifest, ws) = prepared(s, &flaky(&counter, 1, retry, None));
    let (mut child, run) = super::timers::started_sleeping(s, &manifest, &ws);
    child.kill().unwrap();
    child.wait().unwrap();
    let due = of_type(&run_events(s, &run), "retry_scheduled")[0]["due_at_ms"]
        .as_i64()
        .unwrap();
    let shown = stdout(&wfhost(&["show", &run], s));
    assert!(
        shown.contains("sleeping    retry 1 of main.build due at"),
        "{shown}"
    );
    let detail: Value =
        serde_json::from_slice(&wfhost(&["show", &run, "--json"], s).stdout).unwrap();
    assert_eq!(detail["timer"]["retry"], 1, "{detail:#}");
    assert_eq!(detail["timer"]["due_at_ms"], due, "{detail:#}");

    let out = wfhost(&["resume", &run], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let now = wfhost_core::time::now_ms();
    assert!(now >= due, "retried {} ms early", due - now);
    assert!(
        now < due + 2_000,
        "retried {} ms late: the wait restarted",
        now - due
    );
    assert_eq!(runs_of(&counter), 2);
    let events = run_events(s, &run);
    assert_eq!(of_type(&events, "retry_scheduled").len(), 1);
    assert_eq!(of_type(&events, "block_started").len(), 2);
}

#[test]
fn a_served_runs_leased_job_is_retried_by_the_run_process_or_once_the_server_wakes_it() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let served = serve_with(s, &["--local-agents", "0"]);
    let agent = Agent::start(s, &served, "a1");
    let counter = s.join("runs");
    // The first wait (0.5 s) the run process waits itself; the second
    // (1.5 s) is longer than it does: the server wakes the run.
    let retry = json!({"initial": "500ms", "multiplier": 3, "jitter": 0});
    let (_, ws) = prepared(s, &json!({}));
    let (status, body) = http_post(
        &served.addr,
        "/v1/runs",
        &json!({"manifest": flaky(&counter, 2, retry, None), "workspace": ws}),
    );
    assert_eq!(status, 202, "{body}");
    let run = body["run_id"].as_str().unwrap().to_string();
    let sleeping = await_status(&served.addr, &run, "sleeping");
    assert_eq!(sleeping["timer"]["block"], "build", "{sleeping:#}");
    assert_eq!(sleeping["open_jobs"], json!([]), "{sleeping:#}");
    await_status(&served.addr, &run, "succeeded");
    assert_eq!(runs_of(&counter), 3);
    let (_, steps) = http_get(&served.addr, &format!("/v1/runs/{run}/steps"));
    assert_eq!(steps["steps"][0]["retry"]["wait_ms"], 500, "{steps:#}");
    assert_eq!(steps["steps"][1]["retry"]["wait_ms"], 1500, "{steps:#}");
    let events = run_events(s, &run);
    assert_eq!(of_type(&events, "retry_scheduled").len(), 2);
    // Every attempt was a job the agent leased, however it was woken.
    let (_, jobs) = http_get(&served.addr, &format!("/v1/runs/{run}/jobs"));
    let by: Vec<(i64, &str, &str)> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["step"].as_i64().unwrap(),
                j["agent"].as_str().unwrap_or("-"),
                j["outcome"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        by,
        [
            (0, "a1", "failed"),
            (1, "a1", "failed"),
            (2, "a1", "succeeded")
        ],
        "{jobs:#}\n{}",
        agent.said()
    );
}

#[test]
fn lanes_follow_the_blocks_retry_policy() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let counter = s.join("runs");
    let argv = |fails: &str| json!([{"argv": ["python3", "flaky.py", counter.display().to_string(), fails]}]);
    let wf = json!({"id": "lanes", "plugins": {"exec": {"grants": ["exec"]}},
    "start_node": "main",
    "nodes": {"main": {"entry_block": "fan", "blocks": {"fan": {
        "worker": "exec", "config": {"commands": []},
        "retry": {"max_attempts": 3, "initial": "400ms", "jitter": 0},
        "parallel": {"lanes": {
            "flaky": {"config": {"commands": argv("1")}},
            "steady": {"config": {"commands": [{"argv": ["true"]}]}}
        }},
        "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                        {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:lanes failed"}]
    }}}}});
    let (manifest, ws) = prepared(s, &wf);
    let started = Instant::now();
    let (code, report) = run_report(&manifest, &ws, s);
    assert_eq!(code, Some(0), "{report:#}");
    assert!(started.elapsed() >= Duration::from_millis(400));
    let run = report["run_id"].as_str().unwrap();
    let events = run_events(s, run);
    let retried = of_type(&events, "lane_retried");
    assert_eq!(retried.len(), 1, "{retried:?}");
    assert_eq!(retried[0]["lane"], "flaky");
    assert_eq!(retried[0]["wait_ms"], 400);
    let shown = stdout(&wfhost(&["show", run], s));
    assert!(
        shown.contains("[0.flaky] -> SIGNAL:SUCCESS") && shown.contains("after 1 attempt failed"),
        "{shown}"
    );
}

#[test]
fn a_slurm_job_is_retried_as_a_new_job_after_the_wait() {
    if !slurm_ready() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let counter = s.join("runs");
    let retry = json!({"initial": "1s", "jitter": 0});
    let slurm = json!({"slurm": {"partition": "debug"}});
    let (manifest, ws) = prepared(s, &flaky(&counter, 1, retry, Some(slurm)));
    let (code, report) = run_report(&manifest, &ws, s);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(runs_of(&counter), 2);
    let run = report["run_id"].as_str().unwrap();
    let events = run_events(s, run);
    assert_eq!(of_type(&events, "retry_scheduled").len(), 1);
    // Each attempt was a Slurm job of its own, sealed in its bundle.
    let mut jobs = Vec::new();
    for step in [0, 1] {
        let dir = ws.join(format!(".output/exec/{run}/step-{step}-main.build"));
        let m: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(m["executor"], "slurm", "{m:#}");
        jobs.push(m["slurm_job_id"].as_str().unwrap().to_string());
    }
    assert_ne!(jobs[0], jobs[1]);
}

#[test]
fn validate_names_a_bad_retry_policy_with_its_pointer() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    for (retry, pointer, words) in [
        (
            json!({"multiplier": 0.5}),
            "/nodes/main/blocks/build/retry/multiplier",
            "from 1 to 100",
        ),
        (
            json!({"initial": "soon"}),
            "retry.initial",
            "is not a duration",
        ),
        (
            json!({"on": ["SIGNAL:A"], "never": ["SIGNAL:A"]}),
            "/nodes/main/blocks/build/retry/on/0",
            "in `never` as well",
        ),
    ] {
        let (manifest, _) = prepared(s, &flaky(&s.join("c"), 0, retry, None));
        let out = wfhost(&["validate", manifest.to_str().unwrap()], s);
        assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(text.contains(pointer) && text.contains(words), "{text}");
    }
}

#[test]
fn an_agent_block_whose_agent_reports_failure_is_retried() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    // An agent that reports `failed` on its first run, `completed` after.
    let agent = repo().join("examples/agents/scripted_agent.py");
    let wrapper = s.join("flaky_agent.py");
    std::fs::write(
        &wrapper,
        format!(
            "#!/usr/bin/env python3\nimport os, sys\nmark = {mark:?}\nstatus = 'completed' if os.path.exists(mark) else 'failed'\nopen(mark, 'a').close()\nos.execv(sys.executable, [sys.executable, {agent:?}, '--status', status] + sys.argv[1:])\n",
            mark = s.join("ran-once").display().to_string(),
            agent = agent.display().to_string()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let wf = json!({"id": "agent-retry", "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "dev", "nodes": {"dev": {"entry_block": "implement", "blocks": {"implement": {
            "worker": "agent", "timeout": "60s",
            "config": {"command": [wrapper.display().to_string()]},
            "retry": {"initial": "200ms", "jitter": 0},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                            {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:the agent gave up"}]}}}}});
    let manifest = s.join("agent.json");
    std::fs::write(&manifest, wf.to_string()).unwrap();
    let (code, report) = run_report(&manifest, &ws, s);
    assert_eq!(code, Some(0), "{report:#}");
    let events = run_events(s, report["run_id"].as_str().unwrap());
    let retries = of_type(&events, "retry_scheduled");
    assert_eq!(retries.len(), 1, "{events:#?}");
    assert_eq!(retries[0]["signal"], "SIGNAL:FAILED");
    assert_eq!(of_type(&events, "block_started").len(), 2);
}
