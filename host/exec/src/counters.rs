//! Counts of the costly things commands make the host do, for budget
//! tests: deterministic where timings are not. Process-wide and only ever
//! growing; a test reads them before and after what it measures, alone in
//! its process.

use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) static SPAWNS: AtomicU64 = AtomicU64::new(0);
pub(crate) static PROC_READS: AtomicU64 = AtomicU64::new(0);

/// Processes started by [`crate::spawn::spawn`].
pub fn spawns() -> u64 {
    SPAWNS.load(Ordering::Relaxed)
}

/// Files and directories of `/proc` read to keep commands contained.
pub fn proc_reads() -> u64 {
    PROC_READS.load(Ordering::Relaxed)
}

pub(crate) fn count(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}
