//! The `exec` capability (`wfhost:plugin/exec`): a block's commands on a
//! host executor (local, container or Slurm), over `wfhost-exec`.

use wasmtime::component::{HasData, Linker};

use super::scope::{
    ExecScope, calling_block, to_container_options, to_slurm_options, to_wit_error,
};
use super::slurm::no_secrets_on_slurm;
use crate::bindings::{exec, executor_types as wit};

/// The capability's view of the store, as `WasiCtxView` is WASI's: what it
/// knows of the calling block. It keeps no state of its own.
pub(crate) struct ExecCtxView<'a> {
    pub scope: Option<&'a ExecScope>,
}

impl ExecCtxView<'_> {
    fn scope(&self) -> Result<ExecScope, wit::ExecError> {
        calling_block(self.scope)
    }
}

/// A store that serves `exec` (as `WasiView` is one that serves WASI).
pub(crate) trait ExecView: Send {
    fn exec(&mut self) -> ExecCtxView<'_>;
}

struct Exec;

impl HasData for Exec {
    type Data<'a> = ExecCtxView<'a>;
}

/// Link `wfhost:plugin/exec`.
pub(crate) fn link<T: ExecView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    exec::add_to_linker::<T, Exec>(linker, T::exec)
}

impl exec::Host for ExecCtxView<'_> {
    #[tracing::instrument(
        name = "host_call",
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
