//! What runs leave behind when the process executing them dies: Docker
//! containers and Slurm jobs whose run no process executes, lane
//! workspaces of parallel blocks no run will come back to, staging copies
//! and agent snapshots. `wfhost gc` collects them after removing old runs.

use std::path::PathBuf;

use wfhost_store::Store;

/// What [`collect_leftovers`] removed.
#[derive(Debug, Default)]
pub struct Leftovers {
    /// Container ids.
    pub containers: Vec<String>,
    /// Slurm job ids cancelled.
    pub slurm_jobs: Vec<String>,
    /// `<run>/<lane>` of each lane workspace removed.
    pub lanes: Vec<String>,
    /// Staging copies and snapshots removed.
    pub scratch: Vec<String>,
}

/// Remove what runs of `store` left behind; `removed_runs` were just
/// removed from it (their lanes go too). Without Docker or Slurm there is
/// nothing of theirs to collect.
pub fn collect_leftovers(store: &Store, removed_runs: &[String]) -> Leftovers {
    let (containers, slurm_jobs) = orphans(store);
    Leftovers {
        containers,
        slurm_jobs,
        lanes: stale_lanes(store, removed_runs),
        scratch: wfhost_exec::scratch::remove_stale(None)
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
    }
}

/// Containers and Slurm jobs left behind by hosts that died mid-run: the
/// process that started them is gone and their run is not being executed.
fn orphans(store: &Store) -> (Vec<String>, Vec<String>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return (Vec::new(), Vec::new());
    };
    let is_live = |o: &wfhost_exec::Owner| {
        wfhost_store::RunId::parse(&o.run_id).is_ok_and(|id| store.is_running(&id))
            || o.process_alive()
    };
    rt.block_on(async {
        let containers = match wfhost_exec::ContainerPool::connect().await {
            Ok(pool) => pool.remove_orphans(is_live).await.unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        (
            containers,
            wfhost_exec::slurm::cancel_orphans(is_live).await,
        )
    })
}

/// Lane workspaces of parallel blocks that no run will come back to: this
/// store's runs that are not executing and not resting inside a fan-out,
/// and the runs just removed.
fn stale_lanes(store: &Store, removed_runs: &[String]) -> Vec<String> {
    let mut removed = Vec::new();
    for run_id in wfhost_runtime::lanes::runs_with_lanes() {
        if store.is_running(&run_id) {
            continue;
        }
        let record = store.run(&run_id).ok().flatten();
        // The lane directory is shared by every store on the machine: a
        // run this store does not know may be another home's.
        if record.is_none() && !removed_runs.iter().any(|r| *r == *run_id) {
            continue;
        }
        let active = record.as_ref().and_then(|_| {
            let branch = store.current_branch(&run_id).ok()?;
            store.state(&run_id, branch).ok()?.fan_out.map(|f| f.step)
        });
        let main = record
            .map(|r| PathBuf::from(r.workspace))
            .unwrap_or_default();
        for lane in wfhost_runtime::lanes::remove_stale(&main, &run_id, active) {
            removed.push(format!("{run_id}/{lane}"));
        }
    }
    removed
}
