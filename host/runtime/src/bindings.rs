//! Host-side bindings of the `wfhost:plugin` WIT package: one module per
//! frozen version (`wit/since_vX.Y.Z/`), as Zed's extension host does.
//!
//! A component is run with the bindings of the version it targets (read
//! from the interface it exports, see `admission::check_world`). A new
//! version adds a `since_vX_Y_Z` module, a variant to [`WorkerPre`] and
//! [`ActionHandlerPre`] (converting its types to and from `latest`'s), the
//! linker entries of its imports and an entry in [`SERVED_VERSIONS`].

use wasmtime::Store;
use wasmtime::component::InstancePre;

use crate::host_state::HostState;

/// The bindings of `wfhost:plugin@0.1.0` (`wit/since_v0.1.0/`).
pub mod since_v0_1_0 {
    /// The package version these bindings speak.
    pub const VERSION: &str = "0.1.0";

    /// The `worker` world.
    pub mod worker {
        wasmtime::component::bindgen!({
            path: "../../wit/since_v0.1.0",
            world: "worker",
            imports: {
                "wfhost:plugin/exec.run": async,
                "wfhost:plugin/container.run": async,
                "wfhost:plugin/container.status": async,
                "wfhost:plugin/container.logs": async,
                "wfhost:plugin/container.pause": async,
                "wfhost:plugin/container.unpause": async,
                "wfhost:plugin/container.remove": async,
                "wfhost:plugin/slurm.submit": async,
                "wfhost:plugin/slurm.status": async,
                "wfhost:plugin/slurm.cancel": async,
                "wfhost:plugin/agent.run": async,
            },
            exports: { default: async },
        });
    }

    /// The `action-handler` world; shares `types` and `log` with `worker`.
    pub mod action_handler {
        wasmtime::component::bindgen!({
            path: "../../wit/since_v0.1.0",
            world: "action-handler",
            exports: { default: async },
            with: {
                "wfhost:plugin/types": super::worker::wfhost::plugin::types,
                "wfhost:plugin/log": super::worker::wfhost::plugin::log,
            },
        });
    }
}

/// The newest version: the host's own types are converted to and from it.
pub use since_v0_1_0 as latest;

pub use latest::worker::wfhost::plugin::{
    agent, container, exec, executor_types, log, slurm, types,
};

/// Every version of `wfhost:plugin` this host serves, oldest first.
pub const SERVED_VERSIONS: &[&str] = &[since_v0_1_0::VERSION];

/// The interface a worker component exports (without its version).
pub const WORKER_INTERFACE: &str = "wfhost:plugin/block-worker";
/// The interface an action-handler component exports (without its version).
pub const ACTION_HANDLER_INTERFACE: &str = "wfhost:plugin/action-interpreter";

/// A worker component ready to instantiate, with its version's bindings.
pub enum WorkerPre {
    V0_1_0(since_v0_1_0::worker::WorkerPre<HostState>),
}

impl WorkerPre {
    /// `pre` with the bindings of `version` (one of [`SERVED_VERSIONS`]).
    pub fn new(version: &str, pre: InstancePre<HostState>) -> wasmtime::Result<Self> {
        match version {
            since_v0_1_0::VERSION => Ok(Self::V0_1_0(since_v0_1_0::worker::WorkerPre::new(pre)?)),
            other => Err(unserved(other)),
        }
    }

    /// Instantiate in `store` and run one block.
    pub async fn run(
        &self,
        store: &mut Store<HostState>,
        context: &types::BlockContext,
        payload: &[types::ContextSegment],
    ) -> wasmtime::Result<Result<types::WorkerOutput, types::PluginError>> {
        match self {
            Self::V0_1_0(pre) => {
                let instance = pre.instantiate_async(&mut *store).await?;
                instance
                    .wfhost_plugin_block_worker()
                    .call_run(store, context, payload)
                    .await
            }
        }
    }
}

/// An action-handler component ready to instantiate, with its version's
/// bindings.
pub enum ActionHandlerPre {
    V0_1_0(since_v0_1_0::action_handler::ActionHandlerPre<HostState>),
}

/// An instantiated action handler, kept between calls.
pub enum ActionHandler {
    V0_1_0(since_v0_1_0::action_handler::ActionHandler),
}

impl ActionHandlerPre {
    /// `pre` with the bindings of `version` (one of [`SERVED_VERSIONS`]).
    pub fn new(version: &str, pre: InstancePre<HostState>) -> wasmtime::Result<Self> {
        match version {
            since_v0_1_0::VERSION => Ok(Self::V0_1_0(
                since_v0_1_0::action_handler::ActionHandlerPre::new(pre)?,
            )),
            other => Err(unserved(other)),
        }
    }

    pub async fn instantiate(
        &self,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<ActionHandler> {
        match self {
            Self::V0_1_0(pre) => Ok(ActionHandler::V0_1_0(pre.instantiate_async(store).await?)),
        }
    }
}

impl ActionHandler {
    /// Interpret one action.
    pub async fn interpret(
        &self,
        store: &mut Store<HostState>,
        action: &str,
        view: &types::RunView,
    ) -> wasmtime::Result<Result<types::EngineCommand, types::PluginError>> {
        match self {
            Self::V0_1_0(instance) => {
                instance
                    .wfhost_plugin_action_interpreter()
                    .call_interpret(store, action, view)
                    .await
            }
        }
    }
}

fn unserved(version: &str) -> wasmtime::Error {
    wasmtime::Error::msg(format!(
        "no bindings for wfhost:plugin@{version}; this host serves {}",
        SERVED_VERSIONS.join(", ")
    ))
}
