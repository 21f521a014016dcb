//! The branches resting at a `sleep` block and when each is due: what a
//! server reads to wake them (the `timers` table, kept by the appends that
//! start and end each sleep).

use crate::{RunId, Store, StoreError};

/// A branch resting at a `sleep` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timer {
    pub run_id: RunId,
    pub branch: u32,
    /// Unix ms.
    pub due_at_ms: i64,
}

impl Store {
    /// The timers due at `now_ms` or before, the earliest first, at most
    /// `limit`.
    pub fn due_timers(&self, now_ms: i64, limit: usize) -> Result<Vec<Timer>, StoreError> {
        let mut statement = self
            .db
            .prepare_cached(
                "SELECT r.id, t.branch, t.due_at FROM timers t JOIN runs r ON r.num = t.run
                 WHERE t.due_at <= ?1 ORDER BY t.due_at LIMIT ?2",
            )
            .map_err(|e| self.err(e))?;
        let rows = statement
            .query_map((now_ms, limit as i64), |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, u32>(1)?, r.get(2)?))
            })
            .map_err(|e| self.err(e))?;
        let mut timers = Vec::new();
        for row in rows {
            let (id, branch, due_at_ms) = row.map_err(|e| self.err(e))?;
            // Ids were checked on the way in; one that is not is skipped.
            if let Ok(run_id) = RunId::parse(&id) {
                timers.push(Timer {
                    run_id,
                    branch,
                    due_at_ms,
                });
            }
        }
        Ok(timers)
    }

    /// When the earliest timer is due, if any branch sleeps.
    pub fn next_timer_due(&self) -> Result<Option<i64>, StoreError> {
        self.db
            .prepare_cached("SELECT min(due_at) FROM timers")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(|e| self.err(e))
    }
}
