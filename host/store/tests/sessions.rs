//! Sessions against a real SQLite file: runs grouped, exported and
//! imported together, and kept or removed together by retention.

use wfhost_core::run::event::{Event, EventSink, Outcome};

mod common;
use common::Backend;
#[allow(unused_imports)]
use common::{M, Q, R, R1, R2, R3, R4};
use common::{record, started};
use wfhost_store::{Durability, SessionBundle, SessionSource, SessionTag, Store, StoreError};

/// A finished run of `session`.
fn run_in(store: &mut Store, id: &str, session: Option<&SessionTag>) {
    store
        .create_run_in(&record(id), "{}", &started(id), session)
        .unwrap();
    store
        .writer(id, 1)
        .unwrap()
        .append(&[Event::RunFinished {
            outcome: Outcome::Succeeded,
        }])
        .unwrap();
}

fn chat() -> SessionTag {
    SessionTag::client("chat-42", Some("main".into())).unwrap()
}

/// Move every event of `run` `days` into the past (the log is append-only;
/// only a test rewrites it).
fn age(home: &std::path::Path, run: &str, days: i64) {
    let store = Store::open_existing(home).unwrap();
    let drop_trigger = match store.backend() {
        wfhost_store::Backend::Sqlite => "DROP TRIGGER IF EXISTS events_are_append_only",
        wfhost_store::Backend::Postgres => {
            "DROP TRIGGER IF EXISTS events_are_append_only ON events"
        }
    };
    let sql = format!(
        "{drop_trigger}; UPDATE events SET at = at - {} WHERE run = (SELECT num FROM runs WHERE id = '{run}')",
        days * 86_400_000
    );
    wfhost_store::testing::execute_batch(&store, &sql).unwrap();
}

fn runs_are_grouped_by_session_and_listed(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = Store::open(home.path(), Durability::Normal).unwrap();
    run_in(&mut store, R1, Some(&chat()));
    run_in(&mut store, R2, Some(&chat()));
    let git = SessionTag::git("feature", "/work/repo");
    run_in(&mut store, R3, Some(&git));
    run_in(&mut store, R4, None);

    assert_eq!(store.session_of(R1).unwrap(), Some(chat()));
    assert_eq!(store.session_of(R4).unwrap(), None);
    let ids: Vec<String> = store
        .session_runs("chat-42")
        .unwrap()
        .into_iter()
        .map(|r| r.id.to_string())
        .collect();
    assert_eq!(ids, [R1, R2]);
    let sessions = store.sessions().unwrap();
    assert_eq!(sessions.len(), 2);
    let listed = sessions.iter().find(|s| s.id == "chat-42").unwrap();
    assert_eq!((listed.runs, listed.source), (2, SessionSource::Client));
    let g = sessions
        .iter()
        .find(|s| s.id == "git:feature@/work/repo")
        .unwrap();
    assert_eq!((g.runs, g.git_branch.as_deref()), (1, Some("feature")));
    let by_run = store.run_session_ids().unwrap();
    assert_eq!(by_run.len(), 3);
    assert_eq!(by_run[R2], "chat-42");
    assert_eq!(by_run[R3], "git:feature@/work/repo");
    assert!(!by_run.contains_key(R4));
}

fn a_session_moves_to_another_home_whole_and_only_whole(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = Store::open(home.path(), Durability::Normal).unwrap();
    run_in(&mut store, R1, Some(&chat()));
    run_in(&mut store, R2, Some(&chat()));
    run_in(&mut store, R3, None);
    let bundle = store.export_session("chat-42").unwrap();
    assert_eq!(bundle.runs.len(), 2);
    assert!(matches!(
        store.export_session("nope"),
        Err(StoreError::UnknownSession { .. })
    ));

    let Some(other) = common::home(b) else { return };
    let mut there = Store::open(other.path(), Durability::Normal).unwrap();
    let done = there.import_session(&bundle).unwrap();
    assert_eq!(done.imported, [R1, R2]);
    assert_eq!(there.session_of(R2).unwrap(), Some(chat()));
    assert_eq!(
        there.export_session("chat-42").unwrap(),
        bundle,
        "the imported session exports to the same bundle"
    );
    // Again: nothing new, both already present.
    let again = there.import_session(&bundle).unwrap();
    assert!(again.imported.is_empty());
    assert_eq!(again.already_present, [R1, R2]);

    // A third home holding a different r2: the import is refused and
    // nothing of it is written, r1 included.
    let Some(third) = common::home(b) else { return };
    let mut held = Store::open(third.path(), Durability::Normal).unwrap();
    held.create_run(&record(R2), "{}", &started(R2)).unwrap();
    let err = held.import_session(&bundle).unwrap_err().to_string();
    assert!(
        err.contains(R2) && err.contains("nothing was imported"),
        "{err}"
    );
    assert!(held.run(R1).unwrap().is_none());
}

fn a_tampered_or_mixed_session_bundle_is_refused(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = Store::open(home.path(), Durability::Normal).unwrap();
    run_in(&mut store, R1, Some(&chat()));
    let bundle = store.export_session("chat-42").unwrap();
    for (what, edit) in [
        (
            "format",
            Box::new(|v: &mut serde_json::Value| v["format"] = "x".into())
                as Box<dyn Fn(&mut serde_json::Value)>,
        ),
        (
            "version",
            Box::new(|v: &mut serde_json::Value| v["version"] = 9.into()),
        ),
        (
            "checksum",
            Box::new(|v: &mut serde_json::Value| v["session"]["id"] = "chat-43".into()),
        ),
        (
            "session id",
            Box::new(|v: &mut serde_json::Value| v["session"]["id"] = "a\u{7}b".into()),
        ),
        (
            "runs",
            Box::new(|v: &mut serde_json::Value| v["runs"] = 3.into()),
        ),
    ] {
        let mut value = serde_json::to_value(&bundle).unwrap();
        edit(&mut value);
        let text = serde_json::to_vec(&value).unwrap();
        assert!(SessionBundle::parse(&text).is_err(), "{what} accepted");
    }
    assert!(
        SessionBundle::parse(b"not json")
            .unwrap_err()
            .contains("not JSON")
    );
}

const NEW_IN: &str = "run-20260101-000000-0000a0";
const OLD_ALONE: &str = "run-20260101-000000-0000a1";
const OLD_IN: &str = "run-20260101-000000-0000a2";

fn retention_keeps_a_session_while_any_of_its_runs_is_recent(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = Store::open(home.path(), Durability::Normal).unwrap();
    run_in(&mut store, OLD_IN, Some(&chat()));
    run_in(&mut store, NEW_IN, Some(&chat()));
    run_in(&mut store, OLD_ALONE, None);
    age(home.path(), OLD_IN, 90);
    age(home.path(), OLD_ALONE, 90);
    let sixty = std::time::Duration::from_secs(60 * 86_400);
    let ids = |store: &Store| -> Vec<String> {
        store
            .gc_candidates(sixty, false)
            .unwrap()
            .into_iter()
            .map(|c| c.run_id)
            .collect()
    };
    assert_eq!(ids(&store), [OLD_ALONE]);
    age(home.path(), NEW_IN, 70);
    let mut both = ids(&store);
    both.sort();
    assert_eq!(both, [NEW_IN, OLD_ALONE, OLD_IN]);
    let removed = store.remove_runs(&both).unwrap();
    assert_eq!(removed, 3);
    assert!(store.sessions().unwrap().is_empty());
}

fn a_session_bundle_with_a_run_id_that_is_no_run_id_is_refused(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = Store::open(home.path(), Durability::Normal).unwrap();
    run_in(&mut store, R1, Some(&chat()));
    let bundle = store.export_session("chat-42").unwrap();
    let sound = common::forge_session(&bundle, R1, R1);
    // The forgery is sound: re-sealed with the same id, the checksum holds
    // (what fails then is the tests' stand-in definition, checked last).
    let err = SessionBundle::parse(sound.as_bytes()).unwrap_err();
    assert!(err.contains("pinned definition"), "{err}");
    for hostile in common::HOSTILE_RUN_IDS {
        let text = common::forge_session(&bundle, R1, hostile);
        let err = SessionBundle::parse(text.as_bytes()).unwrap_err();
        assert!(err.contains("run id"), "{hostile:?}: {err}");
    }
}

on_both!(
    runs_are_grouped_by_session_and_listed,
    a_session_moves_to_another_home_whole_and_only_whole,
    a_tampered_or_mixed_session_bundle_is_refused,
    retention_keeps_a_session_while_any_of_its_runs_is_recent,
    a_session_bundle_with_a_run_id_that_is_no_run_id_is_refused,
);
