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
    // Containers and Slurm jobs left behind by hosts that died mid-run:
    // the process that started them is gone and their run is not being
    // executed. Without Docker or Slurm there is nothing to collect.
    let (mut orphans, mut orphan_jobs) = (Vec::new(), Vec::new());
    if !args.dry_run
        && let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    {
        let is_live = |o: &wfhost_exec::Owner| {
            wfhost_store::RunId::parse(&o.run_id).is_ok_and(|id| store.is_running(&id))
                || o.process_alive()
        };
        (orphans, orphan_jobs) = rt.block_on(async {
            let containers = match wfhost_exec::ContainerPool::connect().await {
                Ok(pool) => pool.remove_orphans(is_live).await.unwrap_or_default(),
                Err(_) => Vec::new(),
            };
            (
                containers,
                wfhost_exec::slurm::cancel_orphans(is_live).await,
            )
        });
    }
    // Lane workspaces of parallel blocks that no run will come back to: this
    // store's runs that are not executing and not resting inside a fan-out,
    // and the runs just removed.
    let mut lanes_removed = Vec::new();
    if !args.dry_run {
        for run_id in wfhost_runtime::lanes::runs_with_lanes() {
            if store.is_running(&run_id) {
                continue;
            }
            let record = store.run(&run_id).ok().flatten();
            // The lane directory is shared by every store on the machine:
            // a run this store does not know may be another home's.
            if record.is_none() && !candidates.iter().any(|c| c.run_id == run_id) {
                continue;
            }
            let active = record.as_ref().and_then(|_| {
                let branch = store.current_branch(&run_id).ok()?;
                store.state(&run_id, branch).ok()?.fan_out.map(|f| f.step)
            });
            let main = record
                .map(|r| std::path::PathBuf::from(r.workspace))
                .unwrap_or_default();
            for lane in wfhost_runtime::lanes::remove_stale(&main, &run_id, active) {
                lanes_removed.push(format!("{run_id}/{lane}"));
            }
        }
    }
    // Staging copies and agent snapshots of processes killed mid-block.
    let scratch_removed: Vec<String> = if args.dry_run {
        Vec::new()
    } else {
        wfhost_exec::scratch::remove_stale(None)
            .iter()
            .map(|p| p.display().to_string())
            .collect()
    };
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
