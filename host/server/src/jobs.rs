//! Leased jobs: the endpoints agents call, and the reconcile loop.
//!
//! An agent asks for a job (`POST /v1/agent/lease`, long-polled), sends a
//! heartbeat while it runs it (`POST /v1/jobs/{id}/heartbeat`), forwards
//! what its agent blocks send their `TELEMETRY_URL` as it arrives
//! (`POST /v1/jobs/{id}/telemetry`) and reports the result (`POST /v1/jobs/{id}/complete`),
//! or, when it stops, hands the job back (`POST /v1/jobs/{id}/release`). Heartbeats, releases and completions
//! are fenced on the lease's `(attempt, token)`: a stale or foreign one is
//! refused with 409 `lease_lost` (and a refused completion is recorded in
//! the job's history). The reconcile loop puts jobs whose lease ran out
//! back in the queue with their attempt raised. The server's clock is the
//! one that counts: every answer carries `server_now_ms`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use wfhost_store::{Completion, LeaseLost, Store, TelemetryCaps};

use crate::AppState;
use crate::body::JsonBody;
use crate::error::ApiError;
use crate::store::{Stores, blocking, exact_run, with_store};

/// The default lease: an agent that has not sent a heartbeat for this long
/// has lost its job.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// The shortest lease a server accepts.
pub const MIN_LEASE: Duration = Duration::from_millis(300);
/// Agents send a heartbeat every lease / this (so a lease outlives several
/// lost heartbeats: at least 3 are required, 6 are given).
pub const HEARTBEATS_PER_LEASE: u32 = 6;
/// The longest an agent's lease request waits for a job.
pub const MAX_LEASE_WAIT_MS: u64 = 30_000;
/// The largest result an agent may report (the request body limit).
pub const MAX_RESULT_BYTES: usize = crate::MAX_BODY_BYTES;

fn now_ms() -> i64 {
    wfhost_store::time::now_ms()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeaseBody {
    /// The agent's name (letters, digits, `.`, `_`, `-`; at most 64).
    agent: String,
    /// What the agent can run: `wasm`, `exec`, `container`, `slurm`.
    capabilities: Vec<String>,
    /// How long to wait for a job when none is queued (default 0).
    #[serde(default)]
    wait_ms: u64,
}

/// The capabilities a job may require.
pub const CAPABILITIES: [&str; 4] = ["wasm", "exec", "container", "slurm"];

fn check_lease_body(body: &LeaseBody) -> Result<(), ApiError> {
    let name_ok = !body.agent.is_empty()
        && body.agent.len() <= 64
        && body
            .agent
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !name_ok {
        return Err(
            ApiError::bad_request("agent: 1 to 64 letters, digits, `.`, `_` or `-`")
                .with_details(json!({"pointer": "/agent"})),
        );
    }
    if let Some((i, bad)) = body
        .capabilities
        .iter()
        .enumerate()
        .find(|(_, c)| !CAPABILITIES.contains(&c.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "capabilities: unknown capability `{}` (known: {})",
            wfhost_core::text::escape(bad),
            CAPABILITIES.join(", ")
        ))
        .with_details(json!({"pointer": format!("/capabilities/{i}")})));
    }
    if body.wait_ms > MAX_LEASE_WAIT_MS {
        return Err(ApiError::bad_request(format!(
            "wait_ms {} is over the maximum of {MAX_LEASE_WAIT_MS}",
            body.wait_ms
        ))
        .with_details(json!({"pointer": "/wait_ms", "maximum": MAX_LEASE_WAIT_MS})));
    }
    Ok(())
}

/// The longest a lease waiter sleeps without looking at the queue: what a
/// lost doorbell ring costs at most.
pub const LEASE_FALLBACK: Duration = Duration::from_millis(250);

/// `POST /v1/agent/lease`: the oldest queued job this agent can run,
/// leased to it; `job: null` when none came within `wait_ms`.
#[tracing::instrument(name = "job.lease", skip_all, fields(agent = tracing::field::Empty, wait_ms = body.wait_ms, job_id = tracing::field::Empty, run_id = tracing::field::Empty))]
pub(crate) async fn lease(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<LeaseBody>,
) -> Result<Json<Value>, ApiError> {
    check_lease_body(&body)?;
    tracing::Span::current().record("agent", body.agent.as_str());
    let lease_ms = state.lease.as_millis() as i64;
    let deadline = Instant::now() + Duration::from_millis(body.wait_ms);
    let body = Arc::new(body);
    // Jobs are queued by other processes, which ring the server's doorbell:
    // the store's watcher then wakes `changes`, and the queue is looked at
    // again (on the blocking pool). Nothing rang for `LEASE_FALLBACK`: look
    // anyway. A server that begins to stop answers "no job" at once.
    let mut changes = state.changes.clone();
    let mut looks = 0u32;
    let answer = loop {
        // A commit from here on wakes the wait below.
        changes.mark_unchanged();
        looks += 1;
        let (stores, asked) = (state.stores.clone(), Arc::clone(&body));
        let found = blocking(move || match stores.if_any()? {
            Some(mut store) => claim(&mut store, &asked, lease_ms),
            None => Ok(None),
        })
        .await?;
        if let Some(answer) = found {
            let job = &answer["job"];
            let span = tracing::Span::current();
            if let Some(id) = job["id"].as_i64() {
                span.record("job_id", id);
            }
            if let Some(run) = job["run_id"].as_str() {
                span.record("run_id", run);
            }
            break answer;
        }
        let now = Instant::now();
        if now >= deadline || state.stopping.begun() {
            break json!({"job": null, "server_now_ms": now_ms()});
        }
        let wait = (deadline - now).min(LEASE_FALLBACK);
        tokio::select! {
            changed = changes.changed() => {
                // No watcher: look on a short timer instead.
                if changed.is_err() {
                    tokio::time::sleep(wait.min(crate::changes::TICK)).await;
                }
            }
            () = tokio::time::sleep(wait) => {}
            () = state.stopping.wait() => {}
        }
    };
    tracing::debug!(looks, "lease answered");
    Ok(Json(answer))
}

fn claim(store: &mut Store, body: &LeaseBody, lease_ms: i64) -> Result<Option<Value>, ApiError> {
    if !store.has_queued_jobs()? {
        return Ok(None);
    }
    let now = now_ms();
    let Some(lease) = store.claim_job(&body.agent, &body.capabilities, lease_ms, now)? else {
        return Ok(None);
    };
    let request: Value = serde_json::from_str(&lease.request).map_err(|e| {
        ApiError::internal(format!(
            "job {}: its request is not JSON: {e}",
            lease.job.id
        ))
    })?;
    Ok(Some(json!({
        "job": {
            "id": lease.job.id,
            "attempt": lease.job.attempt,
            "token": lease.token,
            "run_id": lease.job.run_id,
            "node": lease.job.node,
            "block": lease.job.block,
            "requires": lease.job.requires,
            "expires_at_ms": lease.job.expires_at_ms,
            "lease_ms": lease_ms,
            "heartbeat_ms": lease_ms / i64::from(HEARTBEATS_PER_LEASE),
            "request": request,
        },
        "server_now_ms": now,
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HeartbeatBody {
    attempt: u32,
    token: String,
}

fn lease_lost(lost: LeaseLost) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "lease_lost",
        format!("job {}: {}", lost.job, lost.reason),
    )
    .with_details(json!({
        "job": lost.job,
        "state": lost.state.as_str(),
        "attempt": lost.attempt,
        "server_now_ms": now_ms(),
    }))
}

/// `POST /v1/jobs/{id}/heartbeat`: extend the lease `(attempt, token)`.
#[tracing::instrument(name = "job.heartbeat", level = "debug", skip_all, fields(job_id = id, attempt = body.attempt))]
pub(crate) async fn heartbeat(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    JsonBody(body): JsonBody<HeartbeatBody>,
) -> Result<Json<Value>, ApiError> {
    let stores = state.stores.clone();
    let lease_ms = state.lease.as_millis() as i64;
    blocking(move || {
        let mut store = stores.existing()?;
        let now = now_ms();
        match store.heartbeat_job(id, body.attempt, &body.token, lease_ms, now)? {
            Ok(expires) => Ok(Json(json!({
                "job": id,
                "attempt": body.attempt,
                "expires_at_ms": expires,
                "server_now_ms": now,
            }))),
            Err(lost) => Err(lease_lost(lost)),
        }
    })
    .await
}

/// How much telemetry a job may report while it runs (its result may
/// carry as much again, sent when it ends).
pub const JOB_TELEMETRY_CAPS: TelemetryCaps = TelemetryCaps {
    events: 1_000,
    bytes: 256 << 10,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TelemetryBody {
    attempt: u32,
    token: String,
    /// What the job's agents sent, oldest first: JSON objects.
    events: Vec<Value>,
}

/// `POST /v1/jobs/{id}/telemetry`: what the job's agents sent while it
/// runs, fenced like a heartbeat; the run records it as the block's
/// telemetry events. Over the job's caps, the rest is dropped (counted).
pub(crate) async fn telemetry(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    JsonBody(body): JsonBody<TelemetryBody>,
) -> Result<Json<Value>, ApiError> {
    if let Some(i) = body.events.iter().position(|e| !e.is_object()) {
        return Err(ApiError::bad_request(format!(
            "events/{i}: a telemetry event is a JSON object"
        ))
        .with_details(json!({"pointer": format!("/events/{i}")})));
    }
    let bodies: Vec<String> = body.events.iter().map(Value::to_string).collect();
    let stores = state.stores.clone();
    blocking(move || {
        let mut store = stores.existing()?;
        let now = now_ms();
        let lease = (id, body.attempt, body.token.as_str());
        match store.add_job_telemetry(lease, &bodies, JOB_TELEMETRY_CAPS, now)? {
            Ok(taken) => Ok(Json(json!({
                "job": id,
                "accepted": taken.accepted,
                "dropped": taken.dropped,
                "server_now_ms": now,
            }))),
            Err(lost) => Err(lease_lost(lost)),
        }
    })
    .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompleteBody {
    attempt: u32,
    token: String,
    /// Whether the block produced an output (`succeeded`) or failed.
    succeeded: bool,
    /// The block's result, as the agent's runtime reported it.
    result: serde_json::Map<String, Value>,
}

/// `POST /v1/jobs/{id}/complete`: record the result of the lease
/// `(attempt, token)`; the same completion again gets the same answer.
#[tracing::instrument(name = "job.complete", skip_all, fields(job_id = id, attempt = body.attempt, succeeded = body.succeeded))]
pub(crate) async fn complete(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    JsonBody(body): JsonBody<CompleteBody>,
) -> Result<(StatusCode, String), ApiError> {
    let stores = state.stores.clone();
    blocking(move || {
        let mut store = stores.existing()?;
        let result = Value::Object(body.result).to_string();
        let now = now_ms();
        let respond = |job: &wfhost_store::Job| {
            json!({
                "job": job.id,
                "attempt": job.attempt,
                "state": job.state.as_str(),
                "server_now_ms": now,
            })
            .to_string()
        };
        match store.complete_job(
            (id, body.attempt, &body.token),
            body.succeeded,
            &result,
            now,
            respond,
        )? {
            Completion::Accepted { response } | Completion::Replayed { response } => {
                Ok((StatusCode::OK, response))
            }
            Completion::Refused(lost) => Err(lease_lost(lost)),
        }
    })
    .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReleaseBody {
    attempt: u32,
    token: String,
    /// Why the agent gives the job up (recorded in the job's history).
    #[serde(default)]
    reason: String,
}

/// The longest reason a release records.
const MAX_RELEASE_REASON: usize = 500;

/// `POST /v1/jobs/{id}/release`: the agent holding the lease
/// `(attempt, token)` gives the job up without a result (it is stopping):
/// the job is queued again at once with its attempt raised, instead of
/// when the lease runs out. Fenced like a heartbeat.
#[tracing::instrument(name = "job.release", skip_all, fields(job_id = id, attempt = body.attempt))]
pub(crate) async fn release(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    JsonBody(body): JsonBody<ReleaseBody>,
) -> Result<Json<Value>, ApiError> {
    if body.reason.len() > MAX_RELEASE_REASON {
        return Err(
            ApiError::bad_request(format!("reason: at most {MAX_RELEASE_REASON} bytes"))
                .with_details(json!({"pointer": "/reason"})),
        );
    }
    let stores = state.stores.clone();
    blocking(move || {
        let mut store = stores.existing()?;
        let now = now_ms();
        let why = wfhost_core::text::escape(&body.reason);
        match store.release_job((id, body.attempt, &body.token), &why, now)? {
            Ok(attempt) => {
                tracing::warn!(
                    "job {id}: its lease was handed back; queued again as attempt {attempt}"
                );
                Ok(Json(json!({
                    "job": id,
                    "state": "queued",
                    "attempt": attempt,
                    "server_now_ms": now,
                })))
            }
            Err(lost) => Err(lease_lost(lost)),
        }
    })
    .await
}

/// `GET /v1/definitions/{hash}`: a run's pinned definition, byte for byte
/// as its hash was taken (agents fetch it once per workflow).
pub(crate) async fn definition(
    State(state): State<AppState>,
    Path(hash): Path<String>,
) -> Result<([(axum::http::HeaderName, &'static str); 1], String), ApiError> {
    let unknown = ApiError::not_found(format!(
        "no pinned definition `{}`",
        wfhost_core::text::escape(&hash)
    ));
    let valid = hash
        .strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
    if !valid {
        return Err(unknown);
    }
    let text = with_store(&state.stores, None, move |store| {
        Ok(store.definition_if_any(&hash)?)
    })
    .await?;
    let text = text.ok_or(unknown)?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        text,
    ))
}

/// A job as the API shows it: the store's record, with `outcome` — what
/// the block came to, apart from the lease's `state` (a job whose command
/// failed was still run and completed): `succeeded` when its block
/// signalled `SIGNAL:SUCCESS`, `failed` when it signalled anything else or
/// could not run, null while it is not final or was cancelled.
fn view(job: &wfhost_store::Job) -> Value {
    let mut shown = serde_json::to_value(job).unwrap_or(Value::Null);
    shown["outcome"] = match outcome(job) {
        Some(outcome) => Value::from(outcome),
        None => Value::Null,
    };
    shown
}

fn outcome(job: &wfhost_store::Job) -> Option<&'static str> {
    use wfhost_store::JobState;
    match job.state {
        JobState::Queued | JobState::Leased | JobState::Cancelled => None,
        JobState::Failed => Some("failed"),
        JobState::Succeeded => {
            let result: Value = serde_json::from_str(job.result.as_deref()?).ok()?;
            let signal = result.pointer("/output/signal").and_then(Value::as_str);
            Some(match signal {
                Some("SIGNAL:SUCCESS") => "succeeded",
                _ => "failed",
            })
        }
    }
}

/// `GET /v1/jobs/{id}`: a job and its history.
pub(crate) async fn show(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    with_store(&state.stores, None, move |store| {
        let job = store
            .job(id)?
            .ok_or_else(|| ApiError::not_found(format!("no job {id}")))?;
        let history = store.job_history(id)?;
        Ok(Json(
            json!({"job": view(&job), "history": history, "server_now_ms": now_ms()}),
        ))
    })
    .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobsQuery {
    after: Option<i64>,
    limit: Option<u32>,
}

/// `GET /v1/runs/{id}/jobs`: the run's jobs, oldest first, paged by id.
pub(crate) async fn of_run(
    State(state): State<AppState>,
    Path(id): Path<String>,
    query: Result<axum::extract::Query<JobsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let axum::extract::Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let limit = query.limit.unwrap_or(100).clamp(1, 1000);
    with_store(&state.stores, None, move |store| {
        exact_run(store, &id)?;
        let jobs = store.jobs_of_run(&id, query.after.unwrap_or(0), limit)?;
        let next = (jobs.len() == limit as usize).then(|| jobs.last().map(|j| j.id));
        let jobs: Vec<Value> = jobs.iter().map(view).collect();
        Ok(Json(
            json!({"jobs": jobs, "next_after": next.flatten(), "server_now_ms": now_ms()}),
        ))
    })
    .await
}

/// Requeue expired leases every `every` until the server stops.
pub(crate) async fn reconcile(stores: Arc<Stores>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut warnings = crate::loop_warnings::LoopWarnings::new("reconcile");
    loop {
        tick.tick().await;
        let stores = stores.clone();
        let done = blocking(move || match stores.if_any()? {
            Some(mut store) => Ok(store.requeue_expired(now_ms())?),
            None => Ok(Vec::new()),
        })
        .await;
        match done {
            Ok(requeued) => {
                warnings.worked();
                for (job, attempt) in requeued {
                    tracing::warn!(
                        "job {job}: its lease expired; queued again as attempt {attempt}"
                    );
                }
            }
            Err(e) => warnings.failed(e.message),
        }
    }
}
