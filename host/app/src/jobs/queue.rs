//! The engine's [`WorkerHost`] for runs started by `wfhost serve`: each
//! block execution becomes a job in the store, leased and run by an agent;
//! the run waits for its result. Lane workspaces are made and merged here,
//! as for a local run.
//!
//! A job is named by `(run, branch, step, lane)`: a run process that is
//! killed and resumed finds the job it queued — and its result, if an
//! agent reported one meanwhile — so a block whose result was recorded is
//! not run again.
//!
//! [`WorkerHost`]: wfhost_core::run::engine::WorkerHost

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wfhost_core::run::engine::{
    BlockFailure, BlockRequest, BlockResult, BlockRunner, LaneKey, Lanes, SessionReads, Telemetry,
    TelemetrySource,
};
use wfhost_core::run::event::QueuedJob;
use wfhost_runtime::PluginSet;
use wfhost_store::bell::Bell;
use wfhost_store::{Durability, JobState, NewJob, Store};

use super::request::{JOB_FORMAT, JobRequest, JobResult, exec_policy, requirements};

/// What every job of one run carries besides the block.
pub struct RunJobs<'p> {
    plugins: &'p PluginSet,
    store: Mutex<Store>,
    home: PathBuf,
    run_id: String,
    branch: u32,
    workflow_hash: String,
    manifest: String,
    workspace: String,
    workspace_id: String,
    executor: String,
    digests: BTreeMap<String, String>,
    /// Telemetry that came with job results, until the engine takes it.
    telemetry: Mutex<Vec<Telemetry>>,
    /// The jobs waited for now, and the block each one's telemetry is
    /// attributed to.
    waiting: Mutex<HashMap<i64, Attribution>>,
    /// The last row of the store's job telemetry read.
    telemetry_read: Mutex<i64>,
    /// How long the job of each step's block waited for an agent, until
    /// the engine asks.
    queued: Mutex<HashMap<u64, Duration>>,
    /// The run's doorbell, rung when one of its jobs becomes final (None:
    /// it could not be bound; jobs are then looked at on a timer).
    bell: Option<RunBell>,
}

/// The doorbell of the process executing a run: a thread takes its rings
/// and changes `rung`. On a PostgreSQL store another thread does the same
/// for the database's notifications that one of the run's jobs became
/// final, which any server (on any machine) sends.
struct RunBell {
    bell: Option<Arc<Bell>>,
    rung: tokio::sync::watch::Receiver<u64>,
}

impl RunBell {
    /// Bind the bell of `run_id` (this process holds the run's lock), and
    /// listen to the database when the store is on PostgreSQL.
    fn bind(home: &std::path::Path, run_id: &str, remote: bool) -> Option<RunBell> {
        let run = wfhost_store::RunId::parse(run_id).ok()?;
        let (tx, rung) = tokio::sync::watch::channel(0u64);
        let tx = Arc::new(tx);
        let bell = Bell::for_run(home, &run)
            .map_err(|e| {
                tracing::debug!("run {run_id}: no doorbell ({e}); jobs are looked at on a timer")
            })
            .ok()
            .map(Arc::new);
        let rings = bell.as_ref().and_then(|bell| {
            let (listening, tx) = (Arc::clone(bell), Arc::clone(&tx));
            std::thread::Builder::new()
                .name("wfhost-run-bell".into())
                .spawn(move || {
                    while !tx.is_closed() {
                        if listening.wait(Some(Duration::from_secs(1))) {
                            tx.send_modify(|n| *n += 1);
                        }
                    }
                })
                .ok()
        });
        let notified = remote
            .then(|| watch_database(run_id, Arc::clone(&tx)))
            .flatten();
        (rings.is_some() || notified.is_some()).then_some(RunBell { bell, rung })
    }
}

/// A thread that changes `tx` whenever the database says one of
/// `run_id`'s jobs became final (the connection holding the run's lock in
/// this process listens for that); None when there is no such lock.
fn watch_database(
    run_id: &str,
    tx: Arc<tokio::sync::watch::Sender<u64>>,
) -> Option<std::thread::JoinHandle<()>> {
    let notified = wfhost_store::run_notifications(run_id)?;
    std::thread::Builder::new()
        .name("wfhost-run-notified".into())
        .spawn(move || {
            let mut seen = notified.count();
            while !tx.is_closed() {
                if notified.wait(seen, Duration::from_secs(1)) {
                    seen = notified.count();
                    tx.send_modify(|n| *n += 1);
                }
            }
        })
        .ok()
}

impl Drop for RunBell {
    fn drop(&mut self) {
        // At once, not when the thread notices: the process may end first.
        if let Some(bell) = &self.bell {
            bell.remove();
        }
    }
}

/// The block execution (and lane) a job's telemetry belongs to.
#[derive(Clone)]
struct Attribution {
    step: u64,
    node: String,
    block: String,
    lane: Option<String>,
}

/// How often the run looks for telemetry agents reported while its jobs
/// run.
const TELEMETRY_POLL: Duration = Duration::from_millis(100);
/// The longest a job is waited for without looking at it: what a lost
/// doorbell ring costs at most.
const JOB_FALLBACK: Duration = Duration::from_millis(200);
/// How often a job is looked at when the run has no doorbell.
const JOB_POLL: Duration = Duration::from_millis(10);

/// Where a run's jobs are queued, and what they share.
pub struct RunInfo {
    pub home: PathBuf,
    pub run_id: String,
    pub branch: u32,
    pub workflow_hash: String,
    pub manifest: String,
    pub executor: String,
}

impl<'p> RunJobs<'p> {
    pub fn new(plugins: &'p PluginSet, run: RunInfo) -> Result<RunJobs<'p>, String> {
        let store =
            Store::open_existing_with(&run.home, Durability::Full).map_err(|e| e.to_string())?;
        let workspace_id = super::request::ensure_workspace_id(plugins.workspace())?;
        // Telemetry reported before this process started is not recorded
        // (a resumed run does not record it twice).
        let telemetry_read = store.last_job_telemetry().map_err(|e| e.to_string())?;
        let remote = store.backend() == wfhost_store::Backend::Postgres;
        let bell = RunBell::bind(&run.home, &run.run_id, remote);
        Ok(RunJobs {
            plugins,
            store: Mutex::new(store),
            home: run.home,
            run_id: run.run_id,
            branch: run.branch,
            workflow_hash: run.workflow_hash,
            manifest: run.manifest,
            workspace: plugins.workspace().display().to_string(),
            workspace_id,
            executor: run.executor,
            digests: crate::plugins::plugin_digests(plugins),
            telemetry: Mutex::new(Vec::new()),
            waiting: Mutex::new(HashMap::new()),
            telemetry_read: Mutex::new(telemetry_read),
            queued: Mutex::new(HashMap::new()),
            bell,
        })
    }

    /// The run came to rest (ended, or waiting at a gate or a timer): no
    /// server is to take it over now; the process that goes on with it
    /// notes it again.
    pub fn at_rest(&self) {
        let store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        let forgotten = wfhost_store::RunId::parse(&self.run_id)
            .map_err(|e| e.to_string())
            .and_then(|id| store.forget_served(&id).map_err(|e| e.to_string()));
        if let Err(e) = forgotten {
            // A server's next look finds it at rest and forgets it then.
            tracing::debug!(run_id = %self.run_id, "cannot forget the run as served: {e}");
        }
    }

    fn job_request(&self, request: BlockRequest) -> JobRequest {
        JobRequest {
            format: JOB_FORMAT,
            run_id: self.run_id.clone(),
            branch: self.branch,
            workflow_hash: self.workflow_hash.clone(),
            manifest: self.manifest.clone(),
            workspace: self.workspace.clone(),
            workspace_id: self.workspace_id.clone(),
            executor: self.executor.clone(),
            plugins: self.digests.clone(),
            worker: request.worker,
            timeout_ms: request.timeout.map(|t| t.as_millis() as u64),
            lane: request.lane,
            context: request.context,
            payload: request.payload,
            session_folder: self.plugins.session_folder(),
            // Queued with the block's start, under its span.
            traceparent: wfhost_protocol::trace::current(),
        }
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What an agent needs to run `job`, and the job as it is stored.
    fn encode(job: &JobRequest) -> Result<(Vec<String>, String), String> {
        let requires = requirements(&job.worker, &job.context.config, &job.executor);
        let text = serde_json::to_string(job).map_err(|e| format!("cannot encode the job: {e}"))?;
        Ok((requires, text))
    }

    /// The job that stands for a block, queued by the engine's sink with
    /// the block's start. None when the block must not become a job (the
    /// exec policy refuses it): `run` then fails it without queueing.
    fn queued_job(&self, request: &BlockRequest) -> Option<QueuedJob> {
        let job = self.job_request(request.clone());
        exec_policy(&job.worker, &job.context.config).ok()?;
        let (requires, request) = Self::encode(&job).ok()?;
        Some(QueuedJob {
            step: job.context.step_index,
            node: job.context.node_id,
            block: job.context.block_id,
            requires,
            request,
        })
    }

    /// Queue the block (or find its job, queued with the block's start or
    /// by a run process that was killed) and return the job's id.
    fn enqueue(&self, job: &JobRequest) -> Result<(i64, Option<Finished>), String> {
        let (requires, text) = Self::encode(job)?;
        let lane = job.lane.as_ref().map(|l| l.lane.as_str()).unwrap_or("");
        let new = NewJob {
            run_id: &job.run_id,
            branch: job.branch,
            step: job.context.step_index,
            lane,
            node: &job.context.node_id,
            block: &job.context.block_id,
            requires: &requires,
            request: &text,
        };
        let mut store = self.store();
        // Queued with the block's start, usually: found with a read.
        let found = store.queued_job(&new).ok().flatten();
        let queued = match found {
            Some(job) => job,
            None => store
                .enqueue_job(&new, wfhost_store::time::now_ms())
                .map_err(|e| format!("cannot queue the block's job: {e}"))?,
        };
        Ok((queued.id, finished(&queued)))
    }

    /// Wait until job `id` is final; its result. The server rings the
    /// run's doorbell when one of its jobs becomes final; without a ring the
    /// job is looked at every [`JOB_FALLBACK`].
    async fn wait(&self, id: i64) -> Finished {
        let mut rung = self.bell.as_ref().map(|b| b.rung.clone());
        let mut looks = 0u32;
        loop {
            // A ring from here on wakes the wait below.
            if let Some(rung) = &mut rung {
                rung.mark_unchanged();
            }
            looks += 1;
            match self.store().job(id) {
                Ok(Some(job)) => {
                    if let Some(result) = finished(&job) {
                        tracing::debug!(job_id = id, looks, "job final");
                        return result;
                    }
                }
                Ok(None) => return Err(format!("job {id} is gone from the store")),
                // A busy store: look again.
                Err(_) => {}
            }
            match &mut rung {
                Some(bell) => {
                    if let Ok(Err(_)) = tokio::time::timeout(JOB_FALLBACK, bell.changed()).await {
                        // The bell's thread is gone: a timer alone.
                        rung = None;
                    }
                }
                None => tokio::time::sleep(JOB_POLL).await,
            }
        }
    }

    async fn run(&self, request: BlockRequest) -> BlockResult {
        let job = self.job_request(request);
        if let Err(refused) = exec_policy(&job.worker, &job.context.config) {
            return failure(refused);
        }
        let (id, done) = match self.enqueue(&job) {
            Ok(queued) => queued,
            Err(e) => return failure(e),
        };
        if let Some(result) = done {
            return self.outcome(&job, result);
        }
        let (step, lane) = job.telemetry_step_and_lane();
        let attribution = Attribution {
            step,
            node: job.context.node_id.clone(),
            block: job.context.block_id.clone(),
            lane: lane.map(str::to_string),
        };
        lock(&self.waiting).insert(id, attribution);
        // Dropped (the run was interrupted or cancelled): the job is
        // cancelled, so the agent running it loses its lease and stops.
        let guard = CancelOnDrop {
            home: &self.home,
            job: id,
        };
        let result = self.wait(id).await;
        std::mem::forget(guard);
        let outcome = self.outcome(&job, result);
        lock(&self.waiting).remove(&id);
        if lane.is_none() {
            let queued = self.time_queued(id);
            lock(&self.queued).insert(step, queued);
        }
        outcome
    }

    /// How long job `id` waited to be leased, over all its attempts: from
    /// each time it was queued (or queued again) to the lease that
    /// followed. Zero when its history cannot be read.
    fn time_queued(&self, id: i64) -> Duration {
        let Ok(history) = self.store().job_history(id) else {
            return Duration::ZERO;
        };
        let mut waiting_since = None;
        let mut total_ms = 0;
        for event in history {
            match event.kind.as_str() {
                "queued" | "requeued" => waiting_since = Some(event.at_ms),
                "leased" => {
                    if let Some(since) = waiting_since.take() {
                        total_ms += (event.at_ms - since).max(0);
                    }
                }
                _ => {}
            }
        }
        Duration::from_millis(u64::try_from(total_ms).unwrap_or(0))
    }

    /// The telemetry agents reported for the jobs waited for since the
    /// last look, oldest first (rows of other jobs are passed over).
    fn reported_telemetry(&self) -> Vec<Telemetry> {
        let mut read = lock(&self.telemetry_read);
        let rows = match self
            .store()
            .job_telemetry_after(&self.run_id, self.branch, *read, 1_000)
        {
            Ok(rows) => rows,
            // A busy store: look again next time.
            Err(_) => return Vec::new(),
        };
        let Some(last) = rows.last() else {
            return Vec::new();
        };
        *read = last.id;
        let waiting = lock(&self.waiting);
        rows.into_iter()
            .filter_map(|row| {
                let to = waiting.get(&row.job)?;
                Some(Telemetry {
                    step: to.step,
                    node: to.node.clone(),
                    block: to.block.clone(),
                    lane: to.lane.clone(),
                    body: serde_json::from_str(&row.body).ok()?,
                })
            })
            .collect()
    }

    /// Telemetry reported while the jobs run, as it comes (cancel-safe:
    /// what is read is returned at once).
    async fn telemetry_reported(&self) -> Vec<Telemetry> {
        loop {
            tokio::time::sleep(TELEMETRY_POLL).await;
            let reported = self.reported_telemetry();
            if !reported.is_empty() {
                return reported;
            }
        }
    }

    /// The block's result; the telemetry that came with it is kept for
    /// the engine, attributed to the job's block.
    fn outcome(&self, job: &JobRequest, finished: Finished) -> BlockResult {
        // What was reported while it ran comes before what came with it.
        let reported = self.reported_telemetry();
        lock(&self.telemetry).extend(reported);
        match finished {
            Ok(result) => {
                lock(&self.telemetry).extend(result.telemetry_of(job));
                result.into_block_result()
            }
            Err(message) => failure(message),
        }
    }
}

/// What a final job came to: the agent's result, or why there is none.
type Finished = Result<JobResult, String>;

/// The result of a final job.
fn finished(job: &wfhost_store::Job) -> Option<Finished> {
    match job.state {
        JobState::Queued | JobState::Leased => None,
        JobState::Cancelled => Some(Err(format!("job {} was cancelled", job.id))),
        JobState::Succeeded | JobState::Failed => Some(
            match job.result.as_deref().map(serde_json::from_str::<JobResult>) {
                Some(Ok(result)) => Ok(result),
                Some(Err(e)) => Err(format!("job {}: its result cannot be read: {e}", job.id)),
                None => Err(format!("job {} finished without a result", job.id)),
            },
        ),
    }
}

fn failure(message: String) -> BlockResult {
    BlockResult {
        outcome: Err(BlockFailure::new(message)),
        log: Vec::new(),
    }
}

struct CancelOnDrop<'a> {
    home: &'a std::path::Path,
    job: i64,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Ok(mut store) = Store::open_existing(self.home) {
            let _ = store.cancel_job(
                self.job,
                "the run stopped waiting for it",
                wfhost_store::time::now_ms(),
            );
        }
    }
}

impl BlockRunner for RunJobs<'_> {
    fn run_block(&self, request: BlockRequest) -> impl Future<Output = BlockResult> + Send {
        self.run(request)
    }

    fn job_for(&self, request: &BlockRequest) -> Option<QueuedJob> {
        self.queued_job(request)
    }

    fn queued_time(&self, step: u64) -> Duration {
        lock(&self.queued).remove(&step).unwrap_or_default()
    }
}

impl Lanes for RunJobs<'_> {
    fn create_lane(&self, lane: &LaneKey) -> impl Future<Output = Result<(), String>> + Send {
        self.plugins.create_lane(lane)
    }

    fn lane_exists(&self, lane: &LaneKey) -> bool {
        self.plugins.lane_exists(lane)
    }

    fn lane_changes(
        &self,
        lane: &LaneKey,
    ) -> impl Future<Output = Result<Vec<String>, String>> + Send {
        self.plugins.lane_changes(lane)
    }

    fn merge_lane(
        &self,
        lane: &LaneKey,
        files: &[String],
    ) -> impl Future<Output = Result<Vec<String>, String>> + Send {
        self.plugins.merge_lane(lane, files)
    }

    fn remove_lanes(&self, run_id: &str, step: u64) -> impl Future<Output = ()> + Send {
        self.plugins.remove_lanes(run_id, step)
    }

    fn wait_until(&self, due_at_ms: i64) -> impl Future<Output = ()> + Send {
        self.plugins.wait_until(due_at_ms)
    }
}

impl SessionReads for RunJobs<'_> {
    fn session_artifact(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<String>, String>> + Send {
        self.plugins.session_artifact(name)
    }
}

impl TelemetrySource for RunJobs<'_> {
    fn telemetry(&self) -> impl Future<Output = Vec<Telemetry>> + Send {
        self.telemetry_reported()
    }

    fn telemetry_now(&self) -> Vec<Telemetry> {
        std::mem::take(&mut *lock(&self.telemetry))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
