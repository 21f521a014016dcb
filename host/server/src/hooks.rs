//! Webhook triggers: `POST /v1/hooks/{name}` starts a run of the hook's
//! workflow from a delivery — its signature, time and id checked as the
//! hook's format says (`wfhost_core::webhook`), its payload mapped to the
//! run's inputs and those checked against the workflow's `inputs` schema
//! (422 naming the input), its id recorded before the run starts so a
//! replayed delivery starts nothing. Authenticated by the signature, not by
//! the API's bearer token (senders such as GitHub have none). `GET
//! /v1/hooks` lists the hooks (for clients).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use wfhost_core::webhook;
use wfhost_protocol::RunRequest;
use wfhost_store::hooks::Hook;
use wfhost_store::time::now_ms;

use crate::AppState;
use crate::error::ApiError;
use crate::start::{check_inputs, runner, submit};
use crate::store::blocking;

/// Whether a request is a hook delivery: answered without a bearer token
/// (its signature is checked instead).
pub(crate) fn is_delivery(method: &axum::http::Method, path: &str) -> bool {
    method == axum::http::Method::POST
        && path
            .strip_prefix("/v1/hooks/")
            .is_some_and(|name| !name.is_empty() && !name.contains('/'))
}

/// `GET /v1/hooks`.
pub async fn list(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let stores = state.stores.clone();
    blocking(move || {
        let store = stores.create()?;
        Ok(Json(json!({"hooks": store.hooks()?})))
    })
    .await
}

/// A delivery checked and recorded: the run to start.
struct Accepted {
    hook: Hook,
    run_id: String,
    inputs: serde_json::Map<String, Value>,
    delivery: Option<String>,
}

/// `POST /v1/hooks/{name}`.
pub async fn deliver(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    runner(&state)?;
    let (stores, home) = (state.stores.clone(), state.stores.home().to_path_buf());
    let accepted = blocking(move || {
        let mut store = stores.create()?;
        let hook = store
            .hook(&name)?
            .ok_or_else(|| ApiError::not_found(format!("no hook named `{name}`")))?;
        let secret = match &hook.secret {
            Some(secret) => wfhost_store::secrets::HomeSecrets::new(&home).read(secret)?,
            None => None,
        };
        let header = |n: &str| {
            headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let now = now_ms();
        let checked = webhook::check(
            &hook.format,
            secret.as_deref().map(str::as_bytes),
            &header,
            &body,
            (now / 1000, hook.window_s),
        )
        .map_err(refused)?;
        let payload: Value = serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("the delivery's body is not JSON: {e}")))?;
        let inputs = webhook::inputs_of(&hook.mapping, &hook.inputs, &payload);
        check_inputs(std::path::Path::new(&hook.workflow), &inputs).map_err(|mut e| {
            e.status = StatusCode::UNPROCESSABLE_ENTITY;
            e.code = "invalid_inputs";
            e
        })?;
        let run_id = wfhost_store::new_run_id(now).to_string();
        if let Some(id) = &checked.delivery
            && let Some(before) = store.claim_delivery(&hook.name, id, &run_id, now)?
        {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "duplicate_delivery",
                format!("delivery `{id}` was taken already: nothing started"),
            )
            .with_details(json!({"run_id": before.run_id, "at_ms": before.at_ms})));
        }
        Ok(Accepted {
            hook,
            run_id,
            inputs,
            delivery: checked.delivery,
        })
    })
    .await?;
    start(&state, accepted).await
}

/// Start the accepted delivery's run; a start that fails forgets the
/// delivery, so that the sender's redelivery can start it.
async fn start(state: &AppState, a: Accepted) -> Result<(StatusCode, Json<Value>), ApiError> {
    let workspace = a.hook.workspace.replace("{run}", &a.run_id);
    if workspace != a.hook.workspace {
        std::fs::create_dir(&workspace).map_err(|e| {
            ApiError::internal(format!("cannot make the run's workspace {workspace}: {e}"))
        })?;
    }
    let request = RunRequest::Start {
        manifest: a.hook.workflow.clone(),
        workspace,
        run_id: a.run_id.clone(),
        inputs: Some(a.inputs),
        max_steps: None,
        executor: None,
    };
    let submitted = submit(state, request).await;
    let (stores, hook, delivery) = (
        state.stores.clone(),
        a.hook.name.clone(),
        a.delivery.clone(),
    );
    let ok = submitted.is_ok();
    blocking(move || {
        if let Some(id) = &delivery {
            let mut store = stores.create()?;
            match ok {
                true => store.delivery_started(&hook, id)?,
                false => store.release_delivery(&hook, id)?,
            }
        }
        Ok(())
    })
    .await?;
    submitted?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"hook": a.hook.name, "run_id": a.run_id, "delivery": a.delivery})),
    ))
}

fn refused(r: webhook::Refusal) -> ApiError {
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_REQUEST);
    ApiError::new(status, r.code, r.message)
}
