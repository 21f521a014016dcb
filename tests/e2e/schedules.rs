//! Schedules: `wfhost schedule` and `/v1/schedules`, and `wfhost serve`
//! starting their runs when due — each tick once, across a SIGKILL of the
//! server, with the catch-up and overlap policies.

use super::serve::{http, http_get, http_post, serve_with};
use super::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn hello() -> String {
    repo()
        .join("examples/hello/workflow.json")
        .display()
        .to_string()
}

/// A workflow whose one exec block sleeps `seconds`.
fn slow(scratch: &Path, seconds: &str) -> String {
    let wf = json!({"id": "slow", "plugins": {"exec": {"grants": ["exec"]}},
        "start_node": "main",
        "nodes": {"main": {"entry_block": "nap", "blocks": {"nap": {
            "worker": "exec", "config": {"commands": [{"argv": ["sleep", seconds]}]},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}}}}});
    let path = scratch.join("slow.json");
    std::fs::write(&path, wf.to_string()).unwrap();
    path.display().to_string()
}

/// A workspace per run under `scratch`.
fn per_run(scratch: &Path) -> String {
    scratch.join("ws-{run}").display().to_string()
}

fn shown(s: &Path, name: &str) -> Value {
    let out = wfhost(&["schedule", "show", name, "--json"], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn ticks(s: &Path, name: &str) -> Vec<Value> {
    shown(s, name)["ticks"].as_array().unwrap().clone()
}

fn in_state<'t>(ticks: &'t [Value], state: &str) -> Vec<&'t Value> {
    ticks.iter().filter(|t| t["state"] == state).collect()
}

/// Poll `ok` over the schedule's ticks for up to `secs`.
fn wait_for(s: &Path, name: &str, secs: u64, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let t = ticks(s, name);
        if ok(&t) || Instant::now() > deadline {
            return t;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every tick handled once, each started tick's run in the store, no
/// run for two ticks.
fn each_tick_once(s: &Path, ticks: &[Value]) {
    let mut keys: Vec<(i64, bool)> = ticks
        .iter()
        .map(|t| {
            (
                t["tick_ms"].as_i64().unwrap(),
                t["manual"].as_bool().unwrap(),
            )
        })
        .collect();
    keys.sort();
    let n = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), n, "a tick handled twice: {ticks:#?}");
    let mut runs: Vec<&str> = ticks.iter().filter_map(|t| t["run_id"].as_str()).collect();
    runs.sort();
    let m = runs.len();
    runs.dedup();
    assert_eq!(runs.len(), m, "a run for two ticks: {ticks:#?}");
    for t in in_state(ticks, "started") {
        let run = t["run_id"].as_str().unwrap();
        let detail: Value =
            serde_json::from_slice(&wfhost(&["show", run, "--json"], s).stdout).unwrap();
        assert_eq!(detail["trigger"]["tick_ms"], t["tick_ms"], "{detail:#}");
    }
}

#[test]
fn schedule_commands_add_list_pause_resume_trigger_and_remove() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let add = |args: &[&str]| {
        let mut all = vec!["schedule", "add"];
        all.extend_from_slice(args);
        wfhost(&all, s)
    };
    let hello = hello();
    let out = add(&[
        "nightly",
        "--cron",
        "0 2 * * *",
        "--tz",
        "Europe/Berlin",
        &hello,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("schedule nightly added: 0 2 * * * (Europe/Berlin), next run"));
    for (args, says) in [
        (
            vec!["nightly", "--cron", "0 2 * * *", hello.as_str()],
            "a schedule named `nightly` exists",
        ),
        (
            vec!["x", "--cron", "61 * * * *", hello.as_str()],
            "cron: `61 * * * *` is not a cron expression",
        ),
        (vec!["x", "--cron", "* *", hello.as_str()], "has 2 fields"),
        (
            vec!["x", "--cron", "@daily", "--tz", "Mars/Base", hello.as_str()],
            "tz: `Mars/Base` is not a time zone",
        ),
        (
            vec!["x y", "--cron", "@daily", hello.as_str()],
            "is not a schedule name",
        ),
        (
            vec![
                "x",
                "--cron",
                "@daily",
                "--overlap",
                "often",
                hello.as_str(),
            ],
            "not an overlap policy",
        ),
        (
            vec!["x", "--cron", "@daily", "--catch-up", "500", hello.as_str()],
            "over the limit of 100",
        ),
        (
            vec!["x", "--cron", "@daily", "/nonexistent/wf.json"],
            "workflow",
        ),
    ] {
        let out = add(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stdout(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    // A workflow that needs inputs the schedule does not give.
    let inputs = repo()
        .join("examples/inputs/workflow.json")
        .display()
        .to_string();
    let out = add(&["x", "--cron", "@daily", &inputs]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("inputs (/inputs/")
            && stderr(&out).contains("missing required input"),
        "{}",
        stderr(&out)
    );
    let listed: Value =
        serde_json::from_slice(&wfhost(&["schedule", "ls", "--json"], s).stdout).unwrap();
    assert_eq!(
        listed["schedules"].as_array().unwrap().len(),
        1,
        "{listed:#}"
    );
    let text = stdout(&wfhost(&["schedule", "ls"], s));
    assert!(
        text.contains("nightly") && text.contains("Europe/Berlin"),
        "{text}"
    );

    assert_eq!(
        wfhost(&["schedule", "pause", "nightly"], s).status.code(),
        Some(0)
    );
    assert_eq!(shown(s, "nightly")["schedule"]["paused"], true);
    let out = wfhost(&["schedule", "resume", "nightly"], s);
    assert!(
        stdout(&out).contains("resumed: next run"),
        "{}",
        stdout(&out)
    );
    assert_eq!(shown(s, "nightly")["schedule"]["paused"], false);
    let out = wfhost(&["schedule", "trigger", "nightly"], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let t = ticks(s, "nightly");
    assert_eq!(
        (t.len(), &t[0]["state"], &t[0]["manual"]),
        (1, &json!("starting"), &json!(true))
    );
    for missing in [
        ["schedule", "pause", "nope"],
        ["schedule", "rm", "nope"],
        ["schedule", "trigger", "nope"],
    ] {
        let out = wfhost(&missing, s);
        assert_eq!(out.status.code(), Some(2), "{missing:?}");
        assert!(
            stderr(&out).contains("no schedule named `nope`"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(
        wfhost(&["schedule", "rm", "nightly"], s).status.code(),
        Some(0)
    );
    let listed: Value =
        serde_json::from_slice(&wfhost(&["schedule", "ls", "--json"], s).stdout).unwrap();
    assert_eq!(listed["schedules"], json!([]));
}

#[test]
fn a_server_starts_a_run_on_each_tick_once_and_a_trigger_starts_one_more() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = per_run(s);
    let out = wfhost(
        &[
            "schedule",
            "add",
            "tick",
            "--cron",
            "* * * * * *",
            "-w",
            &ws,
            &hello(),
        ],
        s,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let served = serve_with(s, &[]);
    let t = wait_for(s, "tick", 30, |t| in_state(t, "started").len() >= 3);
    assert!(in_state(&t, "started").len() >= 3, "{t:#?}");
    // A trigger over the API: one run more, recorded as manual.
    let (status, body) = http_post(&served.addr, "/v1/schedules/tick/trigger", &json!({}));
    assert_eq!(status, 202, "{body}");
    let manual = body["run_id"].as_str().unwrap().to_string();
    let t = wait_for(s, "tick", 30, |t| {
        t.iter()
            .any(|x| x["run_id"] == manual.as_str() && x["state"] == "started")
    });
    // Started is not finished: the run goes on in its own process.
    super::serve::await_status(&served.addr, &manual, "succeeded");
    drop(served);
    each_tick_once(s, &t);
    let detail: Value =
        serde_json::from_slice(&wfhost(&["show", &manual, "--json"], s).stdout).unwrap();
    assert_eq!(detail["trigger"]["manual"], true, "{detail:#}");
    assert_eq!(detail["status"], "succeeded", "{detail:#}");
    let text = stdout(&wfhost(&["show", &manual], s));
    assert!(
        text.contains("started by  schedule tick (triggered by hand"),
        "{text}"
    );
    // Each run had a workspace of its own.
    assert!(s.join(format!("ws-{manual}")).is_dir());
}

#[test]
fn after_a_sigkill_of_serve_a_recorded_tick_starts_its_run_once_and_the_missed_window_one() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = per_run(s);
    let out = wfhost(
        &[
            "schedule",
            "add",
            "sec",
            "--cron",
            "* * * * * *",
            "-w",
            &ws,
            &hello(),
        ],
        s,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut served = serve_with(s, &[]);
    let port = served.addr.rsplit(':').next().unwrap().to_string();
    wait_for(s, "sec", 30, |t| !in_state(t, "started").is_empty());
    served.child.kill().unwrap();
    served.child.wait().unwrap();
    // As if a server died between recording a tick and starting its run:
    // the tick is recorded, its run does not exist.
    let now = wfhost_core::time::now_ms();
    let run_id = wfhost_store::new_run_id(now).to_string();
    let mut store = wfhost_store::Store::open_existing(&s.join("home")).unwrap();
    store
        .add_manual_tick(&wfhost_store::schedules::Tick {
            schedule: "sec".into(),
            tick_ms: now,
            state: "starting".into(),
            run_id: Some(run_id.clone()),
            reason: None,
            manual: true,
            at_ms: now,
        })
        .unwrap();
    drop(store);
    std::thread::sleep(Duration::from_millis(3_500));
    let down_until = wfhost_core::time::now_ms();
    let before = ticks(s, "sec").len();
    let served = serve_with(s, &["--listen", &format!("127.0.0.1:{port}")]);
    let t = wait_for(s, "sec", 30, |t| {
        t.iter()
            .any(|x| x["run_id"] == run_id.as_str() && x["state"] == "started")
            && t.len() >= before + 2
    });
    drop(served);
    each_tick_once(s, &t);
    assert!(
        t.iter()
            .any(|x| x["run_id"] == run_id.as_str() && x["state"] == "started"),
        "the recorded tick's run was started under its id: {t:#?}"
    );
    // The window missed while down: one run, for its latest tick; the
    // others counted as missed.
    // The restarted server's first look handled the missed window: one
    // tick of it started a run, however late that look came.
    let after: Vec<&Value> = t
        .iter()
        .filter(|x| x["manual"] == false && x["at_ms"].as_i64().unwrap() >= down_until)
        .collect();
    let first_look = after
        .iter()
        .map(|x| x["at_ms"].as_i64().unwrap())
        .min()
        .unwrap();
    let window: Vec<&&Value> = after
        .iter()
        .filter(|x| x["at_ms"].as_i64().unwrap() == first_look)
        .collect();
    assert_eq!(window.len(), 1, "{t:#?}");
    assert!(
        window[0]["tick_ms"].as_i64().unwrap() <= first_look,
        "{t:#?}"
    );
    let schedule = &shown(s, "sec")["schedule"];
    assert!(schedule["missed"].as_u64().unwrap() >= 2, "{schedule:#}");
}

#[test]
fn overlapping_ticks_are_skipped_or_queued_as_the_schedule_says() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = per_run(s);
    let slow = slow(s, "2.5");
    for (name, overlap) in [("skips", "skip"), ("queues", "queue")] {
        let out = wfhost(
            &[
                "schedule",
                "add",
                name,
                "--cron",
                "* * * * * *",
                "-w",
                &ws,
                "--overlap",
                overlap,
                &slow,
            ],
            s,
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let served = serve_with(s, &[]);
    let skipped = wait_for(s, "skips", 30, |t| {
        in_state(t, "started").len() >= 2 && !in_state(t, "skipped").is_empty()
    });
    let queued = wait_for(s, "queues", 30, |t| {
        in_state(t, "started").len() >= 2 && !in_state(t, "skipped").is_empty()
    });
    drop(served);
    each_tick_once(s, &skipped);
    each_tick_once(s, &queued);
    let reason = in_state(&skipped, "skipped")[0]["reason"].as_str().unwrap();
    assert!(reason.contains("still going"), "{reason}");
    // Skip: a run at a time, the ticks meanwhile start nothing.
    let starts = in_state(&skipped, "started");
    assert!(in_state(&skipped, "skipped").len() >= 2, "{skipped:#?}");
    // Queue: the tick that waited started once the run before ended; a
    // second one meanwhile was skipped.
    let q = in_state(&queued, "skipped")[0]["reason"].as_str().unwrap();
    assert!(q.contains("already waits"), "{q}");
    assert!(starts.len() >= 2);
    // Neither policy let two of its runs go at once: each started after
    // the one before had taken its 2.5 s.
    for ticks in [&skipped, &queued] {
        let mut started: Vec<i64> = in_state(ticks, "started")
            .iter()
            .map(|t| {
                let run = t["run_id"].as_str().unwrap();
                let d: Value =
                    serde_json::from_slice(&wfhost(&["show", run, "--json"], s).stdout).unwrap();
                d["run"]["created_at"].as_i64().unwrap()
            })
            .collect();
        started.sort();
        for pair in started.windows(2) {
            assert!(pair[1] - pair[0] >= 2_400, "{started:?}");
        }
    }
}

#[test]
fn the_api_adds_lists_pauses_triggers_and_removes_schedules() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let served = serve_with(s, &[]);
    let ws = per_run(s);
    let body = json!({"name": "api", "cron": "0 3 * * *", "tz": "America/New_York", "workflow": hello(), "workspace": ws});
    let (status, created) = http_post(&served.addr, "/v1/schedules", &body);
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["schedule"]["tz"], "America/New_York");
    let (status, again) = http_post(&served.addr, "/v1/schedules", &body);
    assert_eq!((status, &again["code"]), (409, &json!("exists")), "{again}");
    let inputs = repo()
        .join("examples/inputs/workflow.json")
        .display()
        .to_string();
    let (status, refused) = http_post(
        &served.addr,
        "/v1/schedules",
        &json!({"name": "needs", "cron": "@daily", "workflow": inputs, "workspace": ws}),
    );
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["details"]["pointer"]
            .as_str()
            .unwrap()
            .starts_with("/inputs/"),
        "{refused}"
    );
    let (status, refused) = http_post(
        &served.addr,
        "/v1/schedules",
        &json!({"name": "bad", "cron": "* * * * * * *", "workflow": hello(), "workspace": ws}),
    );
    assert_eq!(
        (status, &refused["details"]["field"]),
        (400, &json!("cron")),
        "{refused}"
    );
    let (_, listed) = http_get(&served.addr, "/v1/schedules");
    assert_eq!(listed["schedules"].as_array().unwrap().len(), 1, "{listed}");
    let (status, paused) = http_post(&served.addr, "/v1/schedules/api/pause", &json!({}));
    assert_eq!(
        (status, &paused["schedule"]["paused"]),
        (200, &json!(true)),
        "{paused}"
    );
    let (status, resumed) = http_post(&served.addr, "/v1/schedules/api/resume", &json!({}));
    assert_eq!(
        (status, &resumed["schedule"]["paused"]),
        (200, &json!(false)),
        "{resumed}"
    );
    let (status, triggered) = http_post(&served.addr, "/v1/schedules/api/trigger", &json!({}));
    assert_eq!(status, 202, "{triggered}");
    let run = triggered["run_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, view) = http_get(&served.addr, "/v1/schedules/api");
        if view["ticks"][0]["state"] == "started" {
            assert_eq!(view["ticks"][0]["run_id"], run.as_str());
            break;
        }
        assert!(Instant::now() < deadline, "{view:#}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, _) = http_get(&served.addr, "/v1/schedules/nope");
    assert_eq!(status, 404);
    let (status, removed) = http(&served.addr, "DELETE", "/v1/schedules/api", None);
    assert_eq!(
        (status, &removed["removed"]),
        (200, &json!("api")),
        "{removed}"
    );
    let (status, _) = http(&served.addr, "DELETE", "/v1/schedules/api", None);
    assert_eq!(status, 404);
}
