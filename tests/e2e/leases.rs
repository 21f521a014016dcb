//! Blocks as leased jobs: `wfhost serve` with `wfhost agent` processes,
//! over real HTTP on loopback.

use super::serve::{Served, await_status, http_get, http_post, serve_with};
use super::*;
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A `wfhost agent` process, killed on drop; its stderr goes to a file.
pub(super) struct Agent {
    child: std::process::Child,
    log: PathBuf,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Agent {
    pub(super) fn start(scratch: &Path, served: &Served, name: &str) -> Agent {
        let log = scratch.join(format!("{name}.log"));
        let child = command(scratch)
            .args(["agent", "--server", &format!("http://{}", served.addr)])
            .args(["--name", name])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Agent { child, log }
    }

    fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    pub(super) fn said(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// A chain of `n` echo blocks.
pub(super) fn chain(n: usize) -> Value {
    super::block_chain("chain", n, json!({"worker": "echo"}), json!({}))
}

/// One exec block that sleeps `seconds`.
fn sleeper(seconds: &str) -> Value {
    json!({"id": "sleeper", "start_node": "main",
        "plugins": {"exec": {"grants": ["exec"]}},
        "nodes": {"main": {"entry_block": "nap", "blocks": {"nap": {
            "worker": "exec",
            "config": {"commands": [{"argv": ["sleep", seconds]}]},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}}}}})
}

pub(super) fn start(served: &Served, manifest: &Value, ws: &Path) -> String {
    let (status, body) = http_post(
        &served.addr,
        "/v1/runs",
        &json!({"manifest": manifest, "workspace": ws, "max_steps": 1000}),
    );
    assert_eq!(status, 202, "{body}");
    body["run_id"].as_str().unwrap().to_string()
}

pub(super) fn jobs(served: &Served, run: &str) -> Vec<Value> {
    let (status, body) = http_get(&served.addr, &format!("/v1/runs/{run}/jobs?limit=1000"));
    assert_eq!(status, 200, "{body}");
    body["jobs"].as_array().unwrap().clone()
}

pub(super) fn history(served: &Served, job: i64) -> Vec<String> {
    let (status, body) = http_get(&served.addr, &format!("/v1/jobs/{job}"));
    assert_eq!(status, 200, "{body}");
    body["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{}:{}",
                e["kind"].as_str().unwrap(),
                e["agent"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// The first job of `run` once it is leased; waits up to 30 s.
pub(super) fn leased_job(served: &Served, run: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(job) = jobs(served, run)
            .into_iter()
            .find(|j| j["state"] == "leased")
        {
            return job;
        }
        assert!(Instant::now() < deadline, "no job of {run} was leased");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn two_agents_share_the_jobs_of_concurrent_runs_and_none_is_recorded_twice() {
    let scratch = tempfile::tempdir().unwrap();
    let served = serve_with(scratch.path(), &["--local-agents", "0"]);
    let a = Agent::start(scratch.path(), &served, "a");
    let b = Agent::start(scratch.path(), &served, "b");
    let runs: Vec<String> = (0..4)
        .map(|i| {
            let ws = scratch.path().join(format!("ws{i}"));
            std::fs::create_dir_all(&ws).unwrap();
            start(&served, &chain(50), &ws)
        })
        .collect();
    let mut by_agent = std::collections::BTreeMap::<String, usize>::new();
    for run in &runs {
        let shown = await_status(&served.addr, run, "succeeded");
        assert_eq!(shown["steps"], 50, "{shown}");
        let jobs = jobs(&served, run);
        assert_eq!(jobs.len(), 50, "one job per block execution");
        for job in &jobs {
            assert_eq!(job["state"], "succeeded", "{job}");
            assert_eq!(job["attempt"], 1, "{job}");
            *by_agent
                .entry(job["agent"].as_str().unwrap().into())
                .or_default() += 1;
        }
        // Each block recorded completed exactly once, in step order.
        let (_, steps) = http_get(&served.addr, &format!("/v1/runs/{run}/steps"));
        let steps = steps["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 50, "{steps:?}");
    }
    assert_eq!(by_agent.values().sum::<usize>(), 200);
    assert!(
        by_agent.len() == 2,
        "both agents ran jobs: {by_agent:?}\n{}\n{}",
        a.said(),
        b.said()
    );
    // Each agent said a line per job it ran: which, and what it came to.
    for (name, agent) in [("a", &a), ("b", &b)] {
        let said = agent.said();
        let lines = said
            .lines()
            .filter(|l| {
                l.starts_with(&format!("agent {name}: job "))
                    && l.contains(", attempt 1): SIGNAL:SUCCESS in ")
                    && l.ends_with(" s")
            })
            .count();
        assert_eq!(lines, by_agent[name], "{said}");
    }
}

#[test]
fn an_agent_killed_mid_job_loses_it_to_another_and_one_success_is_recorded() {
    let scratch = tempfile::tempdir().unwrap();
    let served = serve_with(
        scratch.path(),
        &["--local-agents", "0", "--lease-ms", "1000"],
    );
    let ws = workspace_in(scratch.path());
    let killed = Agent::start(scratch.path(), &served, "killed");
    let run = start(&served, &sleeper("2"), &ws);
    let job = leased_job(&served, &run);
    assert_eq!(job["agent"], "killed");
    killed.signal("-KILL");
    let _other = Agent::start(scratch.path(), &served, "other");
    await_status(&served.addr, &run, "succeeded");
    let jobs = jobs(&served, &run);
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0]["attempt"], 2);
    assert_eq!(jobs[0]["agent"], "other");
    assert_eq!(
        history(&served, jobs[0]["id"].as_i64().unwrap()),
        [
            "queued:",
            "leased:killed",
            "requeued:killed",
            "leased:other",
            "succeeded:other"
        ]
    );
}

#[test]
fn an_agent_stopped_by_sigterm_hands_its_job_back_at_once_and_exits_cleanly() {
    let scratch = tempfile::tempdir().unwrap();
    // The default lease (30 s): the job comes back long before it runs out.
    let served = serve_with(scratch.path(), &["--local-agents", "0"]);
    let ws = workspace_in(scratch.path());
    let mut stopped = Agent::start(scratch.path(), &served, "stopped");
    // A sleep this test alone runs, to find its process by.
    let nap = format!("59.{}", std::process::id());
    let run = start(&served, &sleeper(&nap), &ws);
    let sleeping = || {
        Command::new("pgrep")
            .args(["-f", "-x", &format!("sleep {nap}")])
            .status()
            .unwrap()
            .success()
    };
    let wait_until_sleeping = || {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !sleeping() {
            assert!(Instant::now() < deadline, "the job's sleep never started");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let job = leased_job(&served, &run);
    assert_eq!(job["agent"], "stopped");
    wait_until_sleeping();
    let id = job["id"].as_i64().unwrap();
    let asked = Instant::now();
    stopped.signal("-TERM");
    let status = loop {
        if let Some(status) = stopped.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "the agent did not stop: {}",
            stopped.said()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "{}", stopped.said());
    assert!(
        stopped
            .said()
            .contains(&format!("stopped job {id} and handed it back (SIGTERM)")),
        "{}",
        stopped.said()
    );
    // Queued again at once, as attempt 2; its sleep was stopped with it.
    let shown = http_get(&served.addr, &format!("/v1/jobs/{id}")).1;
    assert_eq!(
        (
            shown["job"]["state"].as_str(),
            shown["job"]["attempt"].as_u64()
        ),
        (Some("queued"), Some(2)),
        "{shown}"
    );
    assert!(
        shown["history"][2]["detail"]
            .as_str()
            .unwrap()
            .ends_with("handed back by stopped: the agent stopped (SIGTERM)"),
        "{shown}"
    );
    // The block's process was stopped with the job.
    while sleeping() {
        assert!(
            asked.elapsed() < Duration::from_secs(15),
            "the job's sleep is left"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        history(&served, id),
        ["queued:", "leased:stopped", "requeued:stopped"]
    );
    // The run goes on with the next agent; the stopped one recorded nothing.
    let mut other = Agent::start(scratch.path(), &served, "other");
    let job = leased_job(&served, &run);
    assert_eq!(
        (job["agent"].as_str(), job["attempt"].as_u64()),
        (Some("other"), Some(2))
    );
    // Stopped the same way, the other agent leaves no sleep behind either.
    wait_until_sleeping();
    other.signal("-TERM");
    assert_eq!(
        other.child.wait().unwrap().code(),
        Some(0),
        "{}",
        other.said()
    );
    let stopped_at = Instant::now();
    while sleeping() {
        assert!(
            stopped_at.elapsed() < Duration::from_secs(5),
            "the other agent's sleep is left"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, body) = http_post(&served.addr, &format!("/v1/runs/{run}/cancel"), &json!({}));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_server_killed_mid_run_and_started_again_goes_on_with_its_runs_and_leases() {
    let scratch = tempfile::tempdir().unwrap();
    // One agent in the server's own process: killing the server kills it.
    let options = ["--local-agents", "1", "--lease-ms", "1000"];
    let mut served = serve_with(scratch.path(), &options);
    let ws = workspace_in(scratch.path());
    // A nap, then a few blocks more.
    let mut manifest = sleeper("2");
    let blocks = manifest["nodes"]["main"]["blocks"].as_object_mut().unwrap();
    blocks["nap"]["transitions"][0]["action"] = json!("JUMP:b0");
    for (name, block) in chain(5)["nodes"]["main"]["blocks"].as_object().unwrap() {
        blocks.insert(name.clone(), block.clone());
    }
    let run = start(&served, &manifest, &ws);
    let nap = leased_job(&served, &run);
    let first_agent = nap["agent"].as_str().unwrap().to_string();
    served.child.kill().unwrap();
    served.child.wait().unwrap();

    // Started again over the same home: the lease the dead server's agent
    // held runs out, the job is queued again and the run goes on.
    let again = serve_with(scratch.path(), &options);
    let shown = await_status(&again.addr, &run, "succeeded");
    assert_eq!(shown["steps"], 6, "{shown}");
    let jobs = jobs(&again, &run);
    assert_eq!(jobs.len(), 6, "one job per block: {jobs:?}");
    assert_eq!(jobs[0]["block"], "nap");
    assert_eq!(jobs[0]["attempt"], 2, "{:?}", jobs[0]);
    let second_agent = jobs[0]["agent"].as_str().unwrap().to_string();
    assert_ne!(first_agent, second_agent, "each server has its own agent");
    assert_eq!(
        history(&again, jobs[0]["id"].as_i64().unwrap()),
        [
            "queued:".to_string(),
            format!("leased:{first_agent}"),
            format!("requeued:{first_agent}"),
            format!("leased:{second_agent}"),
            format!("succeeded:{second_agent}"),
        ]
    );
    for job in &jobs {
        assert_eq!(job["state"], "succeeded", "{job}");
    }
    // Each block recorded completed once.
    let (_, steps) = http_get(&again.addr, &format!("/v1/runs/{run}/steps"));
    assert_eq!(steps["steps"].as_array().unwrap().len(), 6, "{steps}");
    // And the restarted server takes new runs.
    let ws2 = scratch.path().join("ws2");
    std::fs::create_dir_all(&ws2).unwrap();
    let next = start(&again, &chain(3), &ws2);
    await_status(&again.addr, &next, "succeeded");
}

/// A workflow of one agent block, `dev.implement`, running the scripted
/// agent with `args`.
fn one_agent_block(id: &str, args: &[&str]) -> Value {
    json!({
        "id": id,
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "implement", "blocks": {"implement": {
            "worker": "agent",
            "config": {"command": super::agents::scripted(args)},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    })
}

#[test]
fn telemetry_from_an_agent_block_run_as_a_job_lands_in_the_runs_log() {
    let scratch = tempfile::tempdir().unwrap();
    let served = serve_with(scratch.path(), &["--local-agents", "0"]);
    let _agent = Agent::start(scratch.path(), &served, "remote");
    let ws = workspace_in(scratch.path());
    let statuses = scratch.path().join("statuses.txt");
    let manifest = one_agent_block(
        "telemetry-job",
        &[
            "--telemetry",
            r#"{"type": "tool_use", "node": "forged"}"#,
            "--telemetry",
            r#"[{"type": "a"}, {"type": "b"}]"#,
            "--telemetry",
            "[1]",
            "--telemetry-log",
            statuses.to_str().unwrap(),
            "--write",
            "a.txt=a",
        ],
    );
    let run = start(&served, &manifest, &ws);
    await_status(&served.addr, &run, "succeeded");
    // The agent process served the address: what it accepted and refused.
    assert_eq!(
        std::fs::read_to_string(&statuses)
            .unwrap()
            .lines()
            .collect::<Vec<_>>(),
        ["202", "202", "400"]
    );
    let (status, page) = http_get(&served.addr, &format!("/v1/runs/{run}/events?limit=1000"));
    assert_eq!(status, 200, "{page}");
    let events = page["events"].as_array().unwrap();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"]["type"].as_str().unwrap())
        .filter(|k| k.starts_with("block_") || *k == "telemetry")
        .collect();
    assert_eq!(
        kinds,
        [
            "block_started",
            "telemetry",
            "telemetry",
            "telemetry",
            "block_completed"
        ],
        "{page}"
    );
    let telemetry: Vec<&Value> = events
        .iter()
        .map(|e| &e["event"])
        .filter(|e| e["type"] == "telemetry")
        .collect();
    for t in &telemetry {
        // Attributed by the job, whatever the body says.
        assert_eq!(
            (&t["node"], &t["block"]),
            (&json!("dev"), &json!("implement"))
        );
    }
    let types: Vec<&str> = telemetry
        .iter()
        .map(|t| t["body"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["tool_use", "a", "b"]);
}

/// The events of `run`'s log: `(type, body.type)` of its blocks and
/// telemetry.
fn block_and_telemetry_events(served: &Served, run: &str) -> Vec<(String, String)> {
    let (status, page) = http_get(&served.addr, &format!("/v1/runs/{run}/events?limit=1000"));
    assert_eq!(status, 200, "{page}");
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["event"])
        .filter(|e| {
            let kind = e["type"].as_str().unwrap();
            kind.starts_with("block_") || kind == "telemetry"
        })
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                e["body"]["type"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn telemetry_of_a_running_job_is_in_the_runs_log_before_the_job_ends() {
    let scratch = tempfile::tempdir().unwrap();
    let served = serve_with(scratch.path(), &["--local-agents", "0"]);
    let _agent = Agent::start(scratch.path(), &served, "remote");
    let ws = workspace_in(scratch.path());
    let go = scratch.path().join("go");
    let manifest = one_agent_block(
        "live-telemetry",
        &[
            "--telemetry",
            r#"{"type": "early"}"#,
            "--telemetry",
            r#"[{"type": "early-2"}, {"type": "early-3"}]"#,
            "--wait-for",
            go.to_str().unwrap(),
            "--late-telemetry",
            r#"{"type": "late"}"#,
            "--write",
            "a.txt=a",
        ],
    );
    let run = start(&served, &manifest, &ws);
    // The block waits for `go`: what its agent sent so far reaches the log.
    let deadline = Instant::now() + Duration::from_secs(60);
    let live = loop {
        let events = block_and_telemetry_events(&served, &run);
        if events.iter().filter(|(k, _)| k == "telemetry").count() == 3 {
            break events;
        }
        assert!(Instant::now() < deadline, "no live telemetry: {events:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let kinds = |events: &[(String, String)]| -> Vec<String> {
        events.iter().map(|(k, t)| format!("{k}:{t}")).collect()
    };
    assert_eq!(
        kinds(&live),
        [
            "block_started:",
            "telemetry:early",
            "telemetry:early-2",
            "telemetry:early-3"
        ]
    );
    std::fs::write(&go, "").unwrap();
    await_status(&served.addr, &run, "succeeded");
    // Each event once: what was forwarded live is not sent again with the
    // result; what came later is recorded too.
    assert_eq!(
        kinds(&block_and_telemetry_events(&served, &run)),
        [
            "block_started:",
            "telemetry:early",
            "telemetry:early-2",
            "telemetry:early-3",
            "telemetry:late",
            "block_completed:"
        ]
    );
}

/// The largest job request of each run in the store of `home`, by run id
/// (read with Python's sqlite3: the test does not link SQLite).
fn largest_job_requests(home: &std::path::Path) -> std::collections::BTreeMap<String, u64> {
    let script = "import sqlite3, sys\n\
        c = sqlite3.connect(sys.argv[1])\n\
        for run, size in c.execute('SELECT r.id, max(length(j.request)) FROM jobs j JOIN runs r ON r.num = j.run GROUP BY r.id'):\n\
        \x20   print(run, size)\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(home.join("wfhost.db"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (run, size) = l.split_once(' ').unwrap();
            (run.to_string(), size.parse().unwrap())
        })
        .collect()
}

#[test]
fn a_jobs_request_does_not_grow_with_its_workflow() {
    let scratch = tempfile::tempdir().unwrap();
    let served = serve_with(scratch.path(), &[]);
    let ws = workspace_in(scratch.path());
    let small = start(&served, &chain(2), &ws);
    await_status(&served.addr, &small, "succeeded");
    let large = start(&served, &chain(300), &ws);
    await_status(&served.addr, &large, "succeeded");
    let sizes = largest_job_requests(&scratch.path().join("home"));
    // The run's definition is named by hash, not carried by each job: a
    // job of a 300-block workflow is no larger than one of a 2-block one
    // (but for the longer block names and step numbers).
    let (small, large) = (sizes[&small], sizes[&large]);
    assert!(large < small + 100, "{large} bytes against {small}");
}

#[test]
fn serve_cache_dir_is_the_cache_of_its_agents_and_runs() {
    let scratch = tempfile::tempdir().unwrap();
    let cache = scratch.path().join("serve-cache");
    let served = serve_with(scratch.path(), &["--cache-dir", cache.to_str().unwrap()]);
    let ws = workspace_in(scratch.path());
    let run = start(&served, &chain(2), &ws);
    await_status(&served.addr, &run, "succeeded");
    let entries = std::fs::read_dir(&cache).map(|d| d.count()).unwrap_or(0);
    assert!(entries > 0, "nothing was cached in {}", cache.display());
    // Not in the environment's cache.
    assert!(!scratch.path().join("cache").exists());
}

#[test]
fn serve_no_cache_leaves_its_agents_and_runs_without_a_cache() {
    let scratch = tempfile::tempdir().unwrap();
    // The environment names a cache (`WFHOST_CACHE_DIR`): nothing goes there.
    let served = serve_with(scratch.path(), &["--no-cache"]);
    let ws = workspace_in(scratch.path());
    let run = start(&served, &chain(2), &ws);
    await_status(&served.addr, &run, "succeeded");
    let cache = scratch.path().join("cache");
    let entries = std::fs::read_dir(&cache).map(|d| d.count()).unwrap_or(0);
    assert_eq!(entries, 0, "plugins were cached in {}", cache.display());
}

#[test]
fn a_paused_agent_past_its_lease_cannot_record_its_result() {
    let scratch = tempfile::tempdir().unwrap();
    let served = serve_with(
        scratch.path(),
        &["--local-agents", "0", "--lease-ms", "1000"],
    );
    let ws = workspace_in(scratch.path());
    let paused = Agent::start(scratch.path(), &served, "paused");
    let run = start(&served, &sleeper("1.5"), &ws);
    let job = leased_job(&served, &run);
    let id = job["id"].as_i64().unwrap();
    paused.signal("-STOP");
    let _other = Agent::start(scratch.path(), &served, "other");
    await_status(&served.addr, &run, "succeeded");
    // Resumed, the paused agent learns it lost the lease: its heartbeat or
    // its completion is refused, and nothing it says is recorded.
    paused.signal("-CONT");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(paused.said().contains("lost the lease") || paused.said().contains("was refused")) {
        assert!(
            Instant::now() < deadline,
            "the paused agent said: {}",
            paused.said()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let jobs = jobs(&served, &run);
    assert_eq!(
        (jobs[0]["agent"].as_str(), jobs[0]["attempt"].as_u64()),
        (Some("other"), Some(2))
    );
    let kinds = history(&served, id);
    assert_eq!(
        kinds.iter().filter(|k| k.starts_with("succeeded")).count(),
        1,
        "{kinds:?}"
    );
    // A late completion of the first lease, sent over HTTP, is refused
    // and recorded as such.
    let (status, body) = http_post(
        &served.addr,
        &format!("/v1/jobs/{id}/complete"),
        &json!({"attempt": 1, "token": "0".repeat(32), "succeeded": true, "result": {}}),
    );
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "lease_lost");
    assert_eq!(body["details"]["state"], "succeeded");
    assert!(history(&served, id).last().unwrap().starts_with("refused"));
    // The run's record of the block is the other agent's.
    let shown = await_status(&served.addr, &run, "succeeded");
    assert_eq!(shown["steps"], 1, "{shown}");
}

#[test]
fn a_workspace_the_agent_does_not_share_fails_the_job_with_the_reason() {
    let scratch = tempfile::tempdir().unwrap();
    let served = serve_with(scratch.path(), &["--local-agents", "0"]);
    let ws = workspace_in(scratch.path());
    let run = start(&served, &chain(1), &ws);
    // Another machine's view: the path holds a different workspace.
    let deadline = Instant::now() + Duration::from_secs(30);
    while jobs(&served, &run).is_empty() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(ws.join(".output/workspace-id"), "elsewhere").unwrap();
    let agent = Agent::start(scratch.path(), &served, "remote");
    let shown = await_status(&served.addr, &run, "failed");
    let (_, events) = http_get(&served.addr, &format!("/v1/runs/{run}/events"));
    let text = events.to_string();
    assert!(
        text.contains("must see the workspace at the same path"),
        "{shown}\n{text}\n{}",
        agent.said()
    );
}

#[test]
fn a_stage_graph_runs_as_a_workflow_with_the_stage_statuses() {
    let scratch = tempfile::tempdir().unwrap();
    let served = serve_with(scratch.path(), &[]);
    let project = workspace_in(scratch.path());
    let graph = json!({
        "workflow": {
            "name": "release",
            "description": "build, approve, publish",
            "nodes": [
                {"id": "build", "type": "exec_block", "exec": {"commands": [{"name": "make", "argv": ["true"]}]}},
                {"id": "approve", "type": "gate", "config": {"requires_approval": true, "message": "ship it?"}},
                {"id": "publish", "type": "exec_block", "exec": {"max_attempts": 2, "commands": [{"name": "pub", "argv": ["true"]}]}}
            ],
            "edges": [{"from": "build", "to": "approve"}, {"from": "approve", "to": "publish"}]
        },
        "project_path": project,
        "intent": {"goal": "build and publish"}
    });
    let (status, body) = http_post(&served.addr, "/v1/runs", &graph);
    assert_eq!(status, 202, "{body}");
    let run = body["run_id"].as_str().unwrap().to_string();
    let shown = await_status(&served.addr, &run, "waiting");
    let statuses = |shown: &Value| -> Vec<String> {
        shown["stages"]
            .as_array()
            .unwrap_or_else(|| panic!("{shown}"))
            .iter()
            .map(|s| {
                format!(
                    "{}={}",
                    s["id"].as_str().unwrap(),
                    s["status"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(
        statuses(&shown),
        ["build=succeeded", "approve=needs_human", "publish=pending"]
    );
    // The gate answers to its stage's id as well as to its gate id.
    let gate = shown["gates"][0]["gate_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{shown}"))
        .to_string();
    let (status, body) = http_post(
        &served.addr,
        &format!("/v1/runs/{run}/gates/approve"),
        &json!({"answer": "approved"}),
    );
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["gate"], gate.as_str(), "{body}");
    let shown = await_status(&served.addr, &run, "succeeded");
    assert_eq!(
        statuses(&shown),
        ["build=succeeded", "approve=succeeded", "publish=succeeded"]
    );

    // Changes requested end the run: the stage after the gate is never
    // reached, so it is skipped.
    let (status, body) = http_post(&served.addr, "/v1/runs", &graph);
    assert_eq!(status, 202, "{body}");
    let rejected = body["run_id"].as_str().unwrap().to_string();
    await_status(&served.addr, &rejected, "waiting");
    let (status, body) = http_post(
        &served.addr,
        &format!("/v1/runs/{rejected}/gates/{gate}"),
        &json!({"answer": "changes-requested:not yet"}),
    );
    assert_eq!(status, 202, "{body}");
    let shown = await_status(&served.addr, &rejected, "failed");
    assert_eq!(
        statuses(&shown),
        ["build=succeeded", "approve=failed", "publish=skipped"]
    );
    // A name that is neither a gate nor a stage waiting at one.
    let (status, body) = http_post(
        &served.addr,
        &format!("/v1/runs/{run}/gates/build"),
        &json!({"answer": "approved"}),
    );
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("not_waiting")),
        "{body}"
    );
    // A graph that does not translate: 400 naming the stage.
    let bad = json!({
        "workflow": {"nodes": [{"id": "sh", "type": "exec_block", "exec": {"commands": [{"name": "x", "argv": ["bash", "-c", "true"]}]}}], "edges": []},
        "project_path": project,
    });
    let (status, body) = http_post(&served.addr, "/v1/runs", &bad);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["details"]["node"], "sh", "{body}");
    assert!(body["message"].as_str().unwrap().contains("sh"), "{body}");
}

/// The daemon's per-command options: `timeout_sec` kills a command,
/// `allow_failure` goes on after it; a relative `project_path` is resolved
/// under the server's projects root.
#[test]
fn a_stage_graphs_commands_time_out_and_may_fail_as_the_payload_says() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().canonicalize().unwrap();
    let root_arg = root.display().to_string();
    let served = serve_with(scratch.path(), &["--projects-root", &root_arg]);
    workspace_in(scratch.path());
    let graph = |strict_timeout: bool| {
        json!({
            "workflow": {
                "name": "checks",
                "nodes": [
                    {"id": "lint", "type": "exec_block", "exec": {"commands": [
                        {"name": "slow", "argv": ["sleep", "30"], "timeout_sec": 1, "allow_failure": true},
                        {"name": "flaky", "argv": ["false"], "allow_failure": true},
                        {"name": "ok", "argv": ["touch", "linted"]}
                    ]}},
                    {"id": "test", "type": "exec_block", "exec": {"commands": [
                        {"name": "t", "argv": ["sleep", if strict_timeout { "30" } else { "0" }], "timeout_sec": 1}
                    ]}}
                ],
                "edges": [{"from": "lint", "to": "test"}]
            },
            "project_path": "./ws"
        })
    };
    let began = Instant::now();
    let (status, body) = http_post(&served.addr, "/v1/runs", &graph(false));
    assert_eq!(status, 202, "{body}");
    let run = body["run_id"].as_str().unwrap().to_string();
    let shown = await_status(&served.addr, &run, "succeeded");
    assert!(
        began.elapsed() < Duration::from_secs(25),
        "the timeout did not kill `sleep 30`"
    );
    assert!(
        root.join("ws/linted").exists(),
        "the run did not work in <root>/ws"
    );
    assert_eq!(
        shown["run"]["workspace"],
        root.join("ws").display().to_string(),
        "{shown}"
    );
    let stages: Vec<String> = shown["stages"]
        .as_array()
        .unwrap_or_else(|| panic!("{shown}"))
        .iter()
        .map(|s| {
            format!(
                "{}={}",
                s["id"].as_str().unwrap(),
                s["status"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(stages, ["lint=succeeded", "test=succeeded"]);
    // One job per command of the split stage, each with its outcome.
    let outcomes: Vec<String> = jobs(&served, &run)
        .iter()
        .map(|j| {
            format!(
                "{}={}",
                j["block"].as_str().unwrap_or("?"),
                j["outcome"].as_str().unwrap_or("?")
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            "lint=failed",
            "lint--2=failed",
            "lint--3=succeeded",
            "test=succeeded"
        ],
        "{:?}",
        jobs(&served, &run)
    );
    // A timed-out command without allow_failure fails its stage.
    let (status, body) = http_post(&served.addr, "/v1/runs", &graph(true));
    assert_eq!(status, 202, "{body}");
    let failed = body["run_id"].as_str().unwrap().to_string();
    let shown = await_status(&served.addr, &failed, "failed");
    let stages: Vec<&str> = shown["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["succeeded", "failed"], "{shown}");
}

/// A block run as a job on an agent gets the run's session folder, as a
/// block the run process runs does: `{session}` context files resolve and
/// the agent sees `SESSION_DIR`.
#[test]
fn a_job_knows_its_runs_session_folder() {
    let scratch = tempfile::tempdir().unwrap();
    let served = serve_with(scratch.path(), &["--local-agents", "0"]);
    let _agent = Agent::start(scratch.path(), &served, "remote");
    let json_agent = repo()
        .join("examples/agents/json_agent.py")
        .display()
        .to_string();
    let dump = scratch.path().join("coder.json");
    let agent = |command: Vec<String>, files: Value, next: &str| {
        json!({
            "worker": "agent",
            "config": {
                "command": command, "protocol": "json", "prompt_delivery": "argument",
                "input": {"task": {"id": "T-001", "title": "t", "goal": "g", "context_files": files}}
            },
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": next}]
        })
    };
    let manifest = json!({
        "id": "session-job",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "team",
        "nodes": {"team": {"entry_block": "spec", "blocks": {
            "spec": agent(vec![json_agent.clone(), "--write".into(), "{session}/spec.md=# Goals\\nx\\n".into()], json!([]), "JUMP:code"),
            "code": agent(vec![json_agent, "--dump-context".into(), dump.display().to_string()], json!(["{session}/spec.md"]), "END")
        }}}
    });
    let ws = workspace_in(scratch.path());
    let run = start(&served, &manifest, &ws);
    await_status(&served.addr, &run, "succeeded");
    let seen: Value = serde_json::from_slice(&std::fs::read(&dump).unwrap()).unwrap();
    let session = seen["env"]["SESSION_DIR"].as_str().unwrap();
    assert!(
        session.starts_with(".agents-work/") && ws.join(session).join("spec.md").is_file(),
        "{seen}"
    );
    assert_eq!(
        seen["input"]["task"]["context_files"][0],
        format!("{session}/spec.md")
    );
}

/// An agent's `tasks.yaml` nested 1,000 levels deep used to overflow the
/// stack of the server's own local agent and take the server down with
/// every run it served (issue 36). Now its run fails with the reason; the
/// server keeps answering, a run it was already serving finishes, and it
/// takes new runs.
#[test]
fn a_tasks_yaml_nested_a_thousand_levels_deep_fails_its_run_not_the_server() {
    let scratch = tempfile::tempdir().unwrap();
    let mut served = serve_with(scratch.path(), &["--local-agents", "1"]);
    let other_ws = scratch.path().join("other");
    std::fs::create_dir_all(&other_ws).unwrap();
    let mut other = sleeper("1");
    other["nodes"]["main"]["blocks"]["nap"]["transitions"][0]["action"] = json!("JUMP:b0");
    let blocks = other["nodes"]["main"]["blocks"].as_object_mut().unwrap();
    for (name, block) in chain(3)["nodes"]["main"]["blocks"].as_object().unwrap() {
        blocks.insert(name.clone(), block.clone());
    }
    let other = start(&served, &other, &other_ws);

    let ws = workspace_in(scratch.path());
    let deep =
        super::agents::one_planner(&["--write".into(), super::agents::deep_tasks_write(1_000)]);
    let run = start(&served, &deep, &ws);
    await_status(&served.addr, &run, "failed");
    let (status, page) = http_get(&served.addr, &format!("/v1/runs/{run}/events?limit=1000"));
    assert_eq!(status, 200, "{page}");
    assert!(
        page.to_string()
            .contains("tasks.yaml: nested more than 64 levels deep (the host's limit) (undone)"),
        "{page}"
    );

    let (status, health) = http_get(&served.addr, "/v1/health");
    assert_eq!((status, &health["status"]), (200, &json!("ok")), "{health}");
    await_status(&served.addr, &other, "succeeded");
    let ws2 = scratch.path().join("ws2");
    std::fs::create_dir_all(&ws2).unwrap();
    let next = start(&served, &chain(3), &ws2);
    await_status(&served.addr, &next, "succeeded");
    assert!(
        served.child.try_wait().unwrap().is_none(),
        "the server exited"
    );
}
