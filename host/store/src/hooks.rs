//! Webhook triggers: named endpoints of `wfhost serve` that start a run
//! from a signed delivery, and the deliveries each took (so a replayed
//! delivery id starts nothing).

use crate::db::{OptionalExtension, params};
use serde::Serialize;

use crate::{Store, StoreError};

/// A hook as stored.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Hook {
    pub name: String,
    /// `start` (a delivery starts a run of `workflow`) or `answer` (a
    /// delivery answers a gate: `run_id`, `gate` and `answer` from its
    /// payload, by `mapping` or at the pointers of the same names).
    pub action: String,
    /// The workflow file its runs run (absolute).
    pub workflow: String,
    /// Their workspace (absolute); `{run}` stands for the run's id.
    pub workspace: String,
    /// `github`, `sha256` or `unsigned`.
    pub format: String,
    /// The name of the home secret that signs deliveries (null for an
    /// unsigned hook).
    pub secret: Option<String>,
    /// Input name → JSON pointer into the delivery's payload.
    pub mapping: serde_json::Map<String, serde_json::Value>,
    /// Inputs every run gets (a mapped value wins).
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// How far a delivery's signed timestamp may be from now (`sha256`).
    pub window_s: i64,
    /// Unix ms.
    pub created_at_ms: i64,
}

/// One delivery a hook took.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Delivery {
    pub hook: String,
    /// The sender's delivery id.
    pub delivery: String,
    /// The run it started.
    pub run_id: Option<String>,
    /// `starting` or `started`.
    pub state: String,
    /// Unix ms.
    pub at_ms: i64,
}

const HOOK_COLUMNS: &str =
    "name, workflow, workspace, format, secret, mapping, inputs, window_s, created_at, action";

fn hook_row(r: &crate::db::Row<'_>) -> crate::db::DbResult<Hook> {
    let object = |i: usize| -> crate::db::DbResult<serde_json::Map<String, serde_json::Value>> {
        let text: String = r.get(i)?;
        Ok(serde_json::from_str(&text).unwrap_or_default())
    };
    Ok(Hook {
        name: r.get(0)?,
        workflow: r.get(1)?,
        workspace: r.get(2)?,
        format: r.get(3)?,
        secret: r.get(4)?,
        mapping: object(5)?,
        inputs: object(6)?,
        window_s: r.get(7)?,
        created_at_ms: r.get(8)?,
        action: r.get(9)?,
    })
}

impl Store {
    /// Add `hook`; refused when one of its name exists.
    pub fn add_hook(&mut self, hook: &Hook) -> Result<(), StoreError> {
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let exists: Option<String> = tx
            .query_row(
                "SELECT name FROM hooks WHERE name = ?1",
                [&hook.name],
                |r| r.get(0),
            )
            .optional()
            .map_err(err)?;
        if exists.is_some() {
            return Err(StoreError::Usage(format!(
                "a hook named `{}` exists; `wfhost hook rm {}` removes it",
                hook.name, hook.name
            )));
        }
        tx.execute(
            &format!(
                "INSERT INTO hooks ({HOOK_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
            ),
            params![
                hook.name,
                hook.workflow,
                hook.workspace,
                hook.format,
                hook.secret,
                serde_json::Value::Object(hook.mapping.clone()).to_string(),
                serde_json::Value::Object(hook.inputs.clone()).to_string(),
                hook.window_s,
                hook.created_at_ms,
                hook.action,
            ],
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(())
    }

    /// Every hook, by name.
    pub fn hooks(&self) -> Result<Vec<Hook>, StoreError> {
        let mut statement = self
            .db
            .prepare_cached(&format!("SELECT {HOOK_COLUMNS} FROM hooks ORDER BY name"))
            .map_err(|e| self.err(e))?;
        let rows = statement.query_map([], hook_row).map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    pub fn hook(&self, name: &str) -> Result<Option<Hook>, StoreError> {
        self.db
            .prepare_cached(&format!("SELECT {HOOK_COLUMNS} FROM hooks WHERE name = ?1"))
            .and_then(|mut s| s.query_row([name], hook_row).optional())
            .map_err(|e| self.err(e))
    }

    /// Remove hook `name` and the deliveries it took. False when there is
    /// no such hook.
    pub fn remove_hook(&mut self, name: &str) -> Result<bool, StoreError> {
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        tx.execute("DELETE FROM hook_deliveries WHERE hook = ?1", [name])
            .map_err(err)?;
        let removed = tx
            .execute("DELETE FROM hooks WHERE name = ?1", [name])
            .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(removed > 0)
    }

    /// Claim delivery `delivery` of hook `hook` for run `run_id`: None
    /// when it is new (recorded `starting`), else the delivery recorded
    /// before (a replay: nothing to start).
    pub fn claim_delivery(
        &mut self,
        hook: &str,
        delivery: &str,
        run_id: &str,
        now_ms: i64,
    ) -> Result<Option<Delivery>, StoreError> {
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let before = tx
            .query_row(
                "SELECT hook, delivery, run_id, state, at FROM hook_deliveries WHERE hook = ?1 AND delivery = ?2",
                [hook, delivery],
                delivery_row,
            )
            .optional()
            .map_err(err)?;
        if before.is_some() {
            return Ok(before);
        }
        tx.execute(
            "INSERT INTO hook_deliveries (hook, delivery, run_id, state, at) VALUES (?1, ?2, ?3, 'starting', ?4)",
            params![hook, delivery, run_id, now_ms],
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(None)
    }

    /// The delivery's run started.
    pub fn delivery_started(&mut self, hook: &str, delivery: &str) -> Result<(), StoreError> {
        self.db
            .execute(
                "UPDATE hook_deliveries SET state = 'started' WHERE hook = ?1 AND delivery = ?2",
                [hook, delivery],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Forget a delivery whose run could not start, so that the sender's
    /// redelivery can.
    pub fn release_delivery(&mut self, hook: &str, delivery: &str) -> Result<(), StoreError> {
        self.db
            .execute(
                "DELETE FROM hook_deliveries WHERE hook = ?1 AND delivery = ?2 AND state = 'starting'",
                [hook, delivery],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// The deliveries of `hook`, newest first, at most `limit`.
    pub fn deliveries(&self, hook: &str, limit: usize) -> Result<Vec<Delivery>, StoreError> {
        let mut statement = self
            .db
            .prepare_cached(
                "SELECT hook, delivery, run_id, state, at FROM hook_deliveries WHERE hook = ?1 ORDER BY at DESC LIMIT ?2",
            )
            .map_err(|e| self.err(e))?;
        let rows = statement
            .query_map(params![hook, limit as i64], delivery_row)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }
}

fn delivery_row(r: &crate::db::Row<'_>) -> crate::db::DbResult<Delivery> {
    Ok(Delivery {
        hook: r.get(0)?,
        delivery: r.get(1)?,
        run_id: r.get(2)?,
        state: r.get(3)?,
        at_ms: r.get(4)?,
    })
}

/// What a hook that answers gates takes from a delivery.
pub const ANSWER_FIELDS: &[&str] = &["run_id", "gate", "answer"];

/// A hook as asked for (`wfhost hook add`).
#[derive(Debug, Clone, Default)]
pub struct HookSpec {
    pub name: String,
    pub workflow: std::path::PathBuf,
    pub workspace: std::path::PathBuf,
    /// `github` (absent), `sha256` or `unsigned`.
    pub format: Option<String>,
    pub secret: Option<String>,
    pub mapping: serde_json::Map<String, serde_json::Value>,
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// Absent: 300 s.
    pub window_s: Option<i64>,
    /// A delivery answers a gate instead of starting a run.
    pub answers_gates: bool,
}

impl HookSpec {
    /// The hook to store, or the field that is wrong and why: its name, a
    /// format with no secret (or an unsigned one with one), a mapping
    /// value that is no pointer, paths, a workflow that does not read.
    pub fn define(&self, now_ms: i64) -> Result<Hook, (&'static str, String)> {
        wfhost_core::schedule::check_name(&self.name)
            .map_err(|m| ("name", m.replace("schedule name", "hook name")))?;
        let format = self.format.clone().unwrap_or_else(|| "github".into());
        if !wfhost_core::webhook::FORMATS.contains(&format.as_str()) {
            return Err((
                "format",
                format!("`{format}` is not a hook format: github, sha256 or unsigned"),
            ));
        }
        match (&self.secret, format.as_str()) {
            (Some(_), "unsigned") => {
                return Err((
                    "secret",
                    "an unsigned hook checks no signature: give it no secret".into(),
                ));
            }
            (None, f) if f != "unsigned" => {
                return Err((
                    "secret",
                    format!(
                        "a `{f}` hook needs --secret NAME, a secret of the home (`wfhost secret set NAME`); a hook without one must be added with --format unsigned"
                    ),
                ));
            }
            (Some(name), _) => {
                wfhost_core::policy::secrets::check_name(name).map_err(|m| ("secret", m))?
            }
            _ => {}
        }
        let window_s = self.window_s.unwrap_or(300);
        if !(1..=86_400).contains(&window_s) {
            return Err(("window", "the timestamp window is 1 s to 1 day".into()));
        }
        wfhost_core::webhook::check_mapping(&self.mapping)
            .map_err(|(input, why)| ("map", format!("{input}: {why}")))?;
        if self.answers_gates {
            if let Some(bad) = self
                .mapping
                .keys()
                .find(|k| !ANSWER_FIELDS.contains(&k.as_str()))
            {
                return Err((
                    "map",
                    format!("`{bad}`: a hook that answers gates maps only run_id, gate and answer"),
                ));
            }
            return Ok(Hook {
                name: self.name.clone(),
                action: "answer".into(),
                workflow: String::new(),
                workspace: String::new(),
                format,
                secret: self.secret.clone(),
                mapping: self.mapping.clone(),
                inputs: serde_json::Map::new(),
                window_s,
                created_at_ms: now_ms,
            });
        }
        let mut paths = Vec::new();
        for (field, path) in [("workflow", &self.workflow), ("workspace", &self.workspace)] {
            if !path.is_absolute() {
                return Err((
                    field,
                    format!("`{}` is not an absolute path", path.display()),
                ));
            }
            paths.push(
                path.to_str()
                    .ok_or((field, "the path is not UTF-8".to_string()))?
                    .to_string(),
            );
        }
        wfhost_core::manifest::read(&self.workflow)
            .and_then(|text| wfhost_core::formats::parse_any(&self.workflow, &text))
            .map_err(|e| ("workflow", e.to_string()))?;
        Ok(Hook {
            name: self.name.clone(),
            action: "start".into(),
            workflow: paths[0].clone(),
            workspace: paths[1].clone(),
            format,
            secret: self.secret.clone(),
            mapping: self.mapping.clone(),
            inputs: self.inputs.clone(),
            window_s,
            created_at_ms: now_ms,
        })
    }
}
