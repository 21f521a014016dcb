//! The telemetry endpoint a run process serves while it executes a
//! workflow that runs agents: `POST /telemetry/<token>` on loopback, the
//! address each agent invocation gets as `TELEMETRY_URL`. Accepting,
//! attributing and capping is [`wfhost_runtime::telemetry`]'s; this is the
//! HTTP around it.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use wfhost_runtime::telemetry::{MAX_BODY_BYTES, Refusal, TelemetryHub};

/// Listen on an ephemeral loopback port and hand the hub to `plugins`.
/// The listener stops with the runtime the run executes on.
pub async fn serve(plugins: &wfhost_runtime::PluginSet) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| format!("cannot listen for telemetry on 127.0.0.1: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("cannot listen for telemetry: {e}"))?
        .port();
    let hub = TelemetryHub::new(format!("http://127.0.0.1:{port}/telemetry"));
    plugins.record_telemetry(Arc::clone(&hub));
    let app = Router::new()
        .route("/telemetry/{token}", post(accept))
        // One byte over the cap still reads, so the hub says 413.
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES + 1))
        .with_state(hub);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(())
}

async fn accept(
    State(hub): State<Arc<TelemetryHub>>,
    Path(token): Path<String>,
    body: Bytes,
) -> Response {
    match hub.accept(&token, &body) {
        Ok(n) => (
            StatusCode::ACCEPTED,
            axum::Json(serde_json::json!({ "accepted": n })),
        )
            .into_response(),
        Err(refusal) => {
            let (status, code) = match refusal {
                Refusal::Unknown => (StatusCode::NOT_FOUND, "not_found"),
                Refusal::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
                Refusal::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid"),
                Refusal::TooMany => (StatusCode::TOO_MANY_REQUESTS, "too_many"),
            };
            let body = serde_json::json!({
                "code": code,
                "message": refusal.to_string(),
                "details": {},
            });
            (status, axum::Json(body)).into_response()
        }
    }
}
