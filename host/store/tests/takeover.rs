//! The served runs a server takes over when their process dies: noted,
//! listed, claimed by one server at a time, forgotten, removed with their
//! run; the schema that holds them reached from version 8; and on
//! PostgreSQL, connections whose dead machine the database notices.

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
    assert!(store.served_runs(0, 10).unwrap().is_empty());
    store.mark_served(&r2).unwrap();
    store.mark_served(&r1).unwrap();
    // Noted again by a resuming process: nothing changes.
    store.mark_served(&r1).unwrap();
    let served = store.served_runs(0, 10).unwrap();
    let ids: Vec<&str> = served.iter().map(|(_, r)| r.run_id.as_str()).collect();
    assert_eq!(ids, [R1, R2], "oldest run first");
    assert_eq!(served[0].1.takeovers, 0);
    assert_eq!(served[0].1.workspace, "/tmp");
    // Paging after a run's number.
    let rest = store.served_runs(served[0].0, 10).unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].1.run_id.as_str(), R2);
    // Two servers (two stores on one home) claim the same takeover: one
    // wins; the loser's view is stale for the next one too.
    let other = Store::open(home.path(), Durability::Normal).unwrap();
    let seen = served[0].1.clone();
    assert!(store.claim_takeover(&seen, 5).unwrap());
    assert!(!other.claim_takeover(&seen, 6).unwrap());
    let now = other.served_runs(0, 1).unwrap().remove(0).1;
    assert_eq!((now.takeovers, now.taken_at_ms), (1, Some(5)));
    assert!(other.claim_takeover(&now, 7).unwrap());
    store.forget_served(&r1).unwrap();
    let ids: Vec<String> = other
        .served_runs(0, 10)
        .unwrap()
        .into_iter()
        .map(|(_, r)| r.run_id.to_string())
        .collect();
    assert_eq!(ids, [R2]);
    // gc removes a served run with its row (a reference to the run would
    // otherwise refuse the removal).
    assert_eq!(store.remove_runs(&[R2]).unwrap(), 1);
    assert!(store.served_runs(0, 10).unwrap().is_empty());
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
    assert_eq!(store.served_runs(0, 10).unwrap().len(), 1);
    assert!(store.run(R2).unwrap().is_some(), "the runs are kept");
}

on_both!(
    a_served_run_is_claimed_once_per_takeover_and_forgotten,
    a_store_of_version_8_is_upgraded,
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
