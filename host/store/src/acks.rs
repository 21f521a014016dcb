//! Acknowledgements of external blocks by MCP clients (table `mcp_acks`).
//!
//! An external block is advanced by an ack token naming the snapshot the
//! run rested at (the seq of its `external_awaited` event, or of the
//! `forked` event of a branch started there) and an attempt number. The ack
//! is inserted in the commit that records the block's completion
//! ([`crate::BranchWriter::append_acked`]): the primary key makes one ack
//! advance a run at most once, in one process or many. The reply the
//! advance was answered with is kept, to answer a repeat of the same
//! request with the same bytes.

use crate::db::OptionalExtension;

use crate::{Store, StoreError};

/// An ack to record with the events it advanced the run by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAck {
    /// The seq of the snapshot the client advanced.
    pub snapshot: u64,
    pub attempt: u32,
    /// What the client sent, digested (to tell a repeat from a change).
    pub digest: String,
}

/// A recorded ack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub snapshot: u64,
    pub attempt: u32,
    /// The branch the advance was recorded on.
    pub branch: u32,
    /// The seq of the first event recorded for it.
    pub first_seq: u64,
    pub digest: String,
    /// The reply, once the run came to rest after the advance.
    pub response: Option<String>,
    pub at: i64,
}

impl Store {
    /// The ack `attempt` of `snapshot` in `run_id`, if it was used.
    pub fn ack(
        &self,
        run_id: &str,
        snapshot: u64,
        attempt: u32,
    ) -> Result<Option<Ack>, StoreError> {
        let run = self.run_num(run_id)?;
        self.db
            .prepare_cached(
                "SELECT branch, first_seq, digest, response, at FROM mcp_acks
                 WHERE run = ?1 AND snapshot = ?2 AND attempt = ?3",
            )
            .and_then(|mut s| {
                s.query_row((run, snapshot as i64, attempt), |r| {
                    Ok(Ack {
                        snapshot,
                        attempt,
                        branch: r.get(0)?,
                        first_seq: r.get::<_, i64>(1)? as u64,
                        digest: r.get(2)?,
                        response: r.get(3)?,
                        at: r.get(4)?,
                    })
                })
                .optional()
            })
            .map_err(|e| self.err(e))
    }

    /// The attempt number of the next unused ack of `snapshot` (1 when
    /// none was used).
    pub fn next_ack_attempt(&self, run_id: &str, snapshot: u64) -> Result<u32, StoreError> {
        let run = self.run_num(run_id)?;
        self.db
            .prepare_cached(
                "SELECT coalesce(max(attempt), 0) + 1 FROM mcp_acks WHERE run = ?1 AND snapshot = ?2",
            )
            .and_then(|mut s| s.query_row((run, snapshot as i64), |r| r.get(0)))
            .map_err(|e| self.err(e))
    }

    /// Keep the reply an ack's advance was answered with. Only the first
    /// reply is kept: a repeat gets the same bytes.
    ///
    /// The write is not synced on its own, whatever the store's durability:
    /// it reaches the disk with the next synced commit. The events the
    /// reply describes are durable already, and a reply lost to a power cut
    /// is rebuilt from them on the repeat, so one fsync per advance is
    /// saved at no cost to what a crash can lose.
    pub fn record_ack_response(
        &self,
        run_id: &str,
        snapshot: u64,
        attempt: u32,
        response: &str,
    ) -> Result<(), StoreError> {
        let run = self.run_num(run_id)?;
        let full = self.sync == crate::Durability::Full;
        if full {
            self.set_synchronous(false)?;
        }
        let written = self
            .db
            .prepare_cached(
                "UPDATE mcp_acks SET response = ?4
                 WHERE run = ?1 AND snapshot = ?2 AND attempt = ?3 AND response IS NULL",
            )
            .and_then(|mut s| s.execute((run, snapshot as i64, attempt, response)))
            .map(|_| ())
            .map_err(|e| self.err(e));
        if full {
            self.set_synchronous(true)?;
        }
        written
    }
}

impl Store {
    /// The number the store keys `run_id`'s events by (what tokens carry).
    pub fn run_number(&self, run_id: &str) -> Result<Option<i64>, StoreError> {
        let num = self.run_num(run_id)?;
        Ok((num >= 0).then_some(num))
    }

    /// The run the store numbers `num`.
    pub fn run_by_number(&self, num: i64) -> Result<Option<crate::RunRecord>, StoreError> {
        let id: Option<String> = self
            .db
            .prepare_cached("SELECT id FROM runs WHERE num = ?1")
            .and_then(|mut s| s.query_row([num], |r| r.get(0)).optional())
            .map_err(|e| self.err(e))?;
        match id {
            Some(id) => self.run(&id),
            None => Ok(None),
        }
    }

    /// The seq of `branch`'s newest event.
    pub fn branch_head(&self, run_id: &str, branch: u32) -> Result<Option<u64>, StoreError> {
        let run = self.run_num(run_id)?;
        self.db
            .prepare_cached(
                "SELECT max(key) - (?1 << 32) FROM events WHERE run = ?1 AND branch = ?2",
            )
            .and_then(|mut s| s.query_row((run, branch), |r| r.get::<_, Option<i64>>(0)))
            .map(|head| head.map(|h| h as u64))
            .map_err(|e| self.err(e))
    }

    /// The event at `seq` of `run_id`.
    pub fn event(&self, run_id: &str, seq: u64) -> Result<Option<crate::StoredEvent>, StoreError> {
        self.event_at(run_id, seq)
    }

    /// Whether `branch` went on after `seq`: an event after it on the
    /// branch other than a checkpoint (which records notes and leaves the
    /// run where it was).
    pub fn moved_on(&self, run_id: &str, branch: u32, seq: u64) -> Result<bool, StoreError> {
        let run = self.run_num(run_id)?;
        self.db
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM events WHERE run = ?1 AND branch = ?2
                   AND key > (?1 << 32) + ?3 AND kind <> 'checkpointed')",
            )
            .and_then(|mut s| s.query_row((run, branch, seq as i64), |r| r.get(0)))
            .map_err(|e| self.err(e))
    }
}

/// Insert `ack` for the events starting at `first_seq` on `branch`, inside
/// the caller's transaction. A used ack is a constraint violation.
pub(crate) fn insert(
    conn: &crate::db::Db,
    run: i64,
    branch: u32,
    first_seq: u64,
    ack: &NewAck,
    at: i64,
) -> crate::db::DbResult<()> {
    conn.prepare_cached(
        "INSERT INTO mcp_acks (run, snapshot, attempt, branch, first_seq, digest, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute((
        run,
        ack.snapshot as i64,
        ack.attempt,
        branch,
        first_seq as i64,
        &ack.digest,
        at,
    ))
    .map(|_| ())
}
