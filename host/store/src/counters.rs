//! Counts of what the store asks of SQLite, for budget tests and the run
//! report: deterministic where timings are not. Process-wide, over every
//! connection, only ever growing.

use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::Connection;
use rusqlite::trace::TraceEventCodes;

static STATEMENTS: AtomicU64 = AtomicU64::new(0);
static COMMITS: AtomicU64 = AtomicU64::new(0);

/// SQL statements run (each statement once per execution).
pub fn statements() -> u64 {
    STATEMENTS.load(Ordering::Relaxed)
}

/// Transactions committed; at `--durability full` each is a sync of the
/// write-ahead log.
pub fn commits() -> u64 {
    COMMITS.load(Ordering::Relaxed)
}

/// One statement run on a backend without SQLite's trace hook.
pub(crate) fn count_statement() {
    STATEMENTS.fetch_add(1, Ordering::Relaxed);
}

/// One transaction committed on a backend without SQLite's commit hook.
pub(crate) fn count_commit() {
    COMMITS.fetch_add(1, Ordering::Relaxed);
}

/// Count what `conn` does from now on.
pub(crate) fn install(conn: &mut Connection) -> rusqlite::Result<()> {
    conn.trace_v2(
        TraceEventCodes::SQLITE_TRACE_STMT,
        Some(|_: rusqlite::trace::TraceEvent<'_>| {
            STATEMENTS.fetch_add(1, Ordering::Relaxed);
        }),
    )?;
    conn.commit_hook(Some(|| {
        COMMITS.fetch_add(1, Ordering::Relaxed);
        false // never turn a commit into a rollback
    }))
}
