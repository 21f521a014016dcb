//! The run-wide resources of the executor capabilities: what a run's
//! plugins started (dormant and started containers, submitted Slurm jobs)
//! is kept in one [`RunResources`] per plugin set, so that a plugin can
//! only address its own run's containers and jobs, and so that everything
//! still there is removed or cancelled when the run comes to rest
//! ([`RunResources::shutdown`]).

use std::collections::HashMap;
use std::sync::Arc;

use wfhost_exec::{ContainerPool, ExecError, ExecOutcome, ExecRequest, SlurmExecutor};

use super::scope::ExecScope;
use super::slurm::SlurmJobs;

/// Containers and jobs of one run's plugins.
#[derive(Default)]
pub struct RunResources {
    /// Connected to Docker on first use.
    containers: tokio::sync::Mutex<Option<Arc<ContainerPool>>>,
    pub(super) slurm: SlurmExecutor,
    /// The `slurm` capability's jobs.
    pub(super) jobs: SlurmJobs,
    /// Parallel blocks with `max_concurrent`: slots for their lanes' local
    /// and container commands.
    lane_slots: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Semaphore>>>,
}

impl RunResources {
    /// The resources of a run whose Slurm jobs are watched by `watcher`.
    pub fn new(watcher: Option<wfhost_exec::slurm::JobWatcher>) -> Self {
        let poll = wfhost_exec::slurm::board::PollConfig::from_env().unwrap_or_else(|e| {
            tracing::warn!("warning: {e}; using the default Slurm polling");
            wfhost_exec::slurm::board::PollConfig::default()
        });
        RunResources {
            slurm: SlurmExecutor {
                watcher,
                ..SlurmExecutor::new(poll)
            },
            ..RunResources::default()
        }
    }

    /// These lanes of the parallel block at `lane`'s group are about to
    /// run: their Slurm work goes in one job array (`limit`: at most that
    /// many tasks at once).
    pub fn lanes_starting(&self, lanes: &[wfhost_core::run::engine::LaneKey], limit: Option<u32>) {
        let Some(first) = lanes.first() else {
            return;
        };
        let names: Vec<String> = lanes.iter().map(|l| l.lane.clone()).collect();
        self.slurm.arrays.expect(&group_of(first), &names, limit);
        // The lanes start window by window: one set of slots for all.
        if let Some(n) = limit {
            self.lane_slots
                .lock()
                .expect("not poisoned")
                .entry(group_of(first))
                .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(n.max(1) as usize)));
        }
    }

    /// A slot for a lane's local or container command, when its parallel
    /// block limits how many run at once.
    pub(super) async fn lane_slot(
        &self,
        scope: &ExecScope,
    ) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let lane = scope.lane.as_ref()?;
        let slots = self
            .lane_slots
            .lock()
            .expect("not poisoned")
            .get(&group_of(lane))
            .cloned()?;
        slots.acquire_owned().await.ok()
    }

    /// `lane` finished: the rest of its array no longer waits for it.
    pub async fn lane_finished(&self, lane: &wfhost_core::run::engine::LaneKey) {
        self.slurm
            .arrays
            .lane_done(&self.slurm, &group_of(lane), &lane.lane)
            .await;
    }

    /// Run `request` on Slurm: a lane's with its group's other lanes as one
    /// job array, anything else as a job of its own.
    pub(super) async fn run_on_slurm(
        &self,
        scope: &ExecScope,
        request: &ExecRequest,
        options: &wfhost_exec::SlurmOptions,
    ) -> Result<ExecOutcome, ExecError> {
        let Some(lane) = &scope.lane else {
            return self.slurm.run(request, options).await;
        };
        let job = self
            .slurm
            .arrays
            .submit(&self.slurm, &group_of(lane), &lane.lane, request, options)
            .await?;
        self.slurm.wait_and_finish(job, request.deadline).await
    }

    pub(crate) async fn containers(&self) -> Result<Arc<ContainerPool>, ExecError> {
        let mut slot = self.containers.lock().await;
        if let Some(pool) = slot.as_ref() {
            return Ok(pool.clone());
        }
        let pool = Arc::new(ContainerPool::connect().await?);
        *slot = Some(pool.clone());
        Ok(pool)
    }

    /// Remove the run's containers and cancel its unfinished Slurm jobs:
    /// call when the run comes to rest.
    pub async fn shutdown(&self) {
        let pool = self.containers.lock().await.take();
        if let Some(pool) = pool {
            pool.shutdown().await;
        }
        for id in self.jobs.drain_queued().await {
            let _ = self.slurm.cancel(&id).await;
        }
        // Whatever is left of the lanes' arrays: one scancel each.
        for id in self.slurm.arrays.arrays() {
            let _ = self.slurm.cancel(&id).await;
        }
    }
}

/// The array group of `lane`'s parallel block.
fn group_of(lane: &wfhost_core::run::engine::LaneKey) -> String {
    wfhost_exec::slurm::array::group_key(&lane.run_id, lane.step, &lane.node, &lane.block)
}
