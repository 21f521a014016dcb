//! `/v1/schedules`: what `wfhost schedule` does, over HTTP.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use wfhost_store::Store;
use wfhost_store::schedules::{Schedule, Spec};
use wfhost_store::time::now_ms;

use crate::AppState;
use crate::body::JsonBody;
use crate::error::ApiError;
use crate::store::blocking;

/// A schedule to add.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddBody {
    name: String,
    cron: String,
    #[serde(default)]
    tz: Option<String>,
    /// The workflow file on the server (absolute).
    workflow: String,
    /// The runs' workspace (absolute; `{run}` stands for each run's id).
    workspace: String,
    #[serde(default)]
    inputs: Option<Map<String, Value>>,
    #[serde(default)]
    overlap: Option<String>,
    #[serde(default)]
    catch_up: Option<u32>,
}

/// How many ticks a schedule's view lists.
const TICKS_SHOWN: usize = 20;

/// `GET /v1/schedules`.
pub async fn list(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let stores = state.stores.clone();
    blocking(move || {
        let store = stores.create()?;
        let schedules = store.schedules()?;
        Ok(Json(
            json!({"schedules": schedules, "server_now_ms": now_ms()}),
        ))
    })
    .await
}

/// `POST /v1/schedules`: checked like `wfhost schedule add`.
pub async fn add(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<AddBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let stores = state.stores.clone();
    blocking(move || {
        let spec = Spec {
            name: body.name,
            cron: body.cron,
            tz: body.tz,
            workflow: body.workflow.into(),
            workspace: body.workspace.into(),
            inputs: body.inputs.unwrap_or_default(),
            overlap: body.overlap,
            catch_up: body.catch_up,
        };
        let schedule = spec.define(now_ms()).map_err(|p| {
            let pointer = p.pointer.clone().unwrap_or_else(|| format!("/{}", p.field));
            ApiError::bad_request(format!("{}: {}", p.field, p.message))
                .with_details(json!({"pointer": pointer, "field": p.field}))
        })?;
        let mut store = stores.create()?;
        if store.schedule(&schedule.name)?.is_some() {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "exists",
                format!("a schedule named `{}` exists", schedule.name),
            ));
        }
        store.add_schedule(&schedule)?;
        Ok((StatusCode::CREATED, Json(json!({"schedule": schedule}))))
    })
    .await
}

fn found(store: &Store, name: &str) -> Result<Schedule, ApiError> {
    store
        .schedule(name)?
        .ok_or_else(|| ApiError::not_found(format!("no schedule named `{name}`")))
}

/// `GET /v1/schedules/{name}`: the schedule and its recent ticks.
pub async fn show(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let stores = state.stores.clone();
    blocking(move || {
        let store = stores.create()?;
        let schedule = found(&store, &name)?;
        let ticks = store.ticks(&name, TICKS_SHOWN)?;
        Ok(Json(json!({"schedule": schedule, "ticks": ticks})))
    })
    .await
}

/// `DELETE /v1/schedules/{name}`.
pub async fn remove(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let stores = state.stores.clone();
    blocking(move || {
        let mut store = stores.create()?;
        match store.remove_schedule(&name)? {
            true => Ok(Json(json!({"removed": name}))),
            false => Err(ApiError::not_found(format!("no schedule named `{name}`"))),
        }
    })
    .await
}

/// `POST /v1/schedules/{name}/pause`.
pub async fn pause(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    set_paused(state, name, true).await
}

/// `POST /v1/schedules/{name}/resume`: from its next tick after now.
pub async fn resume(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    set_paused(state, name, false).await
}

async fn set_paused(state: AppState, name: String, paused: bool) -> Result<Json<Value>, ApiError> {
    let stores = state.stores.clone();
    blocking(move || {
        let mut store = stores.create()?;
        match store.pause_schedule(&name, paused, now_ms())? {
            Some(schedule) => Ok(Json(json!({"schedule": schedule}))),
            None => Err(ApiError::not_found(format!("no schedule named `{name}`"))),
        }
    })
    .await
}

/// `POST /v1/schedules/{name}/trigger`: a run now, started by the watcher
/// like a tick's (its id chosen and recorded first).
pub async fn trigger(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let stores = state.stores.clone();
    blocking(move || {
        let mut store = stores.create()?;
        found(&store, &name)?;
        let tick = store.trigger_schedule(&name, now_ms())?;
        Ok((
            StatusCode::ACCEPTED,
            Json(json!({"schedule": name, "run_id": tick.run_id, "tick_ms": tick.tick_ms})),
        ))
    })
    .await
}
