//! The host side of the executor capabilities `exec`, `container` and
//! `slurm`: thin adapters from the WIT interfaces onto `wfhost-exec`.
//!
//! What a run's plugins start (dormant and started containers, submitted
//! Slurm jobs) is kept in one [`RunResources`] per plugin set, so that a
//! plugin can only address its own run's containers and jobs, and so that
//! everything still there is removed or cancelled when the run comes to
//! rest ([`RunResources::shutdown`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use wfhost_exec::slurm::SubmittedJob;
use wfhost_exec::{
    ContainerPool, ExecError, ExecOutcome, ExecRequest, SlurmExecutor, container::ContainerState,
};

use crate::bindings::{container, exec, executor_types as wit, slurm};
use crate::host_state::HostState;

/// What the capabilities need to know about the calling block.
#[derive(Clone)]
pub struct ExecScope {
    /// The host path of the workspace.
    pub workspace: PathBuf,
    pub run_id: wfhost_core::ids::RunId,
    pub node_id: String,
    pub block_id: String,
    pub step: u64,
    pub attempt: u32,
    /// The env contract, with host paths.
    pub env: Vec<(String, String)>,
    /// The block's timeout, as an instant.
    pub deadline: Instant,
    pub output_cap: u64,
    pub resources: Arc<RunResources>,
    /// For blocks that name no executor.
    pub default_executor: wfhost_exec::Executor,
    /// The block's `NODE_ID` in the agent contract: `node.block`, or
    /// `node.block.lane` in a lane.
    pub agent_id: String,
    /// The block's file restrictions (none: unrestricted).
    pub restrictions: Option<Vec<String>>,
    /// The workflow manifest's directory.
    pub manifest_dir: Option<PathBuf>,
    /// Where the block's agents send telemetry.
    pub telemetry: TelemetryTarget,
    /// The lane of a parallel block the block runs as.
    pub lane: Option<wfhost_core::run::engine::LaneKey>,
    /// The endpoints relayed into the block's agent container
    /// (`config.executor.container.forward`), or why they are not ones.
    pub container_forward: Result<Vec<wfhost_exec::forward::Forward>, String>,
    /// The block's preset settings (`config.preset`, `model`, `resume`,
    /// `home`: `wfhost_core::agents::presets`), or why they are not.
    pub agent: Result<wfhost_core::agents::presets::Settings, String>,
    /// Where the block's `{"secret": NAME}` env references are resolved.
    pub secrets: wfhost_core::policy::secrets::Secrets,
}

/// Where a block's agents send telemetry (`TELEMETRY_URL`).
#[derive(Clone)]
pub enum TelemetryTarget {
    /// Nowhere: `TELEMETRY_ENABLED=0`.
    Off,
    /// A collector the user named (`WFHOST_TELEMETRY_URL`); nothing is
    /// recorded.
    External(String),
    /// The host's own endpoint: each agent invocation gets an address of
    /// its own, and what it sends is recorded in the run's log.
    Recorded {
        hub: Arc<crate::telemetry::TelemetryHub>,
        /// The block execution's step (a lane's block's, not the lane's).
        step: u64,
        lane: Option<String>,
    },
}

impl ExecScope {
    /// The `TELEMETRY_URL` for one agent invocation, and the ticket that
    /// keeps it valid while the invocation runs.
    pub(crate) fn telemetry_address(
        &self,
    ) -> Result<(Option<String>, Option<crate::telemetry::Ticket>), String> {
        match &self.telemetry {
            TelemetryTarget::Off => Ok((None, None)),
            TelemetryTarget::External(url) => Ok((Some(url.clone()), None)),
            TelemetryTarget::Recorded { hub, step, lane } => {
                let ticket = hub
                    .register(*step, &self.node_id, &self.block_id, lane.as_deref())
                    .map_err(|e| format!("cannot make a telemetry address: {e}"))?;
                Ok((Some(ticket.url()), Some(ticket)))
            }
        }
    }
}

impl ExecScope {
    /// `env` with the references a plugin passed (see
    /// [`wfhost_core::policy::secrets`]) resolved on this host: a secret's value
    /// (added to `secrets`, to be masked), or a variable of this process's
    /// environment (left out when it has none). A secret set nowhere is an
    /// error naming it.
    pub(crate) fn resolve_env(
        &self,
        env: Vec<(String, String)>,
        secrets: &mut Vec<String>,
    ) -> Result<Vec<(String, String)>, wit::ExecError> {
        use wfhost_core::policy::secrets::{EnvRef, decode};
        let mut out = Vec::with_capacity(env.len());
        for (key, value) in env {
            match decode(&value)
                .map_err(|e| wit::ExecError::Invalid(format!("env `{key}`: {e}")))?
            {
                None => out.push((key, value)),
                Some(EnvRef::Host(name)) => {
                    if let Ok(value) = std::env::var(&name) {
                        out.push((key, value));
                    }
                }
                Some(EnvRef::Secret(name)) => {
                    let Some(value) = self.secrets.get(&name) else {
                        return Err(wit::ExecError::Invalid(format!(
                            "env `{key}`: secret `{name}` is not set on this host: `wfhost secret set {name}`, or set {name} in wfhost's environment"
                        )));
                    };
                    secrets.push(value.clone());
                    out.push((key, value));
                }
            }
        }
        Ok(out)
    }

    /// A WIT command with its env references resolved.
    pub(crate) fn command(
        &self,
        c: wit::Command,
        secrets: &mut Vec<String>,
    ) -> Result<wfhost_core::policy::exec::ExecCommand, wit::ExecError> {
        Ok(wfhost_core::policy::exec::ExecCommand {
            argv: c.argv,
            cwd: c.cwd,
            env: self.resolve_env(c.env, secrets)?,
        })
    }

    /// A request for `spec` with a fresh bundle directory under
    /// `.output/exec/<run>/`.
    fn request(&self, spec: wfhost_core::policy::exec::ExecSpec) -> ExecRequest {
        self.request_under(spec, ".output/exec")
    }

    /// Like [`Self::request`], with the bundle under `dir/<run>/`.
    pub(crate) fn request_under(
        &self,
        spec: wfhost_core::policy::exec::ExecSpec,
        dir: &str,
    ) -> ExecRequest {
        let parent = self.workspace.join(dir).join(&self.run_id);
        let bundle_dir = wfhost_exec::unique_bundle_dir(
            &parent,
            &format!("step-{}-{}.{}", self.step, self.node_id, self.block_id),
        );
        ExecRequest {
            spec,
            workdir: self.workspace.clone(),
            bundle_dir,
            env: self.env.clone(),
            meta: wfhost_exec::BundleMeta {
                agent_id: wfhost_exec::hostname(),
                run_id: self.run_id.clone(),
                stage_id: format!("{}.{}", self.node_id, self.block_id),
                step: self.step,
                attempt: self.attempt,
            },
            deadline: Some(self.deadline),
            output_cap: self.output_cap,
            stdin: None,
            mask: Default::default(),
        }
    }

    fn result(&self, outcome: ExecOutcome) -> wit::ExecResult {
        to_wit_result(&self.workspace, outcome)
    }
}

/// A Slurm job submitted through the `slurm` capability.
enum Job {
    Queued(Box<SubmittedJob>),
    Finished {
        state: String,
        result: wit::ExecResult,
    },
}

/// Containers and jobs of one run's plugins.
#[derive(Default)]
pub struct RunResources {
    /// Connected to Docker on first use.
    containers: tokio::sync::Mutex<Option<Arc<ContainerPool>>>,
    slurm: SlurmExecutor,
    jobs: tokio::sync::Mutex<HashMap<String, Job>>,
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

    /// The lanes of the parallel block at `lane`'s group are about to run:
    /// their Slurm work goes in one job array (`limit`: at most that many
    /// tasks at once).
    pub fn lanes_starting(&self, lanes: &[wfhost_core::run::engine::LaneKey], limit: Option<u32>) {
        let Some(first) = lanes.first() else {
            return;
        };
        let names: Vec<String> = lanes.iter().map(|l| l.lane.clone()).collect();
        self.slurm.arrays.expect(&group_of(first), &names, limit);
        if let Some(n) = limit {
            self.lane_slots.lock().expect("not poisoned").insert(
                group_of(first),
                Arc::new(tokio::sync::Semaphore::new(n.max(1) as usize)),
            );
        }
    }

    /// A slot for a lane's local or container command, when its parallel
    /// block limits how many run at once.
    async fn lane_slot(&self, scope: &ExecScope) -> Option<tokio::sync::OwnedSemaphorePermit> {
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
    async fn run_on_slurm(
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
        let jobs: Vec<String> = self
            .jobs
            .lock()
            .await
            .drain()
            .filter_map(|(id, job)| matches!(job, Job::Queued(_)).then_some(id))
            .collect();
        for id in jobs {
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

pub(crate) fn to_wit_error(e: ExecError) -> wit::ExecError {
    match e {
        ExecError::Refused(v) => wit::ExecError::Refused(v.to_string()),
        ExecError::Invalid(m) => wit::ExecError::Invalid(m),
        ExecError::Unavailable(m) => wit::ExecError::Unavailable(m),
        ExecError::Failed(m) => wit::ExecError::Failed(m),
    }
}

fn to_slurm_options(o: wit::SlurmOptions) -> wfhost_exec::SlurmOptions {
    wfhost_exec::SlurmOptions {
        partition: o.partition,
        time_limit: o.time_limit,
        cpus_per_task: o.cpus_per_task,
        mem_mb: o.mem_mb,
        extra_args: o.extra_args,
    }
}

pub(crate) fn to_container_options(o: wit::ContainerOptions) -> wfhost_exec::ContainerOptions {
    wfhost_exec::ContainerOptions {
        image: o.image,
        cpus: o.cpus,
        memory_mb: o.memory_mb,
        ..Default::default()
    }
}

pub(crate) fn to_wit_result(workspace: &std::path::Path, outcome: ExecOutcome) -> wit::ExecResult {
    wit::ExecResult {
        bundle_dir: outcome
            .bundle_dir
            .strip_prefix(workspace)
            .unwrap_or(&outcome.bundle_dir)
            .display()
            .to_string(),
        executor: outcome.executor.to_string(),
        slurm_job_id: outcome.slurm_job_id,
        succeeded: outcome.succeeded,
        commands: outcome
            .commands
            .into_iter()
            .map(|c| wit::CommandResult {
                argv: c.argv,
                exit_code: c.exit_code,
                started_ms: c.started_ms,
                ended_ms: c.ended_ms,
                stdout_path: c.stdout,
                stderr_path: c.stderr,
                stdout_truncated: c.stdout_truncated,
                stderr_truncated: c.stderr_truncated,
                timed_out: c.timed_out,
                error: c.error,
            })
            .collect(),
    }
}

impl HostState {
    /// The calling block's scope; action handlers have none.
    pub(crate) fn scope(&self) -> Result<ExecScope, wit::ExecError> {
        self.exec.clone().ok_or_else(|| {
            wit::ExecError::Unavailable("executors can only be used by a block worker".into())
        })
    }
}

impl wit::Host for HostState {}

impl exec::Host for HostState {
    #[tracing::instrument(
        name = "host_call",
        level = "debug",
        skip_all,
        fields(interface = "wfhost:plugin/exec", function = "run")
    )]
    async fn run(&mut self, block: exec::ExecBlock) -> Result<wit::ExecResult, wit::ExecError> {
        let scope = self.scope()?;
        let mut secrets = Vec::new();
        let spec = wfhost_core::policy::exec::ExecSpec {
            commands: block
                .commands
                .into_iter()
                .map(|c| scope.command(c, &mut secrets))
                .collect::<Result<_, _>>()?,
            allow_shell: block.allow_shell,
        };
        let mut request = scope.request(spec);
        request.mask = wfhost_core::policy::secrets::Masker::new(&secrets);
        let executor = match block.executor {
            None => scope.default_executor.clone(),
            Some(exec::Executor::Local) => wfhost_exec::Executor::Local,
            Some(exec::Executor::Container(o)) => {
                wfhost_exec::Executor::Container(to_container_options(o))
            }
            Some(exec::Executor::Slurm(o)) => wfhost_exec::Executor::Slurm(to_slurm_options(o)),
        };
        if !secrets.is_empty() && matches!(executor, wfhost_exec::Executor::Slurm(_)) {
            return Err(no_secrets_on_slurm());
        }
        let outcome = match executor {
            wfhost_exec::Executor::Local => {
                let _slot = scope.resources.lane_slot(&scope).await;
                wfhost_exec::run_local(&request).await
            }
            wfhost_exec::Executor::Container(o) => match scope.resources.containers().await {
                Ok(pool) => {
                    let _slot = scope.resources.lane_slot(&scope).await;
                    pool.run(&request, &o).await
                }
                Err(e) => Err(e),
            },
            wfhost_exec::Executor::Slurm(o) => {
                scope.resources.run_on_slurm(&scope, &request, &o).await
            }
        };
        outcome.map(|o| scope.result(o)).map_err(to_wit_error)
    }
}

fn to_wit_state(state: ContainerState) -> container::ContainerState {
    match state {
        ContainerState::Running => container::ContainerState::Running,
        ContainerState::Paused => container::ContainerState::Paused,
        ContainerState::Exited(code) => container::ContainerState::Exited(code),
        ContainerState::Gone => container::ContainerState::Gone,
    }
}

impl container::Host for HostState {
    #[tracing::instrument(
        name = "host_call",
        level = "debug",
        skip_all,
        fields(interface = "wfhost:plugin/container", function = "run")
    )]
    async fn run(
        &mut self,
        options: wit::ContainerOptions,
        command: wit::Command,
        allow_shell: bool,
    ) -> Result<String, wit::ExecError> {
        let scope = self.scope()?;
        // A started container's output is read back by the plugin
        // (`logs`), unmasked: no secrets there.
        let mut secrets = Vec::new();
        let command = scope.command(command, &mut secrets)?;
        if !secrets.is_empty() {
            return Err(wit::ExecError::Invalid(
                "secret references are not supported by `container.run` (its logs are read back unmasked); use an exec block".into(),
            ));
        }
        let pool = scope.resources.containers().await.map_err(to_wit_error)?;
        pool.start(
            &scope.workspace,
            &scope.run_id,
            &scope.env,
            &to_container_options(options),
            &command,
            allow_shell,
        )
        .await
        .map_err(to_wit_error)
    }

    #[tracing::instrument(
        name = "host_call",
        level = "debug",
        skip_all,
        fields(interface = "wfhost:plugin/container", function = "status")
    )]
    async fn status(&mut self, id: String) -> Result<container::ContainerState, wit::ExecError> {
        let scope = self.scope()?;
        let pool = scope.resources.containers().await.map_err(to_wit_error)?;
        pool.state(&id)
            .await
            .map(to_wit_state)
            .map_err(to_wit_error)
    }

    #[tracing::instrument(
        name = "host_call",
        level = "debug",
        skip_all,
        fields(interface = "wfhost:plugin/container", function = "logs")
    )]
    async fn logs(&mut self, id: String) -> Result<(String, String), wit::ExecError> {
        let scope = self.scope()?;
        let pool = scope.resources.containers().await.map_err(to_wit_error)?;
        pool.logs(&id, scope.output_cap).await.map_err(to_wit_error)
    }

    #[tracing::instrument(
        name = "host_call",
        level = "debug",
        skip_all,
        fields(interface = "wfhost:plugin/container", function = "pause")
    )]
    async fn pause(&mut self, id: String) -> Result<(), wit::ExecError> {
        let scope = self.scope()?;
        let pool = scope.resources.containers().await.map_err(to_wit_error)?;
        pool.pause(&id).await.map_err(to_wit_error)
    }

    #[tracing::instrument(
        name = "host_call",
        level = "debug",
        skip_all,
        fields(interface = "wfhost:plugin/container", function = "unpause")
    )]
    async fn unpause(&mut self, id: String) -> Result<(), wit::ExecError> {
        let scope = self.scope()?;
        let pool = scope.resources.containers().await.map_err(to_wit_error)?;
        pool.unpause(&id).await.map_err(to_wit_error)
    }

    #[tracing::instrument(
        name = "host_call",
        level = "debug",
        skip_all,
        fields(interface = "wfhost:plugin/container", function = "remove")
    )]
    async fn remove(&mut self, id: String) -> Result<(), wit::ExecError> {
        let scope = self.scope()?;
        let pool = scope.resources.containers().await.map_err(to_wit_error)?;
        pool.remove_started(&id).await.map_err(to_wit_error)
    }
}

impl slurm::Host for HostState {
    #[tracing::instrument(
        name = "host_call",
        level = "debug",
        skip_all,
        fields(interface = "wfhost:plugin/slurm", function = "submit")
    )]
    async fn submit(
        &mut self,
        commands: Vec<wit::Command>,
        allow_shell: bool,
        options: wit::SlurmOptions,
    ) -> Result<String, wit::ExecError> {
        let scope = self.scope()?;
        let mut secrets = Vec::new();
        let spec = wfhost_core::policy::exec::ExecSpec {
            commands: commands
                .into_iter()
                .map(|c| scope.command(c, &mut secrets))
                .collect::<Result<_, _>>()?,
            allow_shell,
        };
        if !secrets.is_empty() {
            return Err(no_secrets_on_slurm());
        }
        let mut request = scope.request(spec);
        // The job outlives the block that submitted it; the run's end
        // cancels it if nobody did.
        request.deadline = None;
        let job = scope
            .resources
            .slurm
            .submit(&request, &to_slurm_options(options))
            .await
            .map_err(to_wit_error)?;
        let id = job.job_id.clone();
        scope
            .resources
            .jobs
            .lock()
            .await
            .insert(id.clone(), Job::Queued(Box::new(job)));
        Ok(id)
    }

    #[tracing::instrument(
        name = "host_call",
        level = "debug",
        skip_all,
        fields(interface = "wfhost:plugin/slurm", function = "status")
    )]
    async fn status(&mut self, job_id: String) -> Result<slurm::JobStatus, wit::ExecError> {
        let scope = self.scope()?;
        let resources = &scope.resources;
        let mut jobs = resources.jobs.lock().await;
        let submitted = match jobs.get(&job_id) {
            None => return Err(not_ours(&job_id)),
            Some(Job::Finished { state, result }) => {
                return Ok(slurm::JobStatus {
                    state: state.clone(),
                    finished: true,
                    result: Some(result.clone()),
                });
            }
            Some(Job::Queued(job)) => (**job).clone(),
        };
        let (active, state) = resources.slurm.poll(&job_id).await.map_err(to_wit_error)?;
        if active {
            return Ok(slurm::JobStatus {
                state,
                finished: false,
                result: None,
            });
        }
        let outcome = resources
            .slurm
            .finish(&submitted, false)
            .await
            .map_err(to_wit_error)?;
        let result = to_wit_result(&scope.workspace, outcome);
        jobs.insert(
            job_id,
            Job::Finished {
                state: state.clone(),
                result: result.clone(),
            },
        );
        Ok(slurm::JobStatus {
            state,
            finished: true,
            result: Some(result),
        })
    }

    #[tracing::instrument(
        name = "host_call",
        level = "debug",
        skip_all,
        fields(interface = "wfhost:plugin/slurm", function = "cancel")
    )]
    async fn cancel(&mut self, job_id: String) -> Result<(), wit::ExecError> {
        let scope = self.scope()?;
        let jobs = scope.resources.jobs.lock().await;
        match jobs.get(&job_id) {
            None => Err(not_ours(&job_id)),
            Some(Job::Finished { .. }) => Ok(()),
            Some(Job::Queued(_)) => scope
                .resources
                .slurm
                .cancel(&job_id)
                .await
                .map_err(to_wit_error),
        }
    }
}

/// A Slurm job's batch script, kept in its bundle, would hold the value.
fn no_secrets_on_slurm() -> wit::ExecError {
    wit::ExecError::Invalid(
        "secret references are not supported on the Slurm executor yet (the batch script in the bundle would hold the value)".into(),
    )
}

fn not_ours(job_id: &str) -> wit::ExecError {
    wit::ExecError::Invalid(format!(
        "Slurm job `{job_id}` was not submitted by this run's plugin"
    ))
}
