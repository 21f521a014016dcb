//! Reading runs: the list (filtered, paged), one run, its branches, steps
//! and events (paged by sequence), and the gates waiting for an answer.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use serde_json::{Value, json};
use wfhost_store::{ChainPage, ListError, RUN_STATUSES, RunFilter, RunRecord, RunSummary, Store};

use crate::AppState;
use crate::error::ApiError;
use crate::store::{exact_run, with_store};

/// The most items one page holds.
pub const MAX_PAGE: usize = 1000;

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// A query string that does not parse is a 400 that says why.
fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(t)| t)
        .map_err(|e| ApiError::bad_request(format!("bad query string: {}", e.body_text())))
}

fn page_size(limit: Option<usize>, default: usize) -> Result<usize, ApiError> {
    match limit.unwrap_or(default) {
        0 => Err(ApiError::bad_request("limit must be at least 1")),
        n if n > MAX_PAGE => Err(ApiError::bad_request(format!(
            "limit {n} is over the maximum of {MAX_PAGE}"
        ))
        .with_details(json!({"maximum": MAX_PAGE}))),
        n => Ok(n),
    }
}

pub async fn health() -> Json<Value> {
    Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "server_now_ms": now_ms(),
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    status: Option<String>,
    workflow: Option<String>,
    /// Runs of this session only.
    session: Option<String>,
    /// Text every listed run contains (case-insensitively) in its id,
    /// workflow id, workspace or session id.
    q: Option<String>,
    /// Runs started since: an age (`2h`, `7d`) or a UTC date or time.
    since: Option<String>,
    limit: Option<usize>,
    /// The id of the last run of the previous page.
    after: Option<String>,
}

pub(crate) fn summary(
    store: &Store,
    run: RunRecord,
    session: Option<String>,
) -> Result<RunSummary, ApiError> {
    Ok(store.run_summary(run, session)?)
}

/// `GET /v1/runs`: newest first.
pub async fn list(
    State(app): State<AppState>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = query(q)?;
    let limit = page_size(q.limit, 50)?;
    let since_ms = match &q.since {
        Some(since) => Some(
            wfhost_store::time::parse_since(since, wfhost_store::time::now_ms())
                .map_err(|e| ApiError::bad_request(format!("since: {e}")))?,
        ),
        None => None,
    };
    if let Some(status) = &q.status
        && !RUN_STATUSES.contains(&status.as_str())
    {
        return Err(ApiError::bad_request(format!("unknown status `{status}`"))
            .with_details(json!({"allowed": RUN_STATUSES})));
    }
    let filter = RunFilter {
        status: q.status,
        workflow: q.workflow,
        session: q.session,
        text: q.q,
        since_ms,
        after: q.after,
    };
    with_store(
        &app.stores,
        Some(json!({"runs": [], "next_after": null})),
        move |store| {
            let page = store.list_runs(&filter, limit).map_err(|e| match e {
                ListError::Store(e) => e.into(),
                other => ApiError::bad_request(other.to_string()),
            })?;
            serde_json::to_value(page).map_err(|e| ApiError::internal(e.to_string()))
        },
    )
    .await
    .map(Json)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BranchQuery {
    branch: Option<u32>,
}

fn branch_of(store: &Store, run: &str, asked: Option<u32>) -> Result<u32, ApiError> {
    match asked {
        Some(b) => Ok(b),
        None => Ok(store.current_branch(run)?),
    }
}

/// `GET /v1/runs/{id}`: the run, its branch's state and its branches.
pub async fn show(
    State(app): State<AppState>,
    Path(id): Path<String>,
    q: Result<Query<BranchQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = query(q)?;
    with_store(&app.stores, None, move |store| {
        let run = exact_run(store, &id)?;
        let branch = branch_of(store, &run.id, q.branch)?;
        let (detail, _) = wfhost_store::detail::RunDetail::gather(store, run, branch)?;
        Ok(serde_json::to_value(detail).unwrap_or_default())
    })
    .await
    .map(Json)
}

/// `GET /v1/runs/{id}/summary`: the run as the listing shows it, without
/// reading its log (what a viewer shows first, whatever the run's length).
pub async fn summary_of(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    with_store(&app.stores, None, move |store| {
        let run = exact_run(store, &id)?;
        let session = store.session_of(&run.id)?.map(|s| s.id);
        let s = summary(store, run, session)?;
        serde_json::to_value(s).map_err(|e| ApiError::internal(e.to_string()))
    })
    .await
    .map(Json)
}

/// `GET /v1/runs/{id}/branches`.
pub async fn branches(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    with_store(&app.stores, None, move |store| {
        let run = exact_run(store, &id)?;
        Ok(json!({"branches": store.branches(&run.id)?}))
    })
    .await
    .map(Json)
}

/// `GET /v1/runs/{id}/notifications`: the run's notifications and how
/// their delivery went.
pub async fn notifications(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    with_store(&app.stores, None, move |store| {
        let run = exact_run(store, &id)?;
        Ok(json!({"notifications": store.notifications_of(&run.id)?}))
    })
    .await
    .map(Json)
}

/// `GET /v1/runs/{id}/steps?branch=N`: the executed steps of a branch.
pub async fn steps(
    State(app): State<AppState>,
    Path(id): Path<String>,
    q: Result<Query<BranchQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = query(q)?;
    with_store(&app.stores, None, move |store| {
        let run = exact_run(store, &id)?;
        let branch = branch_of(store, &run.id, q.branch)?;
        let chain = store.chain(&run.id, branch)?;
        Ok(json!({"branch": branch, "steps": wfhost_store::view::steps_of(&chain)}))
    })
    .await
    .map(Json)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// The last sequence number already seen (0: from the start).
    after: Option<u64>,
    /// With `branch`: the page of events just before this sequence number
    /// (walking a branch back from its newest events).
    before: Option<u64>,
    /// Only the events of this branch's chain: its own and those of the
    /// branches it was forked from, up to each fork.
    branch: Option<u32>,
    limit: Option<usize>,
}

/// `GET /v1/runs/{id}/events?after=SEQ&limit=N`: one page of the log, all
/// branches, in write order; with `branch=B`, of that branch's chain
/// (`before=SEQ` pages it from the newest end).
pub async fn events(
    State(app): State<AppState>,
    Path(id): Path<String>,
    q: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = query(q)?;
    let limit = page_size(q.limit, 100)?;
    if q.before.is_some() && (q.after.is_some() || q.branch.is_none()) {
        return Err(ApiError::bad_request(
            "`before` needs `branch` and cannot be given with `after`",
        ));
    }
    with_store(&app.stores, None, move |store| {
        let run = exact_run(store, &id)?;
        let Some(branch) = q.branch else {
            let page = store.events_page(&run.id, q.after.unwrap_or(0), limit)?;
            let next = (page.len() == limit).then(|| page.last().map(|e| e.seq));
            return Ok(json!({"events": page, "next_after": next.flatten()}));
        };
        // An unknown branch is the store's usage error: 400, naming it.
        Ok(match q.before {
            Some(before) => {
                let page = store.chain_page(&run.id, branch, ChainPage::Before(before), limit)?;
                let next = (page.len() == limit).then(|| page.first().map(|e| e.seq));
                json!({"branch": branch, "events": page, "next_before": next.flatten()})
            }
            None => {
                let after = ChainPage::After(q.after.unwrap_or(0));
                let page = store.chain_page(&run.id, branch, after, limit)?;
                let next = (page.len() == limit).then(|| page.last().map(|e| e.seq));
                json!({"branch": branch, "events": page, "next_after": next.flatten()})
            }
        })
    })
    .await
    .map(Json)
}

/// `GET /v1/gates`: every gate waiting for an answer.
pub async fn gates(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    with_store(&app.stores, Some(json!({"gates": []})), |store| {
        Ok(json!({"gates": store.open_gates()?}))
    })
    .await
    .map(Json)
}

/// `GET /v1/runs/{id}/report?branch=N`: the branch as a Markdown report
/// (steps, decisions, outputs, lane conflicts, outcome).
pub async fn report(
    State(app): State<AppState>,
    Path(id): Path<String>,
    q: Result<Query<BranchQuery>, QueryRejection>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let q = query(q)?;
    let (name, text) = with_store(&app.stores, None, move |store| {
        let run = exact_run(store, &id)?;
        let branch = branch_of(store, &run.id, q.branch)?;
        let chain = store.chain(&run.id, branch)?;
        let status = store
            .branches(&run.id)?
            .into_iter()
            .find(|b| b.branch == branch)
            .map(|b| b.status)
            .unwrap_or_default();
        let session = store.session_of(&run.id)?.map(|s| s.id);
        let head = wfhost_store::report::ReportHead {
            run: &run,
            branch,
            status: &status,
            session: session.as_deref(),
        };
        let text = wfhost_store::report::markdown(&head, &chain);
        Ok((format!("{}-branch-{branch}.md", run.id), text))
    })
    .await?;
    Ok((
        [
            (
                axum::http::header::CONTENT_TYPE,
                "text/markdown; charset=utf-8".to_string(),
            ),
            (
                axum::http::header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
        ],
        text,
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundlesQuery {
    step: u64,
    /// `node.block`.
    block: String,
}

/// `GET /v1/runs/{id}/bundles?step=N&block=NODE.BLOCK`: the result bundles
/// that execution left in the run's workspace (`wfhost logs`' bundles):
/// each command, its exit, its stdout and stderr (up to 1 MiB each).
pub async fn bundles(
    State(app): State<AppState>,
    Path(id): Path<String>,
    q: Result<Query<BundlesQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = query(q)?;
    let run = with_store(&app.stores, None, move |store| exact_run(store, &id)).await?;
    // The workspace is read off the async threads: it may be slow or big.
    let found = tokio::task::spawn_blocking(move || {
        wfhost_core::workspace::bundles::read_bundles(
            std::path::Path::new(&run.workspace),
            &run.id,
            q.step,
            &q.block,
        )
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?;
    let (read, unreadable): (Vec<_>, Vec<_>) = found.into_iter().partition(Result::is_ok);
    let read: Vec<_> = read.into_iter().filter_map(Result::ok).collect();
    let unreadable: Vec<_> = unreadable.into_iter().filter_map(Result::err).collect();
    Ok(Json(json!({"bundles": read, "unreadable": unreadable})))
}
