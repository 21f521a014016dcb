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

/// Start watching the store in `home`; the receiver's value changes after
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
        match &bell {
            Some(bell) => {
                bell.wait(Some(FALLBACK));
            }
            None => std::thread::sleep(TICK),
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
}
