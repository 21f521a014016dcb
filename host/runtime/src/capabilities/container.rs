//! The `container` capability (`wfhost:plugin/container`): Docker
//! containers a plugin starts and watches, with the workspace at
//! `/workspace`; the run's pool of them is in [`super::resources`].

use wasmtime::component::{HasData, Linker};
use wfhost_exec::container::ContainerState;

use super::scope::{ExecScope, calling_block, to_container_options, to_wit_error};
use crate::bindings::{container, executor_types as wit};

/// The capability's view of the store, as `WasiCtxView` is WASI's: what it
/// knows of the calling block. Its containers are the run's (`RunResources`).
pub(crate) struct ContainerCtxView<'a> {
    pub scope: Option<&'a ExecScope>,
}

impl ContainerCtxView<'_> {
    fn scope(&self) -> Result<ExecScope, wit::ExecError> {
        calling_block(self.scope)
    }
}

/// A store that serves `container` (as `WasiView` is one that serves WASI).
pub(crate) trait ContainerView: Send {
    fn container(&mut self) -> ContainerCtxView<'_>;
}

struct Container;

impl HasData for Container {
    type Data<'a> = ContainerCtxView<'a>;
}

/// Link `wfhost:plugin/container`.
pub(crate) fn link<T: ContainerView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    container::add_to_linker::<T, Container>(linker, T::container)
}

fn to_wit_state(state: ContainerState) -> container::ContainerState {
    match state {
        ContainerState::Running => container::ContainerState::Running,
        ContainerState::Paused => container::ContainerState::Paused,
        ContainerState::Exited(code) => container::ContainerState::Exited(code),
        ContainerState::Gone => container::ContainerState::Gone,
    }
}

impl container::Host for ContainerCtxView<'_> {
    #[tracing::instrument(
        name = "host_call",
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
        skip_all,
        fields(interface = "wfhost:plugin/container", function = "remove")
    )]
    async fn remove(&mut self, id: String) -> Result<(), wit::ExecError> {
        let scope = self.scope()?;
        let pool = scope.resources.containers().await.map_err(to_wit_error)?;
        pool.remove_started(&id).await.map_err(to_wit_error)
    }
}
