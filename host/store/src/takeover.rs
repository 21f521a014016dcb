//! The runs a server's run processes execute (`served_runs`: noted when
//! such a process starts executing a run, forgotten when the run comes to
//! rest): what a server reads to find the runs whose process died —
//! killed, or gone with its machine — and take them over, and how often
//! each was taken over already (a run that kills its process every time
//! is not taken over for ever).

use crate::{RunId, Store, StoreError};

/// A run executed for a server that had not ended when last looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedRun {
    pub run_id: RunId,
    /// How often a server took it over after its process died.
    pub takeovers: u32,
    /// Unix ms of the last takeover.
    pub taken_at_ms: Option<i64>,
    /// Where it executes (a server takes over only a run whose workspace
    /// it can reach).
    pub workspace: String,
}

impl Store {
    /// Note that `run_id` is executed for a server (by this process): kept
    /// until the run ends. Written once per run; a process resuming it
    /// writes nothing.
    pub fn mark_served(&self, run_id: &RunId) -> Result<(), StoreError> {
        self.db
            .execute(
                "INSERT INTO served_runs (run, takeovers)
                 SELECT num, 0 FROM runs WHERE id = ?1
                 ON CONFLICT (run) DO NOTHING",
                (run_id.as_str(),),
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// The served runs that no process executes now (their process died,
    /// or they came to rest a moment ago), oldest first, at most `limit`
    /// of them after `after` (a run's number, for paging: 0 from the
    /// start); with each its number. One statement on PostgreSQL, whose
    /// locks are the database's; on SQLite each run's lock file is probed.
    pub fn unexecuted_served_runs(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, ServedRun)>, StoreError> {
        let sql = self.db.pick(
            "SELECT s.run, r.id, s.takeovers, s.taken_at, r.workspace
             FROM served_runs s JOIN runs r ON r.num = s.run
             WHERE s.run > ?1 ORDER BY s.run LIMIT ?2",
            crate::lock::UNLOCKED_SERVED_RUNS,
        );
        let mut statement = self.db.prepare_cached(sql).map_err(|e| self.err(e))?;
        let rows = statement
            .query_map((after, limit as i64), |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, u32>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                    r.get::<_, String>(4)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut runs = Vec::new();
        for row in rows {
            let (num, id, takeovers, taken_at_ms, workspace) = row.map_err(|e| self.err(e))?;
            // Ids were checked on the way in; one that is not is skipped.
            let Ok(run_id) = RunId::parse(&id) else {
                continue;
            };
            if self.db.backend() == crate::Backend::Sqlite
                && crate::RunLock::is_held(&self.home, &run_id)
            {
                continue;
            }
            runs.push((
                num,
                ServedRun {
                    run_id,
                    takeovers,
                    taken_at_ms,
                    workspace,
                },
            ));
        }
        Ok(runs)
    }

    /// Claim the next takeover of `run`, last seen taken over `seen`
    /// times: true for exactly one of the servers asking with the same
    /// `seen` (the count moves in the same statement).
    pub fn claim_takeover(&self, run: &ServedRun, now_ms: i64) -> Result<bool, StoreError> {
        self.db
            .execute(
                "UPDATE served_runs SET takeovers = takeovers + 1, taken_at = ?3
                 WHERE run = (SELECT num FROM runs WHERE id = ?1) AND takeovers = ?2",
                (run.run_id.as_str(), i64::from(run.takeovers), now_ms),
            )
            .map(|changed| changed == 1)
            .map_err(|e| self.err(e))
    }

    /// Forget `run_id` as served: it came to rest — ended, or waiting at a
    /// gate or a timer (the process that goes on with it, for an answer or
    /// a timer, notes it again).
    pub fn forget_served(&self, run_id: &RunId) -> Result<(), StoreError> {
        self.db
            .execute(
                "DELETE FROM served_runs WHERE run = (SELECT num FROM runs WHERE id = ?1)",
                (run_id.as_str(),),
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Whether a process executes `run_id` right now, or an error when
    /// that cannot be told (unlike [`Store::is_running`], which says no).
    pub fn running_now(&self, run_id: &RunId) -> Result<bool, StoreError> {
        match self.location {
            crate::Location::Postgres(_) => {
                crate::lock::held_in_database(&self.db, run_id).map_err(|e| self.err(e))
            }
            crate::Location::Embedded => Ok(crate::RunLock::is_held(&self.home, run_id)),
        }
    }
}
