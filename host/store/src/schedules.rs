//! Schedules and their ticks: what `wfhost schedule` writes and a server
//! reads to start runs when due.
//!
//! A tick is handled once: the look that handles it inserts its row (keyed
//! by schedule and tick) and advances the schedule's `next_tick` in one
//! transaction, on the condition that `next_tick` is still what it read —
//! so two looks (two servers, or one restarted) never both handle it. A
//! tick that starts a run records the run's id before the run exists
//! (`starting`); whoever finds it so starts that run, under that id, and
//! a start made twice finds the run there: a tick never starts two runs,
//! even across a crash.

use crate::db::{OptionalExtension, params};
use serde::Serialize;

use crate::{Store, StoreError};

/// A tick's state.
pub mod tick_state {
    /// Its run is being started (its id chosen, recorded first).
    pub const STARTING: &str = "starting";
    /// Its run was started.
    pub const STARTED: &str = "started";
    /// It waits for the schedule's run going to end (overlap `queue`).
    pub const QUEUED: &str = "queued";
    /// It started nothing (overlap `skip`, or a schedule paused).
    pub const SKIPPED: &str = "skipped";
    /// Its run could not be started (`reason` says why).
    pub const FAILED: &str = "failed";
}

/// A schedule as stored.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Schedule {
    pub name: String,
    /// The cron expression, five fields or six (seconds first).
    pub cron: String,
    /// The IANA time zone the expression is read in.
    pub tz: String,
    /// The workflow file (absolute).
    pub workflow: String,
    /// The workspace of its runs (absolute); `{run}` in it stands for the
    /// run's id (a workspace per run).
    pub workspace: String,
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// `skip`, `queue` or `allow`.
    pub overlap: String,
    /// How many runs a look starts for ticks missed while no server looked.
    pub catch_up: u32,
    pub paused: bool,
    /// Unix ms.
    pub created_at_ms: i64,
    /// The next tick to handle, unix ms; null when the expression has no
    /// tick left.
    pub next_tick_ms: Option<i64>,
    /// Ticks passed over so far (downtime beyond the catch-up).
    pub missed: u64,
}

/// One handled tick.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Tick {
    pub schedule: String,
    /// The tick's time, unix ms (for a manual trigger: when it was asked).
    pub tick_ms: i64,
    /// `starting`, `started`, `queued`, `skipped` or `failed`.
    pub state: String,
    /// The run it started or starts; null for a skipped tick.
    pub run_id: Option<String>,
    /// Why it was skipped or failed.
    pub reason: Option<String>,
    /// Asked for by `schedule trigger`, not by the clock.
    pub manual: bool,
    /// When it was handled, unix ms.
    pub at_ms: i64,
}

const SCHEDULE_COLUMNS: &str = "name, cron, tz, workflow, workspace, inputs, overlap, catch_up, paused, created_at, next_tick, missed";
const TICK_COLUMNS: &str = "schedule, tick, state, run_id, reason, manual, at";

fn schedule_row(r: &crate::db::Row<'_>) -> crate::db::DbResult<Schedule> {
    let inputs: String = r.get(5)?;
    Ok(Schedule {
        name: r.get(0)?,
        cron: r.get(1)?,
        tz: r.get(2)?,
        workflow: r.get(3)?,
        workspace: r.get(4)?,
        inputs: serde_json::from_str(&inputs).unwrap_or_default(),
        overlap: r.get(6)?,
        catch_up: r.get(7)?,
        paused: r.get(8)?,
        created_at_ms: r.get(9)?,
        next_tick_ms: r.get(10)?,
        missed: r.get::<_, i64>(11)?.max(0) as u64,
    })
}

fn tick_row(r: &crate::db::Row<'_>) -> crate::db::DbResult<Tick> {
    Ok(Tick {
        schedule: r.get(0)?,
        tick_ms: r.get(1)?,
        state: r.get(2)?,
        run_id: r.get(3)?,
        reason: r.get(4)?,
        manual: r.get(5)?,
        at_ms: r.get(6)?,
    })
}

impl Store {
    /// Add `schedule`; refused when one of its name exists.
    pub fn add_schedule(&mut self, schedule: &Schedule) -> Result<(), StoreError> {
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let exists: Option<String> = tx
            .query_row(
                "SELECT name FROM schedules WHERE name = ?1",
                [&schedule.name],
                |r| r.get(0),
            )
            .optional()
            .map_err(err)?;
        if exists.is_some() {
            return Err(StoreError::Usage(format!(
                "a schedule named `{}` exists; `wfhost schedule rm {}` removes it",
                schedule.name, schedule.name
            )));
        }
        tx.execute(
            &format!("INSERT INTO schedules ({SCHEDULE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"),
            params![
                schedule.name,
                schedule.cron,
                schedule.tz,
                schedule.workflow,
                schedule.workspace,
                serde_json::Value::Object(schedule.inputs.clone()).to_string(),
                schedule.overlap,
                schedule.catch_up,
                schedule.paused,
                schedule.created_at_ms,
                schedule.next_tick_ms,
                schedule.missed as i64,
            ],
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
        self.ring_servers();
        Ok(())
    }

    /// Every schedule, by name.
    pub fn schedules(&self) -> Result<Vec<Schedule>, StoreError> {
        self.query_schedules(
            &format!("SELECT {SCHEDULE_COLUMNS} FROM schedules ORDER BY name"),
            [],
        )
    }

    pub fn schedule(&self, name: &str) -> Result<Option<Schedule>, StoreError> {
        Ok(self
            .query_schedules(
                &format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE name = ?1"),
                [name],
            )?
            .pop())
    }

    /// The schedules not paused whose next tick is at `now_ms` or before.
    pub fn due_schedules(&self, now_ms: i64) -> Result<Vec<Schedule>, StoreError> {
        self.query_schedules(
            &format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE paused = 0 AND next_tick <= ?1 ORDER BY next_tick"),
            [now_ms],
        )
    }

    fn query_schedules<P: crate::db::Params>(
        &self,
        sql: &str,
        params: P,
    ) -> Result<Vec<Schedule>, StoreError> {
        let mut statement = self.db.prepare_cached(sql).map_err(|e| self.err(e))?;
        let rows = statement
            .query_map(params, schedule_row)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Pause or resume schedule `name`; a resumed one waits for its next
    /// tick from now (`next_tick_ms`): the ticks of its pause are not
    /// caught up. False when there is no such schedule.
    pub fn set_schedule_paused(
        &mut self,
        name: &str,
        paused: bool,
        next_tick_ms: Option<i64>,
    ) -> Result<bool, StoreError> {
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let changed = match paused {
            true => tx.execute("UPDATE schedules SET paused = 1 WHERE name = ?1", [name]),
            false => tx.execute(
                "UPDATE schedules SET paused = 0, next_tick = ?2 WHERE name = ?1",
                params![name, next_tick_ms],
            ),
        }
        .map_err(err)?;
        tx.commit().map_err(err)?;
        self.ring_servers();
        Ok(changed > 0)
    }

    /// Pause or resume schedule `name` at `now_ms` (a resumed one from its
    /// first tick after now): the schedule as it is then, None when there
    /// is no such schedule.
    pub fn pause_schedule(
        &mut self,
        name: &str,
        paused: bool,
        now_ms: i64,
    ) -> Result<Option<Schedule>, StoreError> {
        let Some(schedule) = self.schedule(name)? else {
            return Ok(None);
        };
        let next = wfhost_core::schedule::Cron::parse(&schedule.cron, &schedule.tz)
            .ok()
            .and_then(|c| c.next_after(now_ms));
        self.set_schedule_paused(name, paused, next)?;
        self.schedule(name)
    }

    /// Record a run of schedule `name` asked for by hand at `now_ms`: a
    /// manual tick, its run's id chosen now (a running server starts it).
    pub fn trigger_schedule(&mut self, name: &str, now_ms: i64) -> Result<Tick, StoreError> {
        let tick = Tick {
            schedule: name.to_string(),
            tick_ms: now_ms,
            state: tick_state::STARTING.into(),
            run_id: Some(crate::new_run_id(now_ms).to_string()),
            reason: None,
            manual: true,
            at_ms: now_ms,
        };
        self.add_manual_tick(&tick)?;
        Ok(tick)
    }

    /// Remove schedule `name` and its ticks (its runs stay). False when
    /// there is no such schedule.
    pub fn remove_schedule(&mut self, name: &str) -> Result<bool, StoreError> {
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        tx.execute("DELETE FROM schedule_ticks WHERE schedule = ?1", [name])
            .map_err(err)?;
        let removed = tx
            .execute("DELETE FROM schedules WHERE name = ?1", [name])
            .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(removed > 0)
    }

    /// Handle the due ticks of schedule `name`: record `ticks` and move its
    /// next tick from `expected` (what the caller read) to `next_tick_ms`,
    /// adding `missed`. False, with nothing written, when the schedule is
    /// gone, paused, or its next tick is no longer `expected` (another
    /// look handled these ticks).
    pub fn handle_ticks(
        &mut self,
        name: &str,
        expected: i64,
        ticks: &[Tick],
        (next_tick_ms, missed): (Option<i64>, u64),
    ) -> Result<bool, StoreError> {
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let moved = tx
            .execute(
                "UPDATE schedules SET next_tick = ?3, missed = missed + ?4 WHERE name = ?1 AND next_tick = ?2 AND paused = 0",
                params![name, expected, next_tick_ms, missed as i64],
            )
            .map_err(err)?;
        if moved == 0 {
            return Ok(false);
        }
        for tick in ticks {
            insert_tick(&tx, tick).map_err(err)?;
        }
        tx.commit().map_err(err)?;
        self.ring_servers();
        Ok(true)
    }

    /// Record a tick asked for by hand (`schedule trigger`): unique for
    /// its schedule and time.
    pub fn add_manual_tick(&mut self, tick: &Tick) -> Result<(), StoreError> {
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let exists: Option<String> = tx
            .query_row(
                "SELECT name FROM schedules WHERE name = ?1",
                [&tick.schedule],
                |r| r.get(0),
            )
            .optional()
            .map_err(err)?;
        if exists.is_none() {
            return Err(StoreError::Usage(format!(
                "no schedule named `{}`; `wfhost schedule ls` lists them",
                tick.schedule
            )));
        }
        insert_tick(&tx, tick).map_err(err)?;
        tx.commit().map_err(err)?;
        self.ring_servers();
        Ok(())
    }

    /// Move a tick from state `from` to `to` (with why); false when it is
    /// not in `from` any more.
    pub fn set_tick_state(
        &mut self,
        (schedule, tick_ms, manual): (&str, i64, bool),
        from: &str,
        to: &str,
        reason: Option<&str>,
    ) -> Result<bool, StoreError> {
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let changed = tx
            .execute(
                "UPDATE schedule_ticks SET state = ?5, reason = coalesce(?6, reason) \
                 WHERE schedule = ?1 AND tick = ?2 AND manual = ?3 AND state = ?4",
                params![schedule, tick_ms, manual, from, to, reason],
            )
            .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(changed > 0)
    }

    /// The ticks of `schedule`, newest first, at most `limit`.
    pub fn ticks(&self, schedule: &str, limit: usize) -> Result<Vec<Tick>, StoreError> {
        self.query_ticks(
            &format!("SELECT {TICK_COLUMNS} FROM schedule_ticks WHERE schedule = ?1 ORDER BY at DESC, tick DESC LIMIT ?2"),
            params![schedule, limit as i64],
        )
    }

    /// The ticks still to act on: runs to start, runs waiting their turn;
    /// oldest first.
    pub fn open_ticks(&self) -> Result<Vec<Tick>, StoreError> {
        self.query_ticks(
            &format!("SELECT {TICK_COLUMNS} FROM schedule_ticks WHERE state IN ('starting', 'queued') ORDER BY at, tick"),
            [],
        )
    }

    /// The tick that started run `run_id`, if a schedule did.
    pub fn tick_of_run(&self, run_id: &str) -> Result<Option<Tick>, StoreError> {
        Ok(self
            .query_ticks(
                &format!("SELECT {TICK_COLUMNS} FROM schedule_ticks WHERE run_id = ?1"),
                [run_id],
            )?
            .pop())
    }

    fn query_ticks<P: crate::db::Params>(
        &self,
        sql: &str,
        params: P,
    ) -> Result<Vec<Tick>, StoreError> {
        let mut statement = self.db.prepare_cached(sql).map_err(|e| self.err(e))?;
        let rows = statement
            .query_map(params, tick_row)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }
}

fn insert_tick(tx: &crate::db::Db, tick: &Tick) -> crate::db::DbResult<usize> {
    tx.execute(
        &format!("INSERT INTO schedule_ticks ({TICK_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
        params![
            tick.schedule,
            tick.tick_ms,
            tick.state,
            tick.run_id,
            tick.reason,
            tick.manual,
            tick.at_ms
        ],
    )
}

/// A schedule as asked for (`wfhost schedule add`, `POST /v1/schedules`).
#[derive(Debug, Clone, Default)]
pub struct Spec {
    pub name: String,
    pub cron: String,
    /// Absent: UTC.
    pub tz: Option<String>,
    /// The workflow file (absolute).
    pub workflow: std::path::PathBuf,
    /// The workspace of its runs (absolute; `{run}` stands for the run id).
    pub workspace: std::path::PathBuf,
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// `skip` (absent), `queue` or `allow`.
    pub overlap: Option<String>,
    /// Absent: 1.
    pub catch_up: Option<u32>,
}

impl Spec {
    /// The schedule to store, its first tick the first after `now_ms`; or
    /// what is wrong with it (see [`wfhost_core::schedule::check`]).
    pub fn define(&self, now_ms: i64) -> Result<Schedule, wfhost_core::schedule::Problem> {
        use wfhost_core::schedule::{Overlap, Problem, check};
        let problem = |field, message: String| Problem {
            field,
            pointer: None,
            message,
        };
        let tz = self.tz.clone().unwrap_or_else(|| "UTC".to_string());
        let overlap = Overlap::parse(self.overlap.as_deref().unwrap_or("skip"))
            .map_err(|m| problem("overlap", m))?;
        for (field, path) in [("workflow", &self.workflow), ("workspace", &self.workspace)] {
            if !path.is_absolute() {
                return Err(problem(
                    field,
                    format!("`{}` is not an absolute path", path.display()),
                ));
            }
        }
        let workspace = self
            .workspace
            .to_str()
            .ok_or_else(|| problem("workspace", "the path is not UTF-8".into()))?;
        let workflow = self
            .workflow
            .to_str()
            .ok_or_else(|| problem("workflow", "the path is not UTF-8".into()))?;
        let catch_up = self.catch_up.unwrap_or(1);
        let cron = check(
            &self.name,
            (&self.cron, &tz),
            &self.workflow,
            &self.inputs,
            catch_up,
        )?;
        Ok(Schedule {
            name: self.name.clone(),
            cron: cron.expression().to_string(),
            tz,
            workflow: workflow.to_string(),
            workspace: workspace.to_string(),
            inputs: self.inputs.clone(),
            overlap: overlap.as_str().to_string(),
            catch_up,
            paused: false,
            created_at_ms: now_ms,
            next_tick_ms: cron.next_after(now_ms),
            missed: 0,
        })
    }
}
