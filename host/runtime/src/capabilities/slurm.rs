//! The `slurm` capability (`wfhost:plugin/slurm`): Slurm batch jobs a
//! plugin submits, watches and cancels; they outlive the block that
//! submitted them, so the jobs are kept with the run's resources
//! ([`SlurmJobs`]) and cancelled at the run's end.

use std::collections::HashMap;

use wasmtime::component::{HasData, Linker};
use wfhost_exec::slurm::SubmittedJob;

use super::scope::{ExecScope, calling_block, to_slurm_options, to_wit_error, to_wit_result};
use crate::bindings::{executor_types as wit, slurm};

/// The capability's view of the store, as `WasiCtxView` is WASI's: what it
/// knows of the calling block. Its jobs are the run's
/// (`RunResources::jobs`).
pub(crate) struct SlurmCtxView<'a> {
    pub scope: Option<&'a ExecScope>,
}

impl SlurmCtxView<'_> {
    fn scope(&self) -> Result<ExecScope, wit::ExecError> {
        calling_block(self.scope)
    }
}

/// A store that serves `slurm` (as `WasiView` is one that serves WASI).
pub(crate) trait SlurmView: Send {
    fn slurm(&mut self) -> SlurmCtxView<'_>;
}

struct Slurm;

impl HasData for Slurm {
    type Data<'a> = SlurmCtxView<'a>;
}

/// Link `wfhost:plugin/slurm`.
pub(crate) fn link<T: SlurmView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    slurm::add_to_linker::<T, Slurm>(linker, T::slurm)
}

/// A Slurm job submitted through the `slurm` capability.
pub(super) enum Job {
    Queued(Box<SubmittedJob>),
    Finished {
        state: String,
        result: wit::ExecResult,
    },
}

/// The jobs a run's plugins submitted, by id: the capability's own state,
/// run-wide.
#[derive(Default)]
pub(crate) struct SlurmJobs(tokio::sync::Mutex<HashMap<String, Job>>);

impl SlurmJobs {
    pub(super) async fn lock(&self) -> tokio::sync::MutexGuard<'_, HashMap<String, Job>> {
        self.0.lock().await
    }

    /// Forget every job, returning the ids of those still queued (to be
    /// cancelled: the run came to rest).
    pub(super) async fn drain_queued(&self) -> Vec<String> {
        self.0
            .lock()
            .await
            .drain()
            .filter_map(|(id, job)| matches!(job, Job::Queued(_)).then_some(id))
            .collect()
    }
}

impl slurm::Host for SlurmCtxView<'_> {
    #[tracing::instrument(
        name = "host_call",
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
pub(super) fn no_secrets_on_slurm() -> wit::ExecError {
    wit::ExecError::Invalid(
        "secret references are not supported on the Slurm executor yet (the batch script in the bundle would hold the value)".into(),
    )
}

fn not_ours(job_id: &str) -> wit::ExecError {
    wit::ExecError::Invalid(format!(
        "Slurm job `{job_id}` was not submitted by this run's plugin"
    ))
}
