//! Store benchmarks: durable appends per second, and the time to rebuild a
//! run's state from a 100,000-event log (what `wfhost resume` does first);
//! `postgres`: the same appends and a job's lease round trip (claim, then
//! complete) on SQLite and on the test PostgreSQL side by side.
//!
//! `cargo bench -p wfhost-store [append|resume|postgres]` — figures are in
//! docs/dev/benchmarks.md.

use std::time::{Duration, Instant};

use wfhost_core::run::event::{CommandRecord, Event, EventSink, PayloadDelta};
use wfhost_core::run::payload::{ContextSegment, Statistics};
use wfhost_store::{Durability, RunRecord, Store};

fn started(run_id: &str, max_steps: u64) -> Event {
    Event::RunStarted {
        run_id: run_id.into(),
        workflow_id: "bench".into(),
        workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
        plugins: Default::default(),
        start_node: "main".into(),
        start_block: "a".into(),
        max_steps,
        max_call_depth: 64,
        default_executor: String::new(),
        inputs: Default::default(),
        rerun_of: None,
    }
}

/// One step's three events, with a realistic payload segment.
fn step(n: u64, keep: usize) -> [Event; 3] {
    [
        Event::BlockStarted {
            step: n,
            node: "main".into(),
            block: "a".into(),
            attempt: n as u32 + 1,
        },
        Event::BlockCompleted {
            step: n,
            node: "main".into(),
            block: "a".into(),
            signal: "SIGNAL:SUCCESS".into(),
            payload: PayloadDelta {
                keep,
                push: vec![ContextSegment::new(
                    format!("answer-{n}"),
                    "AI_RESPONSE",
                    "The plan is sound; T01 and T02 can proceed in parallel once the pool lands.",
                )],
            },
            artifact: None,
            statistics: Statistics {
                tokens_used: 120,
                lines_written: 2,
                ..Default::default()
            },
            duration_us: 1500,
            queued_us: 0,
            failure: None,
            permanent: false,
            log: vec!["answering with response 0".into()],
            written: Vec::new(),
        },
        Event::ActionTaken {
            step: n,
            action: "JUMP:a".into(),
            command: CommandRecord::Jump {
                to: "main.a".into(),
            },
            gate_id: None,
            fallback_for: None,
        },
    ]
}

fn new_run(store: &mut Store, id: &str, max_steps: u64) {
    let record = RunRecord {
        id: wfhost_store::RunId::parse(id).expect("a run id"),
        workflow_id: "bench".into(),
        workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
        manifest: "/bench/workflow.json".into(),
        workspace: "/tmp".into(),
        created_at: 0,
    };
    store
        .create_run(&record, "{}", &started(id, max_steps))
        .expect("run created");
}

/// Events appended per second, one event per transaction as the engine
/// writes them.
fn appends_per_second(durability: Durability, events: u64) -> f64 {
    let home = tempfile::tempdir().unwrap();
    appends_per_second_in(home.path(), durability, events)
}

/// [`appends_per_second`] in `home` (whose store may be a database).
fn appends_per_second_in(home: &std::path::Path, durability: Durability, events: u64) -> f64 {
    let mut store = Store::open(home, durability).unwrap();
    // A run of its own in a store that may have others.
    let id = format!(
        "run-20260101-000000-{:06x}",
        store.runs().unwrap().len() + 0xa
    );
    new_run(&mut store, &id, u64::MAX);
    let mut writer = store.writer(&id, 1).unwrap();
    let t = Instant::now();
    let mut written = 0;
    let mut n = 0;
    while written < events {
        // Keep the payload short, as a `keep_last` strategy would.
        for e in step(n, usize::from(n > 0)) {
            writer.append(std::slice::from_ref(&e)).unwrap();
            written += 1;
        }
        n += 1;
    }
    written as f64 / t.elapsed().as_secs_f64()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A job's lease round trip as an agent makes it through a server: claim
/// the queued job, then complete it (each its own transaction), `jobs`
/// times; the p50 and p99 of the round trips.
fn lease_round_trips(home: &std::path::Path, jobs: u64) -> (Duration, Duration) {
    let mut store = Store::open(home, Durability::Full).unwrap();
    new_run(&mut store, "run-20260101-000000-0000c1", u64::MAX);
    let caps = vec!["wasm".to_string()];
    let mut times = Vec::with_capacity(jobs as usize);
    for step in 0..jobs {
        let job = wfhost_store::NewJob {
            run_id: "run-20260101-000000-0000c1",
            branch: 1,
            step,
            lane: "",
            node: "main",
            block: "a",
            requires: &caps,
            request: "{}",
        };
        store.enqueue_job(&job, 0).unwrap();
        let t = Instant::now();
        let lease = store.claim_job("bench", &caps, 60_000, 1).unwrap().unwrap();
        let key = (lease.job.id, lease.job.attempt, lease.token.as_str());
        store
            .complete_job(key, true, "{}", 2, |_| String::new())
            .unwrap();
        times.push(t.elapsed());
    }
    times.sort();
    let at = |q: f64| times[((times.len() as f64 - 1.0) * q) as usize];
    (at(0.5), at(0.99))
}

fn postgres_beside_sqlite() {
    let Some(db) = wfhost_store::testing::TestDatabase::create() else {
        println!("postgres: no test database (scripts/services.sh postgres): skipped");
        return;
    };
    let pg = tempfile::tempdir().unwrap();
    db.configure(pg.path());
    let lite = tempfile::tempdir().unwrap();
    for (name, home) in [("SQLite    ", lite.path()), ("PostgreSQL", pg.path())] {
        let full = appends_per_second_in(home, Durability::Full, 600);
        let (p50, p99) = lease_round_trips(home, 500);
        println!(
            "{name}: durable append {full:>6.0} events/s ({:>5.0} µs each); lease round trip p50 {:>5.0} µs, p99 {:>5.0} µs",
            1e6 / full,
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6
        );
    }
    let normal = appends_per_second_in(pg.path(), Durability::Normal, 6_000);
    println!(
        "PostgreSQL: append, durability normal (synchronous_commit off): {normal:>6.0} events/s"
    );
}

fn main() {
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let wants = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));

    if wants("append") {
        let full = appends_per_second(Durability::Full, 600);
        println!("append, durability full (default): {full:>9.0} events/s");
        let normal = appends_per_second(Durability::Normal, 30_000);
        println!("append, durability normal:         {normal:>9.0} events/s");
    }

    if wants("postgres") {
        postgres_beside_sqlite();
    }

    if wants("resume") {
        const EVENTS: u64 = 100_000;
        let home = tempfile::tempdir().unwrap();
        let mut store = Store::open(home.path(), Durability::Normal).unwrap();
        new_run(&mut store, "run-20260101-000000-0000b1", u64::MAX);
        {
            let mut writer = store.writer("run-20260101-000000-0000b1", 1).unwrap();
            let mut batch = Vec::new();
            let steps = (EVENTS - 1) / 3;
            for n in 0..steps {
                batch.extend(step(n, usize::from(n > 0)));
                if batch.len() >= 3000 {
                    writer.append(&batch).unwrap();
                    batch.clear();
                }
            }
            writer.append(&batch).unwrap();
        }
        let size = std::fs::metadata(store.path())
            .map(|m| m.len())
            .unwrap_or(0)
            + std::fs::metadata(home.path().join("wfhost.db-wal"))
                .map(|m| m.len())
                .unwrap_or(0);
        let times: Vec<Duration> = (0..5)
            .map(|_| {
                let t = Instant::now();
                let state = store.state("run-20260101-000000-0000b1", 1).unwrap();
                let elapsed = t.elapsed();
                assert_eq!(state.events, EVENTS);
                elapsed
            })
            .collect();
        println!(
            "resume: rebuild the state of a {EVENTS}-event run: median {:.0} ms (store {:.1} MiB)",
            median(times).as_secs_f64() * 1000.0,
            size as f64 / (1024.0 * 1024.0)
        );
    }
}
