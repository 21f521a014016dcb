//! The wasmtime adapter of wfhost.
//!
//! It executes block workers and action handlers as sandboxed WebAssembly
//! components and plugs into the engine core by implementing
//! [`wfhost_core::run::engine::WorkerHost`] (its roles) and
//! [`wfhost_core::run::engine::ActionInterpreter`] (see [`PluginSet`]).
//!
//! - [`runtime`]: one wasmtime engine (pooling allocator, epoch ticker for
//!   timeouts) shared by every plugin of the process;
//! - [`cache`]: compiled components on disk, keyed by component digest and
//!   engine compatibility, so a plugin's second start never recompiles;
//! - [`admission`]: what a component must look like to be loaded: a
//!   component (not a core module), of the expected world, importing only
//!   what the workflow grants;
//! - [`sandbox`]: WASI preopens cut to a block's file restrictions, with
//!   staging for patterns that are not directory prefixes;
//! - [`plugins`]: the plugins of one workflow, ready to run.

pub mod admission;
mod agent_preset;
mod bindings;
pub mod cache;
mod capabilities;
mod capture;
pub mod config;
mod guest_view;
mod host_state;
pub mod lanes;
mod links;
mod past_sessions;
pub mod plugins;
pub mod runtime;
pub mod sandbox;
mod special_files;
pub mod telemetry;
mod write_watch;

pub use config::RuntimeConfig;
pub use plugins::{LoadError, PluginLoad, PluginSet};
pub use runtime::WasmRuntime;
