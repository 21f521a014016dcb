//! The store, opened per request on the blocking pool.

use std::path::Path;

use wfhost_store::{Store, StoreError};

use crate::error::ApiError;

/// Run `f` on the store in `home`; `empty` answers when no run was ever
/// started there (no store file yet).
pub(crate) async fn with_store<T: Send + 'static>(
    home: &Path,
    empty: Option<T>,
    f: impl FnOnce(&Store) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let home = home.to_path_buf();
    blocking(move || match Store::open_existing(&home) {
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
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(format!("the request's task failed: {e}")))?
}

/// A run by its exact id (the API does not guess from a part of one).
pub(crate) fn exact_run(store: &Store, id: &str) -> Result<wfhost_store::RunRecord, ApiError> {
    store
        .run(id)?
        .ok_or_else(|| ApiError::not_found(format!("unknown run id `{id}`")))
}
