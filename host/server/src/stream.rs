//! `GET /v1/runs/{id}/events/stream`: the run's events as Server-Sent
//! Events, read from the durable log. Each event's SSE `id` is its
//! sequence number, so a client that reconnects with `Last-Event-ID` (or
//! `?after=`) gets exactly the events it missed, then the new ones as they
//! are written.
//!
//! With `?output=true`, once the stream has caught up, the running block's
//! command output comes too, as `output` events without an id (shown,
//! never recorded: read from the block's result bundle as its commands
//! write it, the way `wfhost logs -f` does), rate-limited per connection.

use std::convert::Infallible;
use std::path::PathBuf;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use serde::Deserialize;
use wfhost_core::run::event::Event;
use wfhost_core::workspace::bundles::{LiveLine, LiveTail};
use wfhost_store::RunId;

use crate::AppState;
use crate::error::ApiError;
use crate::store::{exact_run, with_store};

/// How often the log is read for new events while the stream is idle and
/// no change was signalled (should the store's watcher be missing).
const POLL: Duration = Duration::from_secs(1);
/// How often a running block's output is read.
const OUTPUT_POLL: Duration = Duration::from_millis(250);
/// The most output lines sent per read ([`OUTPUT_POLL`]); more become one
/// `skipped` count. When a client starts following a block that has run
/// for a while, only this many of its last lines are sent.
const OUTPUT_LINES: usize = 20;
/// Events read per query.
const BATCH: usize = 500;
/// How many events before where a client starts are read to find the
/// block that is running.
const RECENT: u64 = 200;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    after: Option<u64>,
    /// Send the running block's output too.
    #[serde(default)]
    output: bool,
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
        with_store(&app.stores, None, move |store| exact_run(store, &id)).await?
    };
    let mut live = q
        .output
        .then(|| Live::new(run.workspace.clone().into(), run.id.clone()));
    let run = run.id;
    // A client that saw the log up to `after` may be looking at a block
    // that started before: which one is running is in the last events.
    if let (Some(live), true) = (&mut live, after > 0) {
        let from = after.saturating_sub(RECENT);
        let run = run.clone();
        let recent = with_store(&app.stores, None, move |store| {
            Ok(store.events_page(&run, from, RECENT as usize)?)
        })
        .await?;
        for e in recent.iter().filter(|e| e.seq <= after) {
            live.observe(&e.event);
        }
    }
    let home = app.stores.clone();
    let mut changes = app.changes.clone();
    changes.mark_unchanged();
    let stream = futures_util::stream::unfold(
        (after, std::collections::VecDeque::new(), changes, live),
        move |(mut after, mut pending, mut changes, mut live)| {
            let (home, run) = (home.clone(), run.clone());
            async move {
                loop {
                    if let Some(e) = pending.pop_front() {
                        return Some((Ok(e), (after, pending, changes, live)));
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
                                if let Some(live) = &mut live {
                                    pending.extend(live.observe(&e.event));
                                }
                                let data = serde_json::to_string(&e).unwrap_or_default();
                                pending.push_back(
                                    SseEvent::default()
                                        .id(e.seq.to_string())
                                        .event(e.event.kind())
                                        .data(data),
                                );
                            }
                        }
                        // Nothing new: the running block's output, then
                        // wait for the next commit to the store (or the
                        // fallback timer), then read again.
                        Ok(_) => {
                            let wait = match &mut live {
                                Some(live) if live.running.is_some() => {
                                    pending.extend(live.poll());
                                    OUTPUT_POLL
                                }
                                _ => POLL,
                            };
                            if !pending.is_empty() {
                                continue;
                            }
                            if let Ok(Err(_)) = tokio::time::timeout(wait, changes.changed()).await
                            {
                                // No watcher: read on the timer alone.
                                tokio::time::sleep(wait).await;
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

/// The running block's output, for one connection.
struct Live {
    workspace: PathBuf,
    run: RunId,
    /// The block execution followed: its step and `node.block`.
    running: Option<(u64, String)>,
    tail: LiveTail,
    /// Whether its output was read since it started (else the next read
    /// is a client's first look: only the last lines are sent).
    followed: bool,
}

impl Live {
    fn new(workspace: PathBuf, run: RunId) -> Live {
        Live {
            workspace,
            run,
            running: None,
            tail: LiveTail::default(),
            followed: false,
        }
    }

    /// Follow the block `event` starts; at its end (or when it fans out
    /// into lanes) send the rest of what it wrote, if it was followed.
    fn observe(&mut self, event: &Event) -> Vec<SseEvent> {
        match event {
            Event::BlockStarted {
                step, node, block, ..
            } => {
                let rest = self.finish();
                self.running = Some((*step, format!("{node}.{block}")));
                rest
            }
            Event::BlockCompleted { .. } | Event::LanesStarted { .. } => self.finish(),
            _ => Vec::new(),
        }
    }

    fn finish(&mut self) -> Vec<SseEvent> {
        let rest = if self.followed {
            self.read(true)
        } else {
            Vec::new()
        };
        self.running = None;
        self.tail = LiveTail::default();
        self.followed = false;
        rest
    }

    fn poll(&mut self) -> Vec<SseEvent> {
        self.read(false)
    }

    fn read(&mut self, flush: bool) -> Vec<SseEvent> {
        let Some((step, name)) = self.running.clone() else {
            return Vec::new();
        };
        let mut lines = self
            .tail
            .poll(&self.workspace, &self.run, step, &name, flush);
        let mut skipped = 0;
        if !self.followed {
            // A first look: the last lines only (and everything before is
            // read through, to be skipped quietly).
            for _ in 0..1000 {
                let more = self
                    .tail
                    .poll(&self.workspace, &self.run, step, &name, flush);
                if more.is_empty() {
                    break;
                }
                lines.extend(more);
            }
            let over = lines.len().saturating_sub(OUTPUT_LINES);
            lines.drain(..over);
            self.followed = true;
        } else if lines.len() > OUTPUT_LINES {
            skipped = lines.len() - OUTPUT_LINES;
            lines.drain(..skipped);
        }
        let mut out = Vec::new();
        if skipped > 0 {
            out.push(output_event(
                serde_json::json!({"step": step, "block": name, "skipped": skipped}),
            ));
        }
        out.extend(lines.iter().map(|l| output_event(line(step, &name, l))));
        out
    }
}

fn line(step: u64, block: &str, l: &LiveLine) -> serde_json::Value {
    serde_json::json!({
        "step": step,
        "block": block,
        "stream": l.stream,
        "command": l.command,
        "text": l.text,
        "progress": l.progress,
    })
}

fn output_event(data: serde_json::Value) -> SseEvent {
    SseEvent::default().event("output").data(data.to_string())
}
