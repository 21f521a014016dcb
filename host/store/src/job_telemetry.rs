//! Telemetry of jobs while they run: what a job's agents sent their
//! `TELEMETRY_URL`, reported by the agent that holds the job's lease and
//! read by the run's process, which records it as the block's telemetry
//! events while the block still runs.
//!
//! A report is fenced like a heartbeat (only the current `(job, attempt,
//! token)` may add to the job) and capped per job, so an agent cannot grow
//! the store without bound.

use crate::db::{OptionalExtension, params};

use crate::{LeaseLost, Store, StoreError};

/// How much telemetry one job may hold.
#[derive(Debug, Clone, Copy)]
pub struct TelemetryCaps {
    pub events: usize,
    pub bytes: usize,
}

/// What became of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TelemetryTaken {
    pub accepted: usize,
    /// Left out: over the job's caps.
    pub dropped: usize,
}

/// One event a job's agents sent, with the job it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobTelemetry {
    /// Increasing across the store: where a reader goes on from.
    pub id: i64,
    pub job: i64,
    /// The event (a JSON object, as text).
    pub body: String,
}

impl Store {
    /// Add `bodies` (JSON texts) to the telemetry of the job whose lease
    /// `(job, attempt, token)` is, oldest first, up to `caps`.
    pub fn add_job_telemetry(
        &mut self,
        lease: (i64, u32, &str),
        bodies: &[String],
        caps: TelemetryCaps,
        now_ms: i64,
    ) -> Result<Result<TelemetryTaken, LeaseLost>, StoreError> {
        let (job, attempt, token) = lease;
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        if let Err(lost) = Self::check_lease(&tx, job, attempt, token).map_err(err)? {
            return Ok(Err(lost));
        }
        let (mut events, mut bytes): (i64, i64) = tx
            .prepare_cached(
                "SELECT count(*), coalesce(sum(length(body)), 0) FROM job_telemetry WHERE job = ?1",
            )
            .and_then(|mut s| s.query_row([job], |r| Ok((r.get(0)?, r.get(1)?))))
            .map_err(err)?;
        let mut taken = TelemetryTaken {
            accepted: 0,
            dropped: 0,
        };
        for body in bodies {
            let size = body.len() as i64;
            if taken.dropped > 0
                || events + 1 > caps.events as i64
                || bytes + size > caps.bytes as i64
            {
                taken.dropped += 1;
                continue;
            }
            tx.prepare_cached(
                "INSERT INTO job_telemetry (job, attempt, at, body) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut s| s.execute(params![job, attempt, now_ms, body]))
            .map_err(err)?;
            events += 1;
            bytes += size;
            taken.accepted += 1;
        }
        tx.commit().map_err(err)?;
        Ok(Ok(taken))
    }

    /// The telemetry of the jobs of `run_id`'s `branch` added after the
    /// row `after`, oldest first, at most `limit`.
    pub fn job_telemetry_after(
        &self,
        run_id: &str,
        branch: u32,
        after: i64,
        limit: usize,
    ) -> Result<Vec<JobTelemetry>, StoreError> {
        let err = |e| self.err(e);
        let mut stmt = self
            .db
            .prepare_cached(
                "SELECT t.id, t.job, t.body FROM job_telemetry t \
                 JOIN jobs j ON j.id = t.job JOIN runs r ON r.num = j.run \
                 WHERE t.id > ?1 AND r.id = ?2 AND j.branch = ?3 ORDER BY t.id LIMIT ?4",
            )
            .map_err(err)?;
        let rows = stmt
            .query_map(params![after, run_id, branch, limit as i64], |r| {
                Ok(JobTelemetry {
                    id: r.get(0)?,
                    job: r.get(1)?,
                    body: r.get(2)?,
                })
            })
            .map_err(err)?;
        rows.collect::<Result<_, _>>().map_err(err)
    }

    /// The newest telemetry row of the store (0 when there is none): a run
    /// process reads on from here.
    pub fn last_job_telemetry(&self) -> Result<i64, StoreError> {
        self.db
            .query_row("SELECT max(id) FROM job_telemetry", [], |r| {
                r.get::<_, Option<i64>>(0)
            })
            .optional()
            .map(|v| v.flatten().unwrap_or(0))
            .map_err(|e| self.err(e))
    }
}
