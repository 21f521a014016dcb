//! What can go wrong with the store, phrased for the person at the terminal.

use std::path::{Path, PathBuf};

/// A store error. Every message says what and where; none of them leaves
/// the store half-written (writes are transactions).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no run store at {path} yet: no run has been started with this wfhost home")]
    NoStore { path: PathBuf },
    #[error("unknown run id `{id}` (store {store}); `wfhost runs` lists the runs")]
    UnknownRun { id: String, store: PathBuf },
    #[error("unknown session `{id}` (store {store}); `wfhost session list` lists the sessions")]
    UnknownSession { id: String, store: PathBuf },
    #[error("run {0} already exists in this store")]
    RunExists(String),
    #[error(
        "run {run_id} is being executed by another wfhost process{}; wait for it to finish or stop it",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Busy { run_id: String, pid: Option<u32> },
    /// The database lock of a run this process executed was lost (its
    /// connection ended) and could not be taken again.
    #[error(
        "run {run_id}: this process lost the run's lock (its connection to the database ended and the lock could not be taken again): it stops executing the run, which another process may have taken over"
    )]
    LockLost { run_id: String },
    #[error(
        "the run store {path} is damaged ({detail}); it was not modified. Restore it from a backup, or move it aside to start a new one"
    )]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "the run store {path} was written by a newer wfhost (store schema {found}); this wfhost reads schema {}",
        crate::schema::SCHEMA_VERSION
    )]
    TooNew { path: PathBuf, found: i64 },
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("the run store is inconsistent: {0}")]
    Inconsistent(String),
    #[error("ack {attempt} of snapshot {snapshot} of run {run_id} was already used")]
    AckUsed {
        run_id: String,
        snapshot: u64,
        attempt: u32,
    },
    #[error("{0}")]
    Usage(String),
    /// An id that came from outside is not of its kind's grammar.
    #[error(transparent)]
    BadId(#[from] wfhost_core::ids::IdError),
    /// The database refused an operation (SQLite's or PostgreSQL's
    /// error, in its words).
    #[error("run store {path}: {message}")]
    Database { path: PathBuf, message: String },
    /// The database cannot be reached (PostgreSQL down, the connection
    /// lost): nothing was written by the operation that met it.
    #[error("run store {path} is unavailable: {message}")]
    Unavailable { path: PathBuf, message: String },
    #[error(
        "run store {path}: another process kept it locked for longer than {}s ({detail}); try again",
        crate::BUSY_TIMEOUT.as_secs()
    )]
    Locked { path: PathBuf, detail: String },
}

impl StoreError {
    pub(crate) fn from_db(path: &Path, e: crate::db::DbError) -> StoreError {
        use crate::db::DbError;
        match e {
            DbError::Sqlite(e) => Self::from_sqlite(path, e),
            DbError::Postgres(e) if crate::db::is_unavailable(&e) => StoreError::Unavailable {
                path: path.to_path_buf(),
                message: crate::db::describe(&e),
            },
            DbError::Lost(message) => StoreError::Unavailable {
                path: path.to_path_buf(),
                message,
            },
            other => StoreError::Database {
                path: path.to_path_buf(),
                message: other.to_string(),
            },
        }
    }

    pub(crate) fn from_sqlite(path: &Path, e: rusqlite::Error) -> StoreError {
        use rusqlite::ErrorCode;
        if let rusqlite::Error::SqliteFailure(inner, message) = &e {
            let detail = message.clone().unwrap_or_else(|| inner.to_string());
            match inner.code {
                ErrorCode::NotADatabase => {
                    return StoreError::Corrupt {
                        path: path.to_path_buf(),
                        detail: "the file is not a SQLite database".into(),
                    };
                }
                ErrorCode::DatabaseCorrupt => {
                    return StoreError::Corrupt {
                        path: path.to_path_buf(),
                        detail,
                    };
                }
                ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
                    return StoreError::Locked {
                        path: path.to_path_buf(),
                        detail,
                    };
                }
                _ => {}
            }
        }
        StoreError::Database {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    }

    /// Whether the error is the user's (unknown id, bad answer) rather than
    /// the store's.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            StoreError::NoStore { .. }
                | StoreError::UnknownRun { .. }
                | StoreError::UnknownSession { .. }
                | StoreError::RunExists(_)
                | StoreError::Usage(_)
        )
    }
}
