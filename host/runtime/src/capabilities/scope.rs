//! What the executor capabilities (`exec`, `container`, `slurm`, `agent`)
//! share: the calling block's [`ExecScope`] (set in the store for worker
//! calls only) and the conversions between `wfhost-exec`'s types and the
//! WIT `executor-types`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use wfhost_exec::{ExecError, ExecOutcome, ExecRequest};

use super::resources::RunResources;
use crate::bindings::executor_types as wit;

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
    /// The contract agent the block plays (seed 001), named by its prompt
    /// prefix or its id; `None` when it plays none.
    pub role: Option<String>,
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
    pub(super) fn request(&self, spec: wfhost_core::policy::exec::ExecSpec) -> ExecRequest {
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

    pub(super) fn result(&self, outcome: ExecOutcome) -> wit::ExecResult {
        to_wit_result(&self.workspace, outcome)
    }
}

pub(crate) fn to_wit_error(e: ExecError) -> wit::ExecError {
    match e {
        ExecError::Refused(v) => wit::ExecError::Refused(v.to_string()),
        ExecError::Invalid(m) => wit::ExecError::Invalid(m),
        ExecError::Unavailable(m) => wit::ExecError::Unavailable(m),
        ExecError::Failed(m) => wit::ExecError::Failed(m),
    }
}

pub(super) fn to_slurm_options(o: wit::SlurmOptions) -> wfhost_exec::SlurmOptions {
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

/// The calling block's scope (a copy, for the duration of one host call),
/// or the error an action handler gets: it cannot run commands.
pub(crate) fn calling_block(scope: Option<&ExecScope>) -> Result<ExecScope, wit::ExecError> {
    scope.cloned().ok_or_else(|| {
        wit::ExecError::Unavailable("executors can only be used by a block worker".into())
    })
}
