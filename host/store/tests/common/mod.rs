//! What the store's tests share: a run's identity and its first event.
#![allow(dead_code)]

use wfhost_core::run::event::{CommandRecord, Event, PayloadDelta};
use wfhost_core::run::payload::Statistics;
use wfhost_store::RunRecord;

pub fn started(run_id: &str) -> Event {
    Event::RunStarted {
        run_id: run_id.into(),
        workflow_id: "w".into(),
        workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
        plugins: Default::default(),
        start_node: "main".into(),
        start_block: "a".into(),
        max_steps: 100,
        max_call_depth: 8,
        default_executor: String::new(),
        inputs: Default::default(),
        rerun_of: None,
    }
}

/// Run ids of the tests (one per name they used to have).
pub const R: &str = "run-20260101-000000-00000a";
pub const R1: &str = "run-20260101-000000-000001";
pub const R2: &str = "run-20260101-000000-000002";
pub const R3: &str = "run-20260101-000000-000003";
pub const R4: &str = "run-20260101-000000-000004";
pub const Q: &str = "run-20260101-000000-00000c";
pub const M: &str = "run-20260101-000000-00000d";

pub fn record(id: &str) -> RunRecord {
    RunRecord {
        id: wfhost_store::RunId::parse(id).unwrap(),
        workflow_id: "w".into(),
        workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
        manifest: "/nowhere/w.json".into(),
        workspace: "/tmp".into(),
        created_at: 1,
    }
}

#[allow(unused_imports)]
pub use wfhost_store::forgery::{HOSTILE_RUN_IDS, forge, forge_session};

/// The backend a test runs on: each test of the store's suite runs on
/// both (see [`on_both`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A wfhost home for one test; on PostgreSQL its `config.json` names a
/// database of its own, dropped with it.
pub struct Home {
    dir: tempfile::TempDir,
    _db: Option<wfhost_store::testing::TestDatabase>,
}

impl Home {
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl std::ops::Deref for Home {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl AsRef<std::path::Path> for Home {
    fn as_ref(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// A new home on `backend`; None (the test is skipped) when there is no
/// PostgreSQL to test against and the services are not required.
pub fn home(backend: Backend) -> Option<Home> {
    let dir = tempfile::tempdir().unwrap();
    let db = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => {
            let db = wfhost_store::testing::TestDatabase::create()?;
            db.configure(dir.path());
            Some(db)
        }
    };
    Some(Home { dir, _db: db })
}

/// Run each named test (a `fn(Backend)`) once on SQLite and once on
/// PostgreSQL: `on_sqlite::NAME` and `on_postgres::NAME`.
#[macro_export]
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[test]
            fn $name() {
                super::$name($crate::common::Backend::Sqlite)
            })*
        }
        mod on_postgres {
            $(#[test]
            fn $name() {
                super::$name($crate::common::Backend::Postgres)
            })*
        }
    };
}

/// The events of one step of block `a` jumping to itself.
pub fn step(n: u64) -> Vec<Event> {
    vec![
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
                keep: n as usize,
                push: vec![wfhost_core::run::payload::ContextSegment::new(
                    format!("s{n}"),
                    "T",
                    "x",
                )],
            },
            artifact: None,
            statistics: Statistics {
                tokens_used: 1,
                lines_written: 0,
                ..Default::default()
            },
            duration_us: 10,
            queued_us: 0,
            failure: None,
            permanent: false,
            log: vec![],
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
