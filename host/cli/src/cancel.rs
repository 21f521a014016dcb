//! `wfhost cancel` (stop a run for good) and `wfhost rm` (delete runs).

use std::time::{Duration, Instant};

use clap::Args;
use wfhost_core::event::{Event, EventSink, Outcome};
use wfhost_core::state::Phase;
use wfhost_store::{RunLock, RunRecord, Store, StoreError};

use crate::{Global, exit, report_error, store_error};

#[derive(Args)]
pub struct CancelArgs {
    /// The run: its id, or any part of it that is unique.
    run: String,
    /// Why, recorded with the cancellation.
    #[arg(long)]
    reason: Option<String>,
    /// How long to wait for a live run's process to stop, in seconds.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    wait: u64,
}

#[derive(Args)]
pub struct RmArgs {
    /// The runs to delete: ids, or any unique part of each.
    #[arg(required = true)]
    runs: Vec<String>,
}

/// The prefix of a cancelled run's failure reason.
pub const CANCELLED: &str = "cancelled";

pub fn cancel(args: CancelArgs, global: &Global) -> u8 {
    let mut store = match global.existing_store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let run = match store.resolve_run(&args.run) {
        Ok(r) => r,
        Err(e) => return store_error(e),
    };
    if let Err(code) = not_finished(&store, &run) {
        return code;
    }
    let _lock = match stop_and_lock(&store, &run, Duration::from_secs(args.wait)) {
        Ok(lock) => lock,
        Err(code) => return code,
    };
    // The live run may have finished on its own while it was asked to stop.
    if let Err(code) = not_finished(&store, &run) {
        return code;
    }
    let branch = match store.current_branch(&run.id) {
        Ok(b) => b,
        Err(e) => return store_error(e),
    };
    let reason = match &args.reason {
        Some(why) => format!("{CANCELLED}: {why}"),
        None => format!("{CANCELLED} by the user"),
    };
    let mut writer = match store.writer(&run.id, branch) {
        Ok(w) => w,
        Err(e) => return store_error(e),
    };
    let finished = Event::RunFinished {
        outcome: Outcome::Failed {
            reason: reason.clone(),
        },
    };
    if let Err(e) = writer.append(std::slice::from_ref(&finished)) {
        report_error(format!(
            "run {}: cannot record the cancellation: {e}",
            run.id
        ));
        return exit::RUN_FAILED;
    }
    println!("run {} {reason}", run.id);
    exit::SUCCESS
}

/// Exit 2 naming how the run ended, if it has.
fn not_finished(store: &Store, run: &RunRecord) -> Result<(), u8> {
    let branch = store.current_branch(&run.id).map_err(store_error)?;
    let state = store.state(&run.id, branch).map_err(store_error)?;
    match &state.phase {
        Phase::Finished(Outcome::Succeeded) => Err(finished(run, "succeeded")),
        Phase::Finished(Outcome::Failed { reason }) if reason.starts_with(CANCELLED) => {
            Err(finished(run, "was cancelled"))
        }
        Phase::Finished(Outcome::Failed { .. }) => Err(finished(run, "failed")),
        _ => Ok(()),
    }
}

fn finished(run: &RunRecord, how: &str) -> u8 {
    report_error(format!(
        "run {} {how} already; there is nothing to cancel",
        run.id
    ));
    exit::BAD_INPUT
}

/// The run's lock. A live run's process is asked to stop (SIGTERM: it
/// stops its block's processes, containers and jobs, records what it
/// decided and exits), then its lock is awaited for at most `wait`.
fn stop_and_lock(store: &Store, run: &RunRecord, wait: Duration) -> Result<RunLock, u8> {
    let pid = match store.lock_run(&run.id) {
        Ok(lock) => return Ok(lock),
        Err(StoreError::Busy { pid, .. }) => pid,
        Err(e) => return Err(store_error(e)),
    };
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        report_error(format!(
            "run {} is executing in a process that did not say its pid; nothing was changed",
            run.id
        ));
        return Err(exit::BUSY);
    };
    // SAFETY: sending a signal; ESRCH (already gone) is fine.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + wait;
    loop {
        match store.lock_run(&run.id) {
            Ok(lock) => return Ok(lock),
            Err(StoreError::Busy { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(StoreError::Busy { .. }) => {
                report_error(format!(
                    "run {} did not stop within {} s (pid {pid}); nothing was recorded",
                    run.id,
                    wait.as_secs()
                ));
                return Err(exit::BUSY);
            }
            Err(e) => return Err(store_error(e)),
        }
    }
}

pub fn rm(args: RmArgs, global: &Global) -> u8 {
    let mut store = match global.existing_store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    // Every name resolves and no run is executing, or nothing is removed.
    let mut ids = Vec::new();
    for name in &args.runs {
        match store.resolve_run(name) {
            Ok(run) if store.is_running(&run.id) => {
                report_error(format!(
                    "run {} is executing; cancel it first (`wfhost cancel {}`); nothing was removed",
                    run.id, run.id
                ));
                return exit::BUSY;
            }
            Ok(run) if !ids.contains(&run.id) => ids.push(run.id),
            Ok(_) => {}
            Err(e) => return store_error(e),
        }
    }
    match store.remove_runs(&ids) {
        Ok(n) if n == ids.len() => {
            for id in &ids {
                println!("removed run {id}");
            }
            exit::SUCCESS
        }
        Ok(n) => {
            report_error(format!(
                "{n} of {} runs removed: the others started executing meanwhile",
                ids.len()
            ));
            exit::BUSY
        }
        Err(e) => store_error(e),
    }
}
