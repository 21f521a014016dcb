//! `wfhost serve`: the host as a service. A JSON HTTP API, versioned under
//! `/v1` and described by the OpenAPI document at `/v1/openapi.json`, over
//! the same run store the CLI uses: runs started by `wfhost run` are the
//! runs the API lists, and the live event stream is read from the durable
//! log, so a client that reconnects with `Last-Event-ID` misses nothing.
//!
//! Thin over the store: each request takes a connection to the store
//! (SQLite, in the wfhost home) from a small pool, on tokio's blocking
//! pool; nothing else is kept in the server.
//! Runs are changed under the same lock discipline as the CLI's: a cancel
//! stops a live run's process and records the end under the run's lock.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

pub mod auth;
mod body;
mod changes;
pub mod conn;
pub mod error;
mod guard;
pub(crate) mod hooks;
pub mod jobs;
mod loop_warnings;
mod manage;
mod notify;
mod openapi;
pub mod tls;
/// The OpenAPI document of `/v1`, as `/v1/openapi.json` serves it.
pub use openapi::spec as openapi_spec;
mod runner;
mod runs;
mod schedules;
mod sessions;
mod start;
mod store;
mod stream;
pub mod takeover;
mod timers;
mod trace;
mod ui;
mod workflows;

pub use auth::Tokens;
pub use conn::{ConnectionLimits, LocalConnections, LocalDialer};
pub use error::ApiError;
pub use runner::{
    NO_CACHE_ENV, ProcessRunner, RUN_BLOCKS_AS_JOBS, RunService, SERVE_LOG_DIR_ENV, SERVE_RUN,
    Submitted,
};
pub use tls::{Tls, TlsFiles};

/// The default address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7464";

/// The largest request body accepted (413 above it).
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// What a server needs to start.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// The wfhost home holding the run store.
    pub home: PathBuf,
    /// Required unless `listen` is a loopback address.
    pub tokens: Option<Tokens>,
    /// What starts and continues runs; without one the endpoints that
    /// start or continue runs answer 501.
    pub runner: Option<Arc<dyn RunService>>,
    /// How long a job's lease lasts without a heartbeat.
    pub lease: std::time::Duration,
    /// What clients may hold: connections, and how long they may take.
    pub limits: ConnectionLimits,
    /// Where a stage graph's relative `project_path` is resolved (an
    /// absolute directory); None refuses relative project paths.
    pub projects_root: Option<PathBuf>,
    /// HTTPS only on `listen` (see [`tls`]); None serves plain HTTP.
    pub tls: Option<Tls>,
    /// How long a run executed for a server stays interrupted (its process
    /// gone) before this server takes it over (see [`takeover`]); None
    /// never does.
    pub take_over: Option<std::time::Duration>,
}

#[derive(Clone)]
pub(crate) struct AppState {
    pub stores: Arc<store::Stores>,
    /// Changes after each commit to the store by another connection.
    pub changes: tokio::sync::watch::Receiver<u64>,
    pub runner: Option<Arc<dyn RunService>>,
    pub lease: std::time::Duration,
    /// Set when the server begins to stop: waits under way (a lease's long
    /// poll) end at once, so that stopping does not wait for them.
    pub stopping: Arc<Stopping>,
    /// [`ServerConfig::projects_root`].
    pub projects_root: Option<Arc<PathBuf>>,
}

/// Whether the server began to stop, and the waits to wake when it does.
#[derive(Default)]
pub(crate) struct Stopping {
    begun: std::sync::atomic::AtomicBool,
    wake: tokio::sync::Notify,
}

impl Stopping {
    fn begin(&self) {
        self.begun.store(true, std::sync::atomic::Ordering::SeqCst);
        self.wake.notify_waiters();
    }

    pub(crate) fn begun(&self) -> bool {
        self.begun.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Resolves once the server begins to stop.
    pub(crate) async fn wait(&self) {
        let woken = self.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if !self.begun() {
            woken.await;
        }
    }
}

impl ServerConfig {
    /// Refuse a configuration that would expose the API without tokens.
    pub fn check(&self) -> Result<(), String> {
        if !self.listen.ip().is_loopback() && self.tokens.is_none() {
            return Err(format!(
                "{} is not a loopback address: give --auth-token-file to serve on it",
                self.listen
            ));
        }
        self.limits.check()?;
        if let Some(root) = &self.projects_root
            && !root.is_absolute()
        {
            return Err(format!(
                "the projects root `{}` must be an absolute path",
                root.display()
            ));
        }
        if self.lease < jobs::MIN_LEASE {
            return Err(format!(
                "a lease of {} ms is too short (at least {} ms)",
                self.lease.as_millis(),
                jobs::MIN_LEASE.as_millis()
            ));
        }
        Ok(())
    }
}

impl AppState {
    fn new(config: &ServerConfig) -> AppState {
        AppState {
            stores: store::Stores::new(config.home.clone()),
            changes: changes::watch(config.home.clone()),
            runner: config.runner.clone(),
            lease: config.lease,
            stopping: Arc::default(),
            projects_root: config.projects_root.clone().map(Arc::new),
        }
    }
}

/// The API's routes.
pub fn router(config: &ServerConfig) -> Router {
    routes(AppState::new(config), config)
}

fn routes(state: AppState, config: &ServerConfig) -> Router {
    let tokens = config.tokens.clone().map(Arc::new);
    let agents = Router::new()
        .route("/agent/lease", post(jobs::lease))
        .route("/jobs/{id}/heartbeat", post(jobs::heartbeat))
        .route("/jobs/{id}/telemetry", post(jobs::telemetry))
        .route("/definitions/{hash}", axum::routing::get(jobs::definition))
        .route("/jobs/{id}/complete", post(jobs::complete))
        .route("/jobs/{id}/release", post(jobs::release))
        .with_state(state.clone())
        .layer(axum::middleware::from_fn_with_state(
            tokens.clone(),
            auth::require_agent,
        ));
    let v1 = Router::new()
        .route("/runs", get(runs::list).post(start::start))
        .route("/runs/{id}", get(runs::show))
        .route("/runs/{id}/branches", get(runs::branches))
        .route("/runs/{id}/summary", get(runs::summary_of))
        .route("/runs/{id}/steps", get(runs::steps))
        .route("/runs/{id}/notifications", get(runs::notifications))
        .route("/runs/{id}/events", get(runs::events))
        .route("/runs/{id}/events/stream", get(stream::events))
        .route("/runs/import", post(manage::import))
        .route("/runs/{id}/cancel", post(manage::cancel))
        .route("/runs/{id}/gates/{gate}", post(start::answer_gate))
        .route("/runs/{id}/resume", post(start::resume))
        .route("/runs/{id}/fork", post(start::fork))
        .route("/runs/{id}/export", get(manage::export))
        .route("/runs/{id}/report", get(runs::report))
        .route("/runs/{id}/bundles", get(runs::bundles))
        .route("/runs/{id}/definition", get(workflows::definition))
        .route("/workflows", get(workflows::list))
        .route("/sessions", get(sessions::list))
        .route("/sessions/{id}", get(sessions::show))
        .route("/sessions/{id}/export", get(sessions::export))
        .route("/gates", get(runs::gates))
        .route(
            "/schedules",
            get(schedules::routes::list).post(schedules::routes::add),
        )
        .route(
            "/schedules/{name}",
            get(schedules::routes::show).delete(schedules::routes::remove),
        )
        .route("/schedules/{name}/pause", post(schedules::routes::pause))
        .route("/schedules/{name}/resume", post(schedules::routes::resume))
        .route(
            "/schedules/{name}/trigger",
            post(schedules::routes::trigger),
        )
        .route("/jobs/{id}", get(jobs::show))
        .route("/runs/{id}/jobs", get(jobs::of_run))
        .route("/hooks", get(hooks::list))
        .with_state(state.clone())
        .route("/openapi.json", get(openapi::document))
        .route("/health", get(runs::health))
        .layer(axum::middleware::from_fn_with_state(
            tokens,
            auth::require_client,
        ))
        .merge(agents)
        // Deliveries are authenticated by their signature, not a token.
        .merge(
            Router::new()
                .route("/hooks/{name}", post(hooks::deliver))
                .with_state(state),
        );
    Router::new()
        .nest("/v1", v1)
        .merge(ui::routes())
        .fallback(|| async { ApiError::not_found("no such endpoint; see /v1/openapi.json") })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            guard::Tokenless(config.tokens.is_none()),
            guard::browser_guard,
        ))
        // Outermost: the span covers the guards and authentication too.
        .layer(axum::middleware::from_fn(trace::request_span))
}

/// Serve until the process is stopped; `ready` learns the bound address
/// (port 0 picks a free one).
pub async fn serve(config: ServerConfig, ready: impl FnOnce(SocketAddr)) -> Result<(), String> {
    serve_with_local(config, None, ready).await
}

/// [`serve`], also answering the in-process clients whose streams arrive
/// on `local` (`serve --local-agents`: no socket, no TLS).
pub async fn serve_with_local(
    config: ServerConfig,
    local: Option<LocalConnections>,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), String> {
    config.check()?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    ready(bound);
    let every = (config.lease / 4).min(std::time::Duration::from_secs(1));
    let state = AppState::new(&config);
    let reconcile = tokio::spawn(jobs::reconcile(state.stores.clone(), every));
    let timers = tokio::spawn(timers::watch(state.clone()));
    let schedules = tokio::spawn(schedules::watch(state.clone()));
    let takeover = tokio::spawn(takeover::watch(state.clone(), config.take_over));
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let notifications = tokio::spawn(notify::deliver(
        state.clone(),
        format!("{scheme}://{bound}"),
    ));
    let (limits, lowered) = config.limits.fitted();
    if let Some(note) = lowered {
        eprintln!("note: {note}");
    }
    let tokens = config.tokens.clone().map(Arc::new);
    let stopping = Arc::clone(&state.stopping);
    let stop = async move {
        shutdown().await;
        stopping.begin();
    };
    let listener = conn::Listener {
        tcp: listener,
        tls: config.tls.clone(),
        local,
    };
    conn::serve(listener, routes(state, &config), tokens, limits, stop).await;
    reconcile.abort();
    timers.abort();
    schedules.abort();
    takeover.abort();
    notifications.abort();
    Ok(())
}

async fn shutdown() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
