//! Cancelling a run for good: a live run's process is asked to stop, then
//! the run's end is recorded under its lock. Shared by `wfhost cancel` and
//! the HTTP API.
//!
//! Before a live run's process is signalled, the cancellation is written
//! beside the store (`<home>/cancelling/<run>.json`), so the process can
//! say who stopped it and why instead of offering to resume; the note goes
//! once the end is recorded or the cancellation gave up.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use wfhost_core::run::event::{Event, EventSink, Outcome};
use wfhost_core::run::state::Phase;

use crate::{RunId, RunLock, Store, StoreError};

/// The prefix of a cancelled run's failure reason in logs written before
/// event format 8 (a cancelled run is [`Outcome::Cancelled`] since).
pub const CANCELLED: &str = "cancelled";

/// Who stops a run and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cancellation {
    /// `alice with wfhost cancel`, `the HTTP API (token ci)`.
    pub by: String,
    pub reason: Option<String>,
}

impl Cancellation {
    /// `cancelled by BY: REASON`.
    pub fn text(&self) -> String {
        Outcome::cancelled_text(&self.by, self.reason.as_deref())
    }

    /// The cancellation under way of run `run_id` in `home`, if one is:
    /// what a run process stopped by a signal reads to say why.
    pub fn pending(home: &Path, run_id: &RunId) -> Option<Cancellation> {
        let text = std::fs::read(note_path(home, run_id)).ok()?;
        serde_json::from_slice(&text).ok()
    }
}

fn note_path(home: &Path, run_id: &RunId) -> PathBuf {
    home.join("cancelling").join(format!("{run_id}.json"))
}

/// The note of a cancellation under way, removed when dropped.
struct Note(Option<PathBuf>);

impl Note {
    /// Written whole or not at all (a temporary file renamed): a run
    /// process never reads half of it. Not written is no harm: the run
    /// process then says it was interrupted.
    fn write(home: &Path, run_id: &RunId, cancellation: &Cancellation) -> Note {
        let path = note_path(home, run_id);
        let tmp = path.with_extension("json.tmp");
        let written = path
            .parent()
            .is_some_and(|dir| std::fs::create_dir_all(dir).is_ok())
            && serde_json::to_vec(cancellation)
                .ok()
                .is_some_and(|bytes| std::fs::write(&tmp, bytes).is_ok())
            && std::fs::rename(&tmp, &path).is_ok();
        Note(written.then_some(path))
    }
}

impl Drop for Note {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Why a run was not cancelled.
#[derive(Debug, thiserror::Error)]
pub enum CancelError {
    /// The run had ended already (`how`: succeeded, failed, was cancelled).
    #[error("run {run_id} {how} already; there is nothing to cancel")]
    Finished { run_id: String, how: &'static str },
    #[error("run {run_id} is executing in a process that did not say its pid; nothing was changed")]
    NoPid { run_id: String },
    #[error("run {run_id} did not stop within {waited} s (pid {pid}); nothing was recorded")]
    DidNotStop {
        run_id: String,
        pid: i32,
        waited: u64,
    },
    #[error("run {run_id}: cannot record the cancellation: {message}")]
    NotRecorded { run_id: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Store {
    /// Cancel run `run_id` (an exact id): ask a live run's process to stop
    /// (SIGTERM: it stops its block's processes, containers and jobs,
    /// records what it decided and exits), wait at most `wait` for its
    /// lock, and record the run as cancelled. Returns what was recorded
    /// (`cancelled by BY: REASON`).
    pub fn cancel(
        &mut self,
        run_id: &str,
        cancellation: &Cancellation,
        wait: Duration,
    ) -> Result<String, CancelError> {
        self.not_finished(run_id)?;
        let (_lock, _note) = self.stop_and_lock(run_id, cancellation, wait)?;
        // The live run may have finished on its own while it was asked to stop.
        self.not_finished(run_id)?;
        let branch = self.current_branch(run_id)?;
        let finished = Event::RunFinished {
            outcome: Outcome::Cancelled {
                by: cancellation.by.clone(),
                reason: cancellation.reason.clone(),
            },
        };
        self.writer(run_id, branch)?
            .append(std::slice::from_ref(&finished))
            .map_err(|e| CancelError::NotRecorded {
                run_id: run_id.to_string(),
                message: e.to_string(),
            })?;
        // Agents running one of its blocks lose their lease and stop.
        let text = cancellation.text();
        self.cancel_jobs_of_run(run_id, &text, crate::time::now_ms())?;
        Ok(text)
    }

    fn not_finished(&self, run_id: &str) -> Result<(), CancelError> {
        let branch = self.current_branch(run_id)?;
        let state = self.state(run_id, branch)?;
        let how = match &state.phase {
            Phase::Finished(Outcome::Succeeded) => "succeeded",
            Phase::Finished(Outcome::Failed { reason }) if reason.starts_with(CANCELLED) => {
                "was cancelled"
            }
            Phase::Finished(Outcome::Failed { .. }) => "failed",
            Phase::Finished(Outcome::Cancelled { .. }) => "was cancelled",
            _ => return Ok(()),
        };
        Err(CancelError::Finished {
            run_id: run_id.to_string(),
            how,
        })
    }

    /// The run's lock, once its live process (if any) stopped, and the
    /// note that told that process why.
    fn stop_and_lock(
        &self,
        run_id: &str,
        cancellation: &Cancellation,
        wait: Duration,
    ) -> Result<(RunLock, Note), CancelError> {
        let run_id = &RunId::parse(run_id).map_err(StoreError::from)?;
        let pid = match self.lock_run(run_id) {
            Ok(lock) => return Ok((lock, Note(None))),
            Err(StoreError::Busy { pid, .. }) => pid,
            Err(e) => return Err(e.into()),
        };
        let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 0) else {
            return Err(CancelError::NoPid {
                run_id: run_id.to_string(),
            });
        };
        let note = Note::write(self.home(), run_id, cancellation);
        // SAFETY: sending a signal; ESRCH (already gone) is fine.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + wait;
        loop {
            match self.lock_run(run_id) {
                Ok(lock) => return Ok((lock, note)),
                Err(StoreError::Busy { .. }) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(StoreError::Busy { .. }) => {
                    return Err(CancelError::DidNotStop {
                        run_id: run_id.to_string(),
                        pid,
                        waited: wait.as_secs(),
                    });
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}
