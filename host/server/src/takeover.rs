//! Taking over runs whose process died: a run executed for a server whose
//! process is gone — killed, or gone with its machine (the run's lock is
//! free), its branch neither at rest nor waiting — is resumed in a run
//! process of this server once it has been seen so for the takeover delay.
//! Every server on the store looks; the first to claim a takeover (a
//! conditional update of the run's count) resumes it, and the run's lock
//! keeps any second process out. A run taken over [`MAX_TAKEOVERS`] times
//! is left interrupted and said once: it kills its process, and `wfhost
//! resume` is for a person to decide.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wfhost_protocol::RunRequest;
use wfhost_store::time::now_ms;
use wfhost_store::{RunId, ServedRun, Store, StoreError};

use crate::AppState;
use crate::runner::Submitted;
use crate::store::blocking;

/// How long a served run stays interrupted before a server takes it over,
/// unless `serve --take-over-ms` says otherwise.
pub const DEFAULT_TAKE_OVER_AFTER: Duration = Duration::from_secs(10);

/// Takeovers of one run, at most (by all servers together).
pub const MAX_TAKEOVERS: u32 = 3;

/// How often the served runs are looked at.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Served runs read per query.
const PAGE: usize = 256;

/// What a look found of one served run.
enum Seen {
    /// Executing again: nothing to do.
    Alive,
    /// At rest (ended, or waiting at a gate or a timer), though its
    /// process could not say so: forgotten (a process that goes on with it
    /// notes it again).
    AtRest,
    /// No process executes it and it is not at rest.
    Interrupted,
}

/// Take over interrupted served runs until the server stops; `after` is
/// the takeover delay (None: never).
pub(crate) async fn watch(state: AppState, after: Option<Duration>) {
    let (Some(runner), Some(after)) = (state.runner.clone(), after) else {
        return;
    };
    let mut since: HashMap<RunId, Instant> = HashMap::new();
    let mut said: std::collections::HashSet<RunId> = Default::default();
    let mut warnings = crate::loop_warnings::LoopWarnings::new("takeover");
    loop {
        if state.stopping.begun() {
            return;
        }
        let stores = state.stores.clone();
        let looked = blocking(move || match stores.if_any()? {
            Some(store) => Ok(look(&store)?),
            None => Ok(Vec::new()),
        })
        .await;
        match looked {
            Ok(interrupted) => {
                warnings.worked();
                let due = due(&mut since, interrupted, after);
                for run in due {
                    take_over(&state, &runner, run, &mut said).await;
                }
            }
            Err(e) => warnings.failed(e.message),
        }
        let stopping = Arc::clone(&state.stopping);
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            () = stopping.wait() => return,
        }
    }
}

/// The served runs found interrupted now (the ended ones forgotten).
fn look(store: &Store) -> Result<Vec<ServedRun>, StoreError> {
    let mut interrupted = Vec::new();
    let mut after = 0;
    loop {
        let page = store.unexecuted_served_runs(after, PAGE)?;
        let Some((last, _)) = page.last() else {
            return Ok(interrupted);
        };
        after = *last;
        for (_, run) in page {
            match seen(store, &run.run_id)? {
                Seen::Alive => {}
                Seen::AtRest => store.forget_served(&run.run_id)?,
                Seen::Interrupted => interrupted.push(run),
            }
        }
    }
}

/// What one served run is now.
fn seen(store: &Store, run_id: &RunId) -> Result<Seen, StoreError> {
    if store.running_now(run_id)? {
        return Ok(Seen::Alive);
    }
    // A run recorded but without its first event yet is starting.
    let Ok(branch) = store.current_branch(run_id.as_str()) else {
        return Ok(Seen::Alive);
    };
    let status = store
        .branches(run_id.as_str())?
        .into_iter()
        .find(|b| b.branch == branch)
        .map(|b| b.status)
        .unwrap_or_default();
    Ok(match status.as_str() {
        "succeeded" | "failed" | "cancelled" | "waiting" | "sleeping" => Seen::AtRest,
        // (Its lock was free a moment ago: a status read after a process
        // took it says running, which waits for the next look.)
        "interrupted" => Seen::Interrupted,
        _ => Seen::Alive,
    })
}

/// The runs seen interrupted on every look for `after` now, and not taken
/// over (by any server) within `after` — a process resuming one may still
/// be starting; `since` keeps when each was first seen so, and forgets
/// those seen otherwise.
fn due(
    since: &mut HashMap<RunId, Instant>,
    interrupted: Vec<ServedRun>,
    after: Duration,
) -> Vec<ServedRun> {
    let now = Instant::now();
    let recent = now_ms() - i64::try_from(after.as_millis()).unwrap_or(i64::MAX);
    let ids: std::collections::HashSet<&RunId> = interrupted.iter().map(|r| &r.run_id).collect();
    since.retain(|id, _| ids.contains(id));
    interrupted
        .into_iter()
        .filter(|run| {
            let first = *since.entry(run.run_id.clone()).or_insert(now);
            now.duration_since(first) >= after && run.taken_at_ms.is_none_or(|at| at < recent)
        })
        .collect()
}

/// Resume `run` in a run process of this server, if this server claims
/// its takeover; say once why a run is left interrupted.
async fn take_over(
    state: &AppState,
    runner: &Arc<dyn crate::runner::RunService>,
    run: ServedRun,
    said: &mut std::collections::HashSet<RunId>,
) {
    if let Some(why) = left_alone(&run) {
        if said.insert(run.run_id.clone()) {
            tracing::warn!(
                run_id = %run.run_id,
                "run {} is interrupted and not taken over: {why}; `wfhost resume {}` continues it",
                run.run_id,
                run.run_id
            );
        }
        return;
    }
    let stores = state.stores.clone();
    let claimed = {
        let run = run.clone();
        blocking(move || match stores.if_any()? {
            Some(store) => Ok(store.claim_takeover(&run, now_ms())?),
            None => Ok(false),
        })
        .await
    };
    if !matches!(claimed, Ok(true)) {
        // Another server claimed it, or the store cannot say: the next
        // look sees.
        return;
    }
    let n = run.takeovers + 1;
    tracing::warn!(
        run_id = %run.run_id,
        "taking over run {} (no process executes it; takeover {n} of {MAX_TAKEOVERS})",
        run.run_id
    );
    let request = RunRequest::Resume {
        run_id: run.run_id.to_string(),
        branch: None,
    };
    // Answered once the new process holds the run: the runs of a dead
    // machine are resumed side by side, not one after the other.
    let (runner, home) = (Arc::clone(runner), state.stores.home().to_path_buf());
    tokio::spawn(async move {
        let resumed = tokio::task::spawn_blocking(move || runner.submit(&home, &request)).await;
        match resumed {
            Ok(Ok(Submitted::Accepted(_) | Submitted::Starting)) => {}
            // (The next look sees the run interrupted again, if it is.)
            Ok(Err(e)) => tracing::warn!(
                run_id = %run.run_id,
                "takeover of run {}: not resumed: {}",
                run.run_id,
                e.message
            ),
            Err(e) => tracing::warn!("takeover: {e}"),
        }
    });
}

/// Why `run` is not taken over by this server, if it is not.
fn left_alone(run: &ServedRun) -> Option<String> {
    if run.takeovers >= MAX_TAKEOVERS {
        return Some(format!(
            "its process died {} times after being taken over",
            run.takeovers
        ));
    }
    if !Path::new(&run.workspace).is_dir() {
        return Some(format!(
            "its workspace {} is not on this machine",
            run.workspace
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(id: &RunId) -> ServedRun {
        ServedRun {
            run_id: id.clone(),
            takeovers: 0,
            taken_at_ms: None,
            workspace: "/".into(),
        }
    }

    #[test]
    fn a_run_is_due_only_once_seen_interrupted_for_the_whole_delay() {
        let (a, b) = (&wfhost_store::new_run_id(0), &wfhost_store::new_run_id(1));
        let mut since = HashMap::new();
        let after = Duration::from_millis(50);
        assert!(due(&mut since, vec![served(a), served(b)], after).is_empty());
        std::thread::sleep(Duration::from_millis(60));
        // b was seen otherwise in between: its wait starts again.
        assert!(due(&mut since, vec![served(a)], after).len() == 1);
        assert!(due(&mut since, vec![served(a), served(b)], after).len() == 1);
        std::thread::sleep(Duration::from_millis(60));
        let both = due(&mut since, vec![served(a), served(b)], after);
        assert_eq!(both.len(), 2);
        assert!(
            due(&mut since, vec![served(a), served(b)], Duration::ZERO).len() == 2,
            "a zero delay takes at once"
        );
        // One taken over a moment ago (its process may be starting) waits.
        let mut taken = served(a);
        taken.taken_at_ms = Some(now_ms());
        assert!(due(&mut since, vec![taken.clone()], Duration::from_secs(60)).is_empty());
        taken.taken_at_ms = Some(now_ms() - 120_000);
        since.insert(a.clone(), Instant::now() - Duration::from_secs(61));
        assert_eq!(
            due(&mut since, vec![taken], Duration::from_secs(60)).len(),
            1
        );
    }

    #[test]
    fn a_run_is_left_alone_after_its_takeovers_or_without_its_workspace() {
        let mut run = served(&wfhost_store::new_run_id(0));
        assert_eq!(left_alone(&run), None);
        run.takeovers = MAX_TAKEOVERS;
        assert!(left_alone(&run).unwrap().contains("died 3 times"));
        run.takeovers = 0;
        run.workspace = "/no/such/workspace/here".into();
        assert!(
            left_alone(&run)
                .unwrap()
                .contains("/no/such/workspace/here is not on this machine")
        );
    }
}
