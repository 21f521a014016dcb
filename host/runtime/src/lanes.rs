//! Lane workspaces for parallel blocks, on disk: the engine core's lane
//! operations ([`WorkerHost::create_lane`](wfhost_core::engine::WorkerHost)
//! and the rest) mapped onto [`wfhost_exec::lanes`]. Git and file copying
//! block, so they run on tokio's blocking pool, never on the threads that
//! drive the other lanes. (Lanes of one repository are made and removed
//! one at a time, across processes: see `wfhost_exec::lanes`.)

use std::path::{Path, PathBuf};

use wfhost_core::engine::LaneKey;
use wfhost_exec::lanes::{self, Lane};

/// Where `key`'s lane lives.
pub fn lane_path(key: &LaneKey) -> PathBuf {
    lanes::lanes_root(&key.run_id).join(key.dir_name())
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("lane task failed: {e}"))?
}

pub async fn create(main: &Path, key: &LaneKey) -> Result<(), String> {
    let (main, key) = (main.to_path_buf(), key.clone());
    blocking(move || {
        Lane::create(&main, &lanes::lanes_root(&key.run_id), &key.dir_name()).map(|_| ())
    })
    .await
}

pub fn exists(key: &LaneKey) -> bool {
    lane_path(key).is_dir()
}

fn open(main: &Path, key: &LaneKey) -> Result<Lane, String> {
    Lane::open(main, &lanes::lanes_root(&key.run_id), &key.dir_name())
}

pub async fn changes(main: &Path, key: &LaneKey) -> Result<Vec<String>, String> {
    let (main, key) = (main.to_path_buf(), key.clone());
    blocking(move || {
        let mut paths: Vec<String> = open(&main, &key)?
            .changes()?
            .into_iter()
            .map(|c| c.path)
            .collect();
        paths.sort();
        Ok(paths)
    })
    .await
}

pub async fn merge(main: &Path, key: &LaneKey, files: &[String]) -> Result<Vec<String>, String> {
    let (main, key, files) = (main.to_path_buf(), key.clone(), files.to_vec());
    blocking(move || {
        let lane = open(&main, &key)?;
        lane.merge_files(&files)?;
        lane.merge_outputs()
    })
    .await
}

/// Remove the lanes of the parallel block at `step` of `run_id`, and the
/// run's lane directory once it is empty.
pub async fn remove_step(main: &Path, run_id: &str, step: u64) {
    let (main, run_id) = (main.to_path_buf(), run_id.to_string());
    let _ = blocking(move || {
        let root = lanes::lanes_root(&run_id);
        let prefix = format!("step-{step}-");
        let Ok(dir) = std::fs::read_dir(&root) else {
            return Ok(());
        };
        for entry in dir.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix)
                && let Ok(lane) = Lane::open(&main, &root, &name)
            {
                lane.remove();
            }
        }
        let _ = std::fs::remove_dir(&root);
        Ok(())
    })
    .await;
}

/// Remove the lanes of `run_id` that belong to no parallel block still in
/// progress (`active_step`): what a crash left behind. Returns the lane
/// directory names removed.
pub fn remove_stale(main: &Path, run_id: &str, active_step: Option<u64>) -> Vec<String> {
    let root = lanes::lanes_root(run_id);
    let Ok(dir) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let keep = active_step.map(|s| format!("step-{s}-"));
    let mut removed = Vec::new();
    for entry in dir.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if keep.as_ref().is_some_and(|k| name.starts_with(k.as_str())) {
            continue;
        }
        match Lane::open(main, &root, &name) {
            Ok(lane) => lane.remove(),
            Err(_) => {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        removed.push(name);
    }
    let _ = std::fs::remove_dir(&root);
    removed.sort();
    removed
}

/// The run ids that have lane directories on this machine.
pub fn runs_with_lanes() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(lanes::lanes_root("")) else {
        return Vec::new();
    };
    let mut runs: Vec<String> = dir
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    runs.sort();
    runs
}
