//! # wfhost-sdk
//!
//! The plugin author's crate for [wfhost](../../README.md): write a block
//! **worker** or a transition **action handler** in plain Rust, build it for
//! `wasm32-wasip2`, and point a workflow at the resulting `.wasm` component.
//!
//! A complete worker:
//!
//! ```no_run
//! use wfhost_sdk::prelude::*;
//!
//! struct Hello;
//!
//! impl Worker for Hello {
//!     fn run(ctx: BlockContext, mut payload: Payload) -> Result<WorkerOutput, PluginError> {
//!         payload.push(segment("GREETING", format!("hello from {}", ctx.block_id)));
//!         Ok(WorkerOutput::new(payload, "SIGNAL:SUCCESS"))
//!     }
//! }
//!
//! export_worker!(Hello);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` (crate type
//! `cdylib`) and reference `target/wasm32-wasip2/release/<name>.wasm` from
//! the workflow's `plugins` table.
//!
//! ## Testing a plugin
//! - **Its logic** is ordinary Rust: call `<Hello as Worker>::run` from a
//!   `#[test]` with a context made by [`BlockContext::for_test`]. Logging
//!   falls back to stderr off-wasm, so such tests run natively with
//!   `cargo test`.
//! - **The built component** runs through the real host: write a small
//!   workflow that uses it and run `wfhost run workflow.json --workspace DIR`,
//!   or drive it from Rust through the `wfhost-runtime` crate, as wfhost's own
//!   tests do (`tests/e2e/`).
//!
//! ## The sandbox
//! The workspace is mounted at `/workspace` (read-only, except the block's
//! writable file restrictions and `.output/`); the SDK makes it the current
//! directory before your code runs, so relative paths work. There is no
//! network (but HTTP requests to the hosts a workflow allows, through the
//! `http` capability: the [`http`] module, cargo feature `http`) and no
//! environment variables beyond the contract.
//!
//! ## Host capabilities
//! Heavy work stays in the host and is reached through the modules
//! [`exec`], [`container`] and [`slurm`]. Each needs the capability of that
//! name in the plugin's `grants` in the workflow; a component that uses one
//! without the grant is refused when the workflow loads. For example, a
//! worker that runs a container and waits for it:
//!
//! ```no_run
//! use wfhost_sdk::container;
//! use wfhost_sdk::exec::{Command, ContainerOptions};
//!
//! # fn demo() -> Result<(), wfhost_sdk::exec::ExecError> {
//! let options = ContainerOptions { image: "my-tools:1".into(), cpus: Some(1.0), memory_mb: None };
//! let command = Command { argv: vec!["make".into(), "test".into()], cwd: None, env: vec![] };
//! let id = container::run(&options, &command, false)?;
//! while !matches!(container::status(&id)?, container::ContainerState::Exited(_)) {
//!     std::thread::sleep(std::time::Duration::from_millis(200));
//! }
//! let (stdout, _stderr) = container::logs(&id)?;
//! container::remove(&id)?;
//! # let _ = stdout; Ok(()) }
//! ```

// The generated bindings name this crate by its absolute path so that the
// export macros also expand correctly inside plugin crates.
extern crate self as wfhost_sdk;

mod context;
#[cfg(feature = "http")]
pub mod http;
pub mod log;

#[doc(hidden)]
pub mod __private {
    pub use wit_bindgen;

    /// The length of `signals` joined by newlines (for `declare_signals!`).
    pub const fn signals_len(signals: &[&str]) -> usize {
        let mut len = 0;
        let mut i = 0;
        while i < signals.len() {
            len += signals[i].len() + 1;
            i += 1;
        }
        len
    }

    /// `signals`, each followed by a newline (for `declare_signals!`).
    pub const fn signals_bytes<const N: usize>(signals: &[&str]) -> [u8; N] {
        let mut out = [0u8; N];
        let mut at = 0;
        let mut i = 0;
        while i < signals.len() {
            let bytes = signals[i].as_bytes();
            let mut j = 0;
            while j < bytes.len() {
                out[at] = bytes[j];
                at += 1;
                j += 1;
            }
            out[at] = b'\n';
            at += 1;
            i += 1;
        }
        out
    }

    /// Enter the workspace so that plugin code can use relative paths.
    pub fn enter_workspace(dir: &str) {
        // A worker with no readable workspace still runs; paths then fail
        // with a clear error at the point of use.
        let _ = std::env::set_current_dir(dir);
    }
}

/// Generated bindings of the `wfhost:plugin` WIT package, one module per
/// world. Most plugins never need them directly.
pub mod bindings {
    /// Bindings of the `worker` world.
    pub mod worker {
        wit_bindgen::generate!({
            path: "wit",
            world: "worker",
            pub_export_macro: true,
            export_macro_name: "export_worker_world",
            default_bindings_module: "wfhost_sdk::bindings::worker",
            runtime_path: "wfhost_sdk::__private::wit_bindgen::rt",
        });
    }

    /// Bindings of the `action-handler` world. Shares the `types` and `log`
    /// interfaces with the worker world.
    pub mod action_handler {
        wit_bindgen::generate!({
            path: "wit",
            world: "action-handler",
            pub_export_macro: true,
            export_macro_name: "export_action_handler_world",
            default_bindings_module: "wfhost_sdk::bindings::action_handler",
            runtime_path: "wfhost_sdk::__private::wit_bindgen::rt",
            with: {
                "wfhost:plugin/types@0.1.0": crate::bindings::worker::wfhost::plugin::types,
                "wfhost:plugin/log@0.1.0": crate::bindings::worker::wfhost::plugin::log,
            },
        });
    }
}

pub use bindings::worker::wfhost::plugin::types::{
    Artifact, BlockContext, BlockRef, CallTarget, ContextSegment, EngineCommand, PluginError,
    RunView, Statistics, WorkerOutput,
};
pub use context::segment;

/// The `exec` capability: run exec blocks on a host executor. Only usable
/// by a plugin the workflow grants `exec`; see `wit/plugin.wit` in this crate.
pub mod exec {
    pub use crate::bindings::worker::wfhost::plugin::exec::*;
}

/// Environment values with host references, for the `env` of `exec`,
/// `container`, `slurm` and `agent` calls.
///
/// A config's `env` value may be a string or `{"secret": "NAME"}`
/// ([`EnvValue`]). A reference is never resolved by the plugin: it travels
/// to the host as an env value that starts with a NUL byte (no real value
/// can), and the host puts the value in the command's environment when it
/// starts it, from its own secrets, and masks it in the output it keeps.
pub mod env {
    use serde::Deserialize;

    /// A string, or a reference to a secret of the host.
    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    #[serde(untagged)]
    pub enum EnvValue {
        Plain(String),
        Secret {
            /// `[A-Za-z_][A-Za-z0-9_]*`.
            secret: String,
        },
    }

    impl EnvValue {
        /// What goes into the WIT `env` list.
        pub fn to_wire(&self) -> String {
            match self {
                EnvValue::Plain(value) => value.clone(),
                EnvValue::Secret { secret } => secret_ref(secret),
            }
        }
    }

    /// The env value the host replaces by secret `name`.
    pub fn secret_ref(name: &str) -> String {
        format!("\0secret:{name}")
    }

    /// The env value the host replaces by its own environment variable
    /// `name` (left out when the host has none): `env_passthrough`.
    pub fn host_ref(name: &str) -> String {
        format!("\0env:{name}")
    }

    /// The WIT `env` list of a command: each `passthrough` name as a host
    /// reference, then `env` (which wins over a passthrough of the same
    /// name).
    pub fn to_wire<'a>(
        passthrough: impl IntoIterator<Item = &'a String>,
        env: impl IntoIterator<Item = (&'a String, &'a EnvValue)>,
    ) -> Vec<(String, String)> {
        passthrough
            .into_iter()
            .map(|name| (name.clone(), host_ref(name)))
            .chain(env.into_iter().map(|(k, v)| (k.clone(), v.to_wire())))
            .collect()
    }
}

/// The `container` capability: run, watch, pause, unpause and remove Docker
/// containers with the workspace at `/workspace`. Only usable by a plugin
/// the workflow grants `container`.
pub mod container {
    pub use crate::bindings::worker::wfhost::plugin::container::*;
}

/// The `slurm` capability: submit, watch and cancel Slurm batch jobs that
/// leave exec result bundles. Only usable by a plugin the workflow grants
/// `slurm`.
pub mod slurm {
    pub use crate::bindings::worker::wfhost::plugin::slurm::*;
}

/// The `agent` capability: run an agent CLI with the env contract and the
/// system prompt, then get what it did (BlockOutput, detected changes,
/// restriction violations). Only usable by a plugin the workflow grants
/// `agent`.
pub mod agent {
    pub use crate::bindings::worker::wfhost::plugin::agent::*;
}

/// The execution payload: the ordered context segments flowing between blocks.
pub type Payload = Vec<ContextSegment>;

/// A block worker: takes the block's context and payload, returns the new
/// payload and a signal. Export it with [`export_worker!`].
pub trait Worker {
    fn run(ctx: BlockContext, payload: Payload) -> Result<WorkerOutput, PluginError>;
}

/// A transition action interpreter. Export it with [`export_action_handler!`].
pub trait ActionHandler {
    fn interpret(action: &str, run: RunView) -> Result<EngineCommand, PluginError>;
}

/// Export a type implementing [`Worker`] as this component's block worker.
#[macro_export]
macro_rules! export_worker {
    ($worker:ty) => {
        #[doc(hidden)]
        #[allow(dead_code)]
        struct __WfhostWorkerExport;

        impl $crate::bindings::worker::exports::wfhost::plugin::block_worker::Guest
            for __WfhostWorkerExport
        {
            fn run(
                context: $crate::BlockContext,
                payload: ::std::vec::Vec<$crate::ContextSegment>,
            ) -> ::std::result::Result<$crate::WorkerOutput, $crate::PluginError> {
                $crate::__private::enter_workspace(&context.workspace_dir);
                <$worker as $crate::Worker>::run(context, payload)
            }
        }

        // Component exports exist only on wasm; natively (unit tests of the
        // plugin's logic) their names are not valid linker symbols.
        #[cfg(target_arch = "wasm32")]
        $crate::bindings::worker::export_worker_world!(
            __WfhostWorkerExport with_types_in $crate::bindings::worker
        );
    };
}

/// Export a type implementing [`ActionHandler`] as this component's action
/// interpreter.
#[macro_export]
macro_rules! export_action_handler {
    ($handler:ty) => {
        #[doc(hidden)]
        #[allow(dead_code)]
        struct __WfhostActionHandlerExport;

        impl $crate::bindings::action_handler::exports::wfhost::plugin::action_interpreter::Guest
            for __WfhostActionHandlerExport
        {
            fn interpret(
                action: ::std::string::String,
                run: $crate::RunView,
            ) -> ::std::result::Result<$crate::EngineCommand, $crate::PluginError> {
                <$handler as $crate::ActionHandler>::interpret(&action, run)
            }
        }

        #[cfg(target_arch = "wasm32")]
        $crate::bindings::action_handler::export_action_handler_world!(
            __WfhostActionHandlerExport with_types_in $crate::bindings::action_handler
        );
    };
}

/// Everything a plugin usually needs, in one import.
pub mod prelude {
    pub use crate::{
        ActionHandler, BlockContext, BlockRef, CallTarget, ContextSegment, EngineCommand, Payload,
        PluginError, RunView, Statistics, Worker, WorkerOutput, export_action_handler,
        export_worker, log, segment,
    };
}

/// Declare the signals this plugin's worker emits, so that `wfhost validate`
/// can warn about a transition on a signal it never emits (a typo such as
/// `SIGNAL:SUCESS`). Each entry is a signal, or `config:KEY` for "the
/// string in the block config's top-level `KEY`, when set". Without a
/// declaration the host assumes any signal is possible.
///
/// ```ignore
/// wfhost_sdk::declare_signals!["SIGNAL:SUCCESS", "SIGNAL:EMPTY", "config:signal"];
/// ```
///
/// The list is stored in the component's `wfhost:signals` custom section,
/// one entry per line; the host reads it without running the plugin.
#[macro_export]
macro_rules! declare_signals {
    ($($signal:literal),* $(,)?) => {
        #[cfg(target_arch = "wasm32")]
        #[used]
        #[unsafe(link_section = "wfhost:signals")]
        static WFHOST_DECLARED_SIGNALS: [u8; $crate::__private::signals_len(&[$($signal),*])] =
            $crate::__private::signals_bytes(&[$($signal),*]);
    };
}
