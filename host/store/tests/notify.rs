//! The notification outbox against a real SQLite file: written with the
//! events that give it, leased to one sender at a time, retried, given up.

use wfhost_core::run::event::{Event, EventSink, Outcome};
use wfhost_store::notify::{MAX_ATTEMPTS, Target};
use wfhost_store::{Durability, Store};

mod common;
use common::Backend;
use common::{R1, R2, record, started};

fn target(name: &str, events: &[&str], workflow: Option<&str>) -> Target {
    Target {
        name: name.into(),
        url: "http://127.0.0.1:9/x".into(),
        secret: None,
        format: "json".into(),
        events: events.iter().map(|e| e.to_string()).collect(),
        workflow: workflow.map(str::to_string),
        created_at_ms: 0,
    }
}

fn failed() -> Event {
    Event::RunFinished {
        outcome: Outcome::Failed {
            reason: "boom".into(),
        },
    }
}

fn a_runs_end_is_queued_with_it_for_each_target_that_wants_it_once(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = Store::open(home.path(), Durability::Normal).unwrap();
    store
        .add_notify_target(&target("all", &["run.failed", "run.succeeded"], None))
        .unwrap();
    store
        .add_notify_target(&target("other", &["run.failed"], Some("not-w")))
        .unwrap();
    store
        .add_notify_target(&target("gates", &["gate.opened"], None))
        .unwrap();
    assert!(store.add_notify_target(&target("all", &[], None)).is_err());
    store.create_run(&record(R1), "{}", &started(R1)).unwrap();
    store.writer(R1, 1).unwrap().append(&[failed()]).unwrap();
    let queued = store.notifications_of(R1).unwrap();
    assert_eq!(queued.len(), 1, "{queued:#?}");
    let n = &queued[0];
    assert_eq!(
        (n.target.as_str(), n.event.as_str(), n.state.as_str()),
        ("all", "run.failed", "pending")
    );
    assert_eq!(n.delivery, format!("{R1}.2.all"));
    assert_eq!(n.body["reason"], "boom");
    assert_eq!(n.body["workflow_id"], "w");
    // Without targets, nothing.
    assert!(store.remove_notify_target("all").unwrap());
    store.create_run(&record(R2), "{}", &started(R2)).unwrap();
    store.writer(R2, 1).unwrap().append(&[failed()]).unwrap();
    assert!(store.notifications_of(R2).unwrap().is_empty());
}

fn a_notification_is_leased_to_one_sender_retried_and_given_up(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut a = Store::open(home.path(), Durability::Normal).unwrap();
    let mut b = Store::open(home.path(), Durability::Normal).unwrap();
    a.add_notify_target(&target("t", &["run.failed"], None))
        .unwrap();
    a.create_run(&record(R1), "{}", &started(R1)).unwrap();
    a.writer(R1, 1).unwrap().append(&[failed()]).unwrap();
    let now = wfhost_store::time::now_ms() + 1;
    let leased = a.lease_notifications(now, 30_000, 10).unwrap();
    assert_eq!(leased.len(), 1);
    assert!(
        b.lease_notifications(now, 30_000, 10).unwrap().is_empty(),
        "leased to a"
    );
    let id = leased[0].id;
    for attempt in 1..MAX_ATTEMPTS {
        a.notification_attempted(id, Err("refused"), now).unwrap();
        let n = &a.notifications_of(R1).unwrap()[0];
        assert_eq!((n.attempts, n.state.as_str()), (attempt, "pending"));
        assert_eq!(n.last_error.as_deref(), Some("refused"));
    }
    a.notification_attempted(id, Err("refused"), now).unwrap();
    assert_eq!(a.notifications_of(R1).unwrap()[0].state, "failed");
    assert!(
        b.lease_notifications(now + 60_000, 30_000, 10)
            .unwrap()
            .is_empty(),
        "given up"
    );
}

fn removing_a_run_takes_its_timer_and_its_notifications(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = Store::open(home.path(), Durability::Normal).unwrap();
    store
        .add_notify_target(&target("t", &["run.failed"], None))
        .unwrap();
    // A sleeping run: its branch has a row in `timers`.
    store.create_run(&record(R1), "{}", &started(R1)).unwrap();
    let sleep = [
        Event::BlockStarted {
            step: 0,
            node: "main".into(),
            block: "a".into(),
            attempt: 1,
        },
        Event::TimerStarted {
            step: 0,
            node: "main".into(),
            block: "a".into(),
            attempt: 1,
            due_at_ms: 5_000,
        },
    ];
    store.writer(R1, 1).unwrap().append(&sleep).unwrap();
    assert_eq!(store.next_timer_due().unwrap(), Some(5_000));
    // A failed run: it has a notification.
    store.create_run(&record(R2), "{}", &started(R2)).unwrap();
    store.writer(R2, 1).unwrap().append(&[failed()]).unwrap();
    assert_eq!(store.notifications_of(R2).unwrap().len(), 1);
    assert_eq!(store.remove_runs(&[R1, R2]).unwrap(), 2);
    assert_eq!(store.next_timer_due().unwrap(), None);
    assert!(store.notifications_of(R2).unwrap().is_empty());
}

on_both!(
    a_runs_end_is_queued_with_it_for_each_target_that_wants_it_once,
    a_notification_is_leased_to_one_sender_retried_and_given_up,
    removing_a_run_takes_its_timer_and_its_notifications,
);
