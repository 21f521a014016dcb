//! Sessions over MCP: finding runs to resume, listing sessions, and moving
//! a session between homes as one bundle.

use std::path::Path;

use serde_json::Value;
use wfhost_store::{RunRecord, SessionBundle, SessionTag};

use super::{Executor, Resume, Service};
use crate::error::ToolError;
use crate::reply::{
    Candidate, ExportReply, ImportReply, ResumeReply, SessionSummary, SessionsReply,
};
use crate::session::git_branch;

/// How many candidates `resume_session` returns.
const MAX_CANDIDATES: usize = 5;

/// A run that matched, and how well.
struct Match {
    run: RunRecord,
    why: Vec<String>,
    /// Started in the client's workspace or on its branch.
    near: bool,
}

impl<E: Executor> Service<E> {
    /// Runs to take up again: the run `run_id`, or runs matching every
    /// filter given (session, git branch, workflow, text in the run id,
    /// workflow id, manifest path or session id, ignoring case), else the
    /// latest runs. Waiting runs first, then runs of the client's
    /// workspace or branch, then the most recent. Each with the reply for
    /// where it rests, fresh tokens included.
    pub fn resume(&self, find: &Resume) -> Result<ResumeReply, ToolError> {
        let store = self.store()?;
        let found = if let Some(id) = &find.run_id {
            let run = store.run(id)?.ok_or_else(|| {
                ToolError::new("RUN_NOT_FOUND", format!("no run `{id}` in this home"))
            })?;
            vec![Match {
                run,
                why: vec!["matched_exact_id".into()],
                near: false,
            }]
        } else {
            let here = find
                .workspace
                .as_deref()
                .map(|w| std::path::absolute(w).unwrap_or_else(|_| w.to_path_buf()));
            let here_branch = here.as_deref().and_then(git_branch);
            let mut found = Vec::new();
            for run in store.runs()? {
                let session = self.session_of(&store, &run.id)?;
                if let Some(m) =
                    matches(find, here.as_deref(), here_branch.as_deref(), run, session)
                {
                    found.push(m);
                }
            }
            found
        };
        let total_eligible = found.len();
        let mut ranked = Vec::new();
        for m in found {
            let Some(latest) = store
                .branches(&m.run.id)?
                .into_iter()
                .max_by_key(|b| (b.last_at, b.branch))
            else {
                continue;
            };
            ranked.push((
                (latest.status != "waiting", !m.near, -latest.last_at),
                m,
                latest,
            ));
        }
        ranked.sort_by_key(|r| r.0);
        let mut candidates = Vec::new();
        for (_, m, latest) in ranked.into_iter().take(MAX_CANDIDATES) {
            let loaded = self.definition(&store, &m.run)?;
            let (head, state) = self.head_state(&store, &m.run.id, latest.branch)?;
            let reply = self.reply(
                &store,
                &m.run,
                &loaded.workflow,
                latest.branch,
                head,
                &state,
            )?;
            candidates.push(Candidate {
                run_id: m.run.id.to_string(),
                workflow_id: m.run.workflow_id.clone(),
                branch: latest.branch,
                status: reply.status.clone(),
                pending_step_id: reply.pending.as_ref().map(|p| p.step_id.clone()),
                is_complete: reply.is_complete,
                last_modified_ms: latest.last_at,
                why_matched: m.why,
                resume: reply,
            });
        }
        Ok(ResumeReply {
            candidates,
            total_eligible,
        })
    }

    /// Every session of this home.
    pub fn sessions(&self) -> Result<SessionsReply, ToolError> {
        let store = self.store()?;
        let sessions = store
            .sessions()?
            .into_iter()
            .map(|s| SessionSummary {
                session_id: s.id,
                source: match s.source {
                    wfhost_store::SessionSource::Client => "client".into(),
                    wfhost_store::SessionSource::Git => "git".into(),
                },
                git_branch: s.git_branch,
                runs: s.runs,
                created_ms: s.created_at,
                last_modified_ms: s.last_at,
            })
            .collect();
        Ok(SessionsReply { sessions })
    }

    /// Session `id` as one bundle.
    pub fn export_session(&self, id: &str) -> Result<ExportReply, ToolError> {
        let store = self.store()?;
        let bundle = store.export_session(id).map_err(|e| match e {
            wfhost_store::StoreError::UnknownSession { .. } => ToolError::new(
                "SESSION_NOT_FOUND",
                format!("no session `{id}` in this home"),
            ),
            other => other.into(),
        })?;
        Ok(ExportReply {
            session_id: bundle.session.id.clone(),
            runs: bundle.runs.len(),
            bundle: serde_json::to_value(&bundle).expect("bundles serialize"),
        })
    }

    /// Add a session bundle's runs to this home, all or nothing.
    pub fn import_session(&self, bundle: Value) -> Result<ImportReply, ToolError> {
        let bundle =
            SessionBundle::from_value(bundle).map_err(|e| ToolError::invalid("/bundle", e))?;
        let mut store = self.store()?;
        let done = store.import_session(&bundle)?;
        Ok(ImportReply {
            session_id: done.session,
            imported: done.imported,
            already_present: done.already_present,
        })
    }
}

/// Whether `run` passes every filter of `find`, and why.
fn matches(
    find: &Resume,
    here: Option<&Path>,
    here_branch: Option<&str>,
    run: RunRecord,
    session: Option<SessionTag>,
) -> Option<Match> {
    let mut why = Vec::new();
    let run_branch = session.as_ref().and_then(|s| s.git_branch.as_deref());
    if let Some(wanted) = &find.session_id {
        if session.as_ref().map(|s| &s.id) != Some(wanted) {
            return None;
        }
        why.push("matched_session".to_string());
    }
    if let Some(wanted) = &find.git_branch {
        if run_branch != Some(wanted.as_str()) {
            return None;
        }
        why.push("matched_branch".into());
    }
    let same_workspace = here.is_some_and(|h| Path::new(&run.workspace) == h);
    if find.same_workspace_only && !same_workspace {
        return None;
    }
    if let Some(w) = &find.workflow_id {
        if &run.workflow_id != w {
            return None;
        }
        why.push("matched_workflow_id".into());
    }
    if let Some(q) = &find.query {
        let hay = format!(
            "{} {} {} {}",
            run.id,
            run.workflow_id,
            run.manifest,
            session.as_ref().map_or("", |s| s.id.as_str())
        )
        .to_lowercase();
        if !hay.contains(&q.to_lowercase()) {
            return None;
        }
        why.push("matched_query".into());
    }
    let same_branch =
        find.git_branch.is_none() && here_branch.is_some() && run_branch == here_branch;
    if same_branch {
        why.push("matched_branch".into());
    }
    if same_workspace {
        why.push("same_workspace".into());
    }
    if why.is_empty() {
        why.push("recency_fallback".into());
    }
    Some(Match {
        run,
        why,
        near: same_workspace || same_branch,
    })
}
