//! The schema on SQLite: its version is the file's `PRAGMA user_version`,
//! and each version's statements upgrade the one before.

use super::{MigrateError, SCHEMA_VERSION};
use crate::db::Db;

const DEFINITIONS: &str = "
CREATE TABLE IF NOT EXISTS definitions (
    hash        TEXT PRIMARY KEY,
    workflow_id TEXT NOT NULL,
    body        TEXT NOT NULL
) WITHOUT ROWID;
";

const V2: &str = "
-- `num` numbers the runs of this store; events are keyed by it.
CREATE TABLE runs (
    num           INTEGER PRIMARY KEY,
    id            TEXT NOT NULL UNIQUE,
    workflow_id   TEXT NOT NULL,
    workflow_hash TEXT NOT NULL REFERENCES definitions(hash),
    manifest      TEXT NOT NULL,
    workspace     TEXT NOT NULL,
    created_at    INTEGER NOT NULL
);

-- The event log: one row per event, a tree per run. `seq` numbers a run's
-- events in the order they were written, across branches (`key` is
-- `run << 32 | seq`); `parent` is the previous event on the event's branch
-- (NULL for run_started). `snapshot` is set on the events a branch can
-- start from.
CREATE TABLE events (
    key      INTEGER PRIMARY KEY,
    run      INTEGER NOT NULL REFERENCES runs(num),
    branch   INTEGER NOT NULL,
    parent   INTEGER,
    at       INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    body     TEXT NOT NULL,
    snapshot TEXT,
    seq      INTEGER GENERATED ALWAYS AS (key - (run << 32)) VIRTUAL
);

CREATE INDEX events_by_branch ON events (run, branch, key);
CREATE UNIQUE INDEX events_by_snapshot ON events (snapshot) WHERE snapshot IS NOT NULL;

CREATE TRIGGER events_are_append_only BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'the event log is append-only');
END;
";

const V3: &str = "
-- A block execution handed to agents. `(run, branch, step, lane)` names the
-- execution, so a run process that restarts finds the job it queued (and
-- its result) instead of running the block again. `state` is queued,
-- leased, succeeded, failed or cancelled; a lease is `(attempt, token,
-- agent, expires_at)` and only a matching `(id, attempt, token)` may
-- heartbeat or complete it. `response` is the body the accepted completion
-- was answered with, replayed to a duplicate of it.
CREATE TABLE jobs (
    id          INTEGER PRIMARY KEY,
    run         INTEGER NOT NULL REFERENCES runs(num),
    branch      INTEGER NOT NULL,
    step        INTEGER NOT NULL,
    lane        TEXT NOT NULL,
    node        TEXT NOT NULL,
    block       TEXT NOT NULL,
    requires    TEXT NOT NULL,
    request     TEXT NOT NULL,
    state       TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    token       TEXT,
    agent       TEXT,
    expires_at  INTEGER,
    result      TEXT,
    response    TEXT,
    created_at  INTEGER NOT NULL,
    UNIQUE (run, branch, step, lane)
);
CREATE INDEX jobs_queued ON jobs (id) WHERE state = 'queued';
CREATE INDEX jobs_leased ON jobs (expires_at) WHERE state = 'leased';

-- What happened to each job: queued, leased, requeued (a lease expired),
-- completed, refused (a stale or foreign completion), cancelled.
CREATE TABLE job_events (
    id      INTEGER PRIMARY KEY,
    job     INTEGER NOT NULL REFERENCES jobs(id),
    at      INTEGER NOT NULL,
    kind    TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    agent   TEXT,
    detail  TEXT NOT NULL
);
CREATE INDEX job_events_by_job ON job_events (job, id);
";

const V4: &str = "
-- Telemetry a job's agents sent while it ran, as the agent holding its
-- lease reported it (fenced like a heartbeat). The run's process reads the
-- rows after the last one it read and records them as telemetry events.
CREATE TABLE job_telemetry (
    id      INTEGER PRIMARY KEY,
    job     INTEGER NOT NULL REFERENCES jobs(id),
    attempt INTEGER NOT NULL,
    at      INTEGER NOT NULL,
    body    TEXT NOT NULL
);
CREATE INDEX job_telemetry_by_job ON job_telemetry (job, id);
";

const V5: &str = "
-- An MCP client's ack of an external block: the advance of the snapshot at
-- seq `snapshot` of run `run` by its `attempt`-th ack token, recorded on
-- `branch` from `first_seq` on, in the same commit. `digest` is what the
-- client sent, digested; `response` the reply, replayed to a repeat.
CREATE TABLE mcp_acks (
    run       INTEGER NOT NULL REFERENCES runs(num),
    snapshot  INTEGER NOT NULL,
    attempt   INTEGER NOT NULL,
    branch    INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    digest    TEXT NOT NULL,
    response  TEXT,
    at        INTEGER NOT NULL,
    PRIMARY KEY (run, snapshot, attempt)
) WITHOUT ROWID;
";

const V6: &str = "
-- The session a run belongs to: `session` is the client's session id or
-- `git:<branch>@<workspace>`; `source` says which (`client`, `git`).
-- Runs of no session have no row.
CREATE TABLE run_sessions (
    run        INTEGER PRIMARY KEY REFERENCES runs(num),
    session    TEXT NOT NULL,
    source     TEXT NOT NULL,
    git_branch TEXT
);
CREATE INDEX run_sessions_by_session ON run_sessions (session, run);
";

const V7: &str = "
-- A branch resting at a `sleep` block: due at `due_at` (unix ms). Written
-- with the branch's `timer_started`, removed with whatever follows it.
CREATE TABLE timers (
    run    INTEGER NOT NULL REFERENCES runs(num),
    branch INTEGER NOT NULL,
    due_at INTEGER NOT NULL,
    PRIMARY KEY (run, branch)
) WITHOUT ROWID;
CREATE INDEX timers_by_due ON timers (due_at);
";

const V8: &str = "
-- A workflow started on a cron expression's ticks (`next_tick`: the next
-- to handle, unix ms; null when there is none left).
CREATE TABLE schedules (
    name       TEXT PRIMARY KEY,
    cron       TEXT NOT NULL,
    tz         TEXT NOT NULL,
    workflow   TEXT NOT NULL,
    workspace  TEXT NOT NULL,
    inputs     TEXT NOT NULL,
    overlap    TEXT NOT NULL,
    catch_up   INTEGER NOT NULL,
    paused     INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    next_tick  INTEGER,
    missed     INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX schedules_by_next ON schedules (next_tick) WHERE paused = 0;
-- Each tick handled: the run it starts (its id chosen before the run
-- exists), or why it started none.
CREATE TABLE schedule_ticks (
    schedule TEXT NOT NULL,
    tick     INTEGER NOT NULL,
    manual   INTEGER NOT NULL DEFAULT 0,
    state    TEXT NOT NULL,
    run_id   TEXT,
    reason   TEXT,
    at       INTEGER NOT NULL,
    PRIMARY KEY (schedule, tick, manual)
) WITHOUT ROWID;
CREATE INDEX schedule_ticks_by_run ON schedule_ticks (run_id);
CREATE INDEX schedule_ticks_open ON schedule_ticks (state) WHERE state IN ('starting', 'queued');
-- A webhook trigger: `POST /v1/hooks/{name}` starts a run of `workflow`
-- from a delivery signed as `format` says with the home secret `secret`.
CREATE TABLE hooks (
    name       TEXT PRIMARY KEY,
    action     TEXT NOT NULL,
    workflow   TEXT NOT NULL,
    workspace  TEXT NOT NULL,
    format     TEXT NOT NULL,
    secret     TEXT,
    mapping    TEXT NOT NULL,
    inputs     TEXT NOT NULL,
    window_s   INTEGER NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
-- Where notifications go: a URL, the events it wants, maybe one workflow.
CREATE TABLE notify_targets (
    name       TEXT PRIMARY KEY,
    url        TEXT NOT NULL,
    secret     TEXT,
    format     TEXT NOT NULL,
    events     TEXT NOT NULL,
    workflow   TEXT,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
-- The outbox: each notification written in the commit of the events that
-- gave it, delivered (at least once) by a server.
CREATE TABLE notifications (
    id         INTEGER PRIMARY KEY,
    target     TEXT NOT NULL,
    delivery   TEXT NOT NULL UNIQUE,
    event      TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    body       TEXT NOT NULL,
    state      TEXT NOT NULL,
    attempts   INTEGER NOT NULL,
    next_at    INTEGER NOT NULL,
    last_error TEXT,
    created_at INTEGER NOT NULL
);
CREATE INDEX notifications_due ON notifications (next_at) WHERE state = 'pending';
CREATE INDEX notifications_by_run ON notifications (run_id);
-- Each delivery a hook took, by the sender's id: a replay starts nothing.
CREATE TABLE hook_deliveries (
    hook     TEXT NOT NULL,
    delivery TEXT NOT NULL,
    run_id   TEXT,
    state    TEXT NOT NULL,
    at       INTEGER NOT NULL,
    PRIMARY KEY (hook, delivery)
) WITHOUT ROWID;
";

/// Version 9: the runs executed for a server that have not ended, and how
/// often a server took each over after its process died.
const V9: &str = "
CREATE TABLE served_runs (
    run       INTEGER PRIMARY KEY REFERENCES runs(num),
    takeovers INTEGER NOT NULL DEFAULT 0,
    taken_at  INTEGER
);
";

/// Version 1 to 2: the same rows under the new keys. Runs are numbered in
/// the order they were created.
const V1_TO_V2: &str = "
DROP TRIGGER events_are_append_only;
DROP INDEX events_by_branch;
ALTER TABLE events RENAME TO events_v1;
ALTER TABLE runs RENAME TO runs_v1;
";

const V1_TO_V2_COPY: &str = "
INSERT INTO runs (id, workflow_id, workflow_hash, manifest, workspace, created_at)
    SELECT id, workflow_id, workflow_hash, manifest, workspace, created_at
    FROM runs_v1 ORDER BY created_at, id;
INSERT INTO events (key, run, branch, parent, at, kind, body, snapshot)
    SELECT (r.num << 32) + e.seq, r.num, e.branch, e.parent, e.at, e.kind, e.body, e.snapshot
    FROM events_v1 e JOIN runs r ON r.id = e.run_id ORDER BY r.num, e.seq;
DROP TABLE events_v1;
DROP TABLE runs_v1;
";

pub(super) fn migrate(conn: &Db, found: i64) -> Result<(), MigrateError> {
    if found > SCHEMA_VERSION {
        return Err(MigrateError::TooNew(found));
    }
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    upgrade(conn).inspect_err(|_| {
        let _ = conn.execute_batch("ROLLBACK");
    })
}

/// Inside the write lock: another process may have upgraded the store
/// since this one looked.
fn upgrade(conn: &Db) -> Result<(), MigrateError> {
    let found: i64 = conn.query_row("PRAGMA user_version", (), |r| r.get(0))?;
    let steps = match found {
        SCHEMA_VERSION => String::new(),
        v if v > SCHEMA_VERSION => return Err(MigrateError::TooNew(v)),
        8 => V9.to_string(),
        7 => format!("{V8} {V9}"),
        6 => format!("{V7} {V8} {V9}"),
        5 => format!("{V6} {V7} {V8} {V9}"),
        4 => format!("{V5} {V6} {V7} {V8} {V9}"),
        3 => format!("{V4} {V5} {V6} {V7} {V8} {V9}"),
        2 => format!("{V3} {V4} {V5} {V6} {V7} {V8} {V9}"),
        1 => format!("{V1_TO_V2} {V2} {V1_TO_V2_COPY} {V3} {V4} {V5} {V6} {V7} {V8} {V9}"),
        _ => format!("{DEFINITIONS} {V2} {V3} {V4} {V5} {V6} {V7} {V8} {V9}"),
    };
    conn.execute_batch(&format!(
        "{steps} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
    ))?;
    Ok(())
}
