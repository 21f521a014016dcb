//! Sessions: the runs of one workstream, grouped. A session is named by
//! the MCP client (its session id) or, when the client names none, by the
//! git branch of the run's workspace. A session is exported and imported
//! as one file holding each of its runs' bundles.

use crate::db::OptionalExtension;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::bundle::{self, Bundle};
use crate::{RunRecord, Store, StoreError};

/// The `format` field of every session bundle.
pub const SESSION_BUNDLE_FORMAT: &str = "wfhost-session-bundle";
/// The session bundle version this wfhost writes and reads.
pub const SESSION_BUNDLE_VERSION: u32 = 1;
/// The longest session id.
pub const MAX_SESSION_ID: usize = 256;

/// Where a session's name comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SessionSource {
    /// The client named it.
    Client,
    /// The workspace's git branch named it.
    Git,
}

impl SessionSource {
    fn as_str(self) -> &'static str {
        match self {
            SessionSource::Client => "client",
            SessionSource::Git => "git",
        }
    }
}

/// The session a run belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionTag {
    pub id: String,
    pub source: SessionSource,
    /// The git branch of the run's workspace when the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_branch: Option<String>,
}

impl SessionTag {
    /// A session named by the client; refuses ids no person could read
    /// back (empty, too long, control characters).
    pub fn client(id: &str, git_branch: Option<String>) -> Result<SessionTag, String> {
        check_id(id)?;
        Ok(SessionTag {
            id: id.to_string(),
            source: SessionSource::Client,
            git_branch,
        })
    }

    /// The session of a git branch in a workspace: `git:<branch>@<workspace>`
    /// (two repositories' `main` are two workstreams).
    pub fn git(branch: &str, workspace: &str) -> SessionTag {
        SessionTag {
            id: format!("git:{branch}@{workspace}"),
            source: SessionSource::Git,
            git_branch: Some(branch.to_string()),
        }
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        check_id(&self.id)?;
        if let Some(b) = &self.git_branch {
            check_id(b).map_err(|e| format!("git branch: {e}"))?;
        }
        Ok(())
    }
}

fn check_id(id: &str) -> Result<(), String> {
    if id.trim().is_empty() {
        return Err("a session id must not be empty".into());
    }
    if id.chars().count() > MAX_SESSION_ID {
        return Err(format!(
            "a session id is at most {MAX_SESSION_ID} characters, this one has {}",
            id.chars().count()
        ));
    }
    if let Some(c) = id.chars().find(|c| c.is_control()) {
        return Err(format!(
            "a session id must not contain control characters (found U+{:04X})",
            u32::from(c)
        ));
    }
    Ok(())
}

/// A session as `wfhost session list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SessionSummary {
    pub id: String,
    pub source: SessionSource,
    pub git_branch: Option<String>,
    pub runs: usize,
    /// Unix ms: the first run's creation.
    pub created_at: i64,
    /// Unix ms: the last event of any of its runs.
    pub last_at: i64,
}

/// A session as one file: each run's bundle, checksummed together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionBundle {
    pub format: String,
    pub version: u32,
    pub session: SessionTag,
    pub runs: Vec<Bundle>,
    /// `sha256:<hex>` over everything above.
    pub checksum: String,
}

#[derive(Serialize)]
struct Checked<'a> {
    format: &'a str,
    version: u32,
    session: &'a SessionTag,
    runs: &'a [Bundle],
}

fn checksum(b: &SessionBundle) -> String {
    let bytes = serde_json::to_vec(&Checked {
        format: &b.format,
        version: b.version,
        session: &b.session,
        runs: &b.runs,
    })
    .expect("session bundles serialize");
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionImport {
    pub session: String,
    /// Runs added to the store.
    pub imported: Vec<String>,
    /// Runs the store already held, identical to the bundle's.
    pub already_present: Vec<String>,
}

impl SessionBundle {
    /// Parse and verify a session bundle; every failure says what is wrong
    /// and where in the file.
    pub fn parse(text: &[u8]) -> Result<SessionBundle, String> {
        let value: serde_json::Value = serde_json::from_slice(text)
            .map_err(|e| format!("not a wfhost session bundle: not JSON ({e})"))?;
        Self::from_value(value)
    }

    /// [`SessionBundle::parse`] of a JSON value already parsed.
    pub fn from_value(mut value: serde_json::Value) -> Result<SessionBundle, String> {
        if value.get("format").and_then(|f| f.as_str()) != Some(SESSION_BUNDLE_FORMAT) {
            return Err(format!(
                "not a wfhost session bundle: `format` is not \"{SESSION_BUNDLE_FORMAT}\""
            ));
        }
        match value.get("version").and_then(|v| v.as_u64()) {
            Some(v) if v == u64::from(SESSION_BUNDLE_VERSION) => {}
            Some(v) => {
                return Err(format!(
                    "session bundle version {v} is not supported: this wfhost reads version {SESSION_BUNDLE_VERSION}"
                ));
            }
            None => return Err("the session bundle has no `version`".into()),
        }
        // Each run is verified as a run bundle is, so a run's error names it.
        let runs = match value.get_mut("runs").map(serde_json::Value::take) {
            Some(serde_json::Value::Array(runs)) => runs,
            _ => return Err("the session bundle has no `runs` list".into()),
        };
        let mut parsed = Vec::with_capacity(runs.len());
        for (i, run) in runs.into_iter().enumerate() {
            let text = serde_json::to_vec(&run).map_err(|e| e.to_string())?;
            parsed.push(Bundle::parse(&text).map_err(|e| format!("/runs/{i}: {e}"))?);
        }
        value["runs"] = serde_json::Value::Array(Vec::new());
        let mut bundle: SessionBundle = serde_json::from_value(value)
            .map_err(|e| format!("the session bundle is malformed: {e}"))?;
        bundle.runs = parsed;
        bundle
            .session
            .check()
            .map_err(|e| format!("/session/id: {e}"))?;
        let expected = checksum(&bundle);
        if bundle.checksum != expected {
            return Err(format!(
                "checksum mismatch: the session bundle says {}, its content hashes to {expected}; the file is damaged or was edited",
                bundle.checksum
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, run) in bundle.runs.iter().enumerate() {
            if run.session.as_ref() != Some(&bundle.session) {
                return Err(format!(
                    "/runs/{i}: run {} does not belong to session `{}`",
                    run.run.id, bundle.session.id
                ));
            }
            if !seen.insert(run.run.id.as_str()) {
                return Err(format!("/runs/{i}: run {} appears twice", run.run.id));
            }
        }
        Ok(bundle)
    }
}

/// Record that run number `run` belongs to `session`.
pub(crate) fn insert(
    tx: &crate::db::Db,
    run: i64,
    session: &SessionTag,
) -> crate::db::DbResult<()> {
    tx.execute(
        "INSERT INTO run_sessions (run, session, source, git_branch) VALUES (?1, ?2, ?3, ?4)",
        (
            run,
            &session.id,
            session.source.as_str(),
            &session.git_branch,
        ),
    )?;
    Ok(())
}

fn source_of(text: &str) -> crate::db::DbResult<SessionSource> {
    match text {
        "client" => Ok(SessionSource::Client),
        "git" => Ok(SessionSource::Git),
        other => Err(crate::db::DbError::conversion(
            0,
            format!("unknown session source `{other}`"),
        )),
    }
}

impl Store {
    /// The session of run `run_id`, if it has one.
    pub fn session_of(&self, run_id: &str) -> Result<Option<SessionTag>, StoreError> {
        let mut stmt = self
            .db
            .prepare_cached(
                "SELECT s.session, s.source, s.git_branch FROM run_sessions s
                 JOIN runs r ON r.num = s.run WHERE r.id = ?1",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_row([run_id], |r| {
            Ok(SessionTag {
                id: r.get(0)?,
                source: source_of(&r.get::<_, String>(1)?)?,
                git_branch: r.get(2)?,
            })
        })
        .optional()
        .map_err(|e| self.err(e))
    }

    /// The session id of every run that has one, by run id: one query,
    /// for listings that show or filter by session.
    pub fn run_session_ids(&self) -> Result<std::collections::HashMap<String, String>, StoreError> {
        let mut stmt = self
            .db
            .prepare_cached(
                "SELECT r.id, s.session FROM run_sessions s JOIN runs r ON r.num = s.run",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))
    }

    /// Every session, the most recently active first.
    pub fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let mut stmt = self
            .db
            .prepare_cached(
                "SELECT s.session, min(s.source), min(s.git_branch), count(DISTINCT r.num),
                        min(r.created_at),
                        (SELECT max(e.at) FROM events e JOIN run_sessions t ON e.run = t.run
                         WHERE t.session = s.session) AS last
                 FROM run_sessions s JOIN runs r ON r.num = s.run
                 GROUP BY s.session ORDER BY last DESC, s.session",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_map([], |r| {
            Ok(SessionSummary {
                id: r.get(0)?,
                source: source_of(&r.get::<_, String>(1)?)?,
                git_branch: r.get(2)?,
                runs: r.get::<_, i64>(3)? as usize,
                created_at: r.get(4)?,
                last_at: r.get::<_, Option<i64>>(5)?.unwrap_or_default(),
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.err(e))
    }

    /// The runs of session `id`, oldest first.
    pub fn session_runs(&self, id: &str) -> Result<Vec<RunRecord>, StoreError> {
        let mut stmt = self
            .db
            .prepare_cached(
                "SELECT r.id, r.workflow_id, r.workflow_hash, r.manifest, r.workspace, r.created_at
                 FROM run_sessions s JOIN runs r ON r.num = s.run
                 WHERE s.session = ?1 ORDER BY r.created_at, r.id",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_map([id], crate::row_to_run)
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))
    }

    /// Session `id` as one bundle.
    pub fn export_session(&self, id: &str) -> Result<SessionBundle, StoreError> {
        let runs = self.session_runs(id)?;
        let Some(first) = runs.first() else {
            return Err(StoreError::UnknownSession {
                id: id.to_string(),
                store: self.path.clone(),
            });
        };
        let session = self.session_of(&first.id)?.ok_or_else(|| {
            StoreError::Inconsistent(format!("run {} lost its session", first.id))
        })?;
        let runs = runs
            .iter()
            .map(|r| self.export(&r.id))
            .collect::<Result<Vec<_>, _>>()?;
        let mut bundle = SessionBundle {
            format: SESSION_BUNDLE_FORMAT.into(),
            version: SESSION_BUNDLE_VERSION,
            session,
            runs,
            checksum: String::new(),
        };
        bundle.checksum = checksum(&bundle);
        Ok(bundle)
    }

    /// Add a verified session bundle's runs to this store, all or nothing.
    /// A run the store already holds is skipped when it is the bundle's
    /// run exactly, and refuses the whole import when it differs.
    pub fn import_session(&mut self, bundle: &SessionBundle) -> Result<SessionImport, StoreError> {
        let mut result = SessionImport {
            session: bundle.session.id.clone(),
            imported: Vec::new(),
            already_present: Vec::new(),
        };
        let mut new = Vec::new();
        for run in &bundle.runs {
            if self.run(&run.run.id)?.is_some() {
                let held = self.export(&run.run.id)?;
                if held.checksum != run.checksum {
                    return Err(StoreError::Usage(format!(
                        "run {} already exists in this store with a different log or session; nothing was imported",
                        run.run.id
                    )));
                }
                result.already_present.push(run.run.id.to_string());
            } else {
                bundle::check(run)?;
                new.push(run);
            }
        }
        let (tx, path) = self.begin()?;
        for run in new {
            bundle::insert(&tx, run).map_err(|e| StoreError::from_db(&path, e))?;
            result.imported.push(run.run.id.to_string());
        }
        tx.commit().map_err(|e| StoreError::from_db(&path, e))?;
        Ok(result)
    }
}
