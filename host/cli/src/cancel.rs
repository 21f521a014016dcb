//! `wfhost cancel` (stop a run for good) and `wfhost rm` (delete runs).

use std::time::Duration;

use clap::Args;
use wfhost_store::CancelError;

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

pub fn cancel(args: CancelArgs, global: &Global) -> u8 {
    let mut store = match global.existing_store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let run = match store.resolve_run(&args.run) {
        Ok(r) => r,
        Err(e) => return store_error(e),
    };
    let cancellation = wfhost_store::Cancellation {
        by: who_cancels(),
        reason: args.reason,
    };
    match store.cancel(&run.id, &cancellation, Duration::from_secs(args.wait)) {
        Ok(reason) => {
            // The session folder says so too: no decision left pending.
            wfhost_app::session_files::SessionFiles::rewrite_after_end(&store, &run);
            println!("run {} {reason}", run.id);
            exit::SUCCESS
        }
        Err(CancelError::Store(e)) => store_error(e),
        Err(e) => {
            let code = match &e {
                CancelError::Finished { .. } => exit::BAD_INPUT,
                CancelError::NotRecorded { .. } => exit::RUN_FAILED,
                _ => exit::BUSY,
            };
            report_error(e.to_string());
            code
        }
    }
}

/// `alice with wfhost cancel`: the account running this command.
fn who_cancels() -> String {
    // SAFETY: getuid cannot fail; getpwuid returns a pointer into static
    // storage or null, and the name is copied out at once, on this thread.
    let (uid, name) = unsafe {
        let uid = libc::getuid();
        let entry = libc::getpwuid(uid);
        let name = (!entry.is_null() && !(*entry).pw_name.is_null()).then(|| {
            std::ffi::CStr::from_ptr((*entry).pw_name)
                .to_string_lossy()
                .into_owned()
        });
        (uid, name)
    };
    let name = name
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| format!("uid {uid}"));
    format!("{name} with wfhost cancel")
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
