//! The store against a real SQLite file.

use wfhost_core::run::event::{CommandRecord, Event, EventSink, Outcome};
use wfhost_store::{Bundle, ChainPage, Durability, RunId, Store, StoreError};

mod common;
use common::Backend;
#[allow(unused_imports)]
use common::{M, Q, R, R1, R2, R3, R4};
use common::{record, started};

use common::step;

/// The snapshot id of a branch's newest event (which must have one).
fn last_snapshot(store: &Store, run: &str, branch: u32) -> String {
    let chain = store.chain(run, branch).unwrap();
    chain.last().unwrap().snapshot.clone().unwrap()
}

fn new_store(b: Backend) -> Option<(common::Home, Store)> {
    let home = common::home(b)?;
    let mut store = Store::open(home.path(), Durability::Normal).unwrap();
    store.create_run(&record(R1), "{}", &started(R1)).unwrap();
    Some((home, store))
}

fn appended_events_fold_and_the_log_refuses_updates(b: Backend) {
    let Some((_home, mut store)) = new_store(b) else {
        return;
    };
    {
        let mut w = store.writer(R1, 1).unwrap();
        for n in 0..3 {
            w.append(&step(n)).unwrap();
        }
    }
    let state = store.state(R1, 1).unwrap();
    assert_eq!(state.steps, 3);
    assert_eq!(state.payload.len(), 3);
    assert_eq!(state.statistics.tokens_used, 3);
    // Append-only: the trigger refuses edits, even through SQL.
    let err =
        wfhost_store::testing::execute_batch(&store, "UPDATE events SET body = '{}' WHERE seq = 2")
            .unwrap_err();
    assert!(err.contains("append-only"), "{err}");
}

fn a_writer_behind_the_branch_head_is_refused(b: Backend) {
    let Some((_home, mut store)) = new_store(b) else {
        return;
    };
    let home = store.home().to_path_buf();
    let mut other = Store::open(&home, Durability::Normal).unwrap();
    let mut stale = other.writer(R1, 1).unwrap();
    store.writer(R1, 1).unwrap().append(&step(0)).unwrap();
    let err = stale.append(&step(0)).unwrap_err();
    assert!(err.0.contains("extended by another process"), "{err}");
    assert_eq!(store.state(R1, 1).unwrap().steps, 1);
}

fn the_run_lock_is_exclusive_and_released_on_drop(b: Backend) {
    let Some((_home, store)) = new_store(b) else {
        return;
    };
    let lock = store.lock_run(&RunId::parse(R1).unwrap()).unwrap();
    assert!(store.is_running(&RunId::parse(R1).unwrap()));
    assert!(matches!(
        store.lock_run(&RunId::parse(R1).unwrap()),
        Err(StoreError::Busy { pid: Some(_), .. })
    ));
    drop(lock);
    assert!(!store.is_running(&RunId::parse(R1).unwrap()));
    store.lock_run(&RunId::parse(R1).unwrap()).unwrap();
}

fn forks_branch_off_and_chains_follow_their_ancestry(b: Backend) {
    let Some((_home, mut store)) = new_store(b) else {
        return;
    };
    {
        let mut w = store.writer(R1, 1).unwrap();
        for n in 0..3 {
            w.append(&step(n)).unwrap();
        }
    }
    let chain = store.chain(R1, 1).unwrap();
    let after_step_0 = chain[3].snapshot.clone().unwrap();
    let b2 = store.fork(R1, &after_step_0).unwrap();
    assert_eq!(b2, 2);
    store.writer(R1, 2).unwrap().append(&step(1)).unwrap();
    // A fork of the fork, at its own snapshot.
    let snap = last_snapshot(&store, R1, 2);
    let b3 = store.fork(R1, &snap).unwrap();
    let chain3 = store.chain(R1, b3).unwrap();
    assert_eq!(chain3.len(), 1 + 3 + 1 + 3 + 1);
    assert_eq!(store.state(R1, b3).unwrap().steps, 2);
    assert_eq!(
        store.state(R1, 1).unwrap().steps,
        3,
        "the original is intact"
    );
    let branches = store.branches(R1).unwrap();
    assert_eq!(branches.len(), 3);
    assert_eq!(
        branches[1].forked_from.as_deref(),
        Some(after_step_0.as_str())
    );
    assert_eq!(
        (branches[1].forked_at, branches[1].forked_from_branch),
        (Some(chain[3].seq), Some(1))
    );
    assert_eq!(branches[2].forked_from_branch, Some(2));
    assert_eq!(
        (branches[0].forked_at, branches[0].forked_from_branch),
        (None, None)
    );
    assert_eq!(store.current_branch(R1).unwrap(), 3);
    // Not a snapshot (a block_started event has none), or another run's.
    assert!(store.fork(R1, "sn-nope").is_err());
    store.create_run(&record(R2), "{}", &started(R2)).unwrap();
    let foreign = store.chain(R2, 1).unwrap()[0].snapshot.clone().unwrap();
    let err = store.fork(R1, &foreign).unwrap_err().to_string();
    assert!(err.contains(&format!("belongs to run {R2}")), "{err}");
}

fn chain_pages_from_either_end_are_the_chain_of_a_forked_branch(b: Backend) {
    let Some((_home, mut store)) = new_store(b) else {
        return;
    };
    {
        let mut w = store.writer(R1, 1).unwrap();
        for n in 0..4 {
            w.append(&step(n)).unwrap();
        }
    }
    let at = store.chain(R1, 1).unwrap()[6].snapshot.clone().unwrap();
    let b2 = store.fork(R1, &at).unwrap();
    {
        let mut w = store.writer(R1, b2).unwrap();
        for n in 2..5 {
            w.append(&step(n)).unwrap();
        }
    }
    // Branch 1 goes on after the fork: its later events are not branch 2's.
    store.writer(R1, 1).unwrap().append(&step(4)).unwrap();
    for branch in [1, b2] {
        let chain: Vec<u64> = store
            .chain(R1, branch)
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        for limit in 1..=chain.len() + 1 {
            let mut forward = Vec::new();
            let mut after = 0;
            loop {
                let page = store
                    .chain_page(R1, branch, ChainPage::After(after), limit)
                    .unwrap();
                assert!(page.len() <= limit);
                let Some(last) = page.last() else { break };
                after = last.seq;
                forward.extend(page.iter().map(|e| e.seq));
            }
            assert_eq!(forward, chain, "branch {branch}, forward pages of {limit}");
            let mut backward = Vec::new();
            let mut before = u64::MAX;
            loop {
                let page = store
                    .chain_page(R1, branch, ChainPage::Before(before), limit)
                    .unwrap();
                assert!(page.len() <= limit);
                let Some(first) = page.first() else { break };
                before = first.seq;
                let mut seqs: Vec<u64> = page.iter().map(|e| e.seq).collect();
                seqs.extend(backward);
                backward = seqs;
            }
            assert_eq!(
                backward, chain,
                "branch {branch}, backward pages of {limit}"
            );
        }
    }
    assert!(store.chain_page(R1, 9, ChainPage::After(0), 10).is_err());
}

fn a_bundle_whose_log_does_not_fold_is_refused(b: Backend) {
    let Some((_home, mut store)) = new_store(b) else {
        return;
    };
    store.writer(R1, 1).unwrap().append(&step(0)).unwrap();
    store
        .writer(R1, 1)
        .unwrap()
        .append(&[Event::RunFinished {
            outcome: Outcome::Succeeded,
        }])
        .unwrap();
    let mut bundle = store.export(R1).unwrap();
    // Drop a completed block and re-seal: the checksum is right, the log is not.
    bundle.events.remove(2);
    for (i, e) in bundle.events.iter_mut().enumerate() {
        e.seq = i as u64 + 1;
        e.parent = (i > 0).then_some(i as u64);
    }
    bundle.checksum = String::new();
    let text = serde_json::to_vec(&bundle).unwrap();
    let err = Bundle::parse(&text).unwrap_err();
    assert!(err.contains("checksum mismatch"), "{err}");

    let Some(other) = common::home(b) else { return };
    let mut there = Store::open(other.path(), Durability::Normal).unwrap();
    let err = there.import(&bundle).unwrap_err().to_string();
    assert!(err.contains("does not fit"), "{err}");
    assert!(there.runs().unwrap().is_empty());
}

fn an_existing_store_opens_with_the_durability_asked_for(b: Backend) {
    let Some(home) = common::home(b) else { return };
    wfhost_store::Store::open(home.path(), wfhost_store::Durability::Full).unwrap();
    for durability in [
        wfhost_store::Durability::Normal,
        wfhost_store::Durability::Full,
    ] {
        let store = wfhost_store::Store::open_existing_with(home.path(), durability).unwrap();
        assert_eq!(store.durability().unwrap(), durability);
    }
}

/// `n` steps of `a` jumping to itself, then one that opens gate `UD-1`.
const SHORT: &str = "run-20260101-000000-00005a";
const LONG: &str = "run-20260101-000000-00005b";

fn waiting_run(store: &mut Store, id: &str, n: u64) {
    store.create_run(&record(id), "{}", &started(id)).unwrap();
    let mut w = store.writer(id, 1).unwrap();
    for i in 0..n {
        w.append(&step(i)).unwrap();
    }
    let mut gate = step(n);
    gate[2] = Event::ActionTaken {
        step: n,
        action: "GATE:Ship it?".into(),
        command: CommandRecord::Gate {
            prompt: "Ship it?".into(),
            questions: Vec::new(),
        },
        gate_id: Some("UD-1".into()),
        fallback_for: None,
    };
    w.append(&gate).unwrap();
}

fn open_gates_read_a_few_events_whatever_the_length_of_the_runs(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = Store::open(home.path(), Durability::Normal).unwrap();
    waiting_run(&mut store, SHORT, 10);
    waiting_run(&mut store, LONG, 1_000);
    let cost = |store: &Store, f: &dyn Fn(&Store)| {
        let before = store.events_decoded();
        f(store);
        store.events_decoded() - before
    };
    let gates = store.open_gates().unwrap();
    assert_eq!(gates.len(), 2);
    for g in &gates {
        assert_eq!(
            (g.gate_id.as_str(), g.node.as_str(), g.block.as_str()),
            ("UD-1", "main", "a")
        );
        assert_eq!(
            (g.prompt.as_str(), g.workflow_id.as_str()),
            ("Ship it?", "w")
        );
    }
    // Each waiting run costs the same few events, 1,000 steps or 10.
    let both = cost(&store, &|s| {
        s.open_gates().unwrap();
    });
    assert!(both <= 6, "{both} events decoded for two waiting runs");
    let short = cost(&store, &|s| {
        s.branches(SHORT).unwrap();
    });
    let long = cost(&store, &|s| {
        s.branches(LONG).unwrap();
    });
    assert_eq!(short, long);

    // A branch forked where the gate is open waits at it too, without a
    // fold; answering on the first branch leaves the fork waiting.
    let snapshot = last_snapshot(&store, LONG, 1);
    let b2 = store.fork(LONG, &snapshot).unwrap();
    store
        .writer(LONG, 1)
        .unwrap()
        .append(&[Event::GateAnswered {
            gate_id: "UD-1".into(),
            decision: wfhost_core::run::event::Decision::Approved,
        }])
        .unwrap();
    let forked = cost(&store, &|s| {
        let gates = s.open_gates().unwrap();
        let long: Vec<u32> = gates
            .iter()
            .filter(|g| g.run_id == LONG)
            .map(|g| g.branch)
            .collect();
        assert_eq!(long, [b2]);
    });
    assert!(forked <= 8, "{forked}");
    let statuses: Vec<String> = store
        .branches(LONG)
        .unwrap()
        .into_iter()
        .map(|b| b.status)
        .collect();
    assert_eq!(statuses, ["interrupted", "waiting"]);
}

/// A gate that asks questions stays listed while a security question is
/// open, and numbers its questions: the next gate id comes after them. A
/// mandatory gate asked again stays listed too.
fn gates_answered_in_part_or_asked_again_are_still_open(b: Backend) {
    use wfhost_core::run::questions::GateQuestion;
    let Some(home) = common::home(b) else { return };
    let mut store = Store::open(home.path(), Durability::Normal).unwrap();
    store.create_run(&record(Q), "{}", &started(Q)).unwrap();
    let question = |n: usize, security: bool| GateQuestion {
        id: format!("UD-{n}"),
        text: format!("question {n}?"),
        security,
    };
    let mut gate = step(0);
    gate[2] = Event::ActionTaken {
        step: 0,
        action: "GATE:Findings".into(),
        command: CommandRecord::Gate {
            prompt: "Findings".into(),
            questions: vec![question(1, true), question(2, false)],
        },
        gate_id: Some("UD-1".into()),
        fallback_for: None,
    };
    store.writer(Q, 1).unwrap().append(&gate).unwrap();
    // A new writer reads the numbering from the store: past the questions.
    assert_eq!(store.writer(Q, 1).unwrap().new_gate_id().unwrap(), "UD-3");
    let answer = |state: &wfhost_core::run::state::RunState, text: &str| Event::GateAnswered {
        gate_id: "UD-1".into(),
        decision: state.parse_answer("UD-1", text).unwrap(),
    };
    let state = store.state(Q, 1).unwrap();
    let partial = answer(&state, r#"{"2": "yes"}"#);
    store.writer(Q, 1).unwrap().append(&[partial]).unwrap();
    let gates = store.open_gates().unwrap();
    assert_eq!(gates.len(), 1, "{gates:?}");
    assert_eq!(gates[0].gate_id, "UD-1");
    assert!(
        gates[0].prompt.contains("1. UD-1 [security]: question 1?"),
        "{}",
        gates[0].prompt
    );
    assert!(
        !gates[0].prompt.contains("question 2?"),
        "{}",
        gates[0].prompt
    );
    // The store's prompt is the state's.
    let state = store.state(Q, 1).unwrap();
    let wfhost_core::run::state::Phase::Waiting { prompt, .. } = &state.phase else {
        panic!("{:?}", state.phase)
    };
    assert_eq!(*prompt, gates[0].prompt);
    assert_eq!(store.branches(Q).unwrap()[0].status, "waiting");
    // A deferral settles it.
    let deferred = answer(&state, "defer: later");
    store.writer(Q, 1).unwrap().append(&[deferred]).unwrap();
    assert!(store.open_gates().unwrap().is_empty());

    // A mandatory gate asked again after an invalid answer.
    store.create_run(&record(M), "{}", &started(M)).unwrap();
    let mut gate = step(0);
    gate[2] = Event::ActionTaken {
        step: 0,
        action: "GATE:APPROVE_DESIGN".into(),
        command: CommandRecord::Gate {
            prompt: "Approve?".into(),
            questions: Vec::new(),
        },
        gate_id: Some("UD-APPROVE-DESIGN".into()),
        fallback_for: None,
    };
    let mut w = store.writer(M, 1).unwrap();
    w.append(&gate).unwrap();
    w.append(&[Event::GateReasked {
        gate_id: "UD-APPROVE-DESIGN".into(),
        answer: "maybe".into(),
        reason: "not an answer".into(),
    }])
    .unwrap();
    let gates = store.open_gates().unwrap();
    assert_eq!(gates.len(), 1, "{gates:?}");
    assert_eq!(
        (
            gates[0].run_id.as_str(),
            gates[0].gate_id.as_str(),
            gates[0].prompt.as_str()
        ),
        (M, "UD-APPROVE-DESIGN", "Approve?")
    );
    assert_eq!(store.branches(M).unwrap()[0].status, "waiting");
}

/// The tables of a version 1 store, as wfhost 0.1 wrote them.
const SCHEMA_V1: &str = "
CREATE TABLE definitions (hash TEXT PRIMARY KEY, workflow_id TEXT NOT NULL, body TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE runs (id TEXT PRIMARY KEY, workflow_id TEXT NOT NULL,
    workflow_hash TEXT NOT NULL REFERENCES definitions(hash), manifest TEXT NOT NULL,
    workspace TEXT NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE events (run_id TEXT NOT NULL REFERENCES runs(id), seq INTEGER NOT NULL,
    branch INTEGER NOT NULL, parent INTEGER, at INTEGER NOT NULL, kind TEXT NOT NULL,
    body TEXT NOT NULL, snapshot TEXT UNIQUE, PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
CREATE INDEX events_by_branch ON events (run_id, branch, seq);
CREATE TRIGGER events_are_append_only BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
PRAGMA journal_mode = WAL;
PRAGMA user_version = 1;
";

/// A version 1 store holding run `old` (one step, then a fork of branch 1
/// at its start) and run `new`, created later.
const OLD_V1: &str = "run-20260101-000000-0000c1";
const NEW_V1: &str = "run-20260101-000000-0000c2";

fn version_1_store(home: &std::path::Path) {
    let conn = rusqlite::Connection::open(home.join("wfhost.db")).unwrap();
    conn.execute_batch(SCHEMA_V1).unwrap();
    let hash = wfhost_core::manifest::pinning::hash_of("{}");
    conn.execute("INSERT INTO definitions VALUES (?1, 'w', '{}')", [&hash])
        .unwrap();
    let mut events = vec![(1, 1, None, started(OLD_V1))];
    for (i, e) in step(0).into_iter().enumerate() {
        events.push((i as u64 + 2, 1, Some(i as u64 + 1), e));
    }
    let forked = Event::Forked {
        from_snapshot: wfhost_store::snapshot_id(OLD_V1, 1),
    };
    events.push((5, 2, Some(1), forked));
    for (run, created) in [(OLD_V1, 10), (NEW_V1, 20)] {
        conn.execute(
            "INSERT INTO runs VALUES (?1, 'w', ?2, '/nowhere/w.json', '/tmp', ?3)",
            (run, &hash, created),
        )
        .unwrap();
        let mine: Vec<_> = if run == OLD_V1 {
            events.clone()
        } else {
            vec![(1, 1, None, started(NEW_V1))]
        };
        for (seq, branch, parent, event) in mine {
            let snapshot = event
                .is_snapshot()
                .then(|| wfhost_store::snapshot_id(run, seq));
            conn.execute(
                "INSERT INTO events VALUES (?1, ?2, ?3, ?4, 5, ?5, ?6, ?7)",
                (
                    run,
                    seq as i64,
                    branch,
                    parent.map(|p| p as i64),
                    event.kind(),
                    serde_json::to_string(&event).unwrap(),
                    snapshot,
                ),
            )
            .unwrap();
        }
    }
}

#[test]
fn a_version_1_store_is_upgraded_with_every_run_event_and_snapshot() {
    let home = tempfile::tempdir().unwrap();
    version_1_store(home.path());
    let mut store = Store::open(home.path(), Durability::Normal).unwrap();
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, wfhost_store::SCHEMA_VERSION);
    let runs: Vec<String> = store
        .runs()
        .unwrap()
        .into_iter()
        .map(|r| r.id.to_string())
        .collect();
    assert_eq!(runs, [NEW_V1, OLD_V1]);
    // A row whose id is no run id (an older import did not check) is
    // left out of listings, not a failure of the whole listing.
    conn.execute(
        "INSERT INTO runs (id, workflow_id, workflow_hash, manifest, workspace, created_at) SELECT '/tmp/x', workflow_id, workflow_hash, manifest, workspace, 5 FROM runs LIMIT 1",
        [],
    )
    .unwrap();
    assert_eq!(store.runs().unwrap().len(), 2);
    assert!(store.run("/tmp/x").is_err());
    // The history, its branches and its snapshot ids are what they were.
    assert_eq!(store.state(OLD_V1, 1).unwrap().steps, 1);
    let branch_2 = store.chain(OLD_V1, 2).unwrap();
    let seqs: Vec<u64> = branch_2.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 5]);
    assert_eq!(
        branch_2[0].snapshot.as_deref(),
        Some(wfhost_store::snapshot_id(OLD_V1, 1).as_str())
    );
    assert_eq!(store.events_after(OLD_V1, 0).unwrap().len(), 5);
    assert_eq!(store.events_after(NEW_V1, 0).unwrap().len(), 1);
    // And the upgraded store goes on: a run extended, a snapshot forked.
    store.writer(OLD_V1, 1).unwrap().append(&step(1)).unwrap();
    assert_eq!(store.state(OLD_V1, 1).unwrap().steps, 2);
    let snapshot = last_snapshot(&store, OLD_V1, 1);
    assert_eq!(store.fork(OLD_V1, &snapshot).unwrap(), 3);
    assert!(store.fork(NEW_V1, &snapshot).is_err());
    // Opening it again finds version 2 and changes nothing.
    drop(store);
    let again = Store::open(home.path(), Durability::Normal).unwrap();
    assert_eq!(again.events_after(OLD_V1, 0).unwrap().len(), 9);
}

fn runs_do_not_see_each_others_events(b: Backend) {
    let Some((_home, mut store)) = new_store(b) else {
        return;
    };
    store.create_run(&record(R2), "{}", &started(R2)).unwrap();
    store.writer(R1, 1).unwrap().append(&step(0)).unwrap();
    store.writer(R2, 1).unwrap().append(&step(0)).unwrap();
    store.writer(R1, 1).unwrap().append(&step(1)).unwrap();
    assert_eq!(store.events_after(R1, 0).unwrap().len(), 7);
    assert_eq!(store.events_after(R2, 0).unwrap().len(), 4);
    assert_eq!(store.events_page(R2, 1, 100).unwrap()[0].seq, 2);
    assert_eq!(store.state(R1, 1).unwrap().steps, 2);
    assert_eq!(store.current_branch(R2).unwrap(), 1);
    assert!(store.events_after("nope", 0).unwrap().is_empty());
    assert!(store.writer("nope", 1).is_err());
}

/// Opening a store while another connection creates it finds no store or
/// a whole one: never a file still switching to WAL mode, which SQLite
/// reports as busy at once, whatever the busy timeout (a server probing
/// the store as its first run creates it was refused this way).
#[test]
fn a_store_being_created_is_either_absent_or_whole_to_others() {
    for round in 0..40 {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let creator = {
            let home = home.clone();
            std::thread::spawn(move || -> Result<(), String> {
                for k in 0..5 {
                    let id = format!("run-20260101-000000-00001{k}");
                    let mut store =
                        Store::open(&home, Durability::Full).map_err(|e| e.to_string())?;
                    store
                        .create_run(&record(&id), "{}", &started(&id))
                        .map_err(|e| e.to_string())?;
                }
                Ok(())
            })
        };
        let probes: Vec<_> = (0..3)
            .map(|_| {
                let home = home.clone();
                std::thread::spawn(move || -> Result<(), String> {
                    for _ in 0..500 {
                        match Store::open_existing(&home) {
                            Ok(store) => drop(store.runs().map_err(|e| e.to_string())?),
                            Err(StoreError::NoStore { .. }) => {}
                            Err(e) => return Err(e.to_string()),
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        let mut errors: Vec<String> = probes
            .into_iter()
            .filter_map(|p| p.join().unwrap().err())
            .collect();
        errors.extend(creator.join().unwrap().err());
        assert!(errors.is_empty(), "round {round}: {errors:?}");
        let names: Vec<_> = std::fs::read_dir(&home)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(names.is_empty(), "left behind: {names:?}");
    }
}

#[test]
fn a_version_3_store_gains_every_later_table() {
    let (home, store) = new_store(Backend::Sqlite).unwrap();
    let path = store.path().to_path_buf();
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TABLE job_telemetry; DROP TABLE mcp_acks; DROP TABLE run_sessions; DROP TABLE timers; \
         DROP TABLE schedule_ticks; DROP TABLE schedules; DROP TABLE hook_deliveries; DROP TABLE hooks; \
         DROP TABLE notifications; DROP TABLE notify_targets; DROP TABLE served_runs; \
         PRAGMA user_version = 3;",
    )
    .unwrap();
    drop(conn);
    let store = Store::open_existing(home.path()).unwrap();
    assert_eq!(store.last_job_telemetry().unwrap(), 0);
    assert_eq!(store.next_ack_attempt("nope", 1).unwrap(), 1);
    assert_eq!(store.session_of(R1).unwrap(), None);
    assert!(store.sessions().unwrap().is_empty());
    assert_eq!(store.next_timer_due().unwrap(), None);
    assert!(store.schedules().unwrap().is_empty() && store.open_ticks().unwrap().is_empty());
    assert!(store.hooks().unwrap().is_empty());
    assert!(store.notify_targets().unwrap().is_empty());
    assert!(store.notifications_of(R1).unwrap().is_empty());
    assert!(store.unexecuted_served_runs(0, 10).unwrap().is_empty());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, wfhost_store::SCHEMA_VERSION);
}

fn a_bundle_whose_run_id_is_no_run_id_is_refused_with_nothing_stored(b: Backend) {
    let Some((_home, store)) = new_store(b) else {
        return;
    };
    let bundle = store.export(R1).unwrap();
    // The forgery is sound: re-sealed with the same id, the checksum holds
    // (what fails then is the tests' stand-in definition, checked last).
    let err = Bundle::parse(common::forge(&bundle, R1, R1).as_bytes()).unwrap_err();
    assert!(err.contains("pinned definition"), "{err}");
    let Some(empty) = common::home(b) else { return };
    let mut nothing = Store::open(empty.path(), Durability::Normal).unwrap();
    for hostile in common::HOSTILE_RUN_IDS {
        let text = common::forge(&bundle, R1, hostile);
        let err = Bundle::parse(text.as_bytes()).unwrap_err();
        assert!(
            err.contains("run id") && !err.contains('\n'),
            "{hostile:?}: {err}"
        );
        assert!(nothing.runs().unwrap().is_empty());
    }
    // Nothing of them reached a path: no lock file was made.
    assert!(!empty.path().join("locks").exists());
    let _ = &mut nothing;
}

on_both!(
    a_newer_schema_is_refused_and_left_alone,
    appended_events_fold_and_the_log_refuses_updates,
    a_writer_behind_the_branch_head_is_refused,
    the_run_lock_is_exclusive_and_released_on_drop,
    forks_branch_off_and_chains_follow_their_ancestry,
    chain_pages_from_either_end_are_the_chain_of_a_forked_branch,
    a_bundle_whose_log_does_not_fold_is_refused,
    an_existing_store_opens_with_the_durability_asked_for,
    open_gates_read_a_few_events_whatever_the_length_of_the_runs,
    gates_answered_in_part_or_asked_again_are_still_open,
    runs_do_not_see_each_others_events,
    a_bundle_whose_run_id_is_no_run_id_is_refused_with_nothing_stored,
);

/// Two homes (two machines' servers) on one database share each run's
/// execution lock: held in one, the run is busy in the other (with the
/// holder's pid, this being the same machine), and free again when the
/// holder lets go — or when its connection ends, as when it dies.
#[test]
fn homes_sharing_a_database_share_the_run_locks() {
    let Some(db) = wfhost_store::testing::TestDatabase::create() else {
        return;
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    db.configure(a.path());
    db.configure(b.path());
    let mut here = Store::open(a.path(), Durability::Normal).unwrap();
    here.create_run(&record(R1), "{}", &started(R1)).unwrap();
    let there = Store::open_existing(b.path()).unwrap();
    let id = RunId::parse(R1).unwrap();
    assert!(!there.is_running(&id));
    let lock = here.lock_run(&id).unwrap();
    assert!(
        there.is_running(&id),
        "the other home sees the run executing"
    );
    match there.lock_run(&id) {
        Err(StoreError::Busy { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
        other => panic!("not busy: {other:?}"),
    }
    assert_eq!(there.lock_holder(&id), Some(std::process::id()));
    drop(lock);
    assert!(!there.is_running(&id));
    let theirs = there.lock_run(&id).unwrap();
    assert!(here.is_running(&id));
    drop(theirs);
    // gc removes a run and its lock record.
    here.remove_runs(&[R1]).unwrap();
    assert!(here.run(R1).unwrap().is_none());
}

/// A store whose schema a newer wfhost wrote is refused, naming both
/// versions, and left as it was: SQLite's `user_version`, PostgreSQL's
/// `wfhost_schema` (two servers of different versions on one database).
fn a_newer_schema_is_refused_and_left_alone(b: Backend) {
    let Some((home, store)) = new_store(b) else {
        return;
    };
    let newer = wfhost_store::SCHEMA_VERSION + 1;
    let bump = match b {
        Backend::Sqlite => format!("PRAGMA user_version = {newer}"),
        Backend::Postgres => format!("UPDATE wfhost_schema SET version = {newer}"),
    };
    wfhost_store::testing::execute_batch(&store, &bump).unwrap();
    drop(store);
    for opened in [
        Store::open(home.path(), Durability::Normal).map(drop),
        Store::open_existing(home.path()).map(drop),
    ] {
        match opened {
            Err(e @ StoreError::TooNew { .. }) => {
                let text = e.to_string();
                assert!(text.contains(&format!("schema {newer}")), "{text}");
                assert!(!text.contains("wfhost_test:wfhost_test"), "{text}");
            }
            other => panic!("not refused: {other:?}"),
        }
    }
}
