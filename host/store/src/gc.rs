//! Retention: removing runs nobody touched for a while.

use serde::Serialize;

use crate::{RunId, RunLock, Store, StoreError, time};

/// A run old enough to be removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GcCandidate {
    pub run_id: String,
    pub workflow_id: String,
    /// Unix ms of the run's last event.
    pub last_at: i64,
    /// Status of the run's current branch.
    pub status: String,
    /// The run's session; its runs go together, when the last of them is
    /// old enough.
    pub session: Option<String>,
}

impl Store {
    /// Runs whose last event is older than `age` (for a run of a session:
    /// whose session's last event is). Runs that are executing
    /// are never candidates; unfinished ones (waiting at a gate, or
    /// interrupted) only with `include_unfinished`.
    pub fn gc_candidates(
        &self,
        age: std::time::Duration,
        include_unfinished: bool,
    ) -> Result<Vec<GcCandidate>, StoreError> {
        let cutoff =
            time::now_ms().saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
        let mut stmt = self
            .db
            .prepare_cached(
                "SELECT id, workflow_id, last, session FROM (
                   SELECT r.id, r.workflow_id, max(e.at) AS last, s.session,
                          (SELECT max(e2.at) FROM run_sessions s2 JOIN events e2 ON e2.run = s2.run
                           WHERE s2.session = s.session) AS session_last
                   FROM runs r JOIN events e ON e.run = r.num
                   LEFT JOIN run_sessions s ON s.run = r.num
                   GROUP BY r.num, r.id, r.workflow_id, s.session
                 ) AS c WHERE coalesce(session_last, last) < ?1 ORDER BY last, id",
            )
            .map_err(|e| self.err(e))?;
        let old: Vec<(String, String, i64, Option<String>)> = stmt
            .query_map([cutoff], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for (run_id, workflow_id, last_at, session) in old {
            if self.is_running_text(&run_id) {
                continue;
            }
            let branches = self.branches(&run_id)?;
            let finished = branches
                .iter()
                .all(|b| b.status == "succeeded" || b.status == "failed");
            if !finished && !include_unfinished {
                continue;
            }
            let current = self.current_branch(&run_id)?;
            let status = branches
                .iter()
                .find(|b| b.branch == current)
                .map(|b| b.status.clone())
                .unwrap_or_default();
            out.push(GcCandidate {
                run_id,
                workflow_id,
                last_at,
                status,
                session,
            });
        }
        Ok(out)
    }

    /// Remove runs (events, identity, lock file) and the definitions no run
    /// uses any more. Each run is removed under its lock, in one
    /// transaction.
    pub fn remove_runs<S: AsRef<str>>(&mut self, run_ids: &[S]) -> Result<usize, StoreError> {
        let mut removed = 0;
        for run_id in run_ids {
            let run_id = run_id.as_ref();
            // A row whose id is no run id (an older, unchecked import) has
            // no lock file: its rows go, nothing on disk is touched.
            let checked = RunId::parse(run_id).ok();
            let lock = match &checked {
                Some(id) => match self.lock_run(id) {
                    Ok(lock) => Some(lock),
                    Err(_) => continue, // started executing since it was listed
                },
                None => None,
            };
            let (tx, path) = self.begin()?;
            let err = |e| StoreError::from_db(&path, e);
            tx.execute(
                "DELETE FROM job_telemetry WHERE job IN (SELECT j.id FROM jobs j JOIN runs r ON r.num = j.run WHERE r.id = ?1)",
                [run_id],
            )
            .map_err(err)?;
            tx.execute(
                "DELETE FROM job_events WHERE job IN (SELECT j.id FROM jobs j JOIN runs r ON r.num = j.run WHERE r.id = ?1)",
                [run_id],
            )
            .map_err(err)?;
            tx.execute(
                "DELETE FROM jobs WHERE run = (SELECT num FROM runs WHERE id = ?1)",
                [run_id],
            )
            .map_err(err)?;
            tx.execute(
                "DELETE FROM mcp_acks WHERE run = (SELECT num FROM runs WHERE id = ?1)",
                [run_id],
            )
            .map_err(err)?;
            tx.execute(
                "DELETE FROM run_sessions WHERE run = (SELECT num FROM runs WHERE id = ?1)",
                [run_id],
            )
            .map_err(err)?;
            // A sleeping run's timer, its notifications and the schedule
            // tick that started it go with it.
            tx.execute(
                "DELETE FROM timers WHERE run = (SELECT num FROM runs WHERE id = ?1)",
                [run_id],
            )
            .map_err(err)?;
            tx.execute(
                "DELETE FROM served_runs WHERE run = (SELECT num FROM runs WHERE id = ?1)",
                [run_id],
            )
            .map_err(err)?;
            tx.execute("DELETE FROM notifications WHERE run_id = ?1", [run_id])
                .map_err(err)?;
            tx.execute("DELETE FROM schedule_ticks WHERE run_id = ?1", [run_id])
                .map_err(err)?;
            tx.execute(
                "DELETE FROM events WHERE run = (SELECT num FROM runs WHERE id = ?1)",
                [run_id],
            )
            .map_err(err)?;
            removed += tx
                .execute("DELETE FROM runs WHERE id = ?1", [run_id])
                .map_err(err)?;
            tx.execute(
                "DELETE FROM definitions WHERE hash NOT IN (SELECT workflow_hash FROM runs)",
                [],
            )
            .map_err(err)?;
            tx.commit().map_err(err)?;
            drop(lock);
            if let Some(id) = &checked {
                RunLock::remove(&self.home, id);
                if self.backend() == crate::Backend::Postgres {
                    self.db
                        .execute("DELETE FROM run_locks WHERE run_id = ?1", (id.as_str(),))
                        .map_err(|e| self.err(e))?;
                }
            }
        }
        Ok(removed)
    }
}
