//! The wfhost engine core.
//!
//! This crate owns the concepts of a workflow run and nothing about how
//! blocks are executed: manifests ([`manifest`]), the Node/Block execution
//! loop ([`engine`]), the durable events of a run ([`event`]) and the state
//! they fold into ([`state`]), transition resolution ([`transitions`]), the engine
//! commands that action handlers return ([`command`]) and the grammar of the
//! default action handler ([`actions`]), file restrictions ([`restrictions`])
//! and workspace snapshots used to enforce them ([`workspace`]), parallel
//! blocks ([`parallel`]: fan-out and fan-in), and the agent contracts
//! ([`agents`]: the block output file, the JSON agent protocol and the
//! orchestrator artifacts).
//!
//! It must not depend on wasmtime, Docker or Slurm: those are adapters that
//! implement [`engine::WorkerHost`] and [`engine::ActionInterpreter`], so the
//! core is tested with in-process fakes.

pub mod agents;
pub mod bounded_read;
pub use wfhost_actions::{command, grammar as actions};
pub mod capabilities;
pub mod context;
pub mod control;
pub mod engine;
pub mod event;
pub mod exec;
pub mod ids;
pub mod inputs;
pub mod json_pointer;
pub mod limits;
pub mod links;
pub mod manifest;
pub mod merge;
pub mod parallel;
pub mod payload;
pub mod prompt;
pub mod questions;
pub mod random;
#[cfg(unix)]
pub mod regular_file;
pub mod restrictions;
pub mod secrets;
pub mod state;
pub mod template;
pub mod text;
pub mod time;
pub mod transitions;
pub mod validation;
#[cfg(unix)]
pub mod workspace;
