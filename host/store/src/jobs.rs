//! The job queue of `wfhost serve`: a block execution handed to an agent.
//!
//! A job is `queued → leased → succeeded | failed` (or `cancelled` with its
//! run). A lease is `(job, attempt, token, agent, expires_at)`:
//!
//! - **claim** is one conditional update inside a write transaction
//!   (`… WHERE id = ? AND state = 'queued'`), so two agents, or two server
//!   threads, never hold the same job;
//! - **heartbeat** extends only the lease whose `(job, attempt, token)`
//!   matches;
//! - **requeue** ([`Store::requeue_expired`]) puts a job whose lease ran
//!   out back in the queue with `attempt + 1` and records it; an agent
//!   that stops hands its lease back ([`Store::release_job`], fenced like a
//!   heartbeat) and the job is queued again the same way, at once;
//! - **completion** is fenced on `(attempt, token)`: a stale agent's late
//!   result is refused and recorded as such; the same completion sent again
//!   gets the response the first one got, byte for byte, and changes
//!   nothing. A job is completed at most once.
//!
//! Every transition is a row of `job_events`. Times are the server's clock
//! (Unix milliseconds), passed in by the caller.

use crate::db::{OptionalExtension, params};
use serde::Serialize;

use crate::{Store, StoreError};

/// A job's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    Queued,
    Leased,
    Succeeded,
    Failed,
    Cancelled,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Leased => "leased",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    fn parse(text: &str) -> JobState {
        match text {
            "queued" => JobState::Queued,
            "leased" => JobState::Leased,
            "succeeded" => JobState::Succeeded,
            "failed" => JobState::Failed,
            _ => JobState::Cancelled,
        }
    }

    /// Whether the job is done with (no lease can change it any more).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled
        )
    }
}

/// A block execution to queue.
#[derive(Debug, Clone)]
pub struct NewJob<'a> {
    pub run_id: &'a str,
    pub branch: u32,
    pub step: u64,
    /// The lane of a parallel block (`""` for none).
    pub lane: &'a str,
    pub node: &'a str,
    pub block: &'a str,
    /// Capabilities an agent needs to run it (`wasm`, `exec`, …).
    pub requires: &'a [String],
    /// What the agent is given (JSON, opaque to the store).
    pub request: &'a str,
}

/// A job as stored.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Job {
    pub id: i64,
    pub run_id: String,
    pub branch: u32,
    pub step: u64,
    pub lane: String,
    pub node: String,
    pub block: String,
    pub requires: Vec<String>,
    pub state: JobState,
    pub attempt: u32,
    pub agent: Option<String>,
    pub expires_at_ms: Option<i64>,
    pub created_at_ms: i64,
    /// The completion's result (JSON), once the job is final.
    #[serde(skip)]
    pub result: Option<String>,
}

/// A job of a run that is not final: queued for an agent, or leased by
/// one. What a run that seems idle is waiting for.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct OpenJob {
    pub job: i64,
    pub node: String,
    pub block: String,
    /// The lane's key, empty outside a parallel block.
    pub lane: String,
    /// `queued` or `leased`.
    pub state: JobState,
    pub attempt: u32,
    /// The agent that holds the lease.
    pub agent: Option<String>,
    /// When the job entered its state (queued, requeued or leased), unix ms.
    pub since_ms: i64,
}

/// A lease handed to an agent.
#[derive(Debug, Clone)]
pub struct Lease {
    pub job: Job,
    pub token: String,
    pub request: String,
}

/// One line of a job's history.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct JobEvent {
    pub at_ms: i64,
    pub kind: String,
    pub attempt: u32,
    pub agent: Option<String>,
    pub detail: String,
}

/// Why a heartbeat or a completion was refused: the lease presented is not
/// the job's current one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseLost {
    pub job: i64,
    /// The job's state now.
    pub state: JobState,
    /// Its current attempt.
    pub attempt: u32,
    pub reason: String,
}

/// The answer to a completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// Recorded now; `response` is what was stored to replay.
    Accepted { response: String },
    /// The very completion recorded before: its stored response.
    Replayed { response: String },
    /// Fenced off (recorded as refused).
    Refused(LeaseLost),
}

const COLUMNS: &str = "j.id, r.id, j.branch, j.step, j.lane, j.node, j.block, j.requires, \
     j.state, j.attempt, j.agent, j.expires_at, j.created_at, j.result";

fn job_row(row: &crate::db::Row<'_>) -> crate::db::DbResult<Job> {
    let requires: String = row.get(7)?;
    let state: String = row.get(8)?;
    Ok(Job {
        id: row.get(0)?,
        run_id: row.get(1)?,
        branch: row.get(2)?,
        step: row.get::<_, i64>(3)? as u64,
        lane: row.get(4)?,
        node: row.get(5)?,
        block: row.get(6)?,
        requires: requires
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        state: JobState::parse(&state),
        attempt: row.get(9)?,
        agent: row.get(10)?,
        expires_at_ms: row.get(11)?,
        created_at_ms: row.get(12)?,
        result: row.get(13)?,
    })
}

/// Put a job back in the queue with its attempt raised (an expired or a
/// handed-back lease): `?1` is the job.
const REQUEUE: &str = "UPDATE jobs SET state = 'queued', attempt = attempt + 1, token = NULL, \
     agent = NULL, expires_at = NULL WHERE id = ?1";

/// What a fenced update did: the agent that held the lease, or why the
/// lease is not held (and the agent named on the job).
type Fenced = Result<Option<String>, (LeaseLost, Option<String>)>;

/// A new lease token: 128 random bits, hex.
fn new_token() -> Result<String, std::io::Error> {
    wfhost_core::random::token()
}

fn record(
    tx: &crate::db::Db,
    job: i64,
    at: i64,
    kind: &str,
    attempt: u32,
    agent: Option<&str>,
    detail: &str,
) -> crate::db::DbResult<()> {
    tx.prepare_cached(
        "INSERT INTO job_events (job, at, kind, attempt, agent, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![job, at, kind, attempt, agent, detail])?;
    Ok(())
}

/// Queue the job `new` of run number `run` inside the caller's transaction,
/// unless one already stands for its (branch, step, lane).
pub(crate) fn queue(
    tx: &crate::db::Db,
    run: i64,
    new: &NewJob<'_>,
    now_ms: i64,
) -> crate::db::DbResult<()> {
    // Numbered as runs are (`crate::insert_run`): the same ids on both
    // backends, none lost to a job that already stood. (`WHERE true`
    // tells SQLite the ON CONFLICT is the upsert's, not a join's.)
    let inserted: Option<i64> = tx
        .prepare_cached(
            "INSERT INTO jobs (id, run, branch, step, lane, node, block, requires, request, state, attempt, created_at) \
             SELECT coalesce(max(id), 0) + 1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'queued', 1, ?9 FROM jobs WHERE true \
             ON CONFLICT (run, branch, step, lane) DO NOTHING RETURNING id",
        )?
        .query_row(params![
            run,
            new.branch,
            new.step as i64,
            new.lane,
            new.node,
            new.block,
            new.requires.join(","),
            new.request,
            now_ms
        ], |r| r.get(0))
        .optional()?;
    if let Some(id) = inserted {
        record(tx, id, now_ms, "queued", 1, None, "")?;
    }
    Ok(())
}

impl Store {
    /// Queue a block execution, or find the job that already stands for
    /// it (a run process that restarted asks again): returns the job.
    #[tracing::instrument(name = "store.enqueue_job", skip_all, fields(run_id = %new.run_id, branch = new.branch, step = new.step, lane = %new.lane, job_id = tracing::field::Empty, attempt = tracing::field::Empty))]
    pub fn enqueue_job(&mut self, new: &NewJob<'_>, now_ms: i64) -> Result<Job, StoreError> {
        let num = self.run_num(new.run_id)?;
        if num < 0 {
            return Err(StoreError::UnknownRun {
                id: new.run_id.to_string(),
                store: self.path.clone(),
            });
        }
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        queue(&tx, num, new, now_ms).map_err(err)?;
        let job = tx
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM jobs j JOIN runs r ON r.num = j.run \
                     WHERE j.run = ?1 AND j.branch = ?2 AND j.step = ?3 AND j.lane = ?4"
            ))
            .and_then(|mut s| {
                s.query_row(params![num, new.branch, new.step as i64, new.lane], job_row)
            })
            .map_err(err)?;
        tx.commit().map_err(err)?;
        self.ring_servers();
        tracing::Span::current()
            .record("job_id", job.id)
            .record("attempt", job.attempt);
        Ok(job)
    }

    /// The job queued for `new`'s (run, branch, step, lane), if there is
    /// one (a read: no write lock) — as a block's start queues it.
    pub fn queued_job(&self, new: &NewJob<'_>) -> Result<Option<Job>, StoreError> {
        self.db
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM jobs j JOIN runs r ON r.num = j.run \
                 WHERE r.id = ?1 AND j.branch = ?2 AND j.step = ?3 AND j.lane = ?4"
            ))
            .and_then(|mut s| {
                s.query_row(
                    params![new.run_id, new.branch, new.step as i64, new.lane],
                    job_row,
                )
                .optional()
            })
            .map_err(|e| self.err(e))
    }

    /// Whether any job waits for an agent (a read: no write lock).
    pub fn has_queued_jobs(&self) -> Result<bool, StoreError> {
        self.db
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM jobs WHERE state = 'queued')")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(|e| self.err(e))
    }

    /// Lease the oldest queued job whose needs are among `capabilities`,
    /// for `lease_ms`. None when there is none. Not synced (see
    /// [`Store::unsynced`]): the run's next step makes it durable.
    pub fn claim_job(
        &mut self,
        agent: &str,
        capabilities: &[String],
        lease_ms: i64,
        now_ms: i64,
    ) -> Result<Option<Lease>, StoreError> {
        self.unsynced(|store| store.claim(agent, capabilities, lease_ms, now_ms))
    }

    #[tracing::instrument(name = "store.claim_job", level = "debug", skip_all, fields(agent = %agent, job_id = tracing::field::Empty, run_id = tracing::field::Empty, attempt = tracing::field::Empty))]
    fn claim(
        &mut self,
        agent: &str,
        capabilities: &[String],
        lease_ms: i64,
        now_ms: i64,
    ) -> Result<Option<Lease>, StoreError> {
        let token = new_token().map_err(|e| StoreError::Io {
            path: "/dev/urandom".into(),
            message: format!("cannot make a lease token: {e}"),
        })?;
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let candidates: Vec<(i64, String)> = tx
            .prepare_cached(
                "SELECT id, requires FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 256",
            )
            .and_then(|mut s| {
                s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<crate::db::DbResult<_>>()
            })
            .map_err(err)?;
        let fits = |requires: &str| {
            requires
                .split(',')
                .filter(|s| !s.is_empty())
                .all(|need| capabilities.iter().any(|c| c == need))
        };
        let Some((id, _)) = candidates.into_iter().find(|(_, r)| fits(r)) else {
            return Ok(None);
        };
        let expires = now_ms + lease_ms;
        let changed = tx
            .prepare_cached(
                "UPDATE jobs SET state = 'leased', token = ?2, agent = ?3, expires_at = ?4 \
                 WHERE id = ?1 AND state = 'queued'",
            )
            .and_then(|mut s| s.execute(params![id, token, agent, expires]))
            .map_err(err)?;
        if changed != 1 {
            return Ok(None);
        }
        let (job, request) = tx
            .prepare_cached(&format!(
                    "SELECT {COLUMNS}, j.request FROM jobs j JOIN runs r ON r.num = j.run WHERE j.id = ?1"
            ))
            .and_then(|mut s| s.query_row([id], |row| Ok((job_row(row)?, row.get::<_, String>(14)?))))
            .map_err(err)?;
        record(&tx, id, now_ms, "leased", job.attempt, Some(agent), "").map_err(err)?;
        tx.commit().map_err(err)?;
        tracing::Span::current()
            .record("job_id", id)
            .record("run_id", job.run_id.as_str())
            .record("attempt", job.attempt);
        tracing::info!(step = job.step, node = %job.node, block = %job.block, lane = %job.lane, expires_at_ms = expires, "job leased");
        Ok(Some(Lease {
            job,
            token,
            request,
        }))
    }

    /// The current lease of `job`, if `(attempt, token)` is it.
    pub(crate) fn check_lease(
        tx: &crate::db::Db,
        job: i64,
        attempt: u32,
        token: &str,
    ) -> crate::db::DbResult<Result<(), LeaseLost>> {
        Ok(Self::read_lease(tx, (job, attempt, token))?.1)
    }

    /// The agent named on `job` and whether `(attempt, token)` is its
    /// current lease: one read, the fence of every lease operation.
    fn read_lease(
        tx: &crate::db::Db,
        lease: (i64, u32, &str),
    ) -> crate::db::DbResult<(Option<String>, Result<(), LeaseLost>)> {
        let (job, attempt, token) = lease;
        type Row = (String, u32, Option<String>, Option<String>);
        let row: Option<Row> = tx
            .prepare_cached("SELECT state, attempt, token, agent FROM jobs WHERE id = ?1")?
            .query_row([job], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .optional()?;
        let Some((state, current, held, agent)) = row else {
            return Ok((
                None,
                Err(LeaseLost {
                    job,
                    state: JobState::Cancelled,
                    attempt: 0,
                    reason: format!("there is no job {job}"),
                }),
            ));
        };
        let state = JobState::parse(&state);
        let lost = |reason: String| {
            Err(LeaseLost {
                job,
                state,
                attempt: current,
                reason,
            })
        };
        let checked = if current != attempt {
            lost(format!(
                "the lease of attempt {attempt} has ended: the job is at attempt {current} ({})",
                state.as_str()
            ))
        } else if state != JobState::Leased {
            lost(format!("the job is {} now", state.as_str()))
        } else {
            // Same length and constant-time equality: a token is not
            // guessed a character at a time.
            use subtle::ConstantTimeEq;
            let matches = held.is_some_and(|h| bool::from(h.as_bytes().ct_eq(token.as_bytes())));
            if matches {
                Ok(())
            } else {
                lost("the lease token does not match".into())
            }
        };
        Ok((agent, checked))
    }

    /// The one fenced update of a leased job: when `lease` is `job`'s
    /// current lease, run `update` (an `UPDATE jobs … WHERE id = ?1`, its
    /// other parameters `rest` from `?2` on) in `tx` and return the agent
    /// that held the lease; otherwise change nothing and say why the lease
    /// is not held ([`LeaseLost`]), with the agent named on the job.
    fn fenced_update(
        tx: &crate::db::Db,
        lease: (i64, u32, &str),
        update: &str,
        rest: &[&dyn crate::db::ToParam],
    ) -> crate::db::DbResult<Fenced> {
        let (agent, checked) = Self::read_lease(tx, lease)?;
        if let Err(lost) = checked {
            return Ok(Err((lost, agent)));
        }
        let mut params: Vec<&dyn crate::db::ToParam> = Vec::with_capacity(rest.len() + 1);
        params.push(&lease.0);
        params.extend_from_slice(rest);
        tx.prepare_cached(update)?.execute(params.as_slice())?;
        Ok(Ok(agent))
    }

    /// Extend the lease `(job, attempt, token)` to `now + lease_ms`;
    /// returns the new expiry, or why the lease is not held any more. Not
    /// synced: an extension lost on a power cut lets the lease run out
    /// sooner, which only queues the job again.
    pub fn heartbeat_job(
        &mut self,
        job: i64,
        attempt: u32,
        token: &str,
        lease_ms: i64,
        now_ms: i64,
    ) -> Result<Result<i64, LeaseLost>, StoreError> {
        self.unsynced(|store| store.heartbeat(job, attempt, token, lease_ms, now_ms))
    }

    #[tracing::instrument(name = "store.heartbeat_job", level = "debug", skip_all, fields(job_id = job, attempt = attempt))]
    fn heartbeat(
        &mut self,
        job: i64,
        attempt: u32,
        token: &str,
        lease_ms: i64,
        now_ms: i64,
    ) -> Result<Result<i64, LeaseLost>, StoreError> {
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let expires = now_ms + lease_ms;
        if let Err((lost, _)) = Self::fenced_update(
            &tx,
            (job, attempt, token),
            "UPDATE jobs SET expires_at = ?2 WHERE id = ?1",
            &[&expires],
        )
        .map_err(err)?
        {
            return Ok(Err(lost));
        }
        tx.commit().map_err(err)?;
        Ok(Ok(expires))
    }

    /// Complete the lease `(job, attempt, token)` with `result` (JSON);
    /// `succeeded` says which final state. `respond` makes the response
    /// body from the job as completed; it is stored and replayed to the
    /// same completion sent again. Not synced (see [`Store::unsynced`]):
    /// the run reads it, then records the block's completion in a synced
    /// commit that carries this one to disk with it. The run's process is
    /// rung.
    pub fn complete_job(
        &mut self,
        lease: (i64, u32, &str),
        succeeded: bool,
        result: &str,
        now_ms: i64,
        respond: impl FnOnce(&Job) -> String,
    ) -> Result<Completion, StoreError> {
        let mut run = None;
        let done = self.unsynced(|store| {
            store.complete(lease, succeeded, result, now_ms, |job| {
                run = Some(job.run_id.clone());
                respond(job)
            })
        })?;
        if let (Completion::Accepted { .. }, Some(run)) = (&done, run) {
            self.ring_run(&run);
        }
        Ok(done)
    }

    #[tracing::instrument(name = "store.complete_job", skip_all, fields(job_id = lease.0, attempt = lease.1, succeeded = succeeded, run_id = tracing::field::Empty))]
    fn complete(
        &mut self,
        lease: (i64, u32, &str),
        succeeded: bool,
        result: &str,
        now_ms: i64,
        respond: impl FnOnce(&Job) -> String,
    ) -> Result<Completion, StoreError> {
        let (job, attempt, _) = lease;
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        if let Some(response) = Self::replay(&tx, lease, result).map_err(err)? {
            return Ok(Completion::Replayed { response });
        }
        let state = if succeeded { "succeeded" } else { "failed" };
        if let Err((lost, agent)) = Self::fenced_update(
            &tx,
            lease,
            "UPDATE jobs SET state = ?2, result = ?3, expires_at = NULL WHERE id = ?1",
            &[&state, &result],
        )
        .map_err(err)?
        {
            if lost.attempt > 0 {
                record(
                    &tx,
                    job,
                    now_ms,
                    "refused",
                    attempt,
                    agent.as_deref(),
                    &lost.reason,
                )
                .map_err(err)?;
                tx.commit().map_err(err)?;
            }
            tracing::info!(reason = %lost.reason, "completion fenced off");
            return Ok(Completion::Refused(lost));
        }
        let done = tx
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM jobs j JOIN runs r ON r.num = j.run WHERE j.id = ?1"
            ))
            .and_then(|mut s| s.query_row([job], job_row))
            .map_err(err)?;
        let response = respond(&done);
        tx.prepare_cached("UPDATE jobs SET response = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![job, response]))
            .map_err(err)?;
        record(&tx, job, now_ms, state, attempt, done.agent.as_deref(), "").map_err(err)?;
        // Delivered at the commit, to the run's process wherever it is.
        tx.notify_run(&done.run_id).map_err(err)?;
        tx.commit().map_err(err)?;
        tracing::Span::current().record("run_id", done.run_id.as_str());
        tracing::info!(state, "job completed");
        Ok(Completion::Accepted { response })
    }

    /// The stored response, when `lease` is the one that completed the job
    /// with this very `result`.
    fn replay(
        tx: &crate::db::Db,
        lease: (i64, u32, &str),
        result: &str,
    ) -> crate::db::DbResult<Option<String>> {
        let (job, attempt, token) = lease;
        type Done = (u32, Option<String>, Option<String>, Option<String>);
        let row: Option<Done> = tx
            .prepare_cached("SELECT attempt, token, result, response FROM jobs WHERE id = ?1")?
            .query_row([job], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .optional()?;
        Ok(match row {
            Some((a, Some(t), Some(r), Some(response)))
                if a == attempt && t == token && r == result =>
            {
                Some(response)
            }
            _ => None,
        })
    }

    /// Put every job whose lease expired before `now_ms` back in the
    /// queue with its attempt raised; returns `(job, new attempt)` of each.
    /// Not synced: a requeue lost on a power cut is made again, the lease
    /// being still expired. The servers are rung when a job was queued.
    pub fn requeue_expired(&mut self, now_ms: i64) -> Result<Vec<(i64, u32)>, StoreError> {
        let requeued = self.unsynced(|store| store.requeue(now_ms))?;
        if !requeued.is_empty() {
            self.ring_servers();
        }
        Ok(requeued)
    }

    #[tracing::instrument(name = "store.requeue_expired", level = "trace", skip_all)]
    fn requeue(&mut self, now_ms: i64) -> Result<Vec<(i64, u32)>, StoreError> {
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let expired: Vec<(i64, u32, Option<String>)> = tx
            .prepare_cached(
                "SELECT id, attempt, agent FROM jobs WHERE state = 'leased' AND expires_at < ?1",
            )
            .and_then(|mut s| {
                s.query_map([now_ms], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect::<crate::db::DbResult<_>>()
            })
            .map_err(err)?;
        let mut requeued = Vec::with_capacity(expired.len());
        for (job, attempt, agent) in expired {
            tx.prepare_cached(REQUEUE)
                .and_then(|mut s| s.execute([job]))
                .map_err(err)?;
            let detail = format!(
                "the lease of attempt {attempt} held by {} expired",
                agent.as_deref().unwrap_or("an agent")
            );
            record(
                &tx,
                job,
                now_ms,
                "requeued",
                attempt + 1,
                agent.as_deref(),
                &detail,
            )
            .map_err(err)?;
            tracing::info!(
                job_id = job,
                attempt = attempt + 1,
                "lease expired; job requeued"
            );
            requeued.push((job, attempt + 1));
        }
        tx.commit().map_err(err)?;
        Ok(requeued)
    }

    /// Hand the lease `(job, attempt, token)` back: the job is queued again
    /// at once with its attempt raised, as if the lease had expired
    /// (recorded as `requeued`, `why` in the detail). Returns the new
    /// attempt, or why the lease is not held any more. Not synced: a
    /// release lost on a power cut leaves the lease to run out instead.
    pub fn release_job(
        &mut self,
        lease: (i64, u32, &str),
        why: &str,
        now_ms: i64,
    ) -> Result<Result<u32, LeaseLost>, StoreError> {
        let released = self.unsynced(|store| store.release(lease, why, now_ms))?;
        if released.is_ok() {
            self.ring_servers();
        }
        Ok(released)
    }

    #[tracing::instrument(name = "store.release_job", skip_all, fields(job_id = lease.0, attempt = lease.1))]
    fn release(
        &mut self,
        lease: (i64, u32, &str),
        why: &str,
        now_ms: i64,
    ) -> Result<Result<u32, LeaseLost>, StoreError> {
        let (job, attempt, _) = lease;
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let agent = match Self::fenced_update(&tx, lease, REQUEUE, &[]).map_err(err)? {
            Ok(agent) => agent,
            Err((lost, _)) => return Ok(Err(lost)),
        };
        let by = agent.as_deref().unwrap_or("an agent");
        let detail = if why.is_empty() {
            format!("the lease of attempt {attempt} was handed back by {by}")
        } else {
            format!("the lease of attempt {attempt} was handed back by {by}: {why}")
        };
        record(
            &tx,
            job,
            now_ms,
            "requeued",
            attempt + 1,
            agent.as_deref(),
            &detail,
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(Ok(attempt + 1))
    }

    /// Cancel `job` unless it is final (its run stopped waiting for it).
    pub fn cancel_job(&mut self, job: i64, why: &str, now_ms: i64) -> Result<bool, StoreError> {
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let attempt: Option<u32> = tx
            .query_row(
                "UPDATE jobs SET state = 'cancelled', token = NULL, expires_at = NULL \
                 WHERE id = ?1 AND state IN ('queued', 'leased') RETURNING attempt",
                [job],
                |r| r.get(0),
            )
            .optional()
            .map_err(err)?;
        if let Some(attempt) = attempt {
            record(&tx, job, now_ms, "cancelled", attempt, None, why).map_err(err)?;
        }
        let run: Option<String> = match attempt {
            Some(_) => tx
                .query_row(
                    "SELECT r.id FROM jobs j JOIN runs r ON r.num = j.run WHERE j.id = ?1",
                    [job],
                    |r| r.get(0),
                )
                .optional()
                .map_err(err)?,
            None => None,
        };
        if let Some(run) = &run {
            tx.notify_run(run).map_err(err)?;
        }
        tx.commit().map_err(err)?;
        if let Some(run) = run {
            self.ring_run(&run);
        }
        Ok(attempt.is_some())
    }

    /// Cancel every unfinished job of `run_id`; returns how many.
    pub fn cancel_jobs_of_run(
        &mut self,
        run_id: &str,
        why: &str,
        now_ms: i64,
    ) -> Result<usize, StoreError> {
        let num = self.run_num(run_id)?;
        let open: Vec<i64> = self
            .db
            .prepare_cached("SELECT id FROM jobs WHERE run = ?1 AND state IN ('queued', 'leased')")
            .and_then(|mut s| {
                s.query_map([num], |r| r.get(0))?
                    .collect::<crate::db::DbResult<_>>()
            })
            .map_err(|e| self.err(e))?;
        let mut cancelled = 0;
        for job in open {
            cancelled += usize::from(self.cancel_job(job, why, now_ms)?);
        }
        Ok(cancelled)
    }

    /// The jobs of `run_id` that are queued or leased, oldest first: a few
    /// rows, found through the run's index whatever the store's size.
    pub fn open_jobs(&self, run_id: &str) -> Result<Vec<OpenJob>, StoreError> {
        let num = self.run_num(run_id)?;
        self.db
            .prepare_cached(
                "SELECT j.id, j.node, j.block, j.lane, j.state, j.attempt, j.agent, \
                        coalesce((SELECT max(e.at) FROM job_events e WHERE e.job = j.id), j.created_at) \
                 FROM jobs j WHERE j.run = ?1 AND j.state IN ('queued', 'leased') ORDER BY j.id",
            )
            .and_then(|mut s| {
                s.query_map([num], |r| {
                    let state: String = r.get(4)?;
                    Ok(OpenJob {
                        job: r.get(0)?,
                        node: r.get(1)?,
                        block: r.get(2)?,
                        lane: r.get(3)?,
                        state: match state.as_str() {
                            "leased" => JobState::Leased,
                            _ => JobState::Queued,
                        },
                        attempt: r.get(5)?,
                        agent: r.get(6)?,
                        since_ms: r.get(7)?,
                    })
                })?
                .collect::<crate::db::DbResult<_>>()
            })
            .map_err(|e| self.err(e))
    }

    /// Job `id`, if there is one.
    pub fn job(&self, id: i64) -> Result<Option<Job>, StoreError> {
        self.db
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM jobs j JOIN runs r ON r.num = j.run WHERE j.id = ?1"
            ))
            .and_then(|mut s| s.query_row([id], job_row).optional())
            .map_err(|e| self.err(e))
    }

    /// The jobs of `run_id`, oldest first, from `after` (a job id), at
    /// most `limit`.
    pub fn jobs_of_run(
        &self,
        run_id: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<Job>, StoreError> {
        let num = self.run_num(run_id)?;
        self.db
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM jobs j JOIN runs r ON r.num = j.run \
                 WHERE j.run = ?1 AND j.id > ?2 ORDER BY j.id LIMIT ?3"
            ))
            .and_then(|mut s| {
                s.query_map(params![num, after, limit], job_row)?
                    .collect::<crate::db::DbResult<_>>()
            })
            .map_err(|e| self.err(e))
    }

    /// The history of job `id`, oldest first.
    pub fn job_history(&self, id: i64) -> Result<Vec<JobEvent>, StoreError> {
        self.db
            .prepare_cached(
                "SELECT at, kind, attempt, agent, detail FROM job_events WHERE job = ?1 ORDER BY id",
            )
            .and_then(|mut s| {
                s.query_map([id], |r| {
                    Ok(JobEvent {
                        at_ms: r.get(0)?,
                        kind: r.get(1)?,
                        attempt: r.get(2)?,
                        agent: r.get(3)?,
                        detail: r.get(4)?,
                    })
                })?
                .collect::<crate::db::DbResult<_>>()
            })
            .map_err(|e| self.err(e))
    }
}
