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

/// A delivery checked and recorded: the run to start, or the gate to
/// answer.
struct Accepted {
    hook: Hook,
    run_id: String,
    inputs: serde_json::Map<String, Value>,
    delivery: Option<String>,
    /// For a hook that answers gates: the gate and the answer.
    answer: Option<(String, String)>,
}

/// What a hook that answers gates takes from `payload`: the run, the gate
/// and the answer, at the hook's pointers (or `/run_id`, `/gate`,
/// `/answer`); 422 naming the one missing.
fn answer_of(hook: &Hook, payload: &Value) -> Result<(String, String, String), ApiError> {
    let mut found = Vec::new();
    for field in wfhost_store::hooks::ANSWER_FIELDS {
        let pointer = hook
            .mapping
            .get(*field)
            .and_then(Value::as_str)
            .map_or_else(|| format!("/{field}"), str::to_string);
        let text = match payload.pointer(&pointer) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(v @ Value::Object(_)) if *field == "answer" => v.to_string(),
            _ => {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_inputs",
                    format!("the delivery has no `{field}` at {pointer}"),
                )
                .with_details(json!({"pointer": pointer})));
            }
        };
        found.push(text);
    }
    let [run, gate, answer]: [String; 3] = found.try_into().expect("three fields");
    Ok((run, gate, answer))
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
        let (run_id, inputs, answer) = if hook.action == "answer" {
            let (run, gate, answer) = answer_of(&hook, &payload)?;
            (run, serde_json::Map::new(), Some((gate, answer)))
        } else {
            let inputs = webhook::inputs_of(&hook.mapping, &hook.inputs, &payload);
            check_inputs(std::path::Path::new(&hook.workflow), &inputs).map_err(|mut e| {
                e.status = StatusCode::UNPROCESSABLE_ENTITY;
                e.code = "invalid_inputs";
                e
            })?;
            (wfhost_store::new_run_id(now).to_string(), inputs, None)
        };
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
            answer,
        })
    })
    .await?;
    start(&state, accepted).await
}

/// Start the accepted delivery's run (or answer its gate); one that fails
/// forgets the delivery, so that the sender's redelivery can.
async fn start(state: &AppState, a: Accepted) -> Result<(StatusCode, Json<Value>), ApiError> {
    if let Some((gate, answer)) = a.answer.clone() {
        let answered = crate::start::answer(state, a.run_id.clone(), gate, answer).await;
        settle(state, &a, answered.is_ok()).await?;
        let (status, Json(mut body)) = answered?;
        body["hook"] = json!(a.hook.name);
        body["delivery"] = json!(a.delivery);
        return Ok((status, Json(body)));
    }
    let workspace = workspace_of(&a);
    if workspace != a.hook.workspace {
        std::fs::create_dir(&workspace).map_err(|e| {
            ApiError::internal(format!("cannot make the run's workspace {workspace}: {e}"))
        })?;
    }
    let request = RunRequest::Start {
        manifest: a.hook.workflow.clone(),
        workspace,
        run_id: a.run_id.clone(),
        inputs: Some(a.inputs.clone()),
        max_steps: None,
        executor: None,
    };
    let submitted = submit(state, request).await;
    settle(state, &a, submitted.is_ok()).await?;
    submitted?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"hook": a.hook.name, "run_id": a.run_id, "delivery": a.delivery})),
    ))
}

/// The run's workspace: the hook's, `{run}` replaced by the run's id.
fn workspace_of(a: &Accepted) -> String {
    a.hook.workspace.replace("{run}", &a.run_id)
}

/// Record the delivery's run started, or forget the delivery (`ok`
/// false) so that it may come again.
async fn settle(state: &AppState, a: &Accepted, ok: bool) -> Result<(), ApiError> {
    let (stores, hook, delivery) = (
        state.stores.clone(),
        a.hook.name.clone(),
        a.delivery.clone(),
    );
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
    .await
}

fn refused(r: webhook::Refusal) -> ApiError {
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_REQUEST);
    ApiError::new(status, r.code, r.message)
}
