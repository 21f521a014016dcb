//! `wfhost gc`: retention.

use clap::Args;
use wfhost_core::text::count;
use wfhost_store::time::{format_utc, parse_age};

use crate::{Global, exit, report_error, store_error};

#[derive(Args)]
pub struct GcArgs {
    /// Remove runs whose last event is older than this: a number and a
    /// unit, s, m, h, d or w. Default: `retention` in the home's
    /// config.json, or 60d. A session's runs go together, when its last
    /// event is this old.
    #[arg(long, value_name = "DURATION")]
    older_than: Option<String>,
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
    let home = match wfhost_store::resolve_home(global.home.as_deref()) {
        Ok(h) => h,
        Err(e) => return store_error(e),
    };
    let (age, age_text) = match &args.older_than {
        Some(text) => match parse_age(text) {
            Ok(a) => (a, text.clone()),
            Err(e) => {
                report_error(format!("--older-than: {e}"));
                return exit::BAD_INPUT;
            }
        },
        None => match wfhost_store::HomeConfig::load(&home) {
            Ok(c) => (c.retention, c.retention_text),
            Err(e) => {
                report_error(e.to_string());
                return exit::BAD_INPUT;
            }
        },
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
    let left = if args.dry_run {
        wfhost_app::gc::Leftovers::default()
    } else {
        let ids: Vec<String> = candidates.iter().map(|c| c.run_id.clone()).collect();
        wfhost_app::gc::collect_leftovers(&store, &ids)
    };
    let wfhost_app::gc::Leftovers {
        containers: orphans,
        slurm_jobs: orphan_jobs,
        lanes: lanes_removed,
        scratch: scratch_removed,
    } = left;
    if args.json {
        let out = serde_json::json!({
            "scratch_removed": scratch_removed,
            "dry_run": args.dry_run,
            "older_than": age_text,
            "candidates": candidates,
            "removed": removed,
            "orphan_containers_removed": orphans,
            "orphan_slurm_jobs_cancelled": orphan_jobs,
            "lane_workspaces_removed": lanes_removed,
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
    for id in &orphans {
        println!("removed orphan container {}", &id[..id.len().min(12)]);
    }
    for id in &orphan_jobs {
        println!("cancelled orphan Slurm job {id}");
    }
    for lane in &lanes_removed {
        println!("removed leftover lane workspace {lane}");
    }
    if args.dry_run {
        println!(
            "{} older than {} would be removed",
            count(candidates.len() as u64, "run"),
            age_text
        );
    } else {
        println!(
            "{} older than {} removed",
            count(removed as u64, "run"),
            age_text
        );
    }
    exit::SUCCESS
}
