//! The telemetry endpoint a process serves while it executes blocks that
//! run agents: `POST /telemetry/<hub>/<token>` on loopback, the address
//! each agent invocation gets as `TELEMETRY_URL`. A run process has one hub;
//! `wfhost agent` one per loaded workflow, so that each job's telemetry is
//! taken from its own. Accepting, attributing and capping is
//! [`wfhost_runtime::telemetry`]'s; this is the HTTP around it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use wfhost_protocol::AppError;
use wfhost_runtime::telemetry::{MAX_BODY_BYTES, Refusal, TelemetryHub};

/// The hubs one listener serves, by id.
pub struct Hubs {
    base: String,
    hubs: Mutex<HashMap<String, Weak<TelemetryHub>>>,
}

impl Hubs {
    /// A new hub behind this listener; it is served as long as it is held.
    pub fn hub(&self) -> Result<Arc<TelemetryHub>, AppError> {
        let id = wfhost_core::random::token()
            .map_err(|e| AppError::internal(format!("cannot make a telemetry address: {e}")))?;
        let hub = TelemetryHub::new(format!("{}/{id}", self.base));
        let mut hubs = self.hubs.lock().unwrap_or_else(|e| e.into_inner());
        hubs.retain(|_, h| h.strong_count() > 0);
        hubs.insert(id, Arc::downgrade(&hub));
        Ok(hub)
    }

    fn get(&self, id: &str) -> Option<Arc<TelemetryHub>> {
        let hubs = self.hubs.lock().unwrap_or_else(|e| e.into_inner());
        hubs.get(id).and_then(Weak::upgrade)
    }
}

/// Listen on an ephemeral loopback port; the listener stops with the
/// runtime it was started on.
pub async fn listen() -> Result<Arc<Hubs>, AppError> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| {
            AppError::internal(format!("cannot listen for telemetry on 127.0.0.1: {e}"))
        })?;
    let port = listener
        .local_addr()
        .map_err(|e| AppError::internal(format!("cannot listen for telemetry: {e}")))?
        .port();
    let hubs = Arc::new(Hubs {
        base: format!("http://127.0.0.1:{port}/telemetry"),
        hubs: Mutex::new(HashMap::new()),
    });
    let app = Router::new()
        .route("/telemetry/{hub}/{token}", post(accept))
        // One byte over the cap still reads, so the hub says 413.
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES + 1))
        .with_state(Arc::clone(&hubs));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(hubs)
}

/// Serve telemetry for a run process: one hub, handed to `plugins`.
pub async fn serve(plugins: &wfhost_runtime::PluginSet) -> Result<(), AppError> {
    let hubs = listen().await?;
    plugins.record_telemetry(hubs.hub()?);
    Ok(())
}

async fn accept(
    State(hubs): State<Arc<Hubs>>,
    Path((hub, token)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let accepted = match hubs.get(&hub) {
        Some(hub) => hub.accept(&token, &body),
        None => Err(Refusal::Unknown),
    };
    match accepted {
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
