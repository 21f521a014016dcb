//! What a block costs through `wfhost serve`, counted, not timed: HTTP
//! round trips between agent and server, and how often the server's lease
//! waiters and the run's process look at the store while they wait. A
//! wait that polls looks once a millisecond (tens of times per block
//! here); one woken by the doorbells looks about twice.

use super::leases::jobs;
use super::serve::{Served, await_status, http_post};
use super::*;
use serde_json::{Value, json};

/// A chain of `n` exec blocks that each sleep `seconds`: long enough for
/// a polling wait to show.
fn sleepy_chain(n: usize, seconds: &str) -> Value {
    super::block_chain(
        "sleepy",
        n,
        json!({"worker": "exec", "config": {"commands": [{"argv": ["sleep", seconds]}]}}),
        json!({"exec": {"grants": ["exec"]}}),
    )
}

/// `wfhost serve` with two local agents (one waits for a lease while the
/// other runs a job) and the jobs' debug events in `log`.
fn serve_logged(scratch: &Path, log: &Path) -> Served {
    super::serve::serve_logging(
        scratch,
        log,
        &["--local-agents", "2"],
        &[("WFHOST_LOG", "wfhost_server=debug,wfhost_app::jobs=debug")],
    )
}

/// The sum of `field=N` over the lines of `text` that say `what`, and how
/// many lines did.
fn sum_of(text: &str, what: &str, field: &str) -> (u64, u64) {
    let key = format!("{field}=");
    text.lines()
        .filter(|l| l.contains(what))
        .filter_map(|l| {
            let at = l.find(&key)? + key.len();
            l[at..]
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u64>()
                .ok()
        })
        .fold((0, 0), |(sum, lines), n| (sum + n, lines + 1))
}

/// The agent endpoints' requests answered, by route.
fn agent_requests(text: &str) -> std::collections::BTreeMap<String, u64> {
    let mut by_route = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| l.contains("request answered")) {
        // `http{method=POST path=/v1/jobs/{id}/complete status=200 …}:`:
        // the route template holds braces, the span ends with `}:`.
        let Some(rest) = line.split("path=").nth(1) else {
            continue;
        };
        let end = [rest.find(' '), rest.find("}:")]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(rest.len());
        let path = &rest[..end];
        let agents = path.starts_with("/v1/agent/")
            || path.starts_with("/v1/jobs/{id}/")
            || path.starts_with("/v1/definitions/");
        if agents {
            *by_route.entry(path.to_string()).or_default() += 1;
        }
    }
    by_route
}

#[test]
fn a_job_through_the_server_costs_two_requests_and_a_few_looks_however_long_it_runs() {
    const BLOCKS: usize = 100;
    let scratch = tempfile::tempdir().unwrap();
    let log = scratch.path().join("serve.log");
    let served = serve_logged(scratch.path(), &log);
    let ws = workspace_in(scratch.path());
    let (status, body) = http_post(
        &served.addr,
        "/v1/runs",
        &json!({"manifest": sleepy_chain(BLOCKS, "0.03"), "workspace": ws, "max_steps": 1000}),
    );
    assert_eq!(status, 202, "{body}");
    let run = body["run_id"].as_str().unwrap().to_string();
    let shown = await_status(&served.addr, &run, "succeeded");
    assert_eq!(shown["steps"], BLOCKS, "{shown}");
    let jobs = jobs(&served, &run);
    assert_eq!(jobs.len(), BLOCKS);
    assert!(jobs.iter().all(|j| j["attempt"] == 1), "no job ran twice");
    drop(served);
    let serve_log = std::fs::read_to_string(&log).unwrap();
    let run_log = std::fs::read_to_string(
        scratch
            .path()
            .join("home/serve-logs")
            .join(format!("{run}.log")),
    )
    .unwrap();

    // Round trips: a lease and a completion per block, and the run's
    // definition once per agent slot (no heartbeat is due so soon).
    let requests = agent_requests(&serve_log);
    let total: u64 = requests.values().sum();
    assert!(
        total <= 2 * BLOCKS as u64 + 2,
        "{total} agent requests for {BLOCKS} blocks: {requests:?}"
    );
    assert_eq!(
        requests.get("/v1/jobs/{id}/complete"),
        Some(&(BLOCKS as u64)),
        "{requests:?}"
    );

    // The server's lease waiters: every lease answered, and few looks.
    let (looks, leases) = sum_of(&serve_log, "lease answered", "looks");
    assert!(leases >= BLOCKS as u64, "{leases} leases answered");
    assert!(
        looks <= 5 * BLOCKS as u64,
        "the lease waiters looked {looks} times for {BLOCKS} blocks: they poll"
    );
    // The run's process: each job looked at about twice (queued, then
    // final once the server rang).
    let (looks, waited) = sum_of(&run_log, "job final", "looks");
    assert_eq!(waited, BLOCKS as u64, "every block's job was waited for");
    assert!(
        looks <= 3 * BLOCKS as u64,
        "the run looked at its jobs {looks} times for {BLOCKS} blocks: it polls"
    );
}
