//! The store's tables, created and upgraded in one place.

use rusqlite::Connection;

/// The schema this wfhost writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

pub(crate) enum MigrateError {
    Sqlite(rusqlite::Error),
    TooNew(i64),
}

impl From<rusqlite::Error> for MigrateError {
    fn from(e: rusqlite::Error) -> Self {
        MigrateError::Sqlite(e)
    }
}

const V1: &str = "
CREATE TABLE IF NOT EXISTS definitions (
    hash        TEXT PRIMARY KEY,
    workflow_id TEXT NOT NULL,
    body        TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS runs (
    id            TEXT PRIMARY KEY,
    workflow_id   TEXT NOT NULL,
    workflow_hash TEXT NOT NULL REFERENCES definitions(hash),
    manifest      TEXT NOT NULL,
    workspace     TEXT NOT NULL,
    created_at    INTEGER NOT NULL
) WITHOUT ROWID;

-- The event log: one row per event, a tree per run. `seq` numbers a run's
-- events in the order they were written, across branches; `parent` is the
-- previous event on the event's branch (NULL for run_started).
CREATE TABLE IF NOT EXISTS events (
    run_id   TEXT NOT NULL REFERENCES runs(id),
    seq      INTEGER NOT NULL,
    branch   INTEGER NOT NULL,
    parent   INTEGER,
    at       INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    body     TEXT NOT NULL,
    snapshot TEXT UNIQUE,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS events_by_branch ON events (run_id, branch, seq);

CREATE TRIGGER IF NOT EXISTS events_are_append_only BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'the event log is append-only');
END;
";

pub(crate) fn migrate(conn: &Connection, found: i64) -> Result<(), MigrateError> {
    if found > SCHEMA_VERSION {
        return Err(MigrateError::TooNew(found));
    }
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    conn.execute_batch(&format!(
        "BEGIN IMMEDIATE; {V1} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
    ))
    .inspect_err(|_| {
        let _ = conn.execute_batch("ROLLBACK");
    })?;
    Ok(())
}
