//! Learning at once that the store changed. Runs are written by other
//! processes (each `wfhost run`, `gate`, `resume`, and the run processes
//! of this server), so one thread per server waits on the server's
//! doorbell (`wfhost_store::bell`), which those processes ring after each
//! commit, then asks SQLite whether another connection committed (`PRAGMA
//! data_version`, a read of shared memory, no I/O) and wakes the event
//! streams and the agents' lease waiters when one did. They then read the
//! store. Whatever was not rung for (a writer that does not ring: an older
//! wfhost, a ring lost) is seen within [`FALLBACK`]; without a doorbell
//! (it could not be bound) the thread asks every [`TICK`] as before.
//! On a PostgreSQL store, whose writers may be other machines' processes
//! that ring no doorbell here, the thread waits on the database instead:
//! every write transaction notifies, and the store's connection wakes
//! the thread on each notification (`Store::wait_for_change`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use wfhost_store::Store;
use wfhost_store::bell::Bell;

/// How often the store is asked when the server has no doorbell.
pub(crate) const TICK: Duration = Duration::from_millis(5);
/// How often the store is asked at the latest when nothing rang.
pub(crate) const FALLBACK: Duration = Duration::from_millis(100);
/// How often the store is opened again (a store removed and made again).
const REOPEN: Duration = Duration::from_secs(10);

/// Start watching the store of `home`; the receiver's value changes after
/// each commit by another connection. The thread ends when every receiver
/// is gone.
pub(crate) fn watch(home: PathBuf) -> watch::Receiver<u64> {
    let (tx, rx) = watch::channel(0u64);
    // Without the thread (it could not start), the sender is dropped and
    // the streams read on their own fallback timer.
    let _ = std::thread::Builder::new()
        .name("wfhost-store-watch".into())
        .spawn(move || run(home, tx));
    rx
}

fn run(home: PathBuf, tx: watch::Sender<u64>) {
    let mut bell: Option<Bell> = None;
    let mut warned = false;
    let mut store: Option<(Store, i64)> = None;
    let mut opened = Instant::now();
    while !tx.is_closed() {
        let waited = match &store {
            Some((s, seen)) => s.wait_for_change(*seen, FALLBACK).ok().flatten(),
            None => None,
        };
        match (&bell, waited) {
            (_, Some(_)) => {}
            (Some(bell), None) => {
                bell.wait(Some(FALLBACK));
            }
            (None, None) => std::thread::sleep(TICK),
        }
        // A store made after the server started, or replaced, is opened
        // (again) now and then; the doorbell is bound once the home exists.
        if store.is_none() || opened.elapsed() >= REOPEN {
            opened = Instant::now();
            if bell.is_none() && home.is_dir() {
                bell = bind(&home, &mut warned);
            }
            store = Store::open_existing(&home)
                .ok()
                .and_then(|s| s.data_version().ok().map(|v| (s, v)));
            tx.send_modify(|n| *n += 1);
            continue;
        }
        let Some((s, seen)) = &mut store else {
            continue;
        };
        match s.data_version() {
            Ok(v) if v != *seen => {
                *seen = v;
                tx.send_modify(|n| *n += 1);
            }
            Ok(_) => {}
            Err(_) => store = None,
        }
    }
}

/// The server's doorbell, or None (said once) when it cannot be bound.
fn bind(home: &std::path::Path, warned: &mut bool) -> Option<Bell> {
    Bell::for_server(home)
        .map_err(|e| {
            if !std::mem::replace(warned, true) {
                tracing::warn!(
                    "cannot bind the server's doorbell in {}: {e}; the store is asked every {} ms instead",
                    home.display(),
                    TICK.as_millis()
                );
            }
        })
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wfhost_store::Durability;

    #[test]
    fn a_commit_by_another_connection_is_signalled() {
        let home = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let mut rx = watch(home.path().to_path_buf());
        rt.block_on(async {
            // The store does not exist yet; once made, it is found.
            let store = Store::open(home.path(), Durability::Normal).unwrap();
            let wait = |rx: &mut watch::Receiver<u64>| {
                let mut rx = rx.clone();
                async move {
                    tokio::time::timeout(Duration::from_secs(20), rx.changed())
                        .await
                        .expect("signalled")
                        .unwrap();
                }
            };
            wait(&mut rx).await;
            rx.mark_unchanged();
            let before = *rx.borrow();
            let conn = rusqlite::Connection::open(store.path()).unwrap();
            conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
                .unwrap();
            let mut seen = rx.clone();
            tokio::time::timeout(Duration::from_secs(20), async {
                while *seen.borrow_and_update() == before {
                    seen.changed().await.unwrap();
                }
            })
            .await
            .expect("the commit is signalled");
        });
    }

    /// On PostgreSQL a commit made through another home (another
    /// machine's server, which rings no doorbell here) is signalled: the
    /// database's notification wakes the watcher.
    #[test]
    fn a_commit_through_another_home_on_postgres_is_signalled() {
        let Some(db) = wfhost_store::testing::TestDatabase::create() else {
            return;
        };
        let (here, there) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        db.configure(here.path());
        db.configure(there.path());
        drop(Store::open(here.path(), Durability::Normal).unwrap());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let rx = watch(here.path().to_path_buf());
        rt.block_on(async {
            let mut seen = rx.clone();
            // Opened: the first signal.
            tokio::time::timeout(Duration::from_secs(20), seen.changed())
                .await
                .expect("opened")
                .unwrap();
            let before = *seen.borrow_and_update();
            let mut other = Store::open(there.path(), Durability::Normal).unwrap();
            let id = "run-20260101-000000-0000f2";
            let record = wfhost_store::RunRecord {
                id: wfhost_store::RunId::parse(id).unwrap(),
                workflow_id: "w".into(),
                workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
                manifest: "/nowhere/wf.json".into(),
                workspace: "/tmp".into(),
                created_at: 1,
            };
            let started = wfhost_core::run::event::Event::RunFinished {
                outcome: wfhost_core::run::event::Outcome::Succeeded,
            };
            other.create_run(&record, "{}", &started).unwrap();
            // Well before the watcher opens the store again (REOPEN), which
            // signals whatever happened.
            tokio::time::timeout(Duration::from_secs(5), async {
                while *seen.borrow_and_update() == before {
                    seen.changed().await.unwrap();
                }
            })
            .await
            .expect("the other home's commit is signalled");
        });
    }
}
