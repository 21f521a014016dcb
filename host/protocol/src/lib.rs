//! The typed contract between wfhost's surfaces (CLI, HTTP server, MCP) and
//! its application layer (`wfhost-app`).
//!
//! **API Boundary:** everything here is plain data (serde), free of
//! wasmtime, Docker, SQLite and HTTP, so a surface that must stay light
//! (the server) depends on it alone. Errors are [`AppError`]s whose
//! [`ErrorKind`] a surface maps to its own answer (an exit code, an HTTP
//! status, a JSON-RPC error); nothing parses an error's text.

mod error;
pub mod pem;
mod request;
pub mod trace;

pub use error::{AppError, ErrorKind};
pub use request::{Accepted, Reply, RequestLine, RunRequest};

/// Set (to `1`) in the environment of the processes that execute runs for
/// `wfhost serve`: their blocks are queued as jobs for agents instead of
/// run in the process.
pub const RUN_BLOCKS_AS_JOBS: &str = "WFHOST_RUN_BLOCKS_AS_JOBS";

/// Set in the environment of those processes to the directory of their
/// logs: once a process has read its request, its standard error (and
/// output) go to `<dir>/<run>.log`, appended to.
pub const SERVE_LOG_DIR_ENV: &str = "WFHOST_SERVE_LOG_DIR";

/// How far ahead of a timer's due time `wfhost serve` resumes a sleeping
/// run, and how near its due time a run process of a server waits for a
/// timer itself instead of ending (ms): the process's start is paid before
/// the timer is due, not after.
pub const SERVED_TIMER_HORIZON_MS: i64 = 1_000;

/// How far ahead of its due time the server resumes a sleeping run (ms),
/// within [`SERVED_TIMER_HORIZON_MS`].
pub const TIMER_LEAD_MS: i64 = 500;
