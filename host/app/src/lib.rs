//! wfhost's application layer: how a run is set up and driven, shared by
//! every surface (the `wfhost` CLI, the HTTP server's run processes, the
//! MCP server).
//!
//! **Architecture Invariant:** this crate prints nothing. It returns typed
//! errors ([`AppError`], whose [`ErrorKind`] a surface maps to an exit code,
//! an HTTP status or a JSON-RPC error) and reports diagnostics through
//! `tracing`; the surfaces decide what a person sees.
//!
//! - [`home`]: the home, its store and configuration.
//! - [`workspace`]: a workspace opened once (a directory, canonical,
//!   holding no wfhost state) and locked while a run executes in it.
//! - [`plugins`]: the runtime, a workflow's plugins, and a run's pinned
//!   definition with the plugins it started with.
//! - [`session_files`]: the session folder (`.agents-work/`) a run keeps
//!   current as its events are recorded.
//! - [`run`]: a recorded run prepared and driven until it rests.
//! - [`gates`]: a gate answered, with its re-ask budget, read back.
//! - [`telemetry`]: the run process's endpoint for its agents' telemetry.
//! - [`jobs`]: blocks as leased jobs — the queue, the wire format, the job
//!   runner, agents submitted to Slurm.
//! - [`mcp`]: the executor of `wfhost mcp`.
//! - [`gc`]: what dead run processes left behind, collected.
//! - [`warnings`]: what a person should be told, through the surface.

pub mod checks;
pub mod config;
pub mod costs;
pub mod gates;
pub mod gc;
pub mod home;
pub mod jobs;
pub mod mcp;
pub mod plugin_refs;
pub mod plugins;
pub mod rerun;
pub mod run;
pub mod session_files;
pub mod start;
pub mod store;
pub mod telemetry;
pub mod warnings;
pub mod workspace;

pub use wfhost_protocol::{AppError, ErrorKind};

/// A store error as the application layer's: busy when another process
/// holds what it needs, unavailable when its database cannot be reached,
/// bad input otherwise.
pub fn store_error(e: wfhost_store::StoreError) -> AppError {
    use wfhost_store::StoreError;
    let kind = match &e {
        StoreError::Busy { .. } | StoreError::Locked { .. } | StoreError::LockLost { .. } => {
            ErrorKind::Busy
        }
        StoreError::Unavailable { .. } => ErrorKind::Unavailable,
        _ => ErrorKind::BadInput,
    };
    AppError::new(kind, e)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_store_that_cannot_be_reached_is_unavailable_not_bad_input() {
        let e = super::store_error(wfhost_store::StoreError::Unavailable {
            path: "postgres://db/runs".into(),
            message: "cannot connect to PostgreSQL".into(),
        });
        assert_eq!(e.kind, super::ErrorKind::Unavailable);
        let e = super::store_error(wfhost_store::StoreError::Usage("x".into()));
        assert_eq!(e.kind, super::ErrorKind::BadInput);
    }
}
