//! Finding runs: one listing, filtered and paged, for every surface
//! (`wfhost runs`, `GET /v1/runs`, the dashboard), so a run is the same
//! object wherever it is listed.

use serde::Serialize;

use crate::{OpenJob, RunRecord, Store, StoreError};

/// The statuses a run can have, as listings show them.
pub const RUN_STATUSES: &[&str] = &[
    "running",
    "waiting",
    "sleeping",
    "succeeded",
    "failed",
    "cancelled",
    "interrupted",
];

/// A run in a listing: its record, and where its current branch stands.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RunSummary {
    #[serde(flatten)]
    pub run: RunRecord,
    /// Of the current branch (the one written most recently).
    pub status: String,
    pub branch: u32,
    pub branches: usize,
    /// Unix ms of the last event.
    pub last_at: i64,
    /// The session (workstream) the run belongs to, if any.
    pub session: Option<String>,
    /// What a running run served by `wfhost serve` waits for: its blocks'
    /// jobs queued for an agent or leased by one. Empty otherwise.
    pub open_jobs: Vec<OpenJob>,
}

/// Which runs to list; every field left out matches all.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// One of [`RUN_STATUSES`].
    pub status: Option<String>,
    /// The workflow's id, exactly.
    pub workflow: Option<String>,
    /// The session's id, exactly.
    pub session: Option<String>,
    /// Text the run contains (case-insensitively) in its id, workflow
    /// id, workspace or session id.
    pub text: Option<String>,
    /// Runs started at or after this unix ms.
    pub since_ms: Option<i64>,
    /// The id of the last run of the previous page.
    pub after: Option<String>,
}

/// One page of runs, newest first.
#[derive(Debug, Clone, Serialize)]
pub struct RunPage {
    pub runs: Vec<RunSummary>,
    /// The `after` of the next page; `None` on the last.
    pub next_after: Option<String>,
}

/// Why a listing could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("unknown status `{0}`: use one of {statuses}", statuses = RUN_STATUSES.join(", "))]
    UnknownStatus(String),
    #[error("`after` names no run: `{0}`")]
    UnknownAfter(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RunFilter {
    /// Whether `run` (in `session`) passes every filter but the status,
    /// which needs the run's branches.
    fn admits(&self, run: &RunRecord, session: Option<&String>) -> bool {
        let text = self.text.as_ref().map(|t| t.to_lowercase());
        self.workflow.as_ref().is_none_or(|w| *w == run.workflow_id)
            && self.session.as_ref().is_none_or(|s| Some(s) == session)
            && self.since_ms.is_none_or(|since| run.created_at >= since)
            && text.is_none_or(|t| contains_text(run, session, &t))
    }
}

/// Whether `run` (in `session`) contains `text`, lowercased.
fn contains_text(run: &RunRecord, session: Option<&String>, text: &str) -> bool {
    [
        Some(run.id.as_str()),
        Some(run.workflow_id.as_str()),
        Some(run.workspace.as_str()),
        session.map(String::as_str),
    ]
    .into_iter()
    .flatten()
    .any(|field| field.to_lowercase().contains(text))
}

impl Store {
    /// `run` as listings show it.
    pub fn run_summary(
        &self,
        run: RunRecord,
        session: Option<String>,
    ) -> Result<RunSummary, StoreError> {
        let current = self.current_branch(&run.id)?;
        let branches = self.branches(&run.id)?;
        let head = branches.iter().find(|b| b.branch == current);
        let status = head.map(|b| b.status.clone()).unwrap_or_default();
        let open_jobs = match status.as_str() {
            "running" => self.open_jobs(&run.id)?,
            _ => Vec::new(),
        };
        Ok(RunSummary {
            status,
            open_jobs,
            last_at: branches.iter().map(|b| b.last_at).max().unwrap_or(0),
            branch: current,
            branches: branches.len(),
            session,
            run,
        })
    }

    /// At most `limit` runs that pass `filter`, newest first.
    pub fn list_runs(&self, filter: &RunFilter, limit: usize) -> Result<RunPage, ListError> {
        if let Some(status) = &filter.status
            && !RUN_STATUSES.contains(&status.as_str())
        {
            return Err(ListError::UnknownStatus(status.clone()));
        }
        let mut runs = self.runs()?;
        if let Some(after) = &filter.after {
            let Some(at) = runs.iter().position(|r| r.id.as_str() == after) else {
                return Err(ListError::UnknownAfter(after.clone()));
            };
            runs.drain(..=at);
        }
        let sessions = self.run_session_ids()?;
        let mut page = Vec::new();
        for run in runs {
            let session = sessions.get(run.id.as_str());
            if !filter.admits(&run, session) {
                continue;
            }
            let summary = self.run_summary(run, session.cloned())?;
            if filter.status.as_ref().is_some_and(|s| *s != summary.status) {
                continue;
            }
            if page.len() == limit {
                let next_after = page.last().map(|p: &RunSummary| p.run.id.to_string());
                return Ok(RunPage {
                    runs: page,
                    next_after,
                });
            }
            page.push(summary);
        }
        Ok(RunPage {
            runs: page,
            next_after: None,
        })
    }
}
