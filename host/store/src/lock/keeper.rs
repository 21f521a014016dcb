//! Keeping a run's database lock: the connection that holds it belongs to
//! a thread of its own, which releases the lock when the run lets go of
//! it, and takes it again should the connection be lost (a restart of
//! PostgreSQL ends every session, and with it every session lock). If the
//! lock cannot be had again — another process took the run over, or the
//! database stayed away — the run is marked [`lost`], and its writes are
//! refused from then on: two processes never go on executing one run.

use std::collections::HashSet;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::RunId;
use crate::db::Db;

/// How often the keeper looks whether its connection was lost.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// How long dropping a lock waits for its release to be done (the release
/// is a statement on a live connection; a lost one holds nothing).
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// The thread keeping one run's database lock.
pub(crate) struct Keeper {
    stop: Option<Sender<()>>,
    done: Receiver<()>,
}

impl Keeper {
    /// Keep the lock of `run_id` that `db`'s connection holds.
    pub(crate) fn start(db: Db, run_id: RunId) -> Keeper {
        let (stop, stopped) = std::sync::mpsc::channel();
        let (finished, done) = std::sync::mpsc::channel();
        let name = format!("wfhost-run-lock-{run_id}");
        let lost_id = run_id.clone();
        let spawned = std::thread::Builder::new().name(name).spawn(move || {
            keep(&db, &run_id, &stopped);
            release(&db);
            drop(db);
            let _ = finished.send(());
        });
        if let Err(e) = spawned {
            // The connection went with the closure, and the lock with it.
            mark_lost(
                &lost_id,
                &format!("cannot start the thread keeping it: {e}"),
            );
        }
        Keeper {
            stop: Some(stop),
            done,
        }
    }

    /// Let go of the lock now and wait (briefly) until it is released.
    pub(crate) fn release(&mut self) {
        drop(self.stop.take());
        let _ = self.done.recv_timeout(RELEASE_WAIT);
    }
}

/// Until asked to stop: take the lock again whenever its connection was
/// lost; give up (marking the run lost) when that cannot be done.
fn keep(db: &Db, run_id: &RunId, stop: &Receiver<()>) {
    loop {
        match stop.recv_timeout(LOOK_EVERY) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        if !db.is_closed() {
            continue;
        }
        // Connects again first (trying for a while: a restart).
        match super::take(db, run_id) {
            Ok(true) => {
                tracing::warn!(%run_id, "the connection holding run {run_id}'s lock was lost; the lock was taken again on a new one");
                if let Some(conn) = db.as_postgres() {
                    let _ = conn.listen_for_run(run_id.as_str());
                }
            }
            Ok(false) => {
                mark_lost(run_id, "another process took the run over");
                return;
            }
            Err(e) => {
                mark_lost(run_id, &format!("the database could not be reached: {e}"));
                return;
            }
        }
    }
}

fn release(db: &Db) {
    if db.is_closed() {
        return;
    }
    if let Err(e) = db.execute_batch("SELECT pg_advisory_unlock_all()") {
        tracing::debug!(error = %e, "releasing a run lock: the connection's end releases it");
    }
}

fn lost_runs() -> std::sync::MutexGuard<'static, HashSet<String>> {
    static LOST: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    LOST.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn mark_lost(run_id: &RunId, why: &str) {
    tracing::error!(%run_id, "run {run_id} lost its lock ({why}): this process stops executing it");
    lost_runs().insert(run_id.to_string());
}

/// Whether this process lost the database lock of `run_id` while it
/// executed the run (its writes are refused from then on).
pub fn lost(run_id: &str) -> bool {
    let lost = lost_runs();
    !lost.is_empty() && lost.contains(run_id)
}
