//! Host-side bindings of the `wfhost:plugin` WIT package.

/// The `worker` world.
pub mod worker {
    wasmtime::component::bindgen!({
        path: "../../wit",
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
        path: "../../wit",
        world: "action-handler",
        exports: { default: async },
        with: {
            "wfhost:plugin/types": super::worker::wfhost::plugin::types,
            "wfhost:plugin/log": super::worker::wfhost::plugin::log,
        },
    });
}

pub use worker::wfhost::plugin::{agent, container, exec, executor_types, log, slurm, types};

/// The interface a worker component must export.
pub const WORKER_EXPORT: &str = "wfhost:plugin/block-worker@0.1.0";
/// The interface an action-handler component must export.
pub const ACTION_HANDLER_EXPORT: &str = "wfhost:plugin/action-interpreter@0.1.0";
