//! What this process has asked of the machine so far: store transactions
//! and statements, processes started, `/proc` files read. Counted, not
//! timed, so the same run gives the same figures on any machine; the run
//! report carries them (`host_costs`) and the budget tests hold them.

use serde::Serialize;

/// The counts since this process started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HostCosts {
    /// Store transactions committed (each a sync of the log at `full`).
    pub store_commits: u64,
    /// SQL statements run against the store.
    pub store_statements: u64,
    /// Processes started for exec commands.
    pub processes_started: u64,
    /// `/proc` files read to keep those processes contained.
    pub proc_reads: u64,
}

/// The counts now.
pub fn now() -> HostCosts {
    HostCosts {
        store_commits: wfhost_store::counters::commits(),
        store_statements: wfhost_store::counters::statements(),
        processes_started: wfhost_exec::counters::spawns(),
        proc_reads: wfhost_exec::counters::proc_reads(),
    }
}
