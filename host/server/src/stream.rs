//! `GET /v1/runs/{id}/events/stream`: the run's events as Server-Sent
//! Events, read from the durable log. Each event's SSE `id` is its
//! sequence number, so a client that reconnects with `Last-Event-ID` (or
//! `?after=`) gets exactly the events it missed, then the new ones as they
//! are written.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;
use crate::store::{exact_run, with_store};

/// How often the log is read for new events while the stream is idle and
/// no change was signalled (should the store's watcher be missing).
const POLL: Duration = Duration::from_secs(1);
/// Events read per query.
const BATCH: usize = 500;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    after: Option<u64>,
}

fn last_event_id(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .map(Some)
        .ok_or_else(|| ApiError::bad_request("Last-Event-ID must be an event sequence number"))
}

pub async fn events(
    State(app): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    q: Result<Query<StreamQuery>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let q = q
        .map(|Query(q)| q)
        .map_err(|e| ApiError::bad_request(format!("bad query string: {}", e.body_text())))?;
    // The header wins: it is what a reconnecting EventSource sends.
    let after = last_event_id(&headers)?.or(q.after).unwrap_or(0);
    let run = {
        let id = id.clone();
        with_store(
            &app.stores,
            None,
            move |store| Ok(exact_run(store, &id)?.id),
        )
        .await?
    };
    let home = app.stores.clone();
    let mut changes = app.changes.clone();
    changes.mark_unchanged();
    let stream = futures_util::stream::unfold(
        (after, std::collections::VecDeque::new(), changes),
        move |(mut after, mut pending, mut changes)| {
            let (home, run) = (home.clone(), run.clone());
            async move {
                loop {
                    if let Some(e) = pending.pop_front() {
                        return Some((Ok(e), (after, pending, changes)));
                    }
                    let (home, run) = (home.clone(), run.clone());
                    let page = with_store(&home, None, move |store| {
                        Ok(store.events_page(&run, after, BATCH)?)
                    })
                    .await;
                    match page {
                        Ok(events) if !events.is_empty() => {
                            for e in events {
                                after = e.seq;
                                let data = serde_json::to_string(&e).unwrap_or_default();
                                pending.push_back(
                                    SseEvent::default()
                                        .id(e.seq.to_string())
                                        .event(e.event.kind())
                                        .data(data),
                                );
                            }
                        }
                        // Nothing new: wait for the next commit to the
                        // store (or the fallback timer), then read again.
                        Ok(_) => {
                            if let Ok(Err(_)) = tokio::time::timeout(POLL, changes.changed()).await
                            {
                                // No watcher: read on the timer alone.
                                tokio::time::sleep(POLL).await;
                            }
                        }
                        // The store went away (a `gc`, a broken disk): end
                        // the stream; the client reconnects from its last id.
                        Err(_) => return None,
                    }
                }
            }
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
