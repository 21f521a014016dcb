//! The served runs a server takes over when their process dies: noted,
//! listed, claimed by one server at a time, forgotten, removed with their
//! run; the schema that holds them reached from version 8; and on
//! PostgreSQL, connections whose dead machine the database notices.

use wfhost_core::run::event::EventSink;
use wfhost_store::{Durability, RunId, Store};

mod common;
use common::Backend;
use common::{R1, R2, record, started};

fn new_store(b: Backend) -> Option<(common::Home, Store)> {
    let home = common::home(b)?;
    let mut store = Store::open(home.path(), Durability::Normal).unwrap();
    for id in [R1, R2] {
        store.create_run(&record(id), "{}", &started(id)).unwrap();
    }
    Some((home, store))
}

fn a_served_run_is_claimed_once_per_takeover_and_forgotten(b: Backend) {
    let Some((home, mut store)) = new_store(b) else {
        return;
    };
    let (r1, r2) = (RunId::parse(R1).unwrap(), RunId::parse(R2).unwrap());
    assert!(store.unexecuted_served_runs(0, 10).unwrap().is_empty());
    store.mark_served(&r2).unwrap();
    store.mark_served(&r1).unwrap();
    // Noted again by a resuming process: nothing changes.
    store.mark_served(&r1).unwrap();
    let served = store.unexecuted_served_runs(0, 10).unwrap();
    let ids: Vec<&str> = served.iter().map(|(_, r)| r.run_id.as_str()).collect();
    assert_eq!(ids, [R1, R2], "oldest run first");
    assert_eq!(served[0].1.takeovers, 0);
    assert_eq!(served[0].1.workspace, "/tmp");
    // Paging after a run's number.
    let rest = store.unexecuted_served_runs(served[0].0, 10).unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].1.run_id.as_str(), R2);
    // Two servers (two stores on one home) claim the same takeover: one
    // wins; the loser's view is stale for the next one too.
    let other = Store::open(home.path(), Durability::Normal).unwrap();
    let seen = served[0].1.clone();
    assert!(store.claim_takeover(&seen, 5).unwrap());
    assert!(!other.claim_takeover(&seen, 6).unwrap());
    let now = other.unexecuted_served_runs(0, 1).unwrap().remove(0).1;
    assert_eq!((now.takeovers, now.taken_at_ms), (1, Some(5)));
    assert!(other.claim_takeover(&now, 7).unwrap());
    store.forget_served(&r1).unwrap();
    let ids: Vec<String> = other
        .unexecuted_served_runs(0, 10)
        .unwrap()
        .into_iter()
        .map(|(_, r)| r.run_id.to_string())
        .collect();
    assert_eq!(ids, [R2]);
    // A run some process executes is not listed (its lock is held).
    let held = other.lock_run(&r2).unwrap();
    assert!(store.unexecuted_served_runs(0, 10).unwrap().is_empty());
    drop(held);
    assert_eq!(store.unexecuted_served_runs(0, 10).unwrap().len(), 1);
    // gc removes a served run with its row (a reference to the run would
    // otherwise refuse the removal).
    assert_eq!(store.remove_runs(&[R2]).unwrap(), 1);
    assert!(store.unexecuted_served_runs(0, 10).unwrap().is_empty());
    assert!(!store.running_now(&r1).unwrap());
    let lock = store.lock_run(&r1).unwrap();
    assert!(other.running_now(&r1).unwrap());
    drop(lock);
}

/// A store of version 8 (before served runs) is brought to this version
/// when opened, with its runs, on either backend.
fn a_store_of_version_8_is_upgraded(b: Backend) {
    let Some((home, store)) = new_store(b) else {
        return;
    };
    let back = match b {
        Backend::Sqlite => "DROP TABLE served_runs; PRAGMA user_version = 8",
        Backend::Postgres => "DROP TABLE served_runs; UPDATE wfhost_schema SET version = 8",
    };
    wfhost_store::testing::execute_batch(&store, back).unwrap();
    drop(store);
    let store = Store::open(home.path(), Durability::Normal).unwrap();
    let version = match b {
        Backend::Sqlite => "SELECT CAST(user_version AS TEXT) FROM pragma_user_version",
        Backend::Postgres => "SELECT version::text FROM wfhost_schema",
    };
    let found = wfhost_store::testing::query_text(&store, version).unwrap();
    assert_eq!(found, wfhost_store::SCHEMA_VERSION.to_string());
    let r1 = RunId::parse(R1).unwrap();
    store.mark_served(&r1).unwrap();
    assert_eq!(store.unexecuted_served_runs(0, 10).unwrap().len(), 1);
    assert!(store.run(R2).unwrap().is_some(), "the runs are kept");
}

on_both!(
    a_served_run_is_claimed_once_per_takeover_and_forgotten,
    a_store_of_version_8_is_upgraded,
    a_run_that_ends_is_never_seen_interrupted,
);

/// The database notices a connection whose machine died within about 25 s
/// (TCP keepalives asked of it), so the run locks of a dead machine are
/// released in time for another server to take its runs over.
#[test]
fn postgres_connections_ask_for_keepalives() {
    let Some(home) = common::home(Backend::Postgres) else {
        return;
    };
    let store = Store::open(home.path(), Durability::Normal).unwrap();
    for (setting, value) in [
        ("tcp_keepalives_idle", "10"),
        ("tcp_keepalives_interval", "5"),
        ("tcp_keepalives_count", "3"),
    ] {
        let found = wfhost_store::testing::query_text(&store, &format!("SHOW {setting}")).unwrap();
        assert_eq!(found, value, "{setting}");
    }
}

/// Runs coming to rest and letting go of their locks while another
/// connection lists them: none is ever seen `interrupted` (a status that
/// read a run's newest event before it ended and its lock after it was
/// released would say so, and a server would take over a finished run).
fn a_run_that_ends_is_never_seen_interrupted(b: Backend) {
    let Some(home) = common::home(b) else {
        return;
    };
    let mut writer = Store::open(home.path(), Durability::Normal).unwrap();
    let reader = Store::open(home.path(), Durability::Normal).unwrap();
    let done = &std::sync::atomic::AtomicBool::new(false);
    let seen = std::thread::scope(|scope| {
        let looking = scope.spawn(move || {
            let mut seen = Vec::new();
            let filter = wfhost_store::RunFilter::default();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                for run in reader.list_runs(&filter, 5).unwrap().runs {
                    seen.push(run.status);
                }
            }
            seen
        });
        for i in 0..100 {
            let id = wfhost_store::new_run_id(i);
            let lock = writer.lock_run(&id).unwrap();
            writer
                .create_run(&record(id.as_str()), "{}", &started(id.as_str()))
                .unwrap();
            let mut w = writer.writer(id.as_str(), 1).unwrap();
            w.append(&common::step(0)).unwrap();
            w.append(&[wfhost_core::run::event::Event::RunFinished {
                outcome: wfhost_core::run::event::Outcome::Succeeded,
            }])
            .unwrap();
            drop(lock);
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        looking.join().unwrap()
    });
    assert!(seen.len() > 10, "looked {} times", seen.len());
    assert!(
        !seen.iter().any(|s| s == "interrupted"),
        "{} of {} looks saw a run interrupted",
        seen.iter().filter(|s| *s == "interrupted").count(),
        seen.len()
    );
}

/// A PostgreSQL restart ends the session holding a run's lock: the lock is
/// taken again on a new connection by itself, so the run is seen executing
/// again (not `interrupted`, which a server would take over) and its
/// process goes on writing.
#[test]
fn a_run_lock_is_taken_again_after_a_database_restart() {
    let Some(server) = wfhost_store::testing::PrivateServer::start() else {
        return;
    };
    let db = server.database();
    let home = tempfile::tempdir().unwrap();
    db.configure(home.path());
    let mut here = Store::open(home.path(), Durability::Normal).unwrap();
    let id = wfhost_store::new_run_id(wfhost_store::time::now_ms());
    let lock = here.lock_run(&id).unwrap();
    here.create_run(&record(id.as_str()), "{}", &started(id.as_str()))
        .unwrap();
    server.ctl("restart");
    let there = Store::open(home.path(), Durability::Normal).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !there.running_now(&id).unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "the lock was not taken again"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(matches!(
        there.lock_run(&id),
        Err(wfhost_store::StoreError::Busy { .. })
    ));
    here.writer(id.as_str(), 1)
        .unwrap()
        .append(&common::step(0))
        .unwrap();
    drop(lock);
    assert!(!there.running_now(&id).unwrap(), "released on drop");
}

/// When another process gets a run's lock while the connection of its
/// holder is lost (the run taken over), the first process's writes to the
/// run are refused from then on, saying why: one run is never executed by
/// two processes.
#[test]
fn a_process_whose_run_lock_was_taken_writes_nothing_more() {
    let Some(home) = common::home(Backend::Postgres) else {
        return;
    };
    let mut here = Store::open(home.path(), Durability::Normal).unwrap();
    let id = wfhost_store::new_run_id(wfhost_store::time::now_ms());
    let lock = here.lock_run(&id).unwrap();
    here.create_run(&record(id.as_str()), "{}", &started(id.as_str()))
        .unwrap();
    // Another session ends the holder's and waits for the lock, in one
    // statement: it is first in line when the holder's session goes.
    let there = Store::open(home.path(), Durability::Normal).unwrap();
    let taken = wfhost_store::testing::query_text(
        &there,
        &format!(
            "SELECT (SELECT count(pg_terminate_backend(pid)) FROM pg_locks
                      WHERE locktype = 'advisory' AND granted AND objsubid = 2
                        AND objid = hashtext('{id}')::oid)::text
                    || pg_advisory_lock(2003202609, hashtext('{id}'))::text"
        ),
    )
    .unwrap();
    assert_eq!(taken, "1");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let refused = loop {
        match here.writer(id.as_str(), 1).unwrap().append(&[]) {
            Err(e) => break e.to_string(),
            Ok(()) => {
                assert!(std::time::Instant::now() < deadline, "never refused");
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    };
    assert!(refused.contains("lost the run's lock"), "{refused}");
    drop(lock);
}
