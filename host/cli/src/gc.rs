//! `wfhost gc`: retention.

use clap::Args;
use wfhost_store::time::{format_utc, parse_age};

use crate::{Global, exit, report_error, store_error};

#[derive(Args)]
pub struct GcArgs {
    /// Remove runs whose last event is older than this: a number and a
    /// unit, s, m, h, d or w.
    #[arg(long, default_value = "30d", value_name = "DURATION")]
    older_than: String,
    /// Also remove runs that never finished (waiting at a gate,
    /// interrupted). Runs being executed are never removed.
    #[arg(long)]
    include_unfinished: bool,
    /// Only list what would be removed.
    #[arg(long)]
    dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn gc(args: GcArgs, global: &Global) -> u8 {
    let age = match parse_age(&args.older_than) {
        Ok(a) => a,
        Err(e) => {
            report_error(format!("--older-than: {e}"));
            return exit::BAD_INPUT;
        }
    };
    let home = match wfhost_store::resolve_home(global.home.as_deref()) {
        Ok(h) => h,
        Err(e) => return store_error(e),
    };
    let mut store = match wfhost_store::Store::open_existing(&home) {
        Ok(s) => s,
        Err(wfhost_store::StoreError::NoStore { .. }) => {
            println!("no runs yet: nothing to remove");
            return exit::SUCCESS;
        }
        Err(e) => return store_error(e),
    };
    let candidates = match store.gc_candidates(age, args.include_unfinished) {
        Ok(c) => c,
        Err(e) => return store_error(e),
    };
    let removed = if args.dry_run {
        0
    } else {
        let ids: Vec<String> = candidates.iter().map(|c| c.run_id.clone()).collect();
        match store.remove_runs(&ids) {
            Ok(n) => n,
            Err(e) => return store_error(e),
        }
    };
    if args.json {
        let out = serde_json::json!({
            "dry_run": args.dry_run,
            "candidates": candidates,
            "removed": removed,
        });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return exit::SUCCESS;
    }
    for c in &candidates {
        println!(
            "{} {}  {}  {}  last written {}",
            if args.dry_run {
                "would remove"
            } else {
                "removed"
            },
            c.run_id,
            c.workflow_id,
            c.status,
            format_utc(c.last_at)
        );
    }
    if args.dry_run {
        println!(
            "{} run(s) older than {} would be removed",
            candidates.len(),
            args.older_than
        );
    } else {
        println!("{removed} run(s) older than {} removed", args.older_than);
    }
    exit::SUCCESS
}
