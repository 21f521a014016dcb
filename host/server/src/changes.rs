//! Learning at once that the store changed. Runs are written by other
//! processes (each `wfhost run`, `gate`, `resume`), so there is nothing to
//! subscribe to: one thread per server asks SQLite every few milliseconds
//! whether another connection committed (`PRAGMA data_version`, a read of
//! shared memory, no I/O), and wakes the event streams when one did. A
//! stream then reads its run's new events; an idle server costs a pragma
//! per tick, whatever the number of streams.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::watch;
use wfhost_store::Store;

/// How often the store is asked.
pub(crate) const TICK: Duration = Duration::from_millis(5);

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
    let mut store: Option<(Store, i64)> = None;
    let mut since_open = 0u32;
    while !tx.is_closed() {
        std::thread::sleep(TICK);
        since_open += 1;
        // A store made after the server started, or replaced, is opened
        // (again) now and then.
        if store.is_none() || since_open >= 2000 {
            since_open = 0;
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
