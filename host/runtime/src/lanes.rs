//! Lane workspaces for parallel blocks, on disk: the engine core's lane
//! operations ([`Lanes::create_lane`](wfhost_core::run::engine::Lanes)
//! and the rest) mapped onto [`wfhost_exec::lanes`]. Git and file copying
//! block, so they run on tokio's blocking pool, never on the threads that
//! drive the other lanes. (Lanes of one repository are made and removed
//! one at a time, across processes: see `wfhost_exec::lanes`.)

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use wfhost_core::ids::RunId;
use wfhost_core::run::engine::LaneKey;
use wfhost_exec::lanes::{self, Lane, Source};

/// How many lanes of a parallel block whose lanes go to Slurm are in
/// flight at once when the group sets no `max_concurrent`: all of a
/// 1,000-item list, so that they go in one job array (split at the
/// cluster's `MaxArraySize`); the array's `%` limit is the group's
/// `max_concurrent`.
pub const SLURM_LANE_WINDOW: usize = 1024;

/// How many of `block`'s lanes run at once here: on Slurm (the block's
/// `executor`, else the run's default) a [`SLURM_LANE_WINDOW`] whatever
/// `max_concurrent` says (that is the array's limit); elsewhere the
/// group's `max_concurrent`, else the engine's default. Never more than
/// `capacity`, the plugin instances that may run at once.
pub fn window(
    block: &wfhost_core::manifest::Block,
    max_concurrent: Option<u32>,
    default_executor: &wfhost_exec::Executor,
    capacity: usize,
) -> usize {
    let on_slurm = match block.config.get("executor") {
        Some(executor) => wfhost_core::policy::exec::config::Executor::from_value(executor)
            .is_ok_and(|e| e.capability() == "slurm"),
        None => matches!(default_executor, wfhost_exec::Executor::Slurm(_)),
    };
    let wanted = match (on_slurm, max_concurrent) {
        (true, _) => SLURM_LANE_WINDOW,
        (false, Some(n)) => n as usize,
        (false, None) => wfhost_core::run::engine::DEFAULT_LANE_WINDOW,
    };
    wanted.clamp(1, capacity.max(1))
}

/// The run's lane directory holding `key`'s lane, if it exists (lanes are
/// made in memory or on disk: see `wfhost_exec::lanes::lane_bases`).
fn root_of(key: &LaneKey) -> Option<PathBuf> {
    let name = key.dir_name();
    lanes::lane_roots(&run_of(key).ok()?)
        .into_iter()
        .find(|root| std::fs::symlink_metadata(root.join(&name)).is_ok_and(|m| m.is_dir()))
}

/// The run id of `key`, checked: it becomes a directory name.
fn run_of(key: &LaneKey) -> Result<RunId, String> {
    RunId::parse(&key.run_id).map_err(|e| format!("lane {}: {e}", key.dir_name()))
}

/// Where `key`'s lane lives.
pub fn lane_path(key: &LaneKey) -> Result<PathBuf, String> {
    let run = run_of(key)?;
    Ok(root_of(key)
        .unwrap_or_else(|| lanes::lanes_root(&run))
        .join(key.dir_name()))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("lane task failed: {e}"))?
}

/// The lanes of one parallel block: a workspace, a run, a step.
type FanOut = (PathBuf, RunId, u64);

/// What the lanes of each fan-out in progress start from, worked out by the
/// first of its lanes and shared by the others (the main workspace stays
/// as it is while its lanes are made and run); dropped when the step's
/// lanes are removed.
type Sources = HashMap<FanOut, Arc<OnceLock<Result<Source, String>>>>;

static SOURCES: LazyLock<Mutex<Sources>> = LazyLock::new(Default::default);

fn fan_out(main: &Path, key: &LaneKey) -> Result<FanOut, String> {
    Ok((main.to_path_buf(), run_of(key)?, key.step))
}

fn source(main: &Path, key: &LaneKey) -> Result<Source, String> {
    let cell = SOURCES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(fan_out(main, key)?)
        .or_default()
        .clone();
    cell.get_or_init(|| Source::of(main)).clone()
}

pub async fn create(main: &Path, key: &LaneKey) -> Result<(), String> {
    let (main, key) = (main.to_path_buf(), key.clone());
    blocking(move || {
        // A leftover of the same lane elsewhere (a crash) goes first.
        if let Some(old) = root_of(&key)
            && let Ok(lane) = Lane::open(&main, &old, &key.dir_name())
        {
            lane.remove();
        }
        let root = lanes::root_for_new_lane(&main, &run_of(&key)?)?;
        let source = source(&main, &key)?;
        Lane::create_from(&source, &root, &key.dir_name()).map(|_| ())
    })
    .await
}

pub fn exists(key: &LaneKey) -> bool {
    root_of(key).is_some()
}

fn open(main: &Path, key: &LaneKey) -> Result<Lane, String> {
    let root = root_of(key).ok_or_else(|| format!("lane {} is missing", key.dir_name()))?;
    Lane::open(main, &root, &key.dir_name())
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
    // A text that is no run id names no lane directory: nothing to remove.
    let Ok(run_id) = RunId::parse(run_id) else {
        return;
    };
    let main = main.to_path_buf();
    let _ = blocking(move || {
        SOURCES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(m, r, s), _| !(m == &main && r == &run_id && *s == step));
        let prefix = format!("step-{step}-");
        let roots = lanes::lane_roots(&run_id);
        let mut done = Vec::new();
        for root in &roots {
            let Ok(dir) = std::fs::read_dir(root) else {
                continue;
            };
            for entry in dir.filter_map(Result::ok) {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(&prefix)
                    && let Ok(lane) = Lane::open(&main, root, &name)
                {
                    done.push(lane);
                }
            }
        }
        lanes::remove_lanes(done);
        for root in &roots {
            let _ = std::fs::remove_dir(root);
        }
        Ok(())
    })
    .await;
}

/// Remove the lanes of `run_id` that belong to no parallel block still in
/// progress (`active_step`): what a crash left behind. Returns the lane
/// directory names removed.
pub fn remove_stale(main: &Path, run_id: &RunId, active_step: Option<u64>) -> Vec<String> {
    let mut removed = Vec::new();
    for root in lanes::lane_roots(run_id) {
        remove_stale_in(main, &root, active_step, &mut removed);
    }
    removed.sort();
    removed
}

fn remove_stale_in(main: &Path, root: &Path, active_step: Option<u64>, removed: &mut Vec<String>) {
    let Ok(dir) = std::fs::read_dir(root) else {
        return;
    };
    let keep = active_step.map(|s| format!("step-{s}-"));
    for entry in dir.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if keep.as_ref().is_some_and(|k| name.starts_with(k.as_str())) {
            continue;
        }
        match Lane::open(main, root, &name) {
            Ok(lane) => lane.remove(),
            // Not a lane: a private index a crash left, or a stray entry.
            Err(_) => {
                let _ = match entry.file_type() {
                    Ok(t) if t.is_dir() => std::fs::remove_dir_all(entry.path()),
                    _ => std::fs::remove_file(entry.path()),
                };
            }
        }
        removed.push(name);
    }
    let _ = std::fs::remove_dir(root);
}

/// The run ids that have lane directories on this machine (a directory
/// whose name is no run id is not wfhost's).
pub fn runs_with_lanes() -> Vec<RunId> {
    let mut runs: Vec<RunId> = lanes::lane_bases()
        .iter()
        .filter_map(|b| std::fs::read_dir(&b.path).ok())
        .flat_map(|dir| dir.filter_map(Result::ok))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| RunId::parse(&e.file_name().to_string_lossy()).ok())
        .collect();
    runs.sort();
    runs.dedup();
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source_kept(main: &Path, key: &LaneKey) -> bool {
        let main = main.to_path_buf();
        SOURCES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&fan_out(&main, key).unwrap())
    }

    fn key(lane: &str) -> LaneKey {
        LaneKey {
            run_id: format!("run-20260101-000000-{:06x}", std::process::id() & 0xff_ffff),
            step: 3,
            node: "n".into(),
            block: "b".into(),
            lane: lane.into(),
        }
    }

    /// The lanes of a fan-out share one look at the workspace, which goes
    /// with them.
    #[tokio::test]
    async fn a_fan_outs_lanes_share_one_source_dropped_with_them() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("a.txt"), "1").unwrap();
        let (a, b) = (key("a"), key("b"));
        let (ra, rb) = tokio::join!(create(ws.path(), &a), create(ws.path(), &b));
        ra.unwrap();
        rb.unwrap();
        assert!(source_kept(ws.path(), &a));
        assert!(exists(&a) && exists(&b));
        assert_eq!(
            std::fs::read_to_string(lane_path(&b).unwrap().join("a.txt")).unwrap(),
            "1"
        );
        remove_step(ws.path(), &a.run_id, a.step).await;
        assert!(!source_kept(ws.path(), &a));
        assert!(!exists(&a) && !exists(&b));
        // A key whose run id is no run id makes no lane and names no path.
        let mut hostile = key("c");
        hostile.run_id = "/tmp/wfhost-victim".into();
        assert!(create(ws.path(), &hostile).await.is_err());
        assert!(lane_path(&hostile).is_err() && !exists(&hostile));
        assert!(
            lanes::lane_roots(&RunId::parse(&a.run_id).unwrap())
                .iter()
                .all(|r| !r.exists())
        );
    }
}
