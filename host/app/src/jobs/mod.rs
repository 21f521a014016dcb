//! Blocks as leased jobs: `queue` (a run started by `wfhost serve` queues
//! each block execution in the store and waits for its result), `request`
//! (what a job carries and what comes back), `runner` (the job runner,
//! `wfhost agent` and `serve --local-agents`: lease, heartbeat, run,
//! complete) and its HTTP client (`http`, over TLS for `https://` servers:
//! `tls`).

pub mod http;
pub mod queue;
pub mod request;
pub mod runner;
pub mod submit;
pub mod tls;
