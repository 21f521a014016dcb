//! Sessions: the runs of one workstream (an MCP client's session id, or a
//! workspace's git branch), listed together and exported as one bundle.

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use crate::AppState;
use crate::error::ApiError;
use crate::runs::summary;
use crate::store::with_store;

/// `GET /v1/sessions`: every session, the most recently active first.
pub async fn list(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    with_store(&app.stores, Some(json!({"sessions": []})), |store| {
        Ok(json!({"sessions": store.sessions()?}))
    })
    .await
    .map(Json)
}

/// `GET /v1/sessions/{id}`: the session's runs, oldest first, each as the
/// runs listing shows it.
pub async fn show(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    with_store(&app.stores, None, move |store| {
        let records = store.session_runs(&id)?;
        if records.is_empty() {
            return Err(ApiError::not_found(format!("unknown session `{id}`")));
        }
        let runs = records
            .into_iter()
            .map(|run| summary(store, run, Some(id.clone())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(json!({"session": id, "runs": runs}))
    })
    .await
    .map(Json)
}

/// `GET /v1/sessions/{id}/export`: the session as a bundle
/// (`wfhost session import` takes it).
pub async fn export(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    with_store(&app.stores, None, move |store| {
        let bundle = store.export_session(&id)?;
        serde_json::to_value(bundle).map_err(|e| ApiError::internal(e.to_string()))
    })
    .await
    .map(Json)
}
