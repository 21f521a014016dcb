//! The same seeded random sequences of appends, forks, gates, job leases,
//! heartbeats, completions and expiries applied to a store on SQLite and
//! one on PostgreSQL: every answer and the whole log must be the same.
//! Times are the test's (`now_ms` is given to every lease operation), and
//! what is random by design (lease tokens, write times) is compared by
//! role, not value.

use wfhost_core::run::event::{CommandRecord, Decision, Event, EventSink};
use wfhost_store::{Durability, NewJob, Store};

mod common;
use common::{Backend, record, started, step};

/// A small deterministic generator (xorshift64*): the sequences are the
/// same on every machine, and a failing seed is printed to replay.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const RUNS: [&str; 3] = [
    "run-20260101-000000-0000d1",
    "run-20260101-000000-0000d2",
    "run-20260101-000000-0000d3",
];

/// One store under test, with what it handed out (lease tokens by job).
struct Side {
    store: Store,
    tokens: std::collections::BTreeMap<i64, (u32, String)>,
    _home: common::Home,
}

fn gate(step: u64, n: u64) -> Vec<Event> {
    vec![Event::ActionTaken {
        step,
        action: format!("GATE:ask-{n}"),
        command: CommandRecord::Gate {
            prompt: format!("approve {n}?"),
            questions: Vec::new(),
        },
        gate_id: Some(format!("UD-{n}")),
        fallback_for: None,
    }]
}

/// Apply operation `op` (drawn from `rng`) to `side`; its answer, with
/// what differs by design (tokens) left out.
fn apply(side: &mut Side, op: u64, arg: u64, now: i64) -> String {
    let store = &mut side.store;
    let run = RUNS[(arg % 3) as usize];
    let caps = vec!["wasm".to_string()];
    match op {
        0 => format!("{:?}", store.create_run(&record(run), "{}", &started(run))),
        1 | 2 => {
            let branch = store.current_branch(run).unwrap_or(1);
            match store.writer(run, branch) {
                Ok(mut w) => {
                    let at = arg % 50;
                    let events = if op == 1 { step(at) } else { gate(at, arg % 7) };
                    format!("{:?}", w.append(&events))
                }
                Err(e) => format!("writer: {e}"),
            }
        }
        3 => {
            let snapshots: Vec<String> = store
                .chain(run, store.current_branch(run).unwrap_or(1))
                .map(|c| c.into_iter().filter_map(|e| e.snapshot).collect())
                .unwrap_or_default();
            match snapshots.get((arg as usize) % snapshots.len().max(1)) {
                Some(s) => format!("fork {:?}", store.fork(run, s)),
                None => "no snapshot".into(),
            }
        }
        4 => {
            let branch = store.current_branch(run).unwrap_or(1);
            let answer = vec![Event::GateAnswered {
                gate_id: format!("UD-{}", arg % 7),
                decision: if arg.is_multiple_of(2) {
                    Decision::Approved
                } else {
                    Decision::ChangesRequested {
                        text: "more".into(),
                    }
                },
            }];
            match store.writer(run, branch) {
                Ok(mut w) => format!("{:?}", w.append(&answer)),
                Err(e) => format!("writer: {e}"),
            }
        }
        5 => {
            let new = NewJob {
                run_id: run,
                branch: 1,
                step: arg % 20,
                lane: if arg.is_multiple_of(3) { "0" } else { "" },
                node: "main",
                block: "a",
                requires: &caps,
                request: "{}",
            };
            match store.enqueue_job(&new, now) {
                Ok(job) => format!("queued {} {:?} {}", job.id, job.state, job.attempt),
                Err(e) => format!("enqueue: {e}"),
            }
        }
        6 => match store.claim_job(&format!("agent{}", arg % 2), &caps, 1_000, now) {
            Ok(Some(lease)) => {
                let id = lease.job.id;
                side.tokens
                    .insert(id, (lease.job.attempt, lease.token.clone()));
                format!("leased {id} attempt {}", lease.job.attempt)
            }
            other => format!("{:?}", other.map(|l| l.map(|l| l.job.id))),
        },
        7 | 8 => {
            let Some((&id, (attempt, token))) = side
                .tokens
                .iter()
                .min_by_key(|(id, _)| (**id as u64).wrapping_mul(arg | 1) % 97)
            else {
                return "no lease".into();
            };
            let (attempt, token) = (*attempt, token.clone());
            let stale = arg.is_multiple_of(5);
            let token = if stale { "stale".to_string() } else { token };
            if op == 7 {
                let beat = store.heartbeat_job(id, attempt, &token, 1_000, now);
                format!(
                    "heartbeat {id}: {:?}",
                    beat.map(|b| b.map(|_| ()).map_err(|e| format!("{e:?}")))
                )
            } else {
                let done = store.complete_job(
                    (id, attempt, &token),
                    !arg.is_multiple_of(4),
                    "{}",
                    now,
                    |j| format!("done {}", j.id),
                );
                format!("complete {id}: {:?}", done.map(|c| format!("{c:?}")))
            }
        }
        _ => format!("{:?}", store.requeue_expired(now)),
    }
}

/// Everything the store holds of the runs, with write times left out.
fn contents(store: &Store) -> String {
    let mut out = String::new();
    for run in RUNS {
        let Ok(events) = store.events_after(run, 0) else {
            out.push_str(&format!("{run}: none\n"));
            continue;
        };
        for e in events {
            out.push_str(&format!(
                "{run} {} b{} p{:?} {:?} {}\n",
                e.seq,
                e.branch,
                e.parent,
                e.snapshot,
                serde_json::to_string(&e.event).unwrap()
            ));
        }
        out.push_str(&format!(
            "branches {:?}\n",
            store.branches(run).map(|b| b
                .into_iter()
                .map(|b| (b.branch, b.head, b.events, b.status))
                .collect::<Vec<_>>())
        ));
        for job in store.jobs_of_run(run, 0, 1000).unwrap_or_default() {
            out.push_str(&format!(
                "job {} {:?} attempt {} step {}\n",
                job.id, job.state, job.attempt, job.step
            ));
            for h in store.job_history(job.id).unwrap() {
                out.push_str(&format!(
                    "  {} {} {:?} {} at {}\n",
                    h.kind, h.attempt, h.agent, h.detail, h.at_ms
                ));
            }
        }
    }
    out.push_str(&format!(
        "gates {:?}\n",
        store.open_gates().map(|g| g
            .into_iter()
            .map(|g| (g.run_id, g.branch, g.gate_id, g.prompt))
            .collect::<Vec<_>>())
    ));
    out
}

fn side(backend: Backend) -> Option<Side> {
    let home = common::home(backend)?;
    let store = Store::open(home.path(), Durability::Normal).unwrap();
    Some(Side {
        store,
        tokens: Default::default(),
        _home: home,
    })
}

#[test]
fn sqlite_and_postgres_answer_and_record_the_same() {
    let seeds: u64 = std::env::var("WFHOST_DIFF_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    for seed in 1..=seeds {
        let (Some(mut lite), Some(mut pg)) = (side(Backend::Sqlite), side(Backend::Postgres))
        else {
            return;
        };
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
        let mut now = 1_000_000i64;
        for i in 0..300 {
            let op = rng.below(10);
            let arg = rng.next() >> 8;
            now += rng.below(400) as i64;
            let a = apply(&mut lite, op, arg, now);
            let b = apply(&mut pg, op, arg, now);
            let strip =
                |s: &str, side: &Side| s.replace(&side.store.path().display().to_string(), "STORE");
            assert_eq!(
                strip(&a, &lite),
                strip(&b, &pg),
                "seed {seed}, operation {i} ({op}, {arg}): the backends answered differently"
            );
        }
        let (a, b) = (contents(&lite.store), contents(&pg.store));
        if a != b {
            for (x, y) in a.lines().zip(b.lines()) {
                assert_eq!(x, y, "seed {seed}: the stores hold different things");
            }
            panic!(
                "seed {seed}: the stores hold different things ({} vs {} lines)",
                a.lines().count(),
                b.lines().count()
            );
        }
    }
}
