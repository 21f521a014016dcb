//! Moving an embedded store into PostgreSQL: everything arrives (forks,
//! gates, jobs and their histories, sessions, schedules, notification
//! targets), each table's count and digest match, the runs go on there,
//! and a database that holds anything already is refused untouched.

use wfhost_core::run::event::{CommandRecord, Event, EventSink, Outcome};
use wfhost_store::notify::Target;
use wfhost_store::schedules::Spec;
use wfhost_store::{Durability, NewJob, SessionTag, Store, StoreError};

mod common;
use common::{Backend, R1, R2, record, started, step};

fn gate() -> Event {
    Event::ActionTaken {
        step: 1,
        action: "GATE:ok".into(),
        command: CommandRecord::Gate {
            prompt: "ok?".into(),
            questions: Vec::new(),
        },
        gate_id: Some("UD-1".into()),
        fallback_for: None,
    }
}

/// A home with a forked run waiting at a gate, a finished run in a
/// session, a job leased and one completed, a schedule and a target.
fn a_lived_in_store(home: &std::path::Path) -> Store {
    let mut store = Store::open(home, Durability::Normal).unwrap();
    store.create_run(&record(R1), "{}", &started(R1)).unwrap();
    store.writer(R1, 1).unwrap().append(&step(0)).unwrap();
    let snapshot = store
        .chain(R1, 1)
        .unwrap()
        .last()
        .unwrap()
        .snapshot
        .clone()
        .unwrap();
    let branch = store.fork(R1, &snapshot).unwrap();
    let mut w = store.writer(R1, branch).unwrap();
    w.append(&step(1)[..1]).unwrap();
    w.append(&[gate()]).unwrap();
    let session = SessionTag::client("chat-1", None).unwrap();
    store
        .create_run_in(&record(R2), "{}", &started(R2), Some(&session))
        .unwrap();
    store
        .writer(R2, 1)
        .unwrap()
        .append(&[Event::RunFinished {
            outcome: Outcome::Succeeded,
        }])
        .unwrap();
    let caps = vec!["wasm".to_string()];
    for step in [0, 1] {
        let job = NewJob {
            run_id: R1,
            branch: 1,
            step,
            lane: "",
            node: "main",
            block: "a",
            requires: &caps,
            request: "{\"x\": 1}",
        };
        store.enqueue_job(&job, 10).unwrap();
    }
    let lease = store.claim_job("agent", &caps, 1000, 20).unwrap().unwrap();
    let key = (lease.job.id, lease.job.attempt, lease.token.as_str());
    store
        .complete_job(key, true, "{}", 30, |_| "ok".into())
        .unwrap();
    store.claim_job("agent", &caps, 1000, 40).unwrap().unwrap();
    let schedule = Spec {
        name: "nightly".into(),
        cron: "0 0 3 * * *".into(),
        workflow: std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/hello/workflow.json"),
        workspace: "/tmp/ws-{run}".into(),
        ..Spec::default()
    }
    .define(1_000)
    .unwrap();
    store.add_schedule(&schedule).unwrap();
    store
        .add_notify_target(&Target {
            name: "ops".into(),
            url: "http://127.0.0.1:9/x".into(),
            secret: None,
            format: "json".into(),
            events: vec!["run.failed".into()],
            workflow: None,
            created_at_ms: 0,
        })
        .unwrap();
    store
}

#[test]
fn an_embedded_store_moves_into_postgres_whole_and_goes_on_there() {
    let Some(target_home) = common::home(Backend::Postgres) else {
        return;
    };
    let source_home = tempfile::tempdir().unwrap();
    let mut source = a_lived_in_store(source_home.path());
    let mut target = Store::open(target_home.path(), Durability::Normal).unwrap();
    let copied = source.migrate_to(&mut target).unwrap();
    let events = copied.iter().find(|t| t.table == "events").unwrap();
    assert_eq!(
        events.rows,
        source.events_after(R1, 0).unwrap().len() as u64 + 2
    );
    assert!(
        copied
            .iter()
            .any(|t| t.table == "job_events" && t.rows >= 4),
        "{copied:?}"
    );
    // Read independently on each side, every table is the same.
    assert_eq!(
        source.table_digests().unwrap(),
        target.table_digests().unwrap()
    );
    assert_eq!(copied, target.table_digests().unwrap());
    for branch in [1, 2] {
        assert_eq!(
            source.chain(R1, branch).unwrap(),
            target.chain(R1, branch).unwrap()
        );
    }
    assert_eq!(source.open_gates().unwrap(), target.open_gates().unwrap());
    assert_eq!(
        target.session_of(R2).unwrap(),
        source.session_of(R2).unwrap()
    );
    // The runs go on: the gate is answered, a new run and job are numbered
    // after the copied ones.
    target
        .writer(R1, 2)
        .unwrap()
        .append(&[Event::GateAnswered {
            gate_id: "UD-1".into(),
            decision: wfhost_core::run::event::Decision::Approved,
        }])
        .unwrap();
    assert!(target.open_gates().unwrap().is_empty());
    let third = "run-20260101-000000-0000e3";
    target
        .create_run(&record(third), "{}", &started(third))
        .unwrap();
    let caps = vec!["wasm".to_string()];
    let job = NewJob {
        run_id: third,
        branch: 1,
        step: 0,
        lane: "",
        node: "main",
        block: "a",
        requires: &caps,
        request: "{}",
    };
    let new = target.enqueue_job(&job, 50).unwrap();
    assert_eq!(new.id, 3, "job ids go on after the copied ones");
    target.job_history(new.id).unwrap();
}

#[test]
fn a_database_that_holds_anything_is_refused_and_left_as_it_was() {
    let Some(target_home) = common::home(Backend::Postgres) else {
        return;
    };
    let source_home = tempfile::tempdir().unwrap();
    let mut source = a_lived_in_store(source_home.path());
    let mut target = Store::open(target_home.path(), Durability::Normal).unwrap();
    let other = "run-20260101-000000-0000e4";
    target
        .create_run(&record(other), "{}", &started(other))
        .unwrap();
    let before = target.table_digests().unwrap();
    let err = source.migrate_to(&mut target).unwrap_err();
    assert!(matches!(err, StoreError::Usage(_)), "{err}");
    assert!(err.to_string().contains("empty database"), "{err}");
    assert_eq!(target.table_digests().unwrap(), before);
    // The source was not touched either, and is writable again.
    source.writer(R2, 1).unwrap();
    source
        .create_run(&record(other), "{}", &started(other))
        .unwrap();
}
