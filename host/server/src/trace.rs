//! The `http` span of each request: its method and route template (never
//! the raw path, which holds ids and may hold anything a client sent),
//! then its status and latency, recorded when the handler has answered.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

/// Middleware: the request runs in an `http` span.
pub(crate) async fn request_span(request: Request, next: Next) -> Response {
    let path = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("<unmatched>", |p| p.as_str())
        .to_owned();
    let span = tracing::info_span!(
        "http",
        method = %request.method(),
        path = %path,
        status = tracing::field::Empty,
        latency_ms = tracing::field::Empty,
        // As exported traces name and kind a server's request span.
        otel.name = %format_args!("{} {path}", request.method()),
        otel.kind = "server",
    );
    // A client that traces its calls (an agent, a tool) sends the span it
    // made the call in: this request's span goes under it.
    let parent = request
        .headers()
        .get(wfhost_protocol::trace::TRACEPARENT)
        .and_then(|v| v.to_str().ok());
    wfhost_protocol::trace::adopt(&span, parent);
    let started = Instant::now();
    let response = next.run(request).instrument(span.clone()).await;
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    span.record("status", response.status().as_u16())
        .record("latency_ms", latency_ms);
    tracing::debug!(parent: &span, status = response.status().as_u16(), latency_ms, "request answered");
    response
}
