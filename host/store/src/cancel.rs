//! Cancelling a run for good: a live run's process is asked to stop, then
//! the run's end is recorded under its lock. Shared by `wfhost cancel` and
//! the HTTP API.

use std::time::{Duration, Instant};

use wfhost_core::run::event::{Event, EventSink, Outcome};
use wfhost_core::run::state::Phase;

use crate::{RunId, RunLock, Store, StoreError};

/// The prefix of a cancelled run's failure reason.
pub const CANCELLED: &str = "cancelled";

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
    /// lock, and record the run as failed with `cancelled: <why>`. Returns
    /// the reason recorded.
    pub fn cancel(
        &mut self,
        run_id: &str,
        why: Option<&str>,
        wait: Duration,
    ) -> Result<String, CancelError> {
        self.not_finished(run_id)?;
        let _lock = self.stop_and_lock(run_id, wait)?;
        // The live run may have finished on its own while it was asked to stop.
        self.not_finished(run_id)?;
        let branch = self.current_branch(run_id)?;
        let reason = match why {
            Some(why) => format!("{CANCELLED}: {why}"),
            None => format!("{CANCELLED} by the user"),
        };
        let finished = Event::RunFinished {
            outcome: Outcome::Failed {
                reason: reason.clone(),
            },
        };
        self.writer(run_id, branch)?
            .append(std::slice::from_ref(&finished))
            .map_err(|e| CancelError::NotRecorded {
                run_id: run_id.to_string(),
                message: e.to_string(),
            })?;
        // Agents running one of its blocks lose their lease and stop.
        self.cancel_jobs_of_run(run_id, &reason, crate::time::now_ms())?;
        Ok(reason)
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
            _ => return Ok(()),
        };
        Err(CancelError::Finished {
            run_id: run_id.to_string(),
            how,
        })
    }

    fn stop_and_lock(&self, run_id: &str, wait: Duration) -> Result<RunLock, CancelError> {
        let run_id = &RunId::parse(run_id).map_err(StoreError::from)?;
        let pid = match self.lock_run(run_id) {
            Ok(lock) => return Ok(lock),
            Err(StoreError::Busy { pid, .. }) => pid,
            Err(e) => return Err(e.into()),
        };
        let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 0) else {
            return Err(CancelError::NoPid {
                run_id: run_id.to_string(),
            });
        };
        // SAFETY: sending a signal; ESRCH (already gone) is fine.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + wait;
        loop {
            match self.lock_run(run_id) {
                Ok(lock) => return Ok(lock),
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
