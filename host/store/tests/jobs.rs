//! The job queue against a real SQLite file: claims that race, fenced and
//! idempotent completions, expired leases.

use wfhost_core::run::event::{Event, EventSink, QueuedJob};
use wfhost_store::{Completion, Durability, JobState, NewJob, Store};

mod common;
use common::Backend;
use common::record;
#[allow(unused_imports)]
use common::{M, Q, R, R1, R2, R3, R4};

fn store_with_run(home: &std::path::Path) -> Store {
    let mut store = Store::open(home, Durability::Normal).unwrap();
    store
        .create_run(&record(R), "{}", &common::started(R))
        .unwrap();
    store
}

fn wasm() -> Vec<String> {
    vec!["wasm".to_string()]
}

fn job(step: u64, requires: &[String]) -> NewJob<'_> {
    NewJob {
        run_id: R,
        branch: 1,
        step,
        lane: "",
        node: "main",
        block: "a",
        requires,
        request: "{}",
    }
}

fn a_job_is_queued_once_per_execution_and_found_again(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = store_with_run(home.path());
    let caps = wasm();
    let first = store.enqueue_job(&job(0, &caps), 10).unwrap();
    let again = store.enqueue_job(&job(0, &caps), 20).unwrap();
    assert_eq!(first.id, again.id);
    assert_eq!(again.state, JobState::Queued);
    let other = store.enqueue_job(&job(1, &caps), 30).unwrap();
    assert_ne!(other.id, first.id);
    let history = store.job_history(first.id).unwrap();
    assert_eq!(history.len(), 1, "{history:?}");
}

fn an_agent_gets_only_jobs_it_can_run(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = store_with_run(home.path());
    let slurm = vec!["wasm".to_string(), "slurm".to_string()];
    let needs_slurm = store.enqueue_job(&job(0, &slurm), 1).unwrap();
    let plain = store.enqueue_job(&job(1, &wasm()), 1).unwrap();
    let lease = store.claim_job("a", &wasm(), 1000, 2).unwrap().unwrap();
    assert_eq!(lease.job.id, plain.id);
    assert!(store.claim_job("a", &wasm(), 1000, 2).unwrap().is_none());
    let lease = store.claim_job("b", &slurm, 1000, 2).unwrap().unwrap();
    assert_eq!(lease.job.id, needs_slurm.id);
}

fn two_agents_racing_never_hold_the_same_job(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = store_with_run(home.path());
    for step in 0..200 {
        store.enqueue_job(&job(step, &wasm()), 1).unwrap();
    }
    let claimers: Vec<_> = (0..4)
        .map(|i| {
            let home = home.path().to_path_buf();
            std::thread::spawn(move || {
                let mut store = Store::open(&home, Durability::Normal).unwrap();
                let mut got = Vec::new();
                while let Some(lease) = store
                    .claim_job(&format!("agent-{i}"), &wasm(), 60_000, 5)
                    .unwrap()
                {
                    let done = store
                        .complete_job(
                            (lease.job.id, lease.job.attempt, &lease.token),
                            true,
                            "{}",
                            6,
                            |_| "ok".into(),
                        )
                        .unwrap();
                    assert!(matches!(done, Completion::Accepted { .. }), "{done:?}");
                    got.push(lease.job.id);
                }
                got
            })
        })
        .collect();
    let mut all: Vec<i64> = claimers
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    all.sort_unstable();
    let count = all.len();
    all.dedup();
    assert_eq!(count, 200, "every job run");
    assert_eq!(all.len(), 200, "no job leased twice");
}

fn a_heartbeat_extends_only_the_matching_lease(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = store_with_run(home.path());
    store.enqueue_job(&job(0, &wasm()), 0).unwrap();
    let lease = store.claim_job("a", &wasm(), 100, 0).unwrap().unwrap();
    let id = lease.job.id;
    assert_eq!(
        store.heartbeat_job(id, 1, &lease.token, 100, 50).unwrap(),
        Ok(150)
    );
    let wrong = store.heartbeat_job(id, 1, "forged", 100, 60).unwrap();
    assert!(wrong.unwrap_err().reason.contains("token"));
    let wrong = store.heartbeat_job(id, 2, &lease.token, 100, 60).unwrap();
    assert!(wrong.is_err());
    // Not expired at 149: nothing is requeued.
    assert!(store.requeue_expired(149).unwrap().is_empty());
    assert_eq!(store.requeue_expired(151).unwrap(), [(id, 2)]);
    let lost = store.heartbeat_job(id, 1, &lease.token, 100, 152).unwrap();
    assert!(lost.unwrap_err().reason.contains("attempt 2"));
}

fn a_lease_handed_back_is_queued_again_at_once(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = store_with_run(home.path());
    store.enqueue_job(&job(0, &wasm()), 0).unwrap();
    let lease = store.claim_job("a", &wasm(), 100, 0).unwrap().unwrap();
    let id = lease.job.id;
    // Only the lease holder hands it back.
    let forged = store.release_job((id, 1, "forged"), "", 10).unwrap();
    assert!(forged.unwrap_err().reason.contains("token"));
    assert_eq!(store.job(id).unwrap().unwrap().state, JobState::Leased);
    assert_eq!(
        store
            .release_job((id, 1, &lease.token), "stopped (SIGTERM)", 20)
            .unwrap(),
        Ok(2)
    );
    let queued = store.job(id).unwrap().unwrap();
    assert_eq!(
        (queued.state, queued.attempt, queued.agent),
        (JobState::Queued, 2, None)
    );
    // Long before the lease would have run out, another agent has it.
    let next = store.claim_job("b", &wasm(), 100, 21).unwrap().unwrap();
    assert_eq!((next.job.id, next.job.attempt), (id, 2));
    // The old lease is gone: handing it back again, or a heartbeat, is refused.
    let again = store.release_job((id, 1, &lease.token), "", 22).unwrap();
    assert!(again.unwrap_err().reason.contains("attempt 2"));
    assert!(
        store
            .heartbeat_job(id, 1, &lease.token, 100, 23)
            .unwrap()
            .is_err()
    );
    let history = store.job_history(id).unwrap();
    let kinds: Vec<&str> = history.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["queued", "leased", "requeued", "leased"]);
    assert_eq!(history[2].agent.as_deref(), Some("a"));
    assert_eq!(history[2].attempt, 2);
    assert_eq!(
        history[2].detail,
        "the lease of attempt 1 was handed back by a: stopped (SIGTERM)"
    );
}

fn a_stale_completion_is_refused_and_the_new_lease_wins(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = store_with_run(home.path());
    store.enqueue_job(&job(0, &wasm()), 0).unwrap();
    let stale = store.claim_job("slow", &wasm(), 100, 0).unwrap().unwrap();
    store.requeue_expired(200).unwrap();
    let fresh = store
        .claim_job("quick", &wasm(), 100, 201)
        .unwrap()
        .unwrap();
    assert_eq!(fresh.job.attempt, 2);
    let id = fresh.job.id;
    let done = store
        .complete_job(
            (id, 2, &fresh.token),
            true,
            "{\"by\":\"quick\"}",
            250,
            |j| format!("{{\"state\":\"{}\"}}", j.state.as_str()),
        )
        .unwrap();
    assert_eq!(
        done,
        Completion::Accepted {
            response: "{\"state\":\"succeeded\"}".into()
        }
    );
    let late = store
        .complete_job(
            (id, 1, &stale.token),
            true,
            "{\"by\":\"slow\"}",
            300,
            |_| unreachable!("a refused completion makes no response"),
        )
        .unwrap();
    let Completion::Refused(lost) = late else {
        panic!("{late:?}")
    };
    assert_eq!(lost.attempt, 2);
    let job = store.job(id).unwrap().unwrap();
    assert_eq!(job.result.as_deref(), Some("{\"by\":\"quick\"}"));
    let kinds: Vec<String> = store
        .job_history(id)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            "queued",
            "leased",
            "requeued",
            "leased",
            "succeeded",
            "refused"
        ]
    );
}

fn a_replayed_completion_gets_the_same_response_and_changes_nothing(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = store_with_run(home.path());
    store.enqueue_job(&job(0, &wasm()), 0).unwrap();
    let lease = store.claim_job("a", &wasm(), 100, 0).unwrap().unwrap();
    let key = (lease.job.id, 1, lease.token.as_str());
    let first = store
        .complete_job(key, false, "{\"r\":1}", 10, |_| "first".into())
        .unwrap();
    assert_eq!(
        first,
        Completion::Accepted {
            response: "first".into()
        }
    );
    let again = store
        .complete_job(key, false, "{\"r\":1}", 20, |_| "second".into())
        .unwrap();
    assert_eq!(
        again,
        Completion::Replayed {
            response: "first".into()
        }
    );
    // The same lease with another result is not a replay.
    let other = store
        .complete_job(key, true, "{\"r\":2}", 30, |_| "third".into())
        .unwrap();
    assert!(matches!(other, Completion::Refused(_)), "{other:?}");
    let job = store.job(lease.job.id).unwrap().unwrap();
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.result.as_deref(), Some("{\"r\":1}"));
}

fn cancelling_a_run_cancels_its_open_jobs(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = store_with_run(home.path());
    let a = store.enqueue_job(&job(0, &wasm()), 0).unwrap();
    let lease = store.claim_job("a", &wasm(), 100, 0).unwrap().unwrap();
    assert_eq!(lease.job.id, a.id);
    store.enqueue_job(&job(1, &wasm()), 0).unwrap();
    assert_eq!(store.cancel_jobs_of_run(R, "cancelled", 5).unwrap(), 2);
    let lost = store.heartbeat_job(a.id, 1, &lease.token, 100, 6).unwrap();
    assert_eq!(lost.unwrap_err().state, JobState::Cancelled);
    assert!(store.claim_job("b", &wasm(), 100, 7).unwrap().is_none());
}

fn started(step: u64) -> Event {
    Event::BlockStarted {
        step,
        node: "main".into(),
        block: "a".into(),
        attempt: 1,
    }
}

fn queued(step: u64) -> QueuedJob {
    QueuedJob {
        step,
        node: "main".into(),
        block: "a".into(),
        requires: wasm(),
        request: format!("{{\"step\":{step}}}"),
    }
}

fn a_block_start_and_its_job_are_one_commit(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = store_with_run(home.path());
    let mut other = Store::open(home.path(), Durability::Normal).unwrap();
    // Opened before the branch grows: its appends are refused.
    let mut stale = other.writer(R, 1).unwrap();
    store
        .writer(R, 1)
        .unwrap()
        .append_with_job(&[started(0)], &queued(0))
        .unwrap();
    let jobs = store.jobs_of_run(R, 0, 10).unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!((jobs[0].step, jobs[0].state), (0, JobState::Queued));
    assert_eq!(jobs[0].requires, wasm());
    assert_eq!(store.job_history(jobs[0].id).unwrap().len(), 1);
    let lease = store.claim_job("a", &wasm(), 1000, 2).unwrap().unwrap();
    assert_eq!(lease.request, "{\"step\":0}");
    // Queueing it again (the run process asks when it runs the block)
    // finds the same job.
    let again = store.enqueue_job(&job(0, &wasm()), 99).unwrap();
    assert_eq!(again.id, jobs[0].id);

    // A start that cannot be recorded queues nothing.
    assert!(stale.append_with_job(&[started(1)], &queued(1)).is_err());
    assert_eq!(store.jobs_of_run(R, 0, 10).unwrap().len(), 1);

    // A job that cannot be queued records no start.
    let refuse = match store.backend() {
        wfhost_store::Backend::Sqlite => {
            "CREATE TRIGGER refuse BEFORE INSERT ON jobs BEGIN SELECT RAISE(ABORT, 'full'); END"
        }
        wfhost_store::Backend::Postgres => {
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'full'; END $$;
             CREATE TRIGGER refuse BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION refuse()"
        }
    };
    wfhost_store::testing::execute_batch(&store, refuse).unwrap();
    let before = store.events_after(R, 0).unwrap().len();
    let mut writer = store.writer(R, 1).unwrap();
    let refused = writer.append_with_job(&[started(1)], &queued(1));
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(store.events_after(R, 0).unwrap().len(), before);
}

fn only_the_lease_holder_adds_telemetry_within_the_jobs_caps(b: Backend) {
    use wfhost_store::TelemetryCaps;
    let Some(home) = common::home(b) else { return };
    let mut store = store_with_run(home.path());
    let before = store.last_job_telemetry().unwrap();
    assert_eq!(before, 0);
    let first = store.enqueue_job(&job(0, &wasm()), 0).unwrap();
    let other = store.enqueue_job(&job(1, &wasm()), 0).unwrap();
    let lease = store.claim_job("a", &wasm(), 100, 0).unwrap().unwrap();
    assert_eq!(lease.job.id, first.id);
    let caps = TelemetryCaps {
        events: 3,
        bytes: 40,
    };
    let body = |t: &str| format!(r#"{{"type":"{t}"}}"#);
    let taken = store
        .add_job_telemetry(
            (first.id, 1, &lease.token),
            &[body("a"), body("b")],
            caps,
            5,
        )
        .unwrap()
        .unwrap();
    assert_eq!((taken.accepted, taken.dropped), (2, 0));
    // A forged token, an attempt that is not the job's, a job not leased.
    for (job, attempt, token) in [
        (first.id, 1, "forged"),
        (first.id, 2, lease.token.as_str()),
        (other.id, 1, lease.token.as_str()),
    ] {
        let refused = store
            .add_job_telemetry((job, attempt, token), &[body("x")], caps, 6)
            .unwrap();
        assert!(refused.is_err(), "{job} {attempt} {token}: {refused:?}");
    }
    // Three events at most (and 40 bytes): the rest is dropped, in order.
    let taken = store
        .add_job_telemetry(
            (first.id, 1, &lease.token),
            &[body("c"), body("d")],
            caps,
            7,
        )
        .unwrap()
        .unwrap();
    assert_eq!((taken.accepted, taken.dropped), (1, 1));
    let read = store.job_telemetry_after(R, 1, before, 100).unwrap();
    let bodies: Vec<&str> = read.iter().map(|t| t.body.as_str()).collect();
    assert_eq!(bodies, [body("a"), body("b"), body("c")]);
    assert!(read.iter().all(|t| t.job == first.id));
    // Read on from a row; other branches see none of it.
    let rest = store.job_telemetry_after(R, 1, read[0].id, 100).unwrap();
    assert_eq!(rest, read[1..]);
    assert!(store.job_telemetry_after(R, 2, 0, 100).unwrap().is_empty());
    assert_eq!(store.last_job_telemetry().unwrap(), read[2].id);
    // Removing the run removes its telemetry.
    store
        .complete_job((first.id, 1, &lease.token), true, "{}", 8, |_| "ok".into())
        .unwrap();
    drop(store);
    let mut store = Store::open_existing(home.path()).unwrap();
    store.remove_runs(&[R.to_string()]).unwrap();
    assert_eq!(store.last_job_telemetry().unwrap(), 0);
}

fn the_lease_operations_are_unsynced_and_leave_the_connection_synced(b: Backend) {
    let Some(home) = common::home(b) else { return };
    drop(store_with_run(home.path()));
    let mut store = Store::open_existing_with(home.path(), Durability::Full).unwrap();
    store.enqueue_job(&job(0, &wasm()), 0).unwrap();
    let lease = store.claim_job("a", &wasm(), 100, 0).unwrap().unwrap();
    assert_eq!(store.durability().unwrap(), Durability::Full);
    let key = (lease.job.id, 1, lease.token.as_str());
    store
        .heartbeat_job(key.0, 1, key.2, 100, 1)
        .unwrap()
        .unwrap();
    store
        .complete_job(key, true, "{}", 2, |_| String::new())
        .unwrap();
    // Refused, the same way.
    store
        .heartbeat_job(key.0, 1, "stale", 100, 3)
        .unwrap()
        .unwrap_err();
    assert_eq!(store.durability().unwrap(), Durability::Full);
}

fn a_queued_job_rings_the_servers_and_its_completion_rings_the_run(b: Backend) {
    use std::time::Duration;
    use wfhost_store::bell::Bell;
    let Some(home) = common::home(b) else { return };
    let mut store = store_with_run(home.path());
    let server = Bell::for_server(home.path()).unwrap();
    let run = Bell::for_run(home.path(), &wfhost_store::RunId::parse(R).unwrap()).unwrap();
    let soon = Some(Duration::from_secs(10));
    let now = Some(Duration::ZERO);
    store.enqueue_job(&job(0, &wasm()), 0).unwrap();
    assert!(server.wait(soon), "queued: the servers look");
    assert!(!run.wait(now));
    let lease = store.claim_job("a", &wasm(), 100, 0).unwrap().unwrap();
    assert!(!server.wait(now) && !run.wait(now), "a lease wakes nobody");
    let key = (lease.job.id, 1, lease.token.as_str());
    store
        .complete_job(key, true, "{}", 2, |_| String::new())
        .unwrap();
    assert!(run.wait(soon), "completed: the run looks");
    // A replay changes nothing and wakes nobody.
    store
        .complete_job(key, true, "{}", 3, |_| String::new())
        .unwrap();
    assert!(!run.wait(now));
}

on_both!(
    a_job_is_queued_once_per_execution_and_found_again,
    an_agent_gets_only_jobs_it_can_run,
    two_agents_racing_never_hold_the_same_job,
    a_heartbeat_extends_only_the_matching_lease,
    a_lease_handed_back_is_queued_again_at_once,
    a_stale_completion_is_refused_and_the_new_lease_wins,
    a_replayed_completion_gets_the_same_response_and_changes_nothing,
    cancelling_a_run_cancels_its_open_jobs,
    a_block_start_and_its_job_are_one_commit,
    only_the_lease_holder_adds_telemetry_within_the_jobs_caps,
    the_lease_operations_are_unsynced_and_leave_the_connection_synced,
    a_queued_job_rings_the_servers_and_its_completion_rings_the_run,
);

/// On PostgreSQL a job becoming final through another home (a server on
/// another machine) is notified to the process waiting for its run, and
/// only to it: another run's completion wakes nobody there.
#[test]
fn a_completion_through_another_home_is_notified_to_its_run_only() {
    use std::time::Duration;
    let Some(db) = wfhost_store::testing::TestDatabase::create() else {
        return;
    };
    let (runner, server) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    db.configure(runner.path());
    db.configure(server.path());
    let mut setup = store_with_run(runner.path());
    setup
        .create_run(&record(R2), "{}", &common::started(R2))
        .unwrap();
    let waiting = Store::open_existing(runner.path()).unwrap();
    assert!(waiting.listen_for_run(R).unwrap());
    let mut seen = waiting.data_version().unwrap();
    // The run's lock listens too: what a run process waits on.
    let lock = waiting
        .lock_run(&wfhost_store::RunId::parse(R).unwrap())
        .unwrap();
    let by_lock = wfhost_store::run_notifications(R).expect("the lock listens");
    let locked_seen = by_lock.count();
    let mut other = Store::open_existing(server.path()).unwrap();
    let caps = wasm();
    let mut finish = |run_id: &'static str, step: u64| {
        let new = NewJob {
            run_id,
            ..job(step, &caps)
        };
        other.enqueue_job(&new, 0).unwrap();
        let lease = other.claim_job("a", &caps, 1000, 1).unwrap().unwrap();
        let key = (lease.job.id, lease.job.attempt, lease.token.as_str());
        other
            .complete_job(key, true, "{}", 2, |_| String::new())
            .unwrap();
    };
    finish(R2, 0);
    assert_eq!(
        waiting
            .wait_for_change(seen, Duration::from_millis(300))
            .unwrap(),
        Some(false),
        "another run's job wakes nobody here"
    );
    assert!(!by_lock.wait(locked_seen, Duration::from_millis(100)));
    finish(R, 1);
    assert_eq!(
        waiting
            .wait_for_change(seen, Duration::from_secs(10))
            .unwrap(),
        Some(true),
        "its own run's job does"
    );
    assert!(by_lock.wait(locked_seen, Duration::from_secs(10)));
    drop(lock);
    assert!(
        wfhost_store::run_notifications(R).is_none(),
        "gone with the lock"
    );
    seen = waiting.data_version().unwrap();
    assert_eq!(
        waiting
            .wait_for_change(seen, Duration::from_millis(100))
            .unwrap(),
        Some(false)
    );
}
