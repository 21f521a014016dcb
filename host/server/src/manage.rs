//! Changing runs: cancel one, export one as a bundle, import a bundle.

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use wfhost_store::{Bundle, CancelError, Cancellation, StoreError};

use crate::AppState;
use crate::body::JsonBody;
use crate::error::ApiError;
use crate::store::{blocking, exact_run, with_store};

/// The longest a cancel waits for a live run to stop.
pub const MAX_CANCEL_WAIT_S: u64 = 600;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelBody {
    /// Recorded with the cancellation.
    reason: Option<String>,
    /// Who asks, as the client names itself (`the dashboard`, `ci`):
    /// recorded as `<by> through the HTTP API`.
    by: Option<String>,
    /// How long to wait for a live run's process to stop (default 60).
    wait_s: Option<u64>,
}

pub async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<CancelBody>,
) -> Result<Json<Value>, ApiError> {
    let wait = body.wait_s.unwrap_or(60);
    if wait > MAX_CANCEL_WAIT_S {
        return Err(ApiError::bad_request(format!(
            "wait_s {wait} is over the maximum of {MAX_CANCEL_WAIT_S}"
        ))
        .with_details(json!({"pointer": "/wait_s", "maximum": MAX_CANCEL_WAIT_S})));
    }
    let cancellation = Cancellation {
        by: who_cancels(body.by.as_deref())?,
        reason: body.reason,
    };
    let stores = state.stores.clone();
    let runner = state.runner.clone();
    blocking(move || {
        let mut store = stores.existing()?;
        exact_run(&store, &id)?;
        let reason = store
            .cancel(&id, &cancellation, Duration::from_secs(wait))
            .map_err(cancel_error)?;
        // The run's session files say so too: no decision left pending.
        if let Some(runner) = runner {
            let settle = wfhost_protocol::RunRequest::Settle { run_id: id.clone() };
            if let Err(e) = runner.submit(stores.home(), &settle) {
                tracing::warn!(run_id = %id, "session files not brought up to date: {}", e.message);
            }
        }
        Ok(Json(
            json!({"run_id": id, "status": "cancelled", "reason": reason}),
        ))
    })
    .await
}

/// The longest name a client may give itself when it cancels.
const MAX_BY: usize = 100;

/// Who a cancellation is recorded as coming from: the API, and the
/// client's own name for itself when it gives one (one short line).
fn who_cancels(by: Option<&str>) -> Result<String, ApiError> {
    let Some(by) = by.map(str::trim).filter(|b| !b.is_empty()) else {
        return Ok("the HTTP API".to_string());
    };
    if by.chars().count() > MAX_BY || by.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "`by` must be one line of at most {MAX_BY} characters"
        ))
        .with_details(json!({"pointer": "/by", "maximum": MAX_BY})));
    }
    Ok(format!("{by} through the HTTP API"))
}

fn cancel_error(e: CancelError) -> ApiError {
    match e {
        CancelError::Store(e) => e.into(),
        CancelError::Finished { .. } => {
            ApiError::new(StatusCode::CONFLICT, "finished", e.to_string())
        }
        CancelError::NoPid { .. } | CancelError::DidNotStop { .. } => {
            ApiError::new(StatusCode::CONFLICT, "busy", e.to_string())
        }
        CancelError::NotRecorded { .. } => ApiError::internal(e.to_string()),
    }
}

/// The run as a bundle (`wfhost export`'s format): import it into
/// another store with `POST /v1/runs/import` or `wfhost import`.
pub async fn export(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Bundle>, ApiError> {
    with_store(&state.stores, None, move |store| {
        exact_run(store, &id)?;
        Ok(Json(store.export(&id)?))
    })
    .await
}

/// Add a bundle's run to this store, all or nothing.
pub async fn import(
    State(state): State<AppState>,
    bytes: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let bytes = bytes.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            crate::body::too_large()
        } else {
            ApiError::bad_request(format!("cannot read the request body: {}", e.body_text()))
        }
    })?;
    // The shape first (a 400 naming the pointer), then the bundle's own
    // checks (format, version, checksum, pinned definition).
    crate::body::parse::<Value>(&bytes)?;
    let bundle = Bundle::parse(&bytes)
        .map_err(|m| ApiError::bad_request(format!("the bundle is invalid: {m}")))?;
    let stores = state.stores.clone();
    blocking(move || {
        let mut store = stores.create()?;
        match store.import(&bundle) {
            Ok(()) => Ok((
                StatusCode::CREATED,
                Json(json!({"run_id": bundle.run.id, "events": bundle.events.len()})),
            )),
            Err(StoreError::RunExists(id)) => Err(ApiError::new(
                StatusCode::CONFLICT,
                "exists",
                format!("run {id} is already in this store"),
            )),
            Err(e) => Err(e.into()),
        }
    })
    .await
}
