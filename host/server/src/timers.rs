//! Waking sleeping runs: every branch resting at a `sleep` block or
//! waiting to retry a failed block is resumed
//! in its own run process once due — [`wfhost_protocol::TIMER_LEAD_MS`]
//! ahead of its due time while the server is up (the process waits the
//! rest), at start for a timer that came due while it was down. The block's
//! completion is recorded once whoever wakes it (the run's lock and its
//! log): a resume asked twice finds the run awake, or busy.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wfhost_protocol::RunRequest;
use wfhost_store::time::now_ms;

use crate::AppState;
use crate::runner::Submitted;
use crate::store::blocking;

/// The longest the watcher goes without looking (a timer written while it
/// slept, by a run process, is seen within this).
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// How long a wake asked for is left to take before it is asked again
/// (for the same timer: a branch's next timer, a later `sleep` or retry,
/// is asked for at once).
const RETRY_AFTER: Duration = Duration::from_secs(30);

/// At most this many runs woken per look.
const BATCH: usize = 256;

/// Wake due timers until the server stops.
pub(crate) async fn watch(state: AppState) {
    let Some(runner) = state.runner.clone() else {
        return;
    };
    let mut asked: HashMap<(String, u32, i64), Instant> = HashMap::new();
    let mut warnings = crate::loop_warnings::LoopWarnings::new("timers");
    loop {
        if state.stopping.begun() {
            return;
        }
        let stores = state.stores.clone();
        let due = blocking(move || match stores.if_any()? {
            // A little ahead: the run's process starts before the time
            // and waits the rest itself.
            Some(store) => Ok(store.due_timers(now_ms() + wfhost_protocol::TIMER_LEAD_MS, BATCH)?),
            None => Ok(Vec::new()),
        })
        .await;
        let due = match due {
            Ok(due) => {
                warnings.worked();
                due
            }
            Err(e) => {
                warnings.failed(e.message);
                Vec::new()
            }
        };
        asked.retain(|_, at| at.elapsed() < RETRY_AFTER);
        for timer in due {
            let key = (timer.run_id.to_string(), timer.branch, timer.due_at_ms);
            if asked.contains_key(&key) {
                continue;
            }
            asked.insert(key, Instant::now());
            let request = RunRequest::Resume {
                run_id: timer.run_id.to_string(),
                branch: Some(timer.branch),
            };
            let (runner, home) = (Arc::clone(&runner), state.stores.home().to_path_buf());
            let late = now_ms().saturating_sub(timer.due_at_ms);
            tokio::spawn(async move {
                let woken =
                    tokio::task::spawn_blocking(move || runner.submit(&home, &request)).await;
                match woken {
                    Ok(Ok(Submitted::Accepted(_) | Submitted::Starting)) => {
                        tracing::info!(run_id = %timer.run_id, branch = timer.branch, late_ms = late, "timer woke the run");
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(run_id = %timer.run_id, error = %e.message, "timer: not woken now")
                    }
                    Err(e) => tracing::warn!("timers: {e}"),
                }
            });
        }
        let stopping = Arc::clone(&state.stopping);
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            () = stopping.wait() => return,
        }
    }
}
