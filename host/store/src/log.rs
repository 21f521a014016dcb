//! The event log: appending to a branch, reading a branch's chain, forks,
//! and the projections listings need (branch heads, open gates).

use crate::acks::NewAck;
use crate::db::{Db, OptionalExtension};
use serde::Serialize;
use wfhost_core::run::event::{
    CommandRecord, Decision, Event, EventSink, QueuedJob, SinkError, gate_id,
};
use wfhost_core::run::state::RunState;

use crate::{NewJob, Store, StoreError, snapshot_id, time};

/// Which page of a branch's chain [`crate::Store::chain_page`] reads, by
/// sequence number (exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainPage {
    /// The first events after this one (0: from the start).
    After(u64),
    /// The last events before this one (`u64::MAX`: the newest).
    Before(u64),
}

/// An event as stored: its place in the run's tree and when it was written.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredEvent {
    /// Position in the run, in write order across branches (1-based).
    pub seq: u64,
    pub branch: u32,
    /// The previous event on this event's branch.
    pub parent: Option<u64>,
    /// Unix milliseconds.
    pub at: i64,
    /// Set when the run is at rest after this event: a branch can start
    /// here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    pub event: Event,
}

/// One branch of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BranchInfo {
    /// 1 is the branch the run started on.
    pub branch: u32,
    /// The snapshot the branch was forked from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
    /// The sequence number of that snapshot's event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_at: Option<u64>,
    /// The branch that event is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from_branch: Option<u32>,
    /// The last event's seq.
    pub head: u64,
    /// Events on the branch itself (not counting the shared history).
    pub events: u64,
    /// When the branch was last written, unix ms.
    pub last_at: i64,
    /// `succeeded`, `failed`, `cancelled`, `waiting`, `running` or
    /// `interrupted`.
    pub status: String,
}

/// A gate waiting for a human.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct OpenGate {
    pub run_id: String,
    pub workflow_id: String,
    pub branch: u32,
    pub gate_id: String,
    pub node: String,
    pub block: String,
    pub prompt: String,
    /// `gate` (answered with `approved` or `changes-requested:…`, or a
    /// question gate's answers) or `fan-in` (lanes whose changes conflict:
    /// answered with the lane each file comes from).
    #[schemars(extend("enum" = ["gate", "fan-in"]))]
    pub kind: &'static str,
    /// Unix ms.
    pub opened_at: i64,
}

/// How many re-asks and answers [`Store::open_gates`] walks back over to
/// find the gate they belong to.
const MAX_GATE_ROUNDS: usize = 1000;

/// The prompt of gate `gate_id` if it is still open after `answers`: a
/// gate without questions closes at its first answer; one with questions
/// when none is pending.
fn still_open(
    gate_id: &str,
    prompt: &str,
    asked: &[wfhost_core::run::questions::GateQuestion],
    answers: &[Decision],
) -> Option<String> {
    use wfhost_core::run::questions::{self, AskedQuestion};
    if asked.is_empty() {
        return answers.is_empty().then(|| prompt.to_string());
    }
    let mut questions: Vec<AskedQuestion> = asked.iter().cloned().map(AskedQuestion::new).collect();
    for answer in answers {
        if questions::apply(gate_id, &mut questions, answer).ok()? {
            return None;
        }
    }
    Some(questions::prompt(prompt, &questions))
}

/// The largest `seq` a run can have: its events are keyed `run << 32 | seq`.
pub(crate) const MAX_SEQ: u64 = u32::MAX as u64;

/// `seq` as a query parameter, never past the run's key range.
fn seq_param(seq: u64) -> i64 {
    seq.min(MAX_SEQ) as i64
}

/// Record `event` as event `seq` of run number `run` (`runs.num`), whose id
/// is `run_id`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn insert_event(
    conn: &Db,
    run: i64,
    run_id: &str,
    seq: u64,
    branch: u32,
    parent: Option<u64>,
    at: i64,
    event: &Event,
) -> crate::db::DbResult<Option<String>> {
    if seq == 0 || seq > MAX_SEQ {
        return Err(crate::db::DbError::conversion(
            1,
            format!("event seq {seq} is out of range"),
        ));
    }
    let body = serde_json::to_string(event).expect("events serialize");
    let snapshot = event.is_snapshot().then(|| snapshot_id(run_id, seq));
    conn.prepare_cached(
        "INSERT INTO events (key, run, branch, parent, at, kind, body, snapshot)
         VALUES ((?1 << 32) + ?2, ?1, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute((
        run,
        seq as i64,
        branch,
        parent.map(|p| p as i64),
        at,
        event.kind(),
        body,
        &snapshot,
    ))?;
    Ok(snapshot)
}

/// `seq, branch, parent, at, snapshot, body` as read, before decoding.
type RawRow = (u64, u32, Option<u64>, i64, Option<String>, String);

impl Store {
    /// The number a run's events are keyed by (`runs.num`); -1, which keys
    /// no event, for a run this store does not have.
    pub(crate) fn run_num(&self, run_id: &str) -> Result<i64, StoreError> {
        self.db
            .prepare_cached("SELECT num FROM runs WHERE id = ?1")
            .and_then(|mut s| s.query_row([run_id], |r| r.get(0)).optional())
            .map(|n| n.unwrap_or(-1))
            .map_err(|e| self.err(e))
    }

    fn decode(&self, run_id: &str, seq: u64, body: &str) -> Result<Event, StoreError> {
        self.decoded.set(self.decoded.get() + 1);
        serde_json::from_str(body).map_err(|e| StoreError::Corrupt {
            path: self.path.clone(),
            detail: format!("event {seq} of run {run_id} cannot be read: {e}"),
        })
    }

    fn rows(
        &self,
        sql: &str,
        params: impl crate::db::Params,
        run_id: &str,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let mut stmt = self.db.prepare_cached(sql).map_err(|e| self.err(e))?;
        let raw: Vec<RawRow> = stmt
            .query_map(params, |r| {
                Ok((
                    r.get::<_, i64>(0)? as u64,
                    r.get(1)?,
                    r.get::<_, Option<i64>>(2)?.map(|p| p as u64),
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            })
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?;
        raw.into_iter()
            .map(|(seq, branch, parent, at, snapshot, body)| {
                Ok(StoredEvent {
                    event: self.decode(run_id, seq, &body)?,
                    seq,
                    branch,
                    parent,
                    at,
                    snapshot,
                })
            })
            .collect()
    }

    /// Every event of a run after `after` (by seq), in write order, all
    /// branches.
    pub fn events_after(&self, run_id: &str, after: u64) -> Result<Vec<StoredEvent>, StoreError> {
        self.rows(
            "SELECT seq, branch, parent, at, snapshot, body FROM events
             WHERE key > (?1 << 32) + ?2 AND key < (?1 + 1) << 32 ORDER BY key",
            (self.run_num(run_id)?, seq_param(after)),
            run_id,
        )
    }

    /// At most `limit` events of a run after `after` (by seq), in write
    /// order, all branches: one page of the log, read by the primary key.
    pub fn events_page(
        &self,
        run_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.rows(
            "SELECT seq, branch, parent, at, snapshot, body FROM events
             WHERE key > (?1 << 32) + ?2 AND key < (?1 + 1) << 32 ORDER BY key LIMIT ?3",
            (
                self.run_num(run_id)?,
                seq_param(after),
                limit.min(i64::MAX as usize) as i64,
            ),
            run_id,
        )
    }

    /// The first event of each branch: `(branch, seq, parent)`.
    /// Each branch's first event: (branch, seq, the event it was forked
    /// from). One index probe per branch (the events are indexed by run,
    /// branch and key), whatever the run's length.
    fn branch_roots(&self, run_id: &str) -> Result<Vec<(u32, u64, Option<u64>)>, StoreError> {
        let run = self.run_num(run_id)?;
        let mut next = self
            .db
            .prepare_cached(
                "SELECT branch, seq, parent FROM events
                 WHERE run = ?1 AND branch > ?2 ORDER BY branch, key LIMIT 1",
            )
            .map_err(|e| self.err(e))?;
        let mut roots = Vec::new();
        let mut after: i64 = -1;
        while let Some(root) = next
            .query_row((run, after), |r| {
                Ok((
                    r.get::<_, u32>(0)?,
                    r.get::<_, i64>(1)? as u64,
                    r.get::<_, Option<i64>>(2)?.map(|p| p as u64),
                ))
            })
            .optional()
            .map_err(|e| self.err(e))?
        {
            after = i64::from(root.0);
            roots.push(root);
        }
        Ok(roots)
    }

    fn branch_of(&self, run_id: &str, seq: u64) -> Result<Option<u32>, StoreError> {
        self.db
            .query_row(
                "SELECT branch FROM events WHERE key = (?1 << 32) + ?2",
                (self.run_num(run_id)?, seq_param(seq)),
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// The parts of `branch`'s history, newest first: `(branch, last seq
    /// included)` from `branch` itself up through the branches it was
    /// forked from.
    fn segments(&self, run_id: &str, branch: u32) -> Result<Vec<(u32, u64)>, StoreError> {
        let roots = self.branch_roots(run_id)?;
        let mut segments = Vec::new();
        let (mut current, mut limit) = (branch, u64::MAX);
        loop {
            let Some(&(_, _, parent)) = roots.iter().find(|(b, _, _)| *b == current) else {
                return Err(if segments.is_empty() {
                    StoreError::Usage(format!("run {run_id} has no branch {branch}"))
                } else {
                    StoreError::Inconsistent(format!(
                        "branch {current} of run {run_id} is referenced but has no events"
                    ))
                });
            };
            segments.push((current, limit));
            let Some(parent) = parent else { break };
            let Some(up) = self.branch_of(run_id, parent)? else {
                return Err(StoreError::Inconsistent(format!(
                    "branch {current} of run {run_id} starts from missing event {parent}"
                )));
            };
            if segments.len() > roots.len() {
                return Err(StoreError::Inconsistent(format!(
                    "the branches of run {run_id} form a cycle"
                )));
            }
            (current, limit) = (up, parent);
        }
        Ok(segments)
    }

    /// The events of `branch` from the run's start: the shared history up
    /// to the fork point, then the branch's own events.
    pub fn chain(&self, run_id: &str, branch: u32) -> Result<Vec<StoredEvent>, StoreError> {
        let mut events = Vec::new();
        let run = self.run_num(run_id)?;
        for (b, limit) in self.segments(run_id, branch)?.into_iter().rev() {
            events.extend(self.rows(
                "SELECT seq, branch, parent, at, snapshot, body FROM events
                 WHERE run = ?1 AND branch = ?2 AND key <= (?1 << 32) + ?3 ORDER BY key",
                (run, b, seq_param(limit)),
                run_id,
            )?);
        }
        Ok(events)
    }

    /// The event at `seq` of a run.
    pub(crate) fn event_at(
        &self,
        run_id: &str,
        seq: u64,
    ) -> Result<Option<StoredEvent>, StoreError> {
        Ok(self
            .rows(
                "SELECT seq, branch, parent, at, snapshot, body FROM events
                 WHERE key = (?1 << 32) + ?2",
                (self.run_num(run_id)?, seq_param(seq)),
                run_id,
            )?
            .pop())
    }

    /// The node and block of the newest `block_started` for `step` on the
    /// history of `branch` at or before `upto`: read backwards from there,
    /// so near the end of a long run it reads a few rows, not the run.
    fn block_of_step(
        &self,
        run_id: &str,
        branch: u32,
        upto: u64,
        step: u64,
    ) -> Result<Option<(String, String)>, StoreError> {
        let run = self.run_num(run_id)?;
        for (b, limit) in self.segments(run_id, branch)? {
            let found = self.rows(
                self.db.pick(
                    "SELECT seq, branch, parent, at, snapshot, body FROM events
                     WHERE run = ?1 AND branch = ?2 AND key <= (?1 << 32) + ?3
                       AND kind = 'block_started' AND json_extract(body, '$.step') = ?4
                     ORDER BY key DESC LIMIT 1",
                    "SELECT seq, branch, parent, at, snapshot, body FROM events
                     WHERE run = ?1 AND branch = ?2 AND key <= (?1 << 32) + ?3
                       AND kind = 'block_started' AND (body::jsonb -> 'step') = to_jsonb(?4)
                     ORDER BY key DESC LIMIT 1",
                ),
                (run, b, seq_param(limit.min(upto)), clamp(step)),
                run_id,
            )?;
            if let Some(Event::BlockStarted { node, block, .. }) =
                found.into_iter().next().map(|e| e.event)
            {
                return Ok(Some((node, block)));
            }
        }
        Ok(None)
    }

    /// The gate a branch whose newest event is `head` waits at, if any: its
    /// head opened one, or the branch was forked from where one was open.
    /// Read from the head and the events just before it, never by folding
    /// the branch.
    fn waiting_at(
        &self,
        run_id: &str,
        branch: u32,
        head: &StoredEvent,
    ) -> Result<Option<OpenGate>, StoreError> {
        let opener = match (&head.event, head.parent) {
            (Event::Forked { .. }, Some(point)) => match self.event_at(run_id, point)? {
                Some(e) => e,
                None => return Ok(None),
            },
            _ => head.clone(),
        };
        // After a re-asked invalid answer, or answers that leave security
        // questions open, the gate is still the one opened before.
        let (opener, answers) = match &opener.event {
            Event::GateReasked { .. } | Event::GateAnswered { .. } => {
                match self.gate_opener(run_id, opener)? {
                    Some(found) => found,
                    None => return Ok(None),
                }
            }
            _ => (opener, Vec::new()),
        };
        let (gate_id, prompt, step, kind) = match &opener.event {
            Event::ActionTaken {
                gate_id: Some(gate),
                command: CommandRecord::Gate { prompt, questions },
                step,
                ..
            } => match still_open(gate, prompt, questions, &answers) {
                Some(prompt) => (gate.clone(), prompt, *step, "gate"),
                None => return Ok(None),
            },
            Event::FanInWaiting { .. } if !answers.is_empty() => return Ok(None),
            Event::FanInWaiting {
                gate_id,
                prompt,
                step,
            } => (gate_id.clone(), prompt.clone(), *step, "fan-in"),
            _ => return Ok(None),
        };
        let (node, block) = self
            .block_of_step(run_id, branch, opener.seq, step)?
            .ok_or_else(|| {
                StoreError::Inconsistent(format!(
                    "run {run_id}: gate {gate_id} was opened at step {step}, which never started"
                ))
            })?;
        Ok(Some(OpenGate {
            run_id: run_id.to_string(),
            workflow_id: String::new(),
            branch,
            gate_id,
            node,
            block,
            prompt,
            kind,
            opened_at: opener.at,
        }))
    }

    /// The event that opened the gate `after` re-asks or answers, with the
    /// answers given since (oldest first); walks back at most
    /// [`MAX_GATE_ROUNDS`] events. `None` when it finds no gate opening.
    fn gate_opener(
        &self,
        run_id: &str,
        after: StoredEvent,
    ) -> Result<Option<(StoredEvent, Vec<Decision>)>, StoreError> {
        let mut answers = Vec::new();
        let mut at = after;
        for _ in 0..MAX_GATE_ROUNDS {
            match &at.event {
                Event::GateReasked { .. } => {}
                Event::GateAnswered { decision, .. } => answers.push(decision.clone()),
                Event::ActionTaken {
                    gate_id: Some(_), ..
                }
                | Event::FanInWaiting { .. } => {
                    answers.reverse();
                    return Ok(Some((at, answers)));
                }
                _ => return Ok(None),
            }
            let Some(parent) = at.parent else {
                return Ok(None);
            };
            match self.event_at(run_id, parent)? {
                Some(e) => at = e,
                None => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Fold a branch into its state.
    /// One page of [`Store::chain`]: at most `limit` events of `branch`'s
    /// chain after sequence number `after` (the first ones) or, with
    /// `before`, the last ones before it — in write order either way. Reads
    /// only the page, whatever the run's length: how a viewer walks a long
    /// run from either end.
    pub fn chain_page(
        &self,
        run_id: &str,
        branch: u32,
        page: ChainPage,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let run = self.run_num(run_id)?;
        let mut segments = self.segments(run_id, branch)?;
        segments.reverse(); // root first: the chain's order
        let mut events = Vec::new();
        match page {
            ChainPage::After(after) => {
                for (b, last) in segments {
                    let left = limit - events.len();
                    if left == 0 {
                        break;
                    }
                    events.extend(self.rows(
                        "SELECT seq, branch, parent, at, snapshot, body FROM events
                         WHERE run = ?1 AND branch = ?2 AND key > (?1 << 32) + ?3
                           AND key <= (?1 << 32) + ?4 ORDER BY key LIMIT ?5",
                        (run, b, seq_param(after), seq_param(last), left as i64),
                        run_id,
                    )?);
                }
            }
            ChainPage::Before(before) => {
                for (b, last) in segments.into_iter().rev() {
                    let left = limit - events.len();
                    if left == 0 {
                        break;
                    }
                    let mut part = self.rows(
                        "SELECT seq, branch, parent, at, snapshot, body FROM events
                         WHERE run = ?1 AND branch = ?2 AND key < (?1 << 32) + ?3
                           AND key <= (?1 << 32) + ?4 ORDER BY key DESC LIMIT ?5",
                        (run, b, seq_param(before), seq_param(last), left as i64),
                        run_id,
                    )?;
                    events.append(&mut part);
                }
                events.reverse();
            }
        }
        Ok(events)
    }

    pub fn state(&self, run_id: &str, branch: u32) -> Result<RunState, StoreError> {
        let chain = self.chain(run_id, branch)?;
        RunState::replay(chain.iter().map(|e| &e.event)).map_err(|e| StoreError::Corrupt {
            path: self.path.clone(),
            detail: format!("run {run_id} branch {branch}: {e}"),
        })
    }

    /// The branch written to most recently: where `resume` and `show` look
    /// by default.
    pub fn current_branch(&self, run_id: &str) -> Result<u32, StoreError> {
        self.db
            .query_row(
                "SELECT branch FROM events WHERE key > ?1 << 32 AND key < (?1 + 1) << 32
                 ORDER BY key DESC LIMIT 1",
                [self.run_num(run_id)?],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::Inconsistent(format!("run {run_id} has no events")))
    }

    /// The branches of a run with their status.
    pub fn branches(&self, run_id: &str) -> Result<Vec<BranchInfo>, StoreError> {
        let roots = self.branch_roots(run_id)?;
        let run = self.run_num(run_id)?;
        let mut out = Vec::new();
        for (branch, _, parent) in roots {
            // The count reads the branch's index entries only; the head's
            // time is its own (a branch is written in time order).
            let (head, events): (i64, i64) = self
                .db
                .query_row(
                    "SELECT max(key) - (?1 << 32), count(*) FROM events WHERE run = ?1 AND branch = ?2",
                    (run, branch),
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(|e| self.err(e))?;
            let last_at: i64 = self
                .db
                .query_row(
                    "SELECT at FROM events WHERE key = (?1 << 32) + ?2",
                    (run, head),
                    |r| r.get(0),
                )
                .map_err(|e| self.err(e))?;
            let forked_from = parent.map(|p| snapshot_id(run_id, p));
            let forked_from_branch = match parent {
                Some(p) => self.branch_of(run_id, p)?,
                None => None,
            };
            out.push(BranchInfo {
                branch,
                forked_from,
                forked_at: parent,
                forked_from_branch,
                head: head as u64,
                events: events as u64,
                last_at,
                status: self.branch_status(run_id, branch, head as u64)?,
            });
        }
        Ok(out)
    }

    /// Status from the branch's last event (`head`), folding only when
    /// the last event alone cannot tell. A branch that looks interrupted
    /// is read again: its process may have written its end and let go of
    /// the run's lock between the two reads (a finished run is never said
    /// to be interrupted, nor taken over by a server).
    fn branch_status(&self, run_id: &str, branch: u32, head: u64) -> Result<String, StoreError> {
        let status = self.status_at(run_id, branch, head)?;
        if status != "interrupted" {
            return Ok(status);
        }
        match self.branch_head(run_id, branch)? {
            Some(now) if now != head => self.status_at(run_id, branch, now),
            _ => Ok(status),
        }
    }

    /// [`Self::branch_status`] with `head` as the branch's newest event.
    fn status_at(&self, run_id: &str, branch: u32, head: u64) -> Result<String, StoreError> {
        let last = self.rows(
            "SELECT seq, branch, parent, at, snapshot, body FROM events WHERE key = (?1 << 32) + ?2",
            (self.run_num(run_id)?, seq_param(head)),
            run_id,
        )?;
        let status = match last.first().map(|e| &e.event) {
            Some(Event::RunFinished { outcome }) => match outcome {
                wfhost_core::run::event::Outcome::Succeeded => "succeeded",
                wfhost_core::run::event::Outcome::Failed { .. } => "failed",
                wfhost_core::run::event::Outcome::Cancelled { .. } => "cancelled",
            },
            Some(Event::ActionTaken {
                gate_id: Some(_), ..
            })
            | Some(Event::FanInWaiting { .. }) => "waiting",
            Some(Event::ActionTaken {
                command: CommandRecord::End,
                ..
            }) => "succeeded",
            Some(Event::ActionTaken {
                command: CommandRecord::Fail { .. },
                ..
            }) => "failed",
            // At an external block, until an MCP client performs it.
            Some(Event::ExternalAwaited { .. } | Event::Checkpointed { .. }) => "waiting",
            // At a `sleep` block or waiting to retry one, until it is due.
            Some(Event::TimerStarted { .. } | Event::RetryScheduled { .. }) => "sleeping",
            // An invalid answer asked again, or answers that leave
            // security questions open: the gate may still wait.
            Some(Event::GateReasked { .. } | Event::GateAnswered { .. }) => {
                match self.waiting_at(run_id, branch, &last[0])? {
                    Some(_) => "waiting",
                    None => self.live_status(run_id)?,
                }
            }
            Some(Event::Forked { .. }) if self.has_timer(self.run_num(run_id)?, branch)? => {
                "sleeping"
            }
            Some(Event::Forked { .. }) => match self.waiting_at(run_id, branch, &last[0])? {
                Some(_) => "waiting",
                None if self.forked_from_external(run_id, &last[0])? => "waiting",
                None => self.live_status(run_id)?,
            },
            _ => self.live_status(run_id)?,
        };
        Ok(status.to_string())
    }

    /// Whether `forked` (a branch's first event) starts where the run
    /// awaited an external block.
    fn forked_from_external(&self, run_id: &str, forked: &StoredEvent) -> Result<bool, StoreError> {
        let Some(point) = forked.parent else {
            return Ok(false);
        };
        Ok(matches!(
            self.event_at(run_id, point)?.map(|e| e.event),
            Some(Event::ExternalAwaited { .. } | Event::Checkpointed { .. })
        ))
    }

    /// Running or interrupted, after whether a process holds the run's
    /// lock; a database that cannot tell is an error, never a run said
    /// to be interrupted.
    fn live_status(&self, run_id: &str) -> Result<&'static str, StoreError> {
        // An id read from the store that is no run id (an older, unchecked
        // import) has no lock and is never running.
        let running = match crate::RunId::parse(run_id) {
            Ok(id) => self.running_now(&id)?,
            Err(_) => false,
        };
        Ok(if running { "running" } else { "interrupted" })
    }

    /// Gates waiting for an answer, in every run. Costs a few rows per
    /// branch whose newest event opened a gate (or forked from an open
    /// one), whatever the length of the runs.
    pub fn open_gates(&self) -> Result<Vec<OpenGate>, StoreError> {
        let mut stmt = self
            .db
            .prepare_cached(
                "SELECT r.id, e.branch, e.seq, r.workflow_id FROM events e
                 JOIN (SELECT max(key) AS head FROM events GROUP BY run, branch) h
                   ON e.key = h.head
                 JOIN runs r ON r.num = e.run
                 WHERE e.kind IN ('action_taken', 'fan_in_waiting', 'forked', 'gate_reasked', 'gate_answered')
                 ORDER BY e.at",
            )
            .map_err(|e| self.err(e))?;
        let heads: Vec<(String, u32, i64, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?;
        let mut gates = Vec::new();
        for (run_id, branch, head, workflow_id) in heads {
            let Some(head) = self.event_at(&run_id, head as u64)? else {
                continue;
            };
            if let Some(gate) = self.waiting_at(&run_id, branch, &head)? {
                gates.push(OpenGate {
                    workflow_id,
                    ..gate
                });
            }
        }
        Ok(gates)
    }

    /// A number that changes whenever another connection (of this process
    /// or another) commits to the store: SQLite's `PRAGMA data_version`.
    /// A cheap way to learn that there may be new events to read.
    pub fn data_version(&self) -> Result<i64, StoreError> {
        self.db.data_version().map_err(|e| self.err(e))
    }

    /// Wait for a commit after `seen` (a [`Store::data_version`]) by any
    /// process or machine, at most `timeout`: `Some(whether one came)` on
    /// PostgreSQL, which notifies every commit (`LISTEN`); `None` on
    /// SQLite, whose writers ring the home's doorbells instead.
    pub fn wait_for_change(
        &self,
        seen: i64,
        timeout: std::time::Duration,
    ) -> Result<Option<bool>, StoreError> {
        self.db
            .wait_for_change(seen, timeout)
            .map_err(|e| self.err(e))
    }

    /// How many events this store has read and decoded since it was
    /// opened (for tests that check what a query costs).
    pub fn events_decoded(&self) -> u64 {
        self.decoded.get()
    }

    /// The highest sequential gate number (`UD-<N>`) the run has opened,
    /// on all branches.
    fn gates_opened(&self, run_id: &str) -> Result<usize, StoreError> {
        let run = self.run_num(run_id)?;
        self.db
            .prepare_cached(self.db.pick(
                // The highest `UD-<N>`: well-known gates take no number.
                // A gate that asks questions numbers each of them.
                "SELECT coalesce(max(n), 0) FROM (
                   SELECT CAST(substr(json_extract(body, '$.gate_id'), 4) AS INTEGER) AS n
                     FROM events WHERE run = ?1 AND kind IN ('action_taken', 'fan_in_waiting')
                     AND json_extract(body, '$.gate_id') GLOB 'UD-[0-9]*'
                   UNION ALL
                   SELECT CAST(substr(json_extract(q.value, '$.id'), 4) AS INTEGER)
                     FROM events, json_each(events.body, '$.command.questions') AS q
                     WHERE run = ?1 AND kind = 'action_taken'
                     AND json_extract(q.value, '$.id') GLOB 'UD-[0-9]*')",
                "SELECT coalesce(max(n), 0) FROM (
                   SELECT (regexp_match(body::jsonb ->> 'gate_id', '^UD-([0-9]{1,18})'))[1]::bigint AS n
                     FROM events WHERE run = ?1 AND kind IN ('action_taken', 'fan_in_waiting')
                   UNION ALL
                   SELECT (regexp_match(q ->> 'id', '^UD-([0-9]{1,18})'))[1]::bigint
                     FROM events, jsonb_array_elements(
                       CASE WHEN jsonb_typeof(body::jsonb #> '{command,questions}') = 'array'
                            THEN body::jsonb #> '{command,questions}' ELSE '[]'::jsonb END) AS q
                     WHERE run = ?1 AND kind = 'action_taken') AS g",
            ))
            .and_then(|mut s| s.query_row([run], |r| r.get::<_, i64>(0)))
            .map(|n| n as usize)
            .map_err(|e| self.err(e))
    }

    /// A writer that extends `branch` of `run_id` from its current head.
    /// Hold the run's [`crate::RunLock`] while writing.
    pub fn writer(&mut self, run_id: &str, branch: u32) -> Result<BranchWriter<'_>, StoreError> {
        let run = self.run_num(run_id)?;
        let head: Option<i64> = self
            .db
            .prepare_cached(
                "SELECT max(key) - (?1 << 32) FROM events WHERE run = ?1 AND branch = ?2",
            )
            .and_then(|mut s| s.query_row((run, branch), |r| r.get(0)))
            .map_err(|e| self.err(e))?;
        let Some(head) = head else {
            return Err(StoreError::Usage(format!(
                "run {run_id} has no branch {branch}"
            )));
        };
        // A branch resting at a `sleep` block (its head a `timer_started`,
        // or a fork of one) has a timer to remove with whatever it appends
        // next.
        let armed = self.has_timer(run, branch)?;
        // The notification targets that want this run's events (most
        // homes have none: nothing more to do per append).
        let workflow_id: String = self
            .db
            .prepare_cached("SELECT workflow_id FROM runs WHERE num = ?1")
            .and_then(|mut s| s.query_row([run], |r| r.get(0)))
            .map_err(|e| self.err(e))?;
        let wanted = self.wanted(&workflow_id)?;
        let last: i64 = self
            .db
            .prepare_cached(
                "SELECT max(key) - (?1 << 32) FROM events WHERE key > ?1 << 32 AND key < (?1 + 1) << 32",
            )
            .and_then(|mut s| s.query_row([run], |r| r.get(0)))
            .map_err(|e| self.err(e))?;
        Ok(BranchWriter {
            store: self,
            run,
            run_id: run_id.to_string(),
            branch,
            head: head as u64,
            last: last as u64,
            gates: None,
            written: Vec::new(),
            armed,
            wanted,
        })
    }

    /// Start a new branch of `run_id` at `snapshot`: the run continues from
    /// that older state and the branch it came from stays as it is.
    /// Returns the new branch's number. Hold the run's lock.
    pub fn fork(&mut self, run_id: &str, snapshot: &str) -> Result<u32, StoreError> {
        let found: Option<(String, i64, String, String)> = self
            .db
            .query_row(
                "SELECT r.id, e.seq, e.kind, e.body FROM events e JOIN runs r ON r.num = e.run WHERE e.snapshot = ?1",
                [snapshot],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        // A fork where the run slept sleeps until the same time.
        let due = match &found {
            Some((_, _, kind, body)) if kind == "timer_started" || kind == "retry_scheduled" => {
                serde_json::from_str::<Event>(body)
                    .ok()
                    .and_then(|e| e.due_at_ms())
            }
            _ => None,
        };
        let seq = match found {
            Some((owner, seq, ..)) if owner == run_id => seq as u64,
            Some((owner, ..)) => {
                return Err(StoreError::Usage(format!(
                    "snapshot {snapshot} belongs to run {owner}, not to run {run_id}"
                )));
            }
            None => {
                return Err(StoreError::Usage(format!(
                    "run {run_id} has no snapshot `{snapshot}`; `wfhost show {run_id}` lists its snapshots"
                )));
            }
        };
        let run = self.run_num(run_id)?;
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let (next, branch): (i64, u32) = tx
            .query_row(
                "SELECT max(seq) + 1, max(branch) + 1 FROM events WHERE run = ?1",
                [run],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(err)?;
        let forked = Event::Forked {
            from_snapshot: snapshot.to_string(),
        };
        insert_event(
            &tx,
            run,
            run_id,
            next as u64,
            branch,
            Some(seq),
            time::now_ms(),
            &forked,
        )
        .map_err(err)?;
        if let Some(due_at) = due {
            tx.execute(
                "INSERT INTO timers (run, branch, due_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (run, branch) DO UPDATE SET due_at = excluded.due_at",
                (run, branch, due_at),
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        self.ring_servers();
        Ok(branch)
    }

    /// Whether the branch rests at a `sleep` block (has a row in `timers`).
    fn has_timer(&self, run: i64, branch: u32) -> Result<bool, StoreError> {
        self.db
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM timers WHERE run = ?1 AND branch = ?2)")
            .and_then(|mut s| s.query_row((run, branch), |r| r.get(0)))
            .map_err(|e| self.err(e))
    }
}

/// Appends a run's events to one branch: the engine's [`EventSink`] over
/// the store. Each `append` is one immediate transaction that first checks
/// the branch still ends where this writer left it.
pub struct BranchWriter<'s> {
    store: &'s mut Store,
    /// The run's number in the store (`runs.num`).
    run: i64,
    run_id: String,
    branch: u32,
    head: u64,
    /// The run's last seq on any branch: the next event is `last + 1`. Not
    /// read again per append: if another process wrote to the run meanwhile
    /// (it must not: the run lock), the insert collides with its event on
    /// the primary key and the append is refused.
    last: u64,
    /// The gates the run has opened, counted when the first new one is
    /// (most writers open none).
    gates: Option<usize>,
    written: Vec<StoredEvent>,
    /// The branch rests at a `sleep` block: it has a row in `timers`.
    armed: bool,
    /// The notification targets that want this run's events.
    wanted: crate::notify::Wanted,
}

impl BranchWriter<'_> {
    pub fn branch(&self) -> u32 {
        self.branch
    }

    /// The seq of the branch's newest event, as this writer left it.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The events written by the last `append`, as stored.
    pub fn last_written(&self) -> &[StoredEvent] {
        &self.written
    }

    /// Append and read the events back from the store, comparing them with
    /// what was meant to be written (seed 001's read-after-write
    /// verification, used for human decisions).
    pub fn append_verified(&mut self, events: &[Event]) -> Result<(), StoreError> {
        self.append_events(events, Extra::None)?;
        let first = self.written.first().map_or(self.head, |e| e.seq);
        let back = self
            .store
            .events_after(&self.run_id, first - 1)?
            .into_iter()
            .filter(|e| e.branch == self.branch)
            .map(|e| e.event)
            .take(events.len())
            .collect::<Vec<_>>();
        if back != events {
            return Err(StoreError::Inconsistent(format!(
                "run {}: the recorded events read back differently",
                self.run_id
            )));
        }
        Ok(())
    }

    /// Append `events` (an external block's completion) and record `ack`,
    /// the client's acknowledgement that advanced it, in the same commit.
    /// An ack already used is refused ([`StoreError::AckUsed`]) and nothing
    /// is written.
    pub fn append_acked(&mut self, events: &[Event], ack: &NewAck) -> Result<(), StoreError> {
        self.append_events(events, Extra::Ack(ack))
    }

    /// Append `events` in one immediate transaction, with what `extra`
    /// records in it too.
    #[tracing::instrument(name = "store.append", level = "debug", skip_all, fields(run_id = %self.run_id, branch = self.branch, events = events.len()))]
    fn append_events(&mut self, events: &[Event], extra: Extra<'_>) -> Result<(), StoreError> {
        // A process whose database lock of the run was lost (and taken by
        // another) writes nothing more.
        if crate::lock::lost(&self.run_id) {
            return Err(StoreError::LockLost {
                run_id: self.run_id.clone(),
            });
        }
        let path = self.store.path.clone();
        let err = |e| StoreError::from_db(&path, e);
        let tx = self.store.db.begin().map_err(err)?;
        let conn: &Db = &tx;
        let at = time::now_ms();
        let mut written = Vec::with_capacity(events.len());
        let (mut seq, mut parent) = (self.last, self.head);
        for event in events {
            seq += 1;
            let inserted = insert_event(
                conn,
                self.run,
                &self.run_id,
                seq,
                self.branch,
                Some(parent),
                at,
                event,
            );
            let snapshot = match inserted {
                Ok(snapshot) => snapshot,
                Err(e) => {
                    return Err(if e.is_unique_violation() {
                        StoreError::Inconsistent(format!(
                            "branch {} of run {} was extended by another process",
                            self.branch, self.run_id
                        ))
                    } else {
                        err(e)
                    });
                }
            };
            written.push(StoredEvent {
                seq,
                branch: self.branch,
                parent: Some(parent),
                at,
                snapshot,
                event: event.clone(),
            });
            parent = seq;
        }
        if let Extra::Ack(ack) = extra {
            let first = self.last + 1;
            if let Err(e) = crate::acks::insert(conn, self.run, self.branch, first, ack, at) {
                return Err(if e.is_unique_violation() {
                    StoreError::AckUsed {
                        run_id: self.run_id.clone(),
                        snapshot: ack.snapshot,
                        attempt: ack.attempt,
                    }
                } else {
                    err(e)
                });
            }
        }
        let was_armed = self.armed;
        let mut armed = self.armed;
        keep_timer(conn, (self.run, self.branch), &mut armed, events).map_err(err)?;
        if self.wanted.any() {
            let at_seq = (self.run_id.as_str(), self.branch, self.last + 1);
            crate::notify::queue(conn, &self.wanted, at_seq, events, (was_armed, at))
                .map_err(err)?;
        }
        if let Extra::Job(job) = extra {
            let new = NewJob {
                run_id: &self.run_id,
                branch: self.branch,
                step: job.step,
                lane: "",
                node: &job.node,
                block: &job.block,
                requires: &job.requires,
                request: &job.request,
            };
            crate::jobs::queue(conn, self.run, &new, at).map_err(err)?;
        }
        tx.commit().map_err(err)?;
        self.armed = armed;
        self.head = parent;
        self.last = seq;
        self.written = written;
        self.store.ring_servers();
        Ok(())
    }
}

/// Keep a branch's row of `timers` in step with `events`, in their
/// transaction: written when they end with a `timer_started`, removed when
/// they follow one (`armed`). Costs nothing for the appends of a branch
/// that never sleeps.
fn keep_timer(
    conn: &crate::db::Db,
    (run, branch): (i64, u32),
    armed: &mut bool,
    events: &[Event],
) -> crate::db::DbResult<()> {
    match events.last().map(|e| (e, e.due_at_ms())) {
        Some((_, Some(due_at_ms))) => {
            conn.prepare_cached(
                "INSERT INTO timers (run, branch, due_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (run, branch) DO UPDATE SET due_at = excluded.due_at",
            )?
            .execute((run, branch, due_at_ms))?;
            *armed = true;
        }
        Some(_) if *armed => {
            conn.prepare_cached("DELETE FROM timers WHERE run = ?1 AND branch = ?2")?
                .execute((run, branch))?;
            *armed = false;
        }
        _ => {}
    }
    Ok(())
}

/// What an append records besides its events.
#[derive(Clone, Copy)]
enum Extra<'a> {
    None,
    /// The block whose start the events end with, queued as a job.
    Job(&'a QueuedJob),
    /// The MCP client's ack that advanced the run.
    Ack(&'a NewAck),
}

impl EventSink for BranchWriter<'_> {
    fn append(&mut self, events: &[Event]) -> Result<(), SinkError> {
        self.append_events(events, Extra::None)
            .map_err(|e| SinkError(e.to_string()))
    }

    fn append_with_job(&mut self, events: &[Event], job: &QueuedJob) -> Result<(), SinkError> {
        self.append_events(events, Extra::Job(job))
            .map_err(|e| SinkError(e.to_string()))
    }

    fn new_gate_id(&mut self) -> Result<String, SinkError> {
        let opened = match self.gates {
            Some(n) => n,
            None => self
                .store
                .gates_opened(&self.run_id)
                .map_err(|e| SinkError(e.to_string()))?,
        };
        self.gates = Some(opened + 1);
        Ok(gate_id(opened + 1))
    }
}

fn clamp(seq: u64) -> i64 {
    seq.min(i64::MAX as u64) as i64
}
