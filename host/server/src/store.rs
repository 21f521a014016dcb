//! The store, reached through a small pool of open connections, on the
//! blocking pool.
//!
//! Connections are kept between requests: opening one costs the file's
//! open, the schema's parse and its pragmas, and closing the last one
//! checkpoints and deletes the WAL — together most of a request's time
//! when each request opened its own. A pooled connection is used again
//! only while the store file is the one it opened (same device and inode):
//! a store removed and made again is opened afresh. A store on
//! PostgreSQL has no file: its connections are kept while they work (one
//! that failed is not put back).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use wfhost_store::{Durability, Store, StoreError};

use crate::error::ApiError;

/// How many idle connections are kept.
const MAX_IDLE: usize = 8;

/// The open connections to one home's store.
pub(crate) struct Stores {
    home: PathBuf,
    idle: Mutex<Vec<(Store, (u64, u64))>>,
    /// The home's store is a database server's, not a file.
    remote: bool,
}

/// A connection taken from the pool; it goes back when dropped.
pub(crate) struct Pooled {
    store: Option<(Store, (u64, u64))>,
    pool: Arc<Stores>,
}

impl std::ops::Deref for Pooled {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store.as_ref().expect("held until dropped").0
    }
}

impl std::ops::DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut Store {
        &mut self.store.as_mut().expect("held until dropped").0
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(entry) = self.store.take()
            && entry.0.is_usable()
            && let Ok(mut idle) = self.pool.idle.lock()
            && idle.len() < MAX_IDLE
        {
            idle.push(entry);
        }
    }
}

impl Stores {
    pub(crate) fn new(home: PathBuf) -> Arc<Stores> {
        let remote = wfhost_store::Location::resolve(&home).is_ok_and(|l| !l.is_embedded());
        Arc::new(Stores {
            home,
            idle: Mutex::new(Vec::new()),
            remote,
        })
    }

    pub(crate) fn home(&self) -> &Path {
        &self.home
    }

    /// The store file's identity now, if there is one.
    fn identity(&self) -> Option<(u64, u64)> {
        if self.remote {
            return Some((0, 0));
        }
        std::fs::metadata(self.home.join(wfhost_store::STORE_FILE))
            .ok()
            .map(|m| (m.dev(), m.ino()))
    }

    /// A connection to the existing store (`NoStore` when no run was ever
    /// started in this home).
    pub(crate) fn existing(self: &Arc<Self>) -> Result<Pooled, StoreError> {
        self.take(false)
    }

    /// A connection to the store, created if there is none yet.
    pub(crate) fn create(self: &Arc<Self>) -> Result<Pooled, StoreError> {
        self.take(true)
    }

    /// The store, or None when no run was ever started in this home.
    pub(crate) fn if_any(self: &Arc<Self>) -> Result<Option<Pooled>, StoreError> {
        match self.existing() {
            Ok(store) => Ok(Some(store)),
            Err(StoreError::NoStore { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn take(self: &Arc<Self>, create: bool) -> Result<Pooled, StoreError> {
        if let Some(now) = self.identity() {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            // Connections to a store file that was replaced are dropped.
            idle.retain(|(_, id)| *id == now);
            if let Some(entry) = idle.pop() {
                return Ok(self.pooled(entry));
            }
        }
        let store = if create {
            Store::open(&self.home, Durability::Full)?
        } else {
            Store::open_existing(&self.home)?
        };
        let id = self.identity().unwrap_or_default();
        Ok(self.pooled((store, id)))
    }

    fn pooled(self: &Arc<Self>, entry: (Store, (u64, u64))) -> Pooled {
        Pooled {
            store: Some(entry),
            pool: self.clone(),
        }
    }
}

/// Run `f` on the store; `empty` answers when no run was ever started in
/// this home (no store file yet).
pub(crate) async fn with_store<T: Send + 'static>(
    stores: &Arc<Stores>,
    empty: Option<T>,
    f: impl FnOnce(&Store) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let stores = stores.clone();
    blocking(move || match stores.existing() {
        Ok(store) => f(&store),
        Err(StoreError::NoStore { .. }) if empty.is_some() => Ok(empty.expect("checked")),
        Err(e) => Err(e.into()),
    })
    .await
}

/// `f` on tokio's blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    // The request's span (and a job endpoint's) goes along to the thread.
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(f))
        .await
        .map_err(|e| ApiError::internal(format!("the request's task failed: {e}")))?
}

/// A run by its exact id (the API does not guess from a part of one).
pub(crate) fn exact_run(store: &Store, id: &str) -> Result<wfhost_store::RunRecord, ApiError> {
    store
        .run(id)?
        .ok_or_else(|| ApiError::not_found(format!("unknown run id `{id}`")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wfhost_core::run::event::Event;
    use wfhost_store::RunRecord;

    fn add_run(home: &Path, id: &str) {
        let mut store = Store::open(home, Durability::Normal).unwrap();
        let record = RunRecord {
            id: wfhost_store::RunId::parse(id).unwrap(),
            workflow_id: "w".into(),
            workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
            manifest: "/nowhere/wf.json".into(),
            workspace: "/tmp".into(),
            created_at: 1,
        };
        let started = Event::RunStarted {
            run_id: id.into(),
            workflow_id: "w".into(),
            workflow_hash: record.workflow_hash.clone(),
            plugins: Default::default(),
            start_node: "main".into(),
            start_block: "a".into(),
            max_steps: 10,
            max_call_depth: 8,
            default_executor: String::new(),
            inputs: Default::default(),
            rerun_of: None,
        };
        store.create_run(&record, "{}", &started).unwrap();
    }

    #[test]
    fn connections_are_reused_and_a_replaced_store_is_opened_afresh() {
        let home = tempfile::tempdir().unwrap();
        let stores = Stores::new(home.path().to_path_buf());
        assert!(stores.if_any().unwrap().is_none(), "no store, none made");
        add_run(home.path(), "run-20260101-000000-0000f1");
        drop(stores.existing().unwrap());
        assert_eq!(
            stores.idle.lock().unwrap().len(),
            1,
            "kept for the next request"
        );
        assert!(
            stores
                .existing()
                .unwrap()
                .run("run-20260101-000000-0000f1")
                .unwrap()
                .is_some()
        );

        // The store is removed and another one made in its place: the
        // kept connection (to the removed file) must not answer.
        for entry in std::fs::read_dir(home.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                std::fs::remove_file(path).unwrap();
            }
        }
        add_run(home.path(), "run-20260101-000000-0000f2");
        let store = stores.existing().unwrap();
        assert!(store.run("run-20260101-000000-0000f2").unwrap().is_some());
        assert!(store.run("run-20260101-000000-0000f1").unwrap().is_none());
    }
}
