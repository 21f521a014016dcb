//! The store's tables, created and upgraded in one place, on either
//! backend: SQLite's history of versions (`sqlite`), and PostgreSQL's,
//! which starts at version 8 with the same tables and follows from there
//! (`postgres`).
//!
//! Version 2 keys each event by one integer, the run's number times 2^32
//! plus the event's `seq`, so an event is a row of a rowid table appended
//! at the end of its b-tree: SQLite writes about half the pages per step
//! that version 1's `(run_id, seq)` key did (a `WITHOUT ROWID` table
//! rebalances three leaves whenever its last one fills, and version 1
//! indexed every event's NULL `snapshot`).
//!
//! Version 3 adds the job queue of `wfhost serve`: each block execution
//! handed to an agent is a row of `jobs` (leased, heartbeated, completed
//! under a fence), with its history in `job_events`.
//!
//! Version 4 adds `job_telemetry`: what a job's agents sent while it ran,
//! reported by the agent holding the lease, read by the run's process.
//!
//! Version 5 adds `mcp_acks`: the acknowledgements with which MCP clients
//! advanced external blocks, each recorded in the commit of the block's
//! completion, with the reply to replay to a repeat.
//!
//! Version 6 adds `run_sessions`: the session (workstream) each run belongs
//! to, named by the MCP client or derived from the workspace's git branch.
//!
//! Version 7 adds `timers`: each branch resting at a `sleep` block and when
//! it is due, kept in the commit of the events that start and end the
//! sleep, so a server finds what to wake without reading any run's log.
//!
//! Version 8 adds `schedules` and `schedule_ticks`: workflows started on a
//! cron expression's ticks, and each tick handled (once: its row and the
//! schedule's next tick move in one transaction); and `hooks` and
//! `hook_deliveries`: webhook triggers and the deliveries they took; and
//! `notify_targets` and `notifications`: where notifications go, and the
//! outbox they are delivered from.
//!
//! Version 9 adds `served_runs`: the runs a server's run processes execute
//! that have not ended, so a server finds the ones whose process died (its
//! machine with it) and takes them over, counting how often.

mod postgres;
mod sqlite;

use crate::db::{Backend, Db, DbError};

/// The schema this wfhost writes (`PRAGMA user_version` on SQLite, the
/// row of `wfhost_schema` on PostgreSQL).
pub const SCHEMA_VERSION: i64 = 9;

pub(crate) enum MigrateError {
    Db(DbError),
    TooNew(i64),
}

impl From<DbError> for MigrateError {
    fn from(e: DbError) -> Self {
        MigrateError::Db(e)
    }
}

/// Bring the store's schema to [`SCHEMA_VERSION`], all or nothing;
/// `found` is the version the caller read (SQLite) — PostgreSQL reads its
/// own under the write lock.
pub(crate) fn migrate(db: &Db, found: i64) -> Result<(), MigrateError> {
    match db.backend() {
        Backend::Sqlite => sqlite::migrate(db, found),
        Backend::Postgres => postgres::migrate(db),
    }
}

/// The schema version of a PostgreSQL database, None when wfhost never
/// made its tables there.
pub(crate) fn postgres_version(db: &Db) -> Result<Option<i64>, DbError> {
    postgres::version(db)
}
