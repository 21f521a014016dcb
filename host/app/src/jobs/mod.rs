//! Blocks as leased jobs, the run's side and the wire format: `queue` (a
//! run started by `wfhost serve` queues each block execution in the store
//! and waits for its result) and `request` (what a job carries and what
//! comes back). The job runner that leases them (`wfhost agent`) is the
//! CLI's `jobs::agent`.

pub mod queue;
pub mod request;
