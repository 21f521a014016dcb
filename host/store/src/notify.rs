//! Notifications: outgoing webhooks when a run ends, a gate opens or a
//! timer fires, delivered from a durable outbox.
//!
//! A target (`wfhost notify add`) names a URL, the events it wants, and
//! optionally one workflow. The notifications of an append are written in
//! the append's own transaction (`queue`), so a run's end is never
//! recorded without its notification; a server delivers them, again and
//! again with a growing wait until one succeeds (at least once), each with
//! the same delivery id.

use crate::db::{OptionalExtension, params};
use serde::Serialize;
use serde_json::{Value, json};
use wfhost_core::run::event::{CommandRecord, Event, Outcome};

use crate::{Store, StoreError};

/// The events a target may want.
pub const EVENTS: &[&str] = &[
    "run.succeeded",
    "run.failed",
    "run.cancelled",
    "gate.opened",
    "timer.fired",
];

/// Attempts before a notification is given up.
pub const MAX_ATTEMPTS: u32 = 12;

/// A notification target as stored.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Target {
    pub name: String,
    pub url: String,
    /// The home secret that signs deliveries (`X-Wfhost-Signature`); null:
    /// unsigned.
    pub secret: Option<String>,
    /// `json` (the notification as is) or `slack` (`{"text": ...}`).
    pub format: String,
    /// The events it wants.
    pub events: Vec<String>,
    /// Only runs of this workflow id; null: every run.
    pub workflow: Option<String>,
    pub created_at_ms: i64,
}

/// One notification of the outbox.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Notification {
    pub id: i64,
    pub target: String,
    /// The delivery id every attempt carries (`X-Wfhost-Delivery`).
    pub delivery: String,
    pub event: String,
    pub run_id: String,
    /// What is sent (in the `json` format).
    pub body: Value,
    /// `pending`, `delivered` or `failed` (given up).
    pub state: String,
    pub attempts: u32,
    /// When it is (next) due, unix ms.
    pub next_at_ms: i64,
    pub last_error: Option<String>,
    pub created_at_ms: i64,
}

const TARGET_COLUMNS: &str = "name, url, secret, format, events, workflow, created_at";
const COLUMNS: &str =
    "id, target, delivery, event, run_id, body, state, attempts, next_at, last_error, created_at";

fn target_row(r: &crate::db::Row<'_>) -> crate::db::DbResult<Target> {
    let events: String = r.get(4)?;
    Ok(Target {
        name: r.get(0)?,
        url: r.get(1)?,
        secret: r.get(2)?,
        format: r.get(3)?,
        events: serde_json::from_str(&events).unwrap_or_default(),
        workflow: r.get(5)?,
        created_at_ms: r.get(6)?,
    })
}

fn row(r: &crate::db::Row<'_>) -> crate::db::DbResult<Notification> {
    let body: String = r.get(5)?;
    Ok(Notification {
        id: r.get(0)?,
        target: r.get(1)?,
        delivery: r.get(2)?,
        event: r.get(3)?,
        run_id: r.get(4)?,
        body: serde_json::from_str(&body).unwrap_or(Value::Null),
        state: r.get(6)?,
        attempts: r.get(7)?,
        next_at_ms: r.get(8)?,
        last_error: r.get(9)?,
        created_at_ms: r.get(10)?,
    })
}

/// What an append's writer knows of the targets: read once when it opens.
#[derive(Debug, Clone, Default)]
pub(crate) struct Wanted {
    /// The targets that want this run's events, and which.
    targets: Vec<(String, Vec<String>)>,
    workflow_id: String,
}

impl Wanted {
    pub(crate) fn any(&self) -> bool {
        !self.targets.is_empty()
    }
}

impl Store {
    /// The targets that want notifications of runs of `workflow_id`.
    pub(crate) fn wanted(&self, workflow_id: &str) -> Result<Wanted, StoreError> {
        let targets = self
            .notify_targets()?
            .into_iter()
            .filter(|t| t.workflow.as_deref().is_none_or(|w| w == workflow_id))
            .map(|t| (t.name, t.events))
            .collect();
        Ok(Wanted {
            targets,
            workflow_id: workflow_id.to_string(),
        })
    }

    /// Add a target; refused when one of its name exists.
    pub fn add_notify_target(&mut self, target: &Target) -> Result<(), StoreError> {
        if self.notify_targets()?.iter().any(|t| t.name == target.name) {
            return Err(StoreError::Usage(format!(
                "a notification target named `{}` exists; `wfhost notify rm {}` removes it",
                target.name, target.name
            )));
        }
        self.db
            .execute(
                &format!("INSERT INTO notify_targets ({TARGET_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
                params![
                    target.name,
                    target.url,
                    target.secret,
                    target.format,
                    serde_json::to_string(&target.events).unwrap_or_default(),
                    target.workflow,
                    target.created_at_ms
                ],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    pub fn notify_targets(&self) -> Result<Vec<Target>, StoreError> {
        let mut statement = self
            .db
            .prepare_cached(&format!(
                "SELECT {TARGET_COLUMNS} FROM notify_targets ORDER BY name"
            ))
            .map_err(|e| self.err(e))?;
        let rows = statement
            .query_map([], target_row)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Remove target `name` (its pending notifications go too). False when
    /// there is none.
    pub fn remove_notify_target(&mut self, name: &str) -> Result<bool, StoreError> {
        self.db
            .execute(
                "DELETE FROM notifications WHERE target = ?1 AND state = 'pending'",
                [name],
            )
            .map_err(|e| self.err(e))?;
        self.db
            .execute("DELETE FROM notify_targets WHERE name = ?1", [name])
            .map(|n| n > 0)
            .map_err(|e| self.err(e))
    }

    /// The pending notifications due at `now_ms`, oldest first, each leased
    /// to the caller for `lease_ms` (another server does not send it
    /// meanwhile): their `next_at` moves that far.
    pub fn lease_notifications(
        &mut self,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
    ) -> Result<Vec<Notification>, StoreError> {
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let due: Vec<Notification> = {
            let mut statement = tx
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM notifications WHERE state = 'pending' AND next_at <= ?1 ORDER BY next_at, id LIMIT ?2"
                ))
                .map_err(err)?;
            let rows = statement
                .query_map(params![now_ms, limit as i64], row)
                .map_err(err)?;
            rows.collect::<Result<_, _>>().map_err(err)?
        };
        for n in &due {
            tx.execute(
                "UPDATE notifications SET next_at = ?2 WHERE id = ?1",
                params![n.id, now_ms + lease_ms],
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        Ok(due)
    }

    /// Record an attempt at notification `id`: delivered, or failed with
    /// `error` — due again at `retry_at_ms`, or given up after
    /// [`MAX_ATTEMPTS`].
    pub fn notification_attempted(
        &mut self,
        id: i64,
        outcome: Result<(), &str>,
        retry_at_ms: i64,
    ) -> Result<(), StoreError> {
        let sql = match outcome {
            Ok(()) => {
                "UPDATE notifications SET state = 'delivered', attempts = attempts + 1, last_error = NULL WHERE id = ?1 AND state = 'pending'"
            }
            Err(_) => {
                "UPDATE notifications SET attempts = attempts + 1, last_error = ?2, next_at = ?3, \
                       state = CASE WHEN attempts + 1 >= ?4 THEN 'failed' ELSE 'pending' END WHERE id = ?1 AND state = 'pending'"
            }
        };
        let error = outcome.err();
        let result = match error {
            None => self.db.execute(sql, [id]),
            Some(e) => self
                .db
                .execute(sql, params![id, e, retry_at_ms, MAX_ATTEMPTS]),
        };
        result.map(drop).map_err(|e| self.err(e))
    }

    /// The notifications of run `run_id`, oldest first.
    pub fn notifications_of(&self, run_id: &str) -> Result<Vec<Notification>, StoreError> {
        let mut statement = self
            .db
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM notifications WHERE run_id = ?1 ORDER BY id"
            ))
            .map_err(|e| self.err(e))?;
        let rows = statement
            .query_map([run_id], row)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    pub fn notify_target(&self, name: &str) -> Result<Option<Target>, StoreError> {
        self.db
            .prepare_cached(&format!(
                "SELECT {TARGET_COLUMNS} FROM notify_targets WHERE name = ?1"
            ))
            .and_then(|mut s| s.query_row([name], target_row).optional())
            .map_err(|e| self.err(e))
    }
}

/// The notable thing `event` is, if any, with its details; `armed`: the
/// branch rested on a timer before this append.
fn notable(event: &Event, armed: bool) -> Option<(&'static str, Value)> {
    match event {
        Event::RunFinished { outcome } => Some(match outcome {
            Outcome::Succeeded => ("run.succeeded", json!({})),
            Outcome::Failed { reason } => ("run.failed", json!({"reason": reason})),
            Outcome::Cancelled { by, reason } => (
                "run.cancelled",
                json!({"cancelled_by": by, "reason": reason}),
            ),
        }),
        Event::ActionTaken {
            command: CommandRecord::End,
            ..
        } => Some(("run.succeeded", json!({}))),
        Event::ActionTaken {
            command: CommandRecord::Fail { reason },
            ..
        } => Some(("run.failed", json!({"reason": reason}))),
        Event::ActionTaken {
            gate_id: Some(gate),
            command,
            ..
        } => {
            let prompt = match command {
                CommandRecord::Gate { prompt, .. } => prompt.clone(),
                _ => String::new(),
            };
            Some(("gate.opened", json!({"gate": gate, "prompt": prompt})))
        }
        Event::FanInWaiting {
            gate_id, prompt, ..
        } => Some(("gate.opened", json!({"gate": gate_id, "prompt": prompt}))),
        Event::BlockCompleted { node, block, .. } | Event::BlockStarted { node, block, .. }
            if armed =>
        {
            Some(("timer.fired", json!({"node": node, "block": block})))
        }
        _ => None,
    }
}

/// Queue, inside an append's transaction, the notifications `events`
/// (the append's, its first at seq `first`) give the targets in `wanted`.
pub(crate) fn queue(
    conn: &crate::db::Db,
    wanted: &Wanted,
    (run_id, branch, first): (&str, u32, u64),
    events: &[Event],
    (armed, at): (bool, i64),
) -> crate::db::DbResult<()> {
    let mut armed = armed;
    for (i, event) in events.iter().enumerate() {
        let woke = armed
            && matches!(
                event,
                Event::BlockCompleted { .. } | Event::BlockStarted { .. }
            );
        armed &= !woke;
        let Some((kind, details)) = notable(event, woke) else {
            continue;
        };
        let seq = first + i as u64;
        for (target, events) in &wanted.targets {
            if !events.iter().any(|e| e == kind) {
                continue;
            }
            let delivery = format!("{run_id}.{seq}.{target}");
            let mut body = json!({
                "event": kind,
                "delivery": delivery,
                "run_id": run_id,
                "branch": branch,
                "workflow_id": wanted.workflow_id,
                "at_ms": at,
                "show": format!("wfhost show {run_id}"),
                "dashboard_path": format!("/#/runs/{run_id}"),
            });
            if let (Some(b), Value::Object(extra)) = (body.as_object_mut(), details.clone()) {
                b.extend(extra);
            }
            if kind == "gate.opened"
                && let Some(gate) = details.get("gate").and_then(Value::as_str)
            {
                body["answer"] = json!(format!("wfhost gate {run_id} {gate} approved"));
            }
            conn.prepare_cached(
                "INSERT INTO notifications (target, delivery, event, run_id, body, state, attempts, next_at, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, ?6, ?6) ON CONFLICT DO NOTHING",
            )?
            .execute(params![target, delivery, kind, run_id, body.to_string(), at])?;
        }
    }
    Ok(())
}

/// A notification's text, for people (the `slack` format's `text`).
pub fn text_of(body: &Value) -> String {
    let s = |k: &str| body.get(k).and_then(Value::as_str).unwrap_or("");
    let run = s("run_id");
    let wf = s("workflow_id");
    match s("event") {
        "run.succeeded" => format!("Run {run} of {wf} succeeded."),
        "run.failed" => format!("Run {run} of {wf} failed: {}", s("reason")),
        "run.cancelled" => format!("Run {run} of {wf} was cancelled by {}.", s("cancelled_by")),
        "gate.opened" => format!(
            "Run {run} of {wf} waits at gate {}: {}\nAnswer with `{}`{}",
            s("gate"),
            s("prompt"),
            s("answer"),
            body.get("dashboard_url")
                .and_then(Value::as_str)
                .map(|u| format!(" or at {u}"))
                .unwrap_or_default()
        ),
        "timer.fired" => format!(
            "Run {run} of {wf}: the timer of {}.{} fired.",
            s("node"),
            s("block")
        ),
        other => format!("Run {run} of {wf}: {other}"),
    }
}
