//! Durable timers: `sleep` blocks rest a run until they are due, through
//! `wfhost run` (the process waits), a SIGKILL and `resume` (the due time
//! kept), and `wfhost serve` (the run process ends; the server wakes the
//! run when due, also after a restart of its own).

use super::serve::{await_status, http_get, http_post, served_address};
use super::*;
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// `a` (echo) → `nap` (sleep `config`) → `b` (echo).
fn napping(config: Value) -> Value {
    json!({"id": "napping", "start_node": "main",
    "nodes": {"main": {"entry_block": "a", "blocks": {
        "a": {"worker": "echo", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:nap"}]},
        "nap": {"worker": "sleep", "config": config,
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:b"}]},
        "b": {"worker": "echo", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}
    }}}})
}

fn write(scratch: &Path, wf: &Value) -> PathBuf {
    let path = scratch.join("napping.json");
    std::fs::write(&path, wf.to_string()).unwrap();
    path
}

/// The nap's events: `timer_started` due times and completions.
fn nap_events(scratch: &Path, run: &str) -> (Vec<i64>, usize) {
    let events = run_events(scratch, run);
    let due: Vec<i64> = events
        .iter()
        .filter(|e| e["type"] == "timer_started")
        .map(|e| e["due_at_ms"].as_i64().unwrap())
        .collect();
    let completed = events
        .iter()
        .filter(|e| e["type"] == "block_completed" && e["block"] == "nap")
        .count();
    (due, completed)
}

/// `wfhost run MANIFEST` in the background, once its run sleeps: the
/// process and the run.
#[allow(clippy::zombie_processes)] // returned to the caller, which waits for it
pub(super) fn started_sleeping(
    s: &Path,
    manifest: &Path,
    ws: &Path,
) -> (std::process::Child, String) {
    let mut child = command(s)
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let runs: Value =
            serde_json::from_slice(&wfhost(&["runs", "--json"], s).stdout).unwrap_or_default();
        if runs[0]["status"] == "sleeping" {
            return (child, runs[0]["id"].as_str().unwrap().to_string());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the run never slept: {runs}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn wfhost_run_waits_for_a_sleep_block_and_goes_on() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let manifest = write(s, &napping(json!({"for": "1s"})));
    let started = Instant::now();
    let (code, report) = run_report(&manifest, &ws, s);
    assert_eq!(code, Some(0), "{report:#}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(report["status"], "succeeded");
    let run = report["run_id"].as_str().unwrap();
    let (due, completed) = nap_events(s, run);
    assert_eq!((due.len(), completed), (1, 1));
    let logs = stdout(&wfhost(&["logs", run], s));
    assert!(logs.contains("slept until"), "{logs}");
}

#[test]
fn a_run_killed_while_it_sleeps_keeps_its_due_time_and_resume_wakes_it_once() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let manifest = write(s, &napping(json!({"for": "3s"})));
    let (mut child, run) = started_sleeping(s, &manifest, &ws);
    child.kill().unwrap();
    child.wait().unwrap();
    let (due, completed) = nap_events(s, &run);
    assert_eq!((due.len(), completed), (1, 0));
    let shown = stdout(&wfhost(&["show", &run], s));
    assert!(
        shown.contains("status      sleeping") && shown.contains("sleeping    at main.nap until"),
        "{shown}"
    );
    // Resumed: it waits for the same due time, not a new 3 s.
    let out = wfhost(&["resume", &run], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let now = wfhost_core::time::now_ms();
    assert!(now >= due[0], "woke {} ms early", due[0] - now);
    assert!(
        now < due[0] + 2_000,
        "woke {} ms late: the wait restarted",
        now - due[0]
    );
    let (due_after, completed) = nap_events(s, &run);
    assert_eq!((due_after, completed), (due, 1));
    // Resumed again: nothing to do, nothing recorded.
    let out = wfhost(&["resume", &run], s);
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(nap_events(s, &run).1, 1);
}

#[test]
fn a_bad_duration_or_time_is_named_by_validate_with_its_pointer() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    for (config, pointer, words) in [
        (
            json!({"for": "ten minutes"}),
            "/nodes/main/blocks/nap/config/for",
            "is not a duration",
        ),
        (
            json!({"until": "2026-02-30T00:00:00Z"}),
            "/nodes/main/blocks/nap/config/until",
            "is not a time",
        ),
        (
            json!({"for": "1m", "until": "2027-01-01T00:00:00Z"}),
            "/nodes/main/blocks/nap/config",
            "both `for` and `until`",
        ),
    ] {
        let manifest = write(s, &napping(config));
        let out = wfhost(&["validate", manifest.to_str().unwrap()], s);
        assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(text.contains(pointer) && text.contains(words), "{text}");
    }
}

/// `wfhost serve` on `port` (0: a free one), its address.
fn serve_on(s: &Path, port: u16) -> (std::process::Child, String) {
    let mut child = command(s)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = served_address(&mut child);
    (child, addr)
}

#[test]
fn a_served_run_sleeps_without_a_process_and_wakes_once_even_across_a_server_crash() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let (mut server, addr) = serve_on(s, 0);
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let ws = s.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    // A short nap, woken by the server that is up.
    let (status, body) = http_post(
        &addr,
        "/v1/runs",
        &json!({"manifest": napping(json!({"for": "1s"})), "workspace": ws}),
    );
    assert_eq!(status, 202, "{body}");
    let first = body["run_id"].as_str().unwrap().to_string();
    await_status(&addr, &first, "sleeping");
    await_status(&addr, &first, "succeeded");
    assert_eq!(nap_events(s, &first).1, 1);

    // A nap the server is not up for: killed outright while it sleeps,
    // started again after the due time; the timer fires at start, once.
    let ws2 = s.join("ws2");
    std::fs::create_dir_all(&ws2).unwrap();
    let (status, body) = http_post(
        &addr,
        "/v1/runs",
        &json!({"manifest": napping(json!({"for": "2s"})), "workspace": ws2}),
    );
    assert_eq!(status, 202, "{body}");
    let second = body["run_id"].as_str().unwrap().to_string();
    let shown = await_status(&addr, &second, "sleeping");
    assert_eq!(shown["open_jobs"], json!([]), "{shown:#}");
    // The server finds it without reading a log: its row in `timers`.
    let next_due = || {
        wfhost_store::Store::open_existing(&s.join("home"))
            .unwrap()
            .next_timer_due()
            .unwrap()
    };
    assert_eq!(next_due(), Some(nap_events(s, &second).0[0]));
    server.kill().unwrap();
    server.wait().unwrap();
    let (due, _) = nap_events(s, &second);
    while wfhost_core::time::now_ms() < due[0] + 300 {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (mut server, addr) = serve_on(s, port);
    await_status(&addr, &second, "succeeded");
    let (due_after, completed) = nap_events(s, &second);
    assert_eq!((due_after, completed), (due, 1));
    let (_, summary) = http_get(&addr, &format!("/v1/runs/{second}"));
    assert_eq!(summary["steps"], 3, "{summary:#}");
    // Woken: no timer is left to wake.
    assert_eq!(next_due(), None);
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn cancelling_a_sleeping_run_cancels_its_timer() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let manifest = write(s, &napping(json!({"for": "1h"})));
    let (child, run) = started_sleeping(s, &manifest, &ws);
    let out = wfhost(&["cancel", &run, "--reason", "not today"], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ended = child.wait_with_output().unwrap();
    assert_eq!(ended.status.code(), Some(5), "{}", stderr(&ended));
    let store = wfhost_store::Store::open_existing(&s.join("home")).unwrap();
    assert_eq!(store.next_timer_due().unwrap(), None);
    let runs: Value = serde_json::from_slice(&wfhost(&["runs", "--json"], s).stdout).unwrap();
    assert_eq!(runs[0]["status"], "cancelled");
    assert_eq!(nap_events(s, &run).1, 0, "the nap never completed");
}

#[test]
fn a_fork_where_the_run_slept_sleeps_until_the_same_time() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let manifest = write(s, &napping(json!({"for": "2s"})));
    let (mut child, run) = started_sleeping(s, &manifest, &ws);
    child.kill().unwrap();
    child.wait().unwrap();
    let events = stdout(&wfhost(&["events", &run, "--json"], s));
    let at = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"]["type"] == "timer_started")
        .unwrap()["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    let due = nap_events(s, &run).0[0];
    // The fork goes on in this process: it waits for the same due time.
    let out = wfhost(&["fork", &run, "--at", &at], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let now = wfhost_core::time::now_ms();
    assert!(now >= due && now < due + 1_500, "woke at {now}, due {due}");
    let shown = shown_with_steps(&["show", &run, "--json"], s);
    assert_eq!(
        (shown["branch"].as_u64(), shown["status"].as_str()),
        (Some(2), Some("succeeded"))
    );
    // The original branch still sleeps, its timer kept; the fork's is gone.
    let first = shown_with_steps(&["show", &run, "--branch", "1", "--json"], s);
    assert_eq!(first["status"], "sleeping");
    let store = wfhost_store::Store::open_existing(&s.join("home")).unwrap();
    assert_eq!(store.next_timer_due().unwrap(), Some(due));
}
