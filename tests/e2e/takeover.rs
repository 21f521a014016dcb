//! A server takes over the runs whose process died: the machine of one of
//! two servers on a database dies (its server and run processes SIGKILLed)
//! and the other server's runs go on to their end with every step once; a
//! run that kills its process is taken over at most three times; a run of
//! `wfhost run` (no server's) is never taken over.

use std::process::Stdio;
use std::time::{Duration, Instant};

use wfhost_store::testing::TestDatabase;

use super::serve::{Served, await_status, http_get, http_post};
use super::*;

/// `wfhost serve` on a free port with `extra` options, its stderr (the
/// server's warnings) in `log`.
fn serve_logging(scratch: &Path, log: &Path, extra: &[&str]) -> Served {
    super::serve::serve_logging(scratch, log, extra, &[])
}

/// A chain of `blocks` exec blocks each sleeping `seconds`.
fn naps(blocks: usize, seconds: &str) -> serde_json::Value {
    super::block_chain(
        "naps",
        blocks,
        serde_json::json!({"worker": "exec", "config": {"commands": [{"argv": ["sleep", seconds]}]}}),
        serde_json::json!({"exec": {"grants": ["exec"]}}),
    )
}

/// The pid of the process executing `run` (a process of this machine),
/// once one does, other than `not`.
fn executor_of(home: &Path, run: &str, not: Option<u32>) -> u32 {
    let store = wfhost_store::Store::open_existing(home).unwrap();
    let id = wfhost_store::RunId::parse(run).unwrap();
    let mut pid = None;
    super::wait_until("a process executes the run", || {
        pid = store.lock_holder(&id).filter(|p| Some(*p) != not);
        pid.is_some()
    });
    pid.unwrap()
}

fn sigkill(pid: u32) {
    // SAFETY: kill(2) on a run process a server of this test started.
    assert_eq!(
        unsafe { libc::kill(pid as i32, libc::SIGKILL) },
        0,
        "pid {pid}"
    );
}

/// Two servers on one database; a run started through the first, whose
/// blocks its own agent runs. The first machine dies: its server and the
/// run's process are SIGKILLed together (the database releases the run's
/// lock as their connections close). The second server takes the run over
/// and it ends succeeded, each step recorded once and each job succeeded
/// once; the second server's log says it took the run over.
#[test]
fn the_runs_of_a_dead_machine_are_taken_over_by_another_server() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    db.configure(&first.path().join("home"));
    db.configure(&second.path().join("home"));
    let options = ["--local-agents", "1", "--lease-ms", "1000"];
    let mut a = serve_logging(
        first.path(),
        &first.path().join("a.log"),
        &[&options[..], &["--take-over-ms", "0"]].concat(),
    );
    let log = second.path().join("b.log");
    let b = serve_logging(
        second.path(),
        &log,
        &[&options[..], &["--take-over-ms", "1000"]].concat(),
    );
    let blocks = 6;
    let ws = workspace_in(first.path());
    let run = super::leases::start(&a, &naps(blocks, "0.3"), &ws);
    super::wait_until("two blocks done", || {
        super::leases::jobs(&b, &run)
            .iter()
            .filter(|j| j["state"] == "succeeded")
            .count()
            >= 2
    });
    let pid = executor_of(&first.path().join("home"), &run, None);
    a.child.kill().unwrap(); // SIGKILL
    sigkill(pid);
    a.child.wait().unwrap();
    let died = Instant::now();
    let shown = await_status(&b.addr, &run, "succeeded");
    eprintln!(
        "taken over and finished {:?} after the machine died",
        died.elapsed()
    );
    assert_eq!(shown["steps"], blocks, "{shown}");
    let (_, steps) = http_get(&b.addr, &format!("/v1/runs/{run}/steps"));
    assert_eq!(steps["steps"].as_array().unwrap().len(), blocks, "{steps}");
    let done = super::leases::jobs(&b, &run);
    assert_eq!(done.len(), blocks, "one job per block: {done:?}");
    for job in &done {
        let succeeded = super::leases::history(&b, job["id"].as_i64().unwrap())
            .iter()
            .filter(|h| h.starts_with("succeeded:"))
            .count();
        assert_eq!(succeeded, 1, "{job}");
    }
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains(&format!("taking over run {run}")) && said.contains("takeover 1 of 3"),
        "{said}"
    );
}

/// One server on the embedded store: a run whose process is SIGKILLed is
/// taken over (a new process executes it) three times; the fourth time it
/// stays interrupted, and the server says why once. `wfhost resume`
/// (the API's) still continues it. A run of `wfhost run` in the same home,
/// killed, is never taken over: the server did not execute it.
#[test]
fn a_run_is_taken_over_at_most_three_times_and_a_cli_run_never() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let log = s.join("serve.log");
    let served = serve_logging(
        s,
        &log,
        &[
            "--local-agents",
            "1",
            "--lease-ms",
            "1000",
            "--take-over-ms",
            "200",
        ],
    );
    let home = s.join("home");
    let ws = workspace_in(s);
    let blocks = 40;
    let run = super::leases::start(&served, &naps(blocks, "0.2"), &ws);
    let mut pid = executor_of(&home, &run, None);
    for _ in 0..3 {
        sigkill(pid);
        pid = executor_of(&home, &run, Some(pid));
    }
    sigkill(pid);
    let shown = await_status(&served.addr, &run, "interrupted");
    assert!(shown["steps"].as_u64().unwrap() < blocks as u64, "{shown}");
    // Looked at again and again, it stays so.
    std::thread::sleep(Duration::from_millis(2500));
    let (_, shown) = http_get(&served.addr, &format!("/v1/runs/{run}"));
    assert_eq!(shown["status"], "interrupted", "{shown}");
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        said.matches(&format!("taking over run {run}")).count(),
        3,
        "{said}"
    );
    let left = format!("run {run} is interrupted and not taken over: its process died 3 times");
    assert_eq!(said.matches(&left).count(), 1, "said once: {said}");

    // A run of `wfhost run`, killed: the server leaves it alone.
    let (mut child, _output) = super::durable::thinking_run(s, 1500, Stdio::null());
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let runs: serde_json::Value =
        serde_json::from_slice(&wfhost(&["runs", "--json"], s).stdout).unwrap();
    let cli_run = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] != run.as_str())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    std::thread::sleep(Duration::from_millis(2500));
    let (_, shown) = http_get(&served.addr, &format!("/v1/runs/{cli_run}"));
    assert_eq!(shown["status"], "interrupted", "{shown}");

    // A run at rest at a gate is no longer noted as served: nothing to
    // take over, and nothing for the servers to look at on every look.
    let gated_ws = s.join("gated");
    std::fs::create_dir_all(&gated_ws).unwrap();
    let (status, gated) = http_post(
        &served.addr,
        "/v1/runs",
        &serde_json::json!({"workflow": repo().join("examples/review-gate/workflow.json"), "workspace": gated_ws}),
    );
    assert_eq!(status, 202, "{gated}");
    await_status(&served.addr, gated["run_id"].as_str().unwrap(), "waiting");
    let store = wfhost_store::Store::open_existing(&home).unwrap();
    super::wait_until("the waiting run forgotten as served", || {
        store
            .unexecuted_served_runs(0, 10)
            .unwrap()
            .iter()
            .all(|(_, r)| r.run_id.as_str() == run)
    });

    // A person resumes the one left: it ends.
    let (status, body) = http_post(
        &served.addr,
        &format!("/v1/runs/{run}/resume"),
        &serde_json::json!({}),
    );
    assert_eq!(status, 202, "{body}");
    let shown = await_status(&served.addr, &run, "succeeded");
    assert_eq!(shown["steps"], blocks, "{shown}");
}
