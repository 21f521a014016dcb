//! wfhost's application layer: how a run is set up and driven, shared by
//! every surface (the `wfhost` CLI, the HTTP server's run processes, the
//! MCP server).
//!
//! **Architecture Invariant:** this crate prints nothing. It returns typed
//! errors ([`AppError`], whose [`ErrorKind`] a surface maps to an exit code,
//! an HTTP status or a JSON-RPC error) and reports diagnostics through
//! `tracing`; the surfaces decide what a person sees.
//!
//! - [`workspace`]: a workspace opened once (a directory, canonical,
//!   holding no wfhost state) and locked while a run executes in it.
//! - [`plugins`]: the runtime, a workflow's plugins, and a run's pinned
//!   definition with the plugins it started with.
//! - [`session_files`]: the session folder (`.agents-work/`) a run keeps
//!   current as its events are recorded.
//! - [`telemetry`]: the run process's endpoint for its agents' telemetry.

pub mod gates;
pub mod jobs;
pub mod mcp;
pub mod plugin_refs;
pub mod plugins;
pub mod run;
pub mod session_files;
pub mod telemetry;
pub mod warnings;
pub mod workspace;

pub use wfhost_protocol::{AppError, ErrorKind};

/// A store error as the application layer's: busy when another process
/// holds what it needs, not found for an unknown run or session, bad input
/// otherwise.
pub fn store_error(e: wfhost_store::StoreError) -> AppError {
    use wfhost_store::StoreError;
    let kind = match &e {
        StoreError::Busy { .. } | StoreError::Locked { .. } => ErrorKind::Busy,
        _ => ErrorKind::BadInput,
    };
    AppError::new(kind, e)
}
