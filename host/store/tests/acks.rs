//! MCP acks against a real SQLite file: recorded in the commit of the
//! events they advanced the run by, used once.

use wfhost_core::run::event::Event;
use wfhost_store::{Durability, NewAck, Store, StoreError};

mod common;
use common::Backend;
#[allow(unused_imports)]
use common::{M, Q, R, R1, R2, R3, R4};
use common::{record, started};

fn awaited() -> Event {
    Event::ExternalAwaited {
        step: 0,
        node: "main".into(),
        block: "a".into(),
        attempt: 1,
        prompt: "do it".into(),
    }
}

fn merged(n: u64) -> Event {
    let mut inputs = serde_json::Map::new();
    inputs.insert("n".into(), n.into());
    Event::InputsMerged { inputs }
}

fn ack(attempt: u32, digest: &str) -> NewAck {
    NewAck {
        snapshot: 2,
        attempt,
        digest: digest.into(),
    }
}

fn an_ack_is_recorded_with_its_events_and_used_once(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = Store::open(home.path(), Durability::Normal).unwrap();
    store.create_run(&record(R1), "{}", &started(R1)).unwrap();
    {
        let mut writer = store.writer(R1, 1).unwrap();
        wfhost_core::run::event::EventSink::append(&mut writer, &[awaited()]).unwrap();
    }
    assert_eq!(store.next_ack_attempt(R1, 2).unwrap(), 1);
    assert_eq!(store.ack(R1, 2, 1).unwrap(), None);
    {
        let mut writer = store.writer(R1, 1).unwrap();
        writer.append_acked(&[merged(1)], &ack(1, "d1")).unwrap();
    }
    let used = store.ack(R1, 2, 1).unwrap().unwrap();
    assert_eq!(
        (used.branch, used.first_seq, used.digest.as_str()),
        (1, 3, "d1")
    );
    assert_eq!(used.response, None);
    assert_eq!(store.next_ack_attempt(R1, 2).unwrap(), 2);

    // The same ack again: refused, and its events are not written.
    let before = store.chain(R1, 1).unwrap().len();
    {
        let mut writer = store.writer(R1, 1).unwrap();
        let again = writer.append_acked(&[merged(2)], &ack(1, "d2"));
        assert!(
            matches!(
                again,
                Err(StoreError::AckUsed {
                    snapshot: 2,
                    attempt: 1,
                    ..
                })
            ),
            "{again:?}"
        );
    }
    assert_eq!(store.chain(R1, 1).unwrap().len(), before);
    assert_eq!(store.ack(R1, 2, 1).unwrap().unwrap().digest, "d1");

    // The first reply is kept.
    store.record_ack_response(R1, 2, 1, "first").unwrap();
    store.record_ack_response(R1, 2, 1, "second").unwrap();
    assert_eq!(
        store.ack(R1, 2, 1).unwrap().unwrap().response.as_deref(),
        Some("first")
    );
    // Another run's snapshot 2 is another ack.
    assert_eq!(store.ack(R2, 2, 1).unwrap(), None);
}

fn gc_removes_a_run_s_acks(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = Store::open(home.path(), Durability::Normal).unwrap();
    store.create_run(&record(R1), "{}", &started(R1)).unwrap();
    {
        let mut writer = store.writer(R1, 1).unwrap();
        wfhost_core::run::event::EventSink::append(&mut writer, &[awaited()]).unwrap();
        writer.append_acked(&[merged(1)], &ack(1, "d1")).unwrap();
    }
    assert_eq!(store.remove_runs(&[R1.to_string()]).unwrap(), 1);
    store.create_run(&record(R1), "{}", &started(R1)).unwrap();
    assert_eq!(
        store.ack(R1, 2, 1).unwrap(),
        None,
        "a new run reusing the number starts clean"
    );
}

on_both!(
    an_ack_is_recorded_with_its_events_and_used_once,
    gc_removes_a_run_s_acks,
);
