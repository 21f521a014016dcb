//! The workflows a client may start: the workflow files under the
//! server's projects root, and the pinned definition of a run.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};
use wfhost_core::formats::discover;

use crate::AppState;
use crate::error::ApiError;
use crate::store::{blocking, exact_run, with_store};

/// `GET /v1/workflows`: the workflow files under the projects root, paths
/// relative to it, each with its id, description and inputs schema, or
/// the error that keeps it from loading.
pub async fn list(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let Some(root) = state.projects_root.clone() else {
        return Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "not_available",
            "this server has no projects root to list workflows from",
        ));
    };
    blocking(move || {
        let found = discover::discover(&root);
        Ok(Json(json!({
            "root": root.display().to_string(),
            "workflows": found.workflows,
            "truncated": found.truncated,
        })))
    })
    .await
}

/// `GET /v1/runs/{id}/definition`: the workflow definition the run pinned
/// when it started (what it runs, whatever became of the file since).
pub async fn definition(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    with_store(&state.stores, None, move |store| {
        let run = exact_run(store, &id)?;
        let text = store.definition(&run.workflow_hash)?;
        let definition: Value = serde_json::from_str(&text)
            .map_err(|e| ApiError::internal(format!("the pinned definition: {e}")))?;
        Ok(json!({"hash": run.workflow_hash, "definition": definition}))
    })
    .await
    .map(Json)
}
